package natstest

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/goleak"
)

// A test's server and connections leave no goroutine behind once its
// cleanup ran.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// In-process and TCP clients reach the same server, and JetStream is on.
func TestServerServesInProcessAndTCP(t *testing.T) {
	srv := Start(t)
	inproc := srv.Conn("inproc")
	tcp, err := nats.Connect(srv.URL())
	if err != nil {
		t.Fatalf("dial %s: %v", srv.URL(), err)
	}
	defer tcp.Close()
	sub, err := tcp.SubscribeSync("natstest.ping")
	if err != nil {
		t.Fatal(err)
	}
	if err := tcp.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := inproc.Publish("natstest.ping", []byte("hi")); err != nil {
		t.Fatal(err)
	}
	msg, err := sub.NextMsg(5 * time.Second)
	if err != nil || string(msg.Data) != "hi" {
		t.Fatalf("message %v %v", msg, err)
	}
	if got := inproc.Opts.Name; got != "inproc" {
		t.Fatalf("connection name %q", got)
	}

	js, err := jetstream.New(inproc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	kv, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "natstest"})
	if err != nil {
		t.Fatalf("JetStream: %v", err)
	}
	if _, err := kv.Put(ctx, "k", []byte("v")); err != nil {
		t.Fatal(err)
	}
}

// Every test gets its own server: state from one does not reach another.
func TestServersAreIsolated(t *testing.T) {
	a, b := Start(t), Start(t)
	if a.URL() == b.URL() {
		t.Fatalf("both servers on %s", a.URL())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	jsA, _ := jetstream.New(a.Conn("a"))
	if _, err := jsA.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "only-on-a"}); err != nil {
		t.Fatal(err)
	}
	jsB, _ := jetstream.New(b.Conn("b"))
	if _, err := jsB.KeyValue(ctx, "only-on-a"); err == nil {
		t.Fatal("server b has server a's bucket")
	}
}
