package turnrunner

import (
	"errors"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/waggle-os/core/libs/bus"
	"github.com/waggle-os/core/libs/protocol"
)

// storageError maps a failed JetStream write of the start path to
// protocol.ErrStorageFull when JetStream said it has no room (its account
// or server storage limit, or JetStream shut down for lack of space), so
// the client gets 507 STORAGE_FULL rather than a 500. Other errors pass
// through unchanged.
func storageError(err error) error {
	if err == nil || protocol.AsError(err) != nil {
		return err
	}
	var apiErr *jetstream.APIError
	switch {
	case bus.IsNoSpace(err), errors.Is(err, jetstream.ErrJetStreamNotEnabled),
		errors.Is(err, jetstream.ErrJetStreamNotEnabledForAccount):
		return protocol.ErrStorageFull
	case errors.As(err, &apiErr) && (apiErr.ErrorCode == jsErrInsufficientResources || apiErr.ErrorCode == jsErrStorageResourcesExceeded):
		return protocol.ErrStorageFull
	}
	return err
}

// JetStream API error codes for "no room" (nats-server errors.json).
const (
	jsErrInsufficientResources    jetstream.ErrorCode = 10023
	jsErrStorageResourcesExceeded jetstream.ErrorCode = 10047
)
