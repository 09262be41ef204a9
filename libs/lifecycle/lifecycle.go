// Package lifecycle starts and stops the services of one waggle process:
// named modules with dependencies, started in dependency order and stopped
// in reverse, so NATS comes up first and goes down last.
package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"time"
)

// Service is a running part of the process. Start must return once the
// service is ready (listening, subscribed); Stop drains and releases
// everything Start acquired.
type Service interface {
	Start(ctx context.Context) error
	Stop(ctx context.Context) error
}

// Module describes one service the manager can run.
type Module struct {
	// Name is the target name (e.g. "gateway").
	Name string
	// Deps are modules that must run (and be started first) whenever this
	// one runs.
	Deps []string
	// Target marks a module a user may name in --targets; internal modules
	// (the bus connection) only run as dependencies.
	Target bool
	// Init builds the service. It runs only for modules that will run, so
	// it may validate config; it must not do I/O.
	Init func() (Service, error)
}

// All is the target that expands to every Target module.
const All = "all"

// Manager runs a set of modules.
type Manager struct {
	log     *slog.Logger
	modules map[string]Module
	names   []string // registration order, for stable output
	running []running
	ready   atomic.Bool
}

type running struct {
	name string
	svc  Service
}

// New returns an empty manager.
func New(log *slog.Logger) *Manager {
	if log == nil {
		log = slog.Default()
	}
	return &Manager{log: log, modules: map[string]Module{}}
}

// Register adds a module. Names must be unique.
func (m *Manager) Register(mod Module) {
	if _, dup := m.modules[mod.Name]; dup {
		panic("lifecycle: duplicate module " + mod.Name)
	}
	m.modules[mod.Name] = mod
	m.names = append(m.names, mod.Name)
}

// Targets lists the names a user may ask for, "all" first.
func (m *Manager) Targets() []string {
	out := []string{All}
	for _, n := range m.names {
		if m.modules[n].Target {
			out = append(out, n)
		}
	}
	return out
}

// Resolve expands targets (with "all") and their dependencies into a start
// order. Unknown names are an error that lists the valid ones.
func (m *Manager) Resolve(targets []string) ([]string, error) {
	want := map[string]bool{}
	for _, t := range targets {
		t = strings.TrimSpace(t)
		switch {
		case t == "":
			continue
		case t == All:
			for _, n := range m.names {
				if m.modules[n].Target {
					want[n] = true
				}
			}
		default:
			mod, ok := m.modules[t]
			if !ok || !mod.Target {
				return nil, fmt.Errorf("lifecycle: unknown target %q (valid: %s)", t, strings.Join(m.Targets(), ", "))
			}
			want[t] = true
		}
	}
	if len(want) == 0 {
		return nil, fmt.Errorf("lifecycle: no targets given (valid: %s)", strings.Join(m.Targets(), ", "))
	}
	var order []string
	state := map[string]int{} // 1 visiting, 2 done
	var visit func(n string, path []string) error
	visit = func(n string, path []string) error {
		switch state[n] {
		case 1:
			return fmt.Errorf("lifecycle: dependency cycle: %s", strings.Join(append(path, n), " -> "))
		case 2:
			return nil
		}
		mod, ok := m.modules[n]
		if !ok {
			return fmt.Errorf("lifecycle: %s depends on unknown module %q", path[len(path)-1], n)
		}
		state[n] = 1
		for _, d := range mod.Deps {
			if err := visit(d, append(path, n)); err != nil {
				return err
			}
		}
		state[n] = 2
		order = append(order, n)
		return nil
	}
	// Visit in registration order so the start order is deterministic.
	for _, n := range m.names {
		if want[n] {
			if err := visit(n, nil); err != nil {
				return nil, err
			}
		}
	}
	return order, nil
}

// Start initialises and starts the resolved modules in order. If one fails,
// those already started are stopped (in reverse) and the error returned.
func (m *Manager) Start(ctx context.Context, targets []string) error {
	order, err := m.Resolve(targets)
	if err != nil {
		return err
	}
	for _, n := range order {
		svc, err := m.modules[n].Init()
		if err != nil {
			m.stopAll(context.Background())
			return fmt.Errorf("%s: %w", n, err)
		}
		began := time.Now()
		if err := svc.Start(ctx); err != nil {
			m.stopAll(context.Background())
			return fmt.Errorf("%s: %w", n, err)
		}
		m.running = append(m.running, running{n, svc})
		m.log.Info("module started", "module", n, "took", time.Since(began).Round(time.Microsecond).String())
	}
	m.ready.Store(true)
	return nil
}

// Ready reports whether every module has started and none is stopping.
func (m *Manager) Ready() bool { return m.ready.Load() }

// Running lists the started modules in start order.
func (m *Manager) Running() []string {
	out := make([]string, len(m.running))
	for i, r := range m.running {
		out[i] = r.name
	}
	return out
}

// Stop stops every started module in reverse order. ctx bounds the whole
// shutdown; each module gets what is left of it.
func (m *Manager) Stop(ctx context.Context) error {
	m.ready.Store(false)
	return m.stopAll(ctx)
}

func (m *Manager) stopAll(ctx context.Context) error {
	var errs []error
	for i := len(m.running) - 1; i >= 0; i-- {
		r := m.running[i]
		began := time.Now()
		if err := r.svc.Stop(ctx); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", r.name, err))
			m.log.Error("module stop failed", "module", r.name, "err", err)
			continue
		}
		m.log.Info("module stopped", "module", r.name, "took", time.Since(began).Round(time.Microsecond).String())
	}
	m.running = nil
	return errors.Join(errs...)
}
