// Package ordered reads a JetStream stream in order through an ephemeral
// consumer that it re-creates, after the last message read, whenever the
// consumer is lost — its NATS node died, its heartbeats stopped, a message
// went missing — trying each re-creation for a short time only, so one sent
// while the cluster elects a leader is tried again within a second or two of
// the election instead of waiting out a long timeout.
//
// nats.go's ordered consumer does the same but bounds each re-creation try
// by 10 s and backs off up to 10 s between tries: a gateway whose live
// consumer was lost with a node stayed silent for 10–30 s after a 4–9 s
// election (issue 30).
package ordered

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Config says what to read.
type Config struct {
	// Stream is the stream's name.
	Stream string
	// Filter is the subjects to read.
	Filter []string
	// DeliverNew reads only messages stored after the consumer is first
	// created; otherwise reading starts at StartSeq (the first message
	// kept when 0).
	DeliverNew bool
	StartSeq   uint64
	// InactiveThreshold bounds how long a consumer of a reader that
	// vanished (its process died) lingers on the server. Default 30 s.
	InactiveThreshold time.Duration
	// Pull are the options of the pull subscription (read-ahead). A
	// heartbeat of Heartbeat is added.
	Pull []jetstream.PullConsumeOpt
	// Heartbeat is how often the server says the consumer is alive; two
	// missed mean it is lost. Default 1 s.
	Heartbeat time.Duration
	// Try bounds one creation of the consumer. Default 2 s.
	Try time.Duration
	// Logger logs re-creations. Default slog.Default().
	Logger *slog.Logger
}

func (c *Config) defaults() {
	if c.InactiveThreshold <= 0 {
		c.InactiveThreshold = 30 * time.Second
	}
	if c.Heartbeat <= 0 {
		c.Heartbeat = time.Second
	}
	if c.Try <= 0 {
		c.Try = 2 * time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
}

// Reader delivers a stream's messages in order, each once, to its
// handler, on nats.go's delivery goroutine.
type Reader struct {
	js      jetstream.JetStream
	cfg     Config
	handler func(jetstream.Msg)

	mu        sync.Mutex
	cons      jetstream.Consumer
	cc        jetstream.ConsumeContext
	serial    int
	streamSeq uint64 // last stream sequence delivered (or skipped as before DeliverNew)
	consSeq   uint64 // last consumer sequence of the current consumer

	lost     chan struct{}   // a signal: re-create the consumer
	ctx      context.Context // ends with Stop
	cancel   context.CancelFunc
	stopOnce sync.Once
	wg       sync.WaitGroup
}

// Start creates the consumer (trying until ctx ends) and delivers every
// message to handler until Stop.
func Start(ctx context.Context, js jetstream.JetStream, cfg Config, handler func(jetstream.Msg)) (*Reader, error) {
	cfg.defaults()
	r := &Reader{js: js, cfg: cfg, handler: handler, lost: make(chan struct{}, 1)}
	if err := r.create(ctx); err != nil {
		return nil, err
	}
	r.ctx, r.cancel = context.WithCancel(context.Background())
	r.wg.Add(1)
	go r.watch()
	return r, nil
}

// Stop stops delivery, deletes the consumer (bounded) and waits for the
// reader's goroutine. It may be called more than once.
func (r *Reader) Stop() {
	r.stopOnce.Do(func() {
		r.cancel()
		r.wg.Wait()
		r.mu.Lock()
		cc, cons := r.cc, r.cons
		r.cc, r.cons = nil, nil
		r.serial++ // nothing more is delivered
		r.mu.Unlock()
		if cc != nil {
			cc.Stop()
		}
		r.delete(cons)
	})
}

// watch re-creates the consumer each time it is lost, until Stop.
func (r *Reader) watch() {
	defer r.wg.Done()
	for {
		select {
		case <-r.ctx.Done():
			return
		case <-r.lost:
		}
		r.mu.Lock()
		cc, cons := r.cc, r.cons
		r.cc, r.cons = nil, nil
		r.serial++ // messages of the old consumer are dropped from now on
		r.mu.Unlock()
		if cc != nil {
			cc.Stop()
		}
		// Its node may be gone: do not wait for the deletion.
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			r.delete(cons)
		}()
		began := time.Now()
		if err := r.create(r.ctx); err != nil {
			return // stopped
		}
		r.mu.Lock()
		after := r.streamSeq
		r.mu.Unlock()
		r.cfg.Logger.Info("ordered: consumer re-created", "stream", r.cfg.Stream, "after_seq", after, "took", time.Since(began).Round(time.Millisecond))
	}
}

