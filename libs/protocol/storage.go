package protocol

import "net/http"

// Storage faults. A process whose disk (or JetStream store) is full says so
// on SubjStorageStatus, so gateways and runners refuse new work at once
// (507 STORAGE_FULL) instead of timing out on a write that cannot land.
const (
	// SubjStorageStatus carries StorageStatus reports. A reporter publishes
	// one every StorageReportInterval while its store is full and one when
	// it recovers; a full report not repeated within StorageReportTTL is
	// stale (its reporter died or recovered unheard).
	SubjStorageStatus = "waggle.storage.evt.status"
	// CodeStorageFull is the error code of a refusal for lack of space.
	CodeStorageFull = "STORAGE_FULL"
)

// StorageStatus is one reporter's view of its store.
type StorageStatus struct {
	// Source names the store: "nats" (the embedded JetStream store),
	// "session-store", "approval".
	Source string `json:"source"`
	// Full is true while writes fail for lack of space.
	Full bool `json:"full"`
	// Reason is what the operator reads (never shown to chat users).
	Reason string `json:"reason,omitempty"`
	// Since is when the store became full (Unix ms), 0 when not full.
	Since int64 `json:"since,omitempty"`
}

// ErrStorageFull is the answer to work that needs a write while a store is
// full. 507 Insufficient Storage: the request was fine, the server cannot
// keep it.
var ErrStorageFull = (&Error{Status: http.StatusInsufficientStorage,
	Message: "The server's storage is full. Free some disk space; the server recovers by itself."}).WithCode(CodeStorageFull)
