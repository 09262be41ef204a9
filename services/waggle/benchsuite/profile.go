package benchsuite

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"
)

// profiler brackets load phases with CPU and allocation profiles of a
// server running under ProfileServe. Without a profile dir it does nothing.
type profiler struct {
	r     *run
	srv   *Server
	k     int
	phase string
}

func (r *run) profiler(srv *Server) *profiler { return &profiler{r: r, srv: srv} }

func (p *profiler) enabled() bool { return p.r.cfg.ProfileDir != "" && len(p.srv.Procs) == 1 }

func (p *profiler) begin(phase string) error {
	if !p.enabled() {
		return nil
	}
	p.k++
	p.phase = phase
	if err := p.srv.Procs[0].Signal(syscall.SIGUSR1); err != nil {
		return err
	}
	return waitFile(filepath.Join(p.r.cfg.ProfileDir, fmt.Sprintf("%d.started", p.k)))
}

func (p *profiler) end() error {
	if !p.enabled() {
		return nil
	}
	dir := p.r.cfg.ProfileDir
	if err := p.srv.Procs[0].Signal(syscall.SIGUSR2); err != nil {
		return err
	}
	if err := waitFile(filepath.Join(dir, fmt.Sprintf("%d.stopped", p.k))); err != nil {
		return err
	}
	cpu := filepath.Join(dir, "cpu-"+p.phase+".pprof")
	allocs := filepath.Join(dir, "allocs-"+p.phase+".pprof")
	base := filepath.Join(dir, "allocs-"+p.phase+"-base.pprof")
	heap := filepath.Join(dir, "heap-"+p.phase+".pprof")
	for from, to := range map[string]string{
		fmt.Sprintf("cpu-%d.pprof", p.k): cpu, fmt.Sprintf("allocs-%d.pprof", p.k): allocs, fmt.Sprintf("allocs-%d-base.pprof", p.k): base,
		fmt.Sprintf("heap-%d.pprof", p.k): heap, fmt.Sprintf("goroutine-%d.txt", p.k): filepath.Join(dir, "goroutine-"+p.phase+".txt"),
		fmt.Sprintf("memstats-%d.txt", p.k): filepath.Join(dir, "memstats-"+p.phase+".txt"),
	} {
		if err := os.Rename(filepath.Join(dir, from), to); err != nil {
			return err
		}
	}
	// The next profiled server counts from 1 again: its markers must not
	// be found here.
	for _, m := range []string{"started", "stopped"} {
		_ = os.Remove(filepath.Join(dir, fmt.Sprintf("%d.%s", p.k, m)))
	}
	// Text summaries for the report; the raw profiles stay for -http use.
	tops := []struct {
		name string
		args []string
	}{
		{"cpu-" + p.phase + ".top.txt", []string{"tool", "pprof", "-top", "-nodecount=30", cpu}},
		{"cpu-" + p.phase + ".cum.txt", []string{"tool", "pprof", "-top", "-cum", "-nodecount=40", cpu}},
		{"allocs-" + p.phase + ".top.txt", []string{"tool", "pprof", "-top", "-nodecount=30", "-sample_index=alloc_space", "-base", base, allocs}},
		{"allocs-" + p.phase + ".objects.txt", []string{"tool", "pprof", "-top", "-nodecount=30", "-sample_index=alloc_objects", "-base", base, allocs}},
	}
	if p.phase == "idle" || p.phase == "stalled" {
		// What the open streams hold, not what opening them allocated.
		tops = append(tops, struct {
			name string
			args []string
		}{"inuse-" + p.phase + ".top.txt", []string{"tool", "pprof", "-top", "-nodecount=30", "-sample_index=inuse_space", allocs}},
			struct {
				name string
				args []string
			}{"heap-" + p.phase + ".cum.txt", []string{"tool", "pprof", "-top", "-cum", "-nodecount=60", "-sample_index=inuse_space", heap}})
		p.r.rep.Profiles = append(p.r.rep.Profiles, filepath.Join(dir, "memstats-"+p.phase+".txt"), filepath.Join(dir, "goroutine-"+p.phase+".txt"))
	}
	for _, t := range tops {
		out, err := exec.Command("go", t.args...).CombinedOutput()
		if err != nil {
			p.r.logf("   pprof %s: %v", t.name, err)
		}
		path := filepath.Join(dir, t.name)
		if err := os.WriteFile(path, out, 0o644); err != nil {
			return err
		}
		p.r.rep.Profiles = append(p.r.rep.Profiles, path)
	}
	return nil
}

func waitFile(path string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	for {
		if _, err := os.Stat(path); err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("benchsuite: profile marker %s never appeared", path)
		case <-time.After(5 * time.Millisecond):
		}
	}
}
