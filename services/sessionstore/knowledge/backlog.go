package knowledge

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/waggle-os/core/libs/bus"
	"github.com/waggle-os/core/libs/protocol"
	"github.com/waggle-os/core/services/sessionstore/frames"
	"github.com/waggle-os/core/services/sessionstore/graph"
)

// Backlog bounds.
const (
	// backlogMax bounds the texts the backlog holds; the oldest go first.
	backlogMax = 100_000
	// backlogAge is how long a text waits for a store to run again.
	backlogAge = 7 * 24 * time.Hour
	// backlogAckWait is how long a store may take over one text before
	// another may take it (longer than a model extraction's timeout).
	backlogAckWait = 3 * time.Minute
	// backlogMaxDeliver stops a text that fails every store from going
	// round for ever.
	backlogMaxDeliver = 5
	// backlogBatch is how many texts one fetch takes.
	backlogBatch = 16
	// backlogPutTimeout bounds a stopping store's wait for the backlog.
	backlogPutTimeout = 10 * time.Second
)

// BacklogJob is one text in the backlog: what a store had not finished
// extracting when it stopped.
type BacklogJob struct {
	// Mind is the text's mind key (frames.Mind.Key).
	Mind string `json:"mind"`
	Text string `json:"text"`
	// RulesDone: the rules' findings are stored already, only the model's
	// extraction is left (applying the rules twice would count every
	// mention twice).
	RulesDone bool `json:"rulesDone,omitempty"`
}

// Backlog keeps texts whose extraction a stopping store did not finish, in
// a JetStream work queue (file storage, replicated as the other streams),
// so the next store to run — this one restarted, or another of a team
// server — extracts them. Delivery is at least once: a store killed while
// extracting a text taken from the backlog leaves it to be taken again.
type Backlog struct {
	js   jetstream.JetStream
	cons jetstream.Consumer
}

// OpenBacklog creates (or updates) the backlog's stream and consumer.
func OpenBacklog(ctx context.Context, js jetstream.JetStream, replicas int) (*Backlog, error) {
	if replicas <= 0 {
		replicas = 1
	}
	st, err := bus.EnsureStream(ctx, js, jetstream.StreamConfig{
		Name: protocol.StreamKnowledgeBacklog, Subjects: []string{protocol.SubjKnowledgeBacklog},
		Retention: jetstream.WorkQueuePolicy, Storage: jetstream.FileStorage, Replicas: replicas,
		MaxMsgs: backlogMax, MaxAge: backlogAge, Discard: jetstream.DiscardOld,
	})
	if err != nil {
		return nil, fmt.Errorf("knowledge: backlog: %w", err)
	}
	cons, err := st.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{
		Durable: protocol.ConsumerKnowledgeBacklog, AckPolicy: jetstream.AckExplicitPolicy,
		AckWait: backlogAckWait, MaxDeliver: backlogMaxDeliver, Replicas: replicas,
	})
	if err != nil {
		return nil, fmt.Errorf("knowledge: backlog consumer: %w", err)
	}
	return &Backlog{js: js, cons: cons}, nil
}

// put stores jobs and waits until the stream has every one.
func (b *Backlog) put(ctx context.Context, jobs []job) error {
	futures := make([]jetstream.PubAckFuture, 0, len(jobs))
	var errs []error
	for _, j := range jobs {
		body, err := json.Marshal(BacklogJob{Mind: j.mind.Key(), Text: j.text, RulesDone: j.rulesDone})
		if err != nil {
			errs = append(errs, err)
			continue
		}
		f, err := b.js.PublishAsync(protocol.SubjKnowledgeBacklog, body)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		futures = append(futures, f)
	}
	for _, f := range futures {
		select {
		case <-f.Ok():
		case err := <-f.Err():
			errs = append(errs, err)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("knowledge: backlog: %w", err)
	}
	return nil
}

// take fetches up to backlogBatch texts without waiting; each comes with
// its message, to acknowledge once extracted. A text that cannot be read
// is dropped.
func (b *Backlog) take() ([]job, error) {
	batch, err := b.cons.FetchNoWait(backlogBatch)
	if err != nil {
		return nil, fmt.Errorf("knowledge: backlog: %w", err)
	}
	var out []job
	for msg := range batch.Messages() {
		var bj BacklogJob
		var m graph.Mind
		ok := false
		if json.Unmarshal(msg.Data(), &bj) == nil {
			m, ok = frames.ParseMindKey(bj.Mind)
		}
		if !ok || bj.Text == "" {
			_ = msg.Term()
			continue
		}
		out = append(out, job{mind: m, text: bj.Text, rulesDone: bj.RulesDone, msg: msg})
	}
	return out, batch.Error()
}
