package ratelimit

import (
	"context"
	"io"
	"log/slog"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/waggle-os/core/libs/natstest"
	"github.com/waggle-os/core/libs/protocol"
)

// TestRateLimitBucketRecreated: the rate-limit bucket is in memory, so a
// NATS restart loses it; the limiter lets the request that finds it gone
// through and counts again from the next one on.
func TestRateLimitBucketRecreated(t *testing.T) {
	nc := natstest.Start(t).Conn("gateway")
	l, err := NewLimiter(nc, Config{Limit: 2}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if d, err := l.Take(ctx, "olga", "GET", "/api/x"); err != nil || !d.Allowed || d.Remaining != 1 {
		t.Fatalf("first take: %+v %v", d, err)
	}
	js, _ := jetstream.New(nc)
	if err := js.DeleteKeyValue(ctx, protocol.BucketRateLimits); err != nil {
		t.Fatal(err)
	}
	if d, err := l.Take(ctx, "olga", "GET", "/api/x"); err == nil || !d.Allowed {
		t.Fatalf("take with the bucket gone: %+v %v, want an error and the request let through", d, err)
	}
	for i, want := range []int{1, 0} {
		if d, err := l.Take(ctx, "olga", "GET", "/api/x"); err != nil || !d.Allowed || d.Remaining != want {
			t.Fatalf("take %d after the bucket was re-created: %+v %v", i, d, err)
		}
	}
	if d, err := l.Take(ctx, "olga", "GET", "/api/x"); err != nil || d.Allowed {
		t.Fatalf("take over the limit: %+v %v", d, err)
	}
}
