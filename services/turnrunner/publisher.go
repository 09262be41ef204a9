package turnrunner

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/waggle-os/core/libs/protocol"
)

// publisher puts one turn's events on its JetStream subject. Events are
// published asynchronously (never a round trip per token); the terminal
// event is published synchronously, which also confirms every earlier
// event of the turn, since the stream stores one connection's messages in
// order.
type publisher struct {
	js      jetstream.JetStream
	turnID  string
	subject string
	// onToken, when set, is called after each token event is handed over.
	onToken func()
}

func newPublisher(js jetstream.JetStream, turnID string) *publisher {
	return &publisher{js: js, turnID: turnID, subject: protocol.TurnEvents(turnID)}
}

// encode marshals event data as single-line JSON without HTML escaping
// (clients compare text byte for byte; "<" must stay "<").
func encode(data any) ([]byte, error) {
	if raw, ok := data.(json.RawMessage); ok {
		return raw, nil
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(data); err != nil {
		return nil, err
	}
	b := buf.Bytes()
	return b[:len(b)-1], nil // Encode appends '\n'
}

func (p *publisher) msg(event string, data any) (*nats.Msg, error) {
	body, err := encode(data)
	if err != nil {
		return nil, fmt.Errorf("turnrunner: encode %s event: %w", event, err)
	}
	m := &nats.Msg{Subject: p.subject, Data: body, Header: nats.Header{}}
	m.Header.Set(protocol.HeaderEvent, event)
	return m, nil
}

// Emit publishes a non-terminal event.
func (p *publisher) Emit(event string, data any) error {
	m, err := p.msg(event, data)
	if err != nil {
		return err
	}
	if _, err := p.js.PublishMsgAsync(m); err != nil {
		return fmt.Errorf("turnrunner: publish %s for %s: %w", event, p.turnID, err)
	}
	if event == protocol.EventToken && p.onToken != nil {
		p.onToken()
	}
	return nil
}

// Note publishes an internal event without waiting. The stream stores one
// connection's messages in order, so a note is still stored before every
// event the turn publishes after it; only Mark's guarantee — durable
// before work with side effects begins — is not given.
func (p *publisher) Note(event string, data any) error {
	m, err := p.msg(event, data)
	if err != nil {
		return err
	}
	if _, err := p.js.PublishMsgAsync(m); err != nil {
		return fmt.Errorf("turnrunner: publish %s for %s: %w", event, p.turnID, err)
	}
	return nil
}

// Mark publishes an internal event and waits for the stream to store it
// (and with it every earlier event of the turn): a checkpoint must be
// durable before the work it describes begins.
func (p *publisher) Mark(event string, data any) error {
	m, err := p.msg(event, data)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := p.js.PublishMsg(ctx, m); err != nil {
		return fmt.Errorf("turnrunner: publish %s for %s: %w", event, p.turnID, err)
	}
	return nil
}

// flush waits (at most d) until every event published asynchronously is
// stored, so a runner taking the turn over reads all of them.
func (p *publisher) flush(d time.Duration) {
	select {
	case <-p.js.PublishAsyncComplete():
	case <-time.After(d):
	}
}

// Finish publishes the terminal event and waits for the stream to store it.
// The message id makes a retried publish of the same end harmless.
func (p *publisher) Finish(event string, data any) error {
	m, err := p.msg(event, data)
	if err != nil {
		return err
	}
	m.Header.Set(jetstream.MsgIDHeader, protocol.TurnEndMsgID(p.turnID))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := p.js.PublishMsg(ctx, m); err != nil {
		return fmt.Errorf("turnrunner: publish %s for %s: %w", event, p.turnID, err)
	}
	return nil
}
