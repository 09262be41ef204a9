package turnevents

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/waggle-os/core/libs/protocol"
)

// Log is what a turn's stored events say about how far it got.
type Log struct {
	Ended  bool   // a terminal event is stored
	Last   uint64 // the number of the last event (protocol.HeaderEventNum)
	Text   string // every token, in order
	Tokens int    // token events
	Path   *protocol.PathCheckpoint
	Steps  []protocol.StepCheckpoint
	Execs  []protocol.ExecCheckpoint
}

// LastEvent reads the kind of turnID's last stored event (ok false when
// the stream holds none): whether the turn ever began, and whether it
// ended, without reading its log.
func LastEvent(ctx context.Context, js jetstream.JetStream, turnID string) (event string, ok bool, err error) {
	st, err := js.Stream(ctx, protocol.StreamTurns)
	if err != nil {
		return "", false, fmt.Errorf("turnevents: turn stream: %w", err)
	}
	m, err := st.GetLastMsgForSubject(ctx, protocol.TurnEvents(turnID))
	switch {
	case errors.Is(err, jetstream.ErrMsgNotFound):
		return "", false, nil
	case err != nil:
		return "", false, fmt.Errorf("turnevents: last event of %s: %w", turnID, err)
	}
	return m.Header.Get(protocol.HeaderEvent), true, nil
}

// ReadLog reads every event of turnID stored so far.
func ReadLog(ctx context.Context, js jetstream.JetStream, turnID string) (Log, error) {
	var lg Log
	subject := protocol.TurnEvents(turnID)
	st, err := js.Stream(ctx, protocol.StreamTurns)
	if err != nil {
		return lg, fmt.Errorf("turnevents: turn stream: %w", err)
	}
	last, err := st.GetLastMsgForSubject(ctx, subject)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return lg, nil
	}
	if err != nil {
		return lg, fmt.Errorf("turnevents: last event of %s: %w", turnID, err)
	}
	cons, err := st.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{FilterSubjects: []string{subject}})
	if err != nil {
		return lg, fmt.Errorf("turnevents: read events of %s: %w", turnID, err)
	}
	var text strings.Builder
	var seq uint64
	// Copies from a re-publish are skipped, as the gateway's relay skips
	// them (see Publisher.republish): a number seen already is a copy; one
	// ahead of the next waits until the next arrives, which drops it (its
	// copy comes in order later). Held events left at the end follow a
	// real hole (discarded events) and are taken as they are.
	type held struct {
		event string
		n     uint64
		data  []byte
	}
	var ahead []held
	for seq < last.Sequence {
		// No wait: the events are stored already; Fetch would wait for a
		// full batch.
		batch, err := cons.FetchNoWait(256)
		if err != nil {
			return lg, fmt.Errorf("turnevents: read events of %s: %w", turnID, err)
		}
		n := 0
		for m := range batch.Messages() {
			n++
			if meta, err := m.Metadata(); err == nil {
				seq = meta.Sequence.Stream
			}
			event := m.Headers().Get(protocol.HeaderEvent)
			num, err := strconv.ParseUint(m.Headers().Get(protocol.HeaderEventNum), 10, 64)
			switch {
			case err != nil || num == 0: // an end without a number (a gateway's)
				lg.add(event, m.Data(), &text)
			case num <= lg.Last:
			case num == lg.Last+1:
				lg.Last = num
				lg.add(event, m.Data(), &text)
				ahead = ahead[:0]
			default:
				ahead = append(ahead, held{event, num, m.Data()})
			}
		}
		if err := batch.Error(); err != nil && !errors.Is(err, jetstream.ErrNoMessages) {
			return lg, fmt.Errorf("turnevents: read events of %s: %w", turnID, err)
		}
		if n == 0 {
			select {
			case <-ctx.Done():
				return lg, fmt.Errorf("turnevents: read events of %s: stopped before event %d: %w", turnID, last.Sequence, ctx.Err())
			case <-time.After(10 * time.Millisecond):
			}
		}
	}
	for _, h := range ahead {
		if h.n > lg.Last {
			lg.Last = h.n
			lg.add(h.event, h.data, &text)
		}
	}
	lg.Text = text.String()
	return lg, nil
}

func (lg *Log) add(event string, data []byte, text *strings.Builder) {
	switch event {
	case protocol.EventToken:
		var d protocol.TokenData
		if json.Unmarshal(data, &d) == nil {
			text.WriteString(d.Content)
			lg.Tokens++
		}
	case protocol.EventPath:
		var p protocol.PathCheckpoint
		if json.Unmarshal(data, &p) == nil {
			lg.Path = &p
		}
	case protocol.EventCheckpointStep:
		var st protocol.StepCheckpoint
		if json.Unmarshal(data, &st) == nil {
			lg.Steps = append(lg.Steps, st)
		}
	case protocol.EventCheckpointExec:
		var e protocol.ExecCheckpoint
		if json.Unmarshal(data, &e) == nil {
			lg.Execs = append(lg.Execs, e)
		}
	default:
		if protocol.IsTerminal(event) {
			lg.Ended = true
		}
	}
}
