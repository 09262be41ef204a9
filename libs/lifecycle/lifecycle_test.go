package lifecycle

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
)

type fakeSvc struct {
	name string
	log  *[]string
	fail bool
}

func (f *fakeSvc) Start(context.Context) error {
	if f.fail {
		return errors.New("boom")
	}
	*f.log = append(*f.log, "start "+f.name)
	return nil
}

func (f *fakeSvc) Stop(context.Context) error {
	*f.log = append(*f.log, "stop "+f.name)
	return nil
}

func newManager(log *[]string, failing string) *Manager {
	m := New(nil)
	add := func(name string, target bool, deps ...string) {
		m.Register(Module{Name: name, Target: target, Deps: deps, Init: func() (Service, error) {
			return &fakeSvc{name: name, log: log, fail: name == failing}, nil
		}})
	}
	add("nats", false)
	add("session-store", true, "nats")
	add("turn-runner", true, "nats")
	add("gateway", true, "nats")
	return m
}

func TestResolve(t *testing.T) {
	tests := []struct {
		targets []string
		want    []string
		err     string
	}{
		{[]string{"all"}, []string{"nats", "session-store", "turn-runner", "gateway"}, ""},
		{[]string{"gateway"}, []string{"nats", "gateway"}, ""},
		{[]string{"gateway", "session-store"}, []string{"nats", "session-store", "gateway"}, ""},
		{[]string{"nats"}, nil, `unknown target "nats"`},
		{[]string{"bogus"}, nil, "valid: all, session-store, turn-runner, gateway"},
		{[]string{""}, nil, "no targets"},
	}
	for _, tt := range tests {
		var log []string
		got, err := newManager(&log, "").Resolve(tt.targets)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("Resolve(%v) err = %v, want %q", tt.targets, err, tt.err)
			}
			continue
		}
		if err != nil || !slices.Equal(got, tt.want) {
			t.Errorf("Resolve(%v) = %v, %v; want %v", tt.targets, got, err, tt.want)
		}
	}
}

func TestStartStopOrder(t *testing.T) {
	var log []string
	m := newManager(&log, "")
	if err := m.Start(context.Background(), []string{"all"}); err != nil {
		t.Fatal(err)
	}
	if !m.Ready() {
		t.Fatal("not ready after start")
	}
	if err := m.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	want := []string{"start nats", "start session-store", "start turn-runner", "start gateway",
		"stop gateway", "stop turn-runner", "stop session-store", "stop nats"}
	if !slices.Equal(log, want) {
		t.Fatalf("order = %v\nwant %v", log, want)
	}
}

func TestFailedStartStopsStarted(t *testing.T) {
	var log []string
	m := newManager(&log, "turn-runner")
	err := m.Start(context.Background(), []string{"all"})
	if err == nil || !strings.Contains(err.Error(), "turn-runner: boom") {
		t.Fatalf("err = %v", err)
	}
	want := []string{"start nats", "start session-store", "stop session-store", "stop nats"}
	if !slices.Equal(log, want) {
		t.Fatalf("order = %v, want %v", log, want)
	}
}
