package bus

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/waggle-os/core/libs/natstest"
	"github.com/waggle-os/core/libs/protocol"
)

func TestTurnStreamConfigValidate(t *testing.T) {
	tests := []struct {
		name string
		in   TurnStreamConfig
		want TurnStreamConfig
		err  string
	}{
		{"defaults", TurnStreamConfig{}, TurnStreamConfig{MaxAge: 15 * time.Minute, Replicas: 1, Storage: "memory", MaxBytes: DefaultTurnStreamBytes}, ""},
		{"kept", TurnStreamConfig{MaxAge: time.Hour, Replicas: 3, Storage: "file", MaxBytes: 1 << 30},
			TurnStreamConfig{MaxAge: time.Hour, Replicas: 3, Storage: "file", MaxBytes: 1 << 30}, ""},
		{"negatives are defaults", TurnStreamConfig{MaxAge: -1, Replicas: -1, MaxBytes: -1},
			TurnStreamConfig{MaxAge: 15 * time.Minute, Replicas: 1, Storage: "memory", MaxBytes: DefaultTurnStreamBytes}, ""},
		{"unknown storage", TurnStreamConfig{Storage: "disk"}, TurnStreamConfig{}, `bus: turn stream storage "disk": want memory or file`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := tc.in
			err := c.Validate()
			if tc.err != "" {
				if err == nil || err.Error() != tc.err {
					t.Fatalf("err %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil || c != tc.want {
				t.Fatalf("Validate = %+v, %v; want %+v", c, err, tc.want)
			}
		})
	}
}

func TestEnsureTurnStream(t *testing.T) {
	srv := natstest.Start(t)
	js := jetStream(t, srv, "runner")
	st, err := EnsureTurnStream(ctxT(t), js, TurnStreamConfig{MaxAge: time.Hour, MaxBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	c := st.CachedInfo().Config
	if c.Name != protocol.StreamTurns || len(c.Subjects) != 1 || c.Subjects[0] != protocol.SubjTurnEventsAll ||
		c.MaxAge != time.Hour || c.MaxBytes != 1<<20 || c.Storage != jetstream.MemoryStorage ||
		c.Discard != jetstream.DiscardOld || c.Duplicates != 2*time.Minute {
		t.Fatalf("config %+v", c)
	}
	// A turn's events land in it.
	if _, err := js.Publish(ctxT(t), protocol.TurnEvents("t1"), []byte(`{}`)); err != nil {
		t.Fatal(err)
	}

	// Every service ensures the stream at start: a second call with new
	// limits updates it in place and keeps the events.
	st, err = EnsureTurnStream(ctxT(t), js, TurnStreamConfig{MaxAge: 2 * time.Hour, MaxBytes: 1 << 21})
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	if info.Config.MaxAge != 2*time.Hour || info.Config.MaxBytes != 1<<21 || info.State.Msgs != 1 {
		t.Fatalf("after update: config %+v, %d messages", info.Config, info.State.Msgs)
	}

	if _, err := EnsureTurnStream(ctxT(t), js, TurnStreamConfig{Storage: "tape"}); err == nil || !strings.Contains(err.Error(), `"tape"`) {
		t.Fatalf("bad storage: %v", err)
	}
}

// JetStream cannot change a stream's storage type; a turn stream of the
// other kind (an older configuration) is replaced, in both directions.
func TestEnsureTurnStreamReplacesTheStorageType(t *testing.T) {
	tests := []struct{ from, to string }{{"file", "memory"}, {"memory", "file"}}
	for _, tc := range tests {
		t.Run(tc.from+" to "+tc.to, func(t *testing.T) {
			srv := natstest.Start(t)
			js := jetStream(t, srv, "runner")
			if _, err := EnsureTurnStream(ctxT(t), js, TurnStreamConfig{Storage: tc.from}); err != nil {
				t.Fatal(err)
			}
			if _, err := js.Publish(ctxT(t), protocol.TurnEvents("t1"), []byte(`{}`)); err != nil {
				t.Fatal(err)
			}
			st, err := EnsureTurnStream(ctxT(t), js, TurnStreamConfig{Storage: tc.to})
			if err != nil {
				t.Fatal(err)
			}
			info, err := st.Info(ctxT(t))
			if err != nil {
				t.Fatal(err)
			}
			want := map[string]jetstream.StorageType{"memory": jetstream.MemoryStorage, "file": jetstream.FileStorage}[tc.to]
			if info.Config.Storage != want || info.State.Msgs != 0 {
				t.Fatalf("storage %v with %d messages, want a new %v stream", info.Config.Storage, info.State.Msgs, want)
			}
		})
	}
}

// createWithRetry retries only what a slow JetStream meta leader causes
// (timeouts, JetStream not ready yet), and no longer than its context.
func TestCreateWithRetry(t *testing.T) {
	other := errors.New("stream name already in use with a different configuration")
	tests := []struct {
		name  string
		errs  []error // returned by successive calls; nil after the list
		calls int
		want  error
	}{
		{"first try", nil, 1, nil},
		{"other errors are final", []error{other}, 1, other},
		{"API timeout", []error{fmt.Errorf("create: %w", context.DeadlineExceeded)}, 2, nil},
		{"request timeout", []error{nats.ErrTimeout}, 2, nil},
		{"JetStream not ready", []error{jetstream.ErrJetStreamNotEnabled}, 2, nil},
		{"timeout then a final error", []error{nats.ErrTimeout, other}, 2, other},
		{"no responders yet", []error{nats.ErrNoResponders}, 2, nil},
		{"no response from the stream", []error{jetstream.ErrNoStreamResponse}, 2, nil},
		{"cluster electing", []error{
			&jetstream.APIError{Code: 503, ErrorCode: jsErrNotAvailable, Description: "JetStream system temporarily unavailable"},
			&jetstream.APIError{Code: 500, ErrorCode: jsErrNotLeader, Description: "JetStream cluster can not handle request"},
			&jetstream.APIError{Code: 500, ErrorCode: jsErrNoPeers, Description: "no suitable peers for placement"},
		}, 4, nil},
		{"other API errors are final", []error{&jetstream.APIError{Code: 400, ErrorCode: 10074, Description: "replicas > 1 not supported in non-clustered mode"}}, 1,
			&jetstream.APIError{ErrorCode: 10074}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			calls := 0
			v, err := createWithRetry(ctxT(t), "test", func(context.Context) (int, error) {
				calls++
				if calls <= len(tc.errs) {
					return 0, tc.errs[calls-1]
				}
				return 42, nil
			})
			if calls != tc.calls || !errors.Is(err, tc.want) || err == nil && v != 42 {
				t.Fatalf("%d calls, %d, %v; want %d calls, %v", calls, v, err, tc.calls, tc.want)
			}
		})
	}
}

// TestEnsureKeyValue: a bucket is created on first use and the same call
// by a second process (or a restart) finds it.
func TestEnsureKeyValue(t *testing.T) {
	js, err := jetstream.New(natstest.Start(t).Conn("ensure"))
	if err != nil {
		t.Fatal(err)
	}
	kv, err := EnsureKeyValue(ctxT(t), js, jetstream.KeyValueConfig{Bucket: "ensure_test", History: 1})
	if err != nil {
		t.Fatal(err)
	}
	if err := func() error { _, err := kv.Put(ctxT(t), "k", []byte("v")); return err }(); err != nil {
		t.Fatal(err)
	}
	again, err := EnsureKeyValue(ctxT(t), js, jetstream.KeyValueConfig{Bucket: "ensure_test", History: 1})
	if err != nil {
		t.Fatal(err)
	}
	if e, err := again.Get(ctxT(t), "k"); err != nil || string(e.Value()) != "v" {
		t.Fatalf("second ensure lost the bucket's data: %v", err)
	}
}

// A try the cluster never answers (a request dropped during an election)
// is given up after createAttemptTimeout, not after the caller's whole
// budget: the next try reaches the new leader.
func TestCreateWithRetryBoundsEachTry(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	began := time.Now()
	calls := 0
	v, err := createWithRetry(ctx, "test", func(ctx context.Context) (int, error) {
		if calls++; calls == 1 {
			<-ctx.Done() // unanswered
			return 0, ctx.Err()
		}
		return 42, nil
	})
	if err != nil || v != 42 || calls != 2 {
		t.Fatalf("%d calls, %d, %v", calls, v, err)
	}
	if took := time.Since(began); took > 3*createAttemptTimeout {
		t.Fatalf("the second try came %s later", took)
	}
}

func TestCreateWithRetryStopsWithItsContext(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	began := time.Now()
	_, err := createWithRetry(ctx, "test", func(context.Context) (int, error) { return 0, nats.ErrTimeout })
	if !errors.Is(err, nats.ErrTimeout) {
		t.Fatalf("err %v, want the last timeout", err)
	}
	if took := time.Since(began); took > 2*time.Second {
		t.Fatalf("gave up after %s, want at its context's end", took)
	}
}
