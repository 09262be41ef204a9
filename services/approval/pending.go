package approval

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/waggle-os/core/libs/protocol"
)

// errNoEntry means the bucket has no entry under the key (never created,
// or removed after its retention).
var errNoEntry = errors.New("no such approval")

// maxCASAttempts bounds the read-modify-write loop of transition. Each
// conflict means another writer made progress, and an entry only changes a
// handful of times in its life, so running out means something is wrong.
const maxCASAttempts = 16

// pendingStore is the approvals bucket: one JSON protocol.PendingApproval
// per request id, changed only by compare-and-set on its revision.
type pendingStore struct {
	kv jetstream.KeyValue
	// decided is told of every entry this store made final, after the
	// write: the service announces it to the runner that waits.
	decided func(protocol.PendingApproval)
}

// entry is a decoded bucket value and the revision it was read at.
type entry struct {
	protocol.PendingApproval
	rev uint64
}

// create stores a new entry; it returns once JetStream acknowledged the
// write, so the entry survives this process.
func (p *pendingStore) create(ctx context.Context, e protocol.PendingApproval) error {
	data, err := json.Marshal(e)
	if err != nil {
		return fmt.Errorf("approval: encode %s: %w", e.RequestID, err)
	}
	if _, err := p.kv.Create(ctx, e.RequestID, data); err != nil {
		return fmt.Errorf("approval: create %s: %w", e.RequestID, err)
	}
	return nil
}

func (p *pendingStore) get(ctx context.Context, id string) (entry, error) {
	kve, err := p.kv.Get(ctx, id)
	if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
		return entry{}, errNoEntry
	}
	if err != nil {
		return entry{}, fmt.Errorf("approval: get %s: %w", id, err)
	}
	return decodeEntry(kve)
}

func decodeEntry(kve jetstream.KeyValueEntry) (entry, error) {
	var e entry
	if err := json.Unmarshal(kve.Value(), &e.PendingApproval); err != nil {
		return entry{}, fmt.Errorf("approval: decode %s: %w", kve.Key(), err)
	}
	e.rev = kve.Revision()
	return e, nil
}

// transition reads the entry, lets change edit it and writes it back if
// change reports true, retrying when another writer got there first. It
// returns the entry as stored at the end (changed or not). An error from
// change is returned as is, with the entry as read.
func (p *pendingStore) transition(ctx context.Context, id string, change func(e *protocol.PendingApproval) (bool, error)) (protocol.PendingApproval, error) {
	for range maxCASAttempts {
		e, err := p.get(ctx, id)
		if err != nil {
			return protocol.PendingApproval{}, err
		}
		next := e.PendingApproval
		write, err := change(&next)
		if err != nil || !write {
			return e.PendingApproval, err
		}
		data, err := json.Marshal(next)
		if err != nil {
			return protocol.PendingApproval{}, fmt.Errorf("approval: encode %s: %w", id, err)
		}
		_, err = p.kv.Update(ctx, id, data, e.rev)
		if errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
			continue
		}
		if err != nil {
			return protocol.PendingApproval{}, fmt.Errorf("approval: update %s: %w", id, err)
		}
		if p.decided != nil && protocol.ApprovalFinal(next.State) && !protocol.ApprovalFinal(e.State) {
			p.decided(next)
		}
		return next, nil
	}
	return protocol.PendingApproval{}, fmt.Errorf("approval: update %s: too many concurrent changes", id)
}

// all reads every entry. Undecodable values are returned in bad (by key and
// revision) so the sweeper can drop them.
func (p *pendingStore) all(ctx context.Context) (good []entry, bad map[string]uint64, err error) {
	w, err := p.kv.WatchAll(ctx, jetstream.IgnoreDeletes())
	if err != nil {
		return nil, nil, fmt.Errorf("approval: list: %w", err)
	}
	defer w.Stop()
	for {
		select {
		case kve, ok := <-w.Updates():
			if !ok {
				return nil, nil, fmt.Errorf("approval: list: watcher closed")
			}
			if kve == nil {
				// The initial values are all delivered.
				return good, bad, nil
			}
			e, err := decodeEntry(kve)
			if err != nil {
				if bad == nil {
					bad = map[string]uint64{}
				}
				bad[kve.Key()] = kve.Revision()
				continue
			}
			good = append(good, e)
		case <-ctx.Done():
			return nil, nil, fmt.Errorf("approval: list: %w", ctx.Err())
		}
	}
}

// remove deletes the entry if it is still at rev.
func (p *pendingStore) remove(ctx context.Context, id string, rev uint64) error {
	err := p.kv.Purge(ctx, id, jetstream.LastRevision(rev))
	if err != nil && !errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
		return fmt.Errorf("approval: remove %s: %w", id, err)
	}
	return nil
}
