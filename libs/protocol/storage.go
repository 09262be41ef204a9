package protocol

// Storage faults: see StorageReports.

// CodeStorageFull is the error code of a refusal for lack of space.
const CodeStorageFull = "STORAGE_FULL"

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
// full: the request was fine, the server cannot keep it.
var ErrStorageFull = &Error{Kind: StorageFull, Code: CodeStorageFull,
	Message: "The server's storage is full. Free some disk space; the server recovers by itself."}