// create makes a consumer that starts after the last message delivered,
// trying (each try bounded by cfg.Try, backing off up to 1 s) until ctx
// ends, and starts consuming it.
func (r *Reader) create(ctx context.Context) error {
	wait := 50 * time.Millisecond
	for {
		err := r.createOnce(ctx)
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("ordered: consumer of %s: %w", r.cfg.Stream, err)
		}
		r.cfg.Logger.Debug("ordered: create consumer", "stream", r.cfg.Stream, "err", err)
		select {
		case <-ctx.Done():
			return fmt.Errorf("ordered: consumer of %s: %w", r.cfg.Stream, err)
		case <-time.After(wait):
		}
		wait = min(2*wait, time.Second)
	}
}

func (r *Reader) createOnce(ctx context.Context) error {
	r.mu.Lock()
	ccfg := jetstream.ConsumerConfig{
		AckPolicy:         jetstream.AckNonePolicy,
		InactiveThreshold: r.cfg.InactiveThreshold,
		MemoryStorage:     true,
		Replicas:          1,
		FilterSubjects:    r.cfg.Filter,
	}
	switch {
	case r.streamSeq > 0:
		ccfg.DeliverPolicy, ccfg.OptStartSeq = jetstream.DeliverByStartSequencePolicy, r.streamSeq+1
	case r.cfg.DeliverNew:
		ccfg.DeliverPolicy = jetstream.DeliverNewPolicy
	case r.cfg.StartSeq > 0:
		ccfg.DeliverPolicy, ccfg.OptStartSeq = jetstream.DeliverByStartSequencePolicy, r.cfg.StartSeq
	default:
		ccfg.DeliverPolicy = jetstream.DeliverAllPolicy
	}
	serial := r.serial
	r.mu.Unlock()

	tctx, cancel := context.WithTimeout(ctx, r.cfg.Try)
	defer cancel()
	cons, err := r.js.CreateConsumer(tctx, r.cfg.Stream, ccfg)
	if err != nil {
		return err
	}
	opts := append([]jetstream.PullConsumeOpt{jetstream.PullHeartbeat(r.cfg.Heartbeat), jetstream.PullExpiry(5 * r.cfg.Heartbeat),
		jetstream.ConsumeErrHandler(func(_ jetstream.ConsumeContext, err error) { r.consumeError(serial, err) })}, r.cfg.Pull...)
	r.mu.Lock()
	if r.serial != serial {
		r.mu.Unlock()
		r.delete(cons)
		return errors.New("superseded")
	}
	if r.streamSeq == 0 && r.cfg.DeliverNew {
		// What was stored before the consumer is not to be read, also
		// by a consumer re-created before the first message arrives.
		if info := cons.CachedInfo(); info != nil {
			r.streamSeq = info.Delivered.Stream
		}
	}
	r.cons, r.consSeq = cons, 0
	r.mu.Unlock()
	cc, err := cons.Consume(func(m jetstream.Msg) { r.deliver(serial, m) }, opts...)
	if err != nil {
		r.delete(cons)
		return err
	}
	r.mu.Lock()
	r.cc = cc
	r.mu.Unlock()
	return nil
}

// deliver passes m on if it is the next one of the current consumer; a
// gap (a message lost in transit) re-creates the consumer after the last
// one delivered.
func (r *Reader) deliver(serial int, m jetstream.Msg) {
	meta, err := m.Metadata()
	r.mu.Lock()
	if serial != r.serial {
		r.mu.Unlock()
		return
	}
	if err != nil || meta.Sequence.Consumer != r.consSeq+1 {
		r.mu.Unlock()
		r.signalLost()
		return
	}
	r.consSeq, r.streamSeq = meta.Sequence.Consumer, meta.Sequence.Stream
	r.mu.Unlock()
	r.handler(m)
}

// consumeError re-creates the consumer when err says it is gone.
func (r *Reader) consumeError(serial int, err error) {
	r.mu.Lock()
	current := serial == r.serial
	r.mu.Unlock()
	if !current {
		return
	}
	if errors.Is(err, jetstream.ErrNoHeartbeat) || errors.Is(err, jetstream.ErrConsumerDeleted) ||
		errors.Is(err, jetstream.ErrConsumerNotFound) || errors.Is(err, nats.ErrNoResponders) {
		r.cfg.Logger.Warn("ordered: consumer lost", "stream", r.cfg.Stream, "err", err)
		r.signalLost()
	}
}

func (r *Reader) signalLost() {
	select {
	case r.lost <- struct{}{}:
	default:
	}
}

// delete removes a consumer, bounded: its node may be gone.
func (r *Reader) delete(cons jetstream.Consumer) {
	if cons == nil {
		return
	}
	info := cons.CachedInfo()
	if info == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = r.js.DeleteConsumer(ctx, r.cfg.Stream, info.Name)
}
