package bus_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/waggle-os/core/libs/bus"
	"github.com/waggle-os/core/libs/embednats"
	"github.com/waggle-os/core/libs/protocol"
	"github.com/waggle-os/core/libs/tmpfstest"
	"github.com/waggle-os/core/libs/waitfor"
)

func TestIsNoSpace(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{nil, false},
		{syscall.ENOSPC, true},
		{fmt.Errorf("append: %w", &os.PathError{Op: "write", Path: "x", Err: syscall.ENOSPC}), true},
		{errors.New("write /data/nats/1.blk: no space left on device"), true},
		{syscall.EIO, false},
		{errors.New("context deadline exceeded"), false},
	} {
		if got := bus.IsNoSpace(tc.err); got != tc.want {
			t.Errorf("IsNoSpace(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}

// A guard on a real disk: it reports full when the disk fills (before any
// write of its owner fails), watchers refuse with STORAGE_FULL, and it
// recovers by itself once space is freed.
func TestStorageGuardFollowsTheDisk(t *testing.T) {
	dir := tmpfstest.Mount(t, "2m")
	ctx := context.Background()
	s := embednats.New(embednats.Config{StoreDir: t.TempDir()})
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Stop(context.Background()) })
	nc, err := nats.Connect("", s.ConnectOption())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	recovered := make(chan string, 4)
	w, err := bus.WatchStorage(nc, func(src string) { recovered <- src })
	if err != nil {
		t.Fatal(err)
	}
	g := bus.NewStorageGuard(nc, bus.StorageGuardConfig{Source: "disk", Dir: dir, Interval: 50 * time.Millisecond})
	g.Start()
	defer g.Stop()
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	if w.Err() != nil {
		t.Fatal("full before the disk filled")
	}
	fill := tmpfstest.Fill(t, dir)
	waitfor.Within(2*time.Second).True(t, "the watch to fail", func() bool { return w.Err() != nil })
	if !errors.Is(w.Err(), protocol.ErrStorageFull) {
		t.Fatalf("watch error %v", w.Err())
	}
	if st, _ := w.Full(); st.Source != "disk" || st.Since == 0 {
		t.Fatalf("report %+v", st)
	}
	os.Remove(fill)
	select {
	case src := <-recovered:
		if src != "disk" {
			t.Fatalf("recovered %q", src)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no recovery after space was freed")
	}
	if w.Err() != nil {
		t.Fatal("still full after recovery")
	}
	// An owner that sees ENOSPC itself says so at once (the loop, which
	// would see the free disk and clear it again, is stopped first).
	g.Stop()
	if !g.Check(&os.PathError{Op: "write", Path: "f", Err: syscall.ENOSPC}) {
		t.Fatal("Check ignored ENOSPC")
	}
	waitfor.Within(2*time.Second).True(t, "the watch to fail", func() bool { return w.Err() != nil })
}
