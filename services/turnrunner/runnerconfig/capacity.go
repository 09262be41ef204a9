package runnerconfig

import (
	"bufio"
	"os"
	"strconv"
	"strings"
)

// Admission: a runner refuses a turn (503 RUNNER_BUSY) only past a limit
// sized from the machine's memory, never from a fixed count. A turn that
// streams costs the runner tens of KiB (its goroutine, its model
// connection's buffers, its publisher); perTurnBudget is deliberately
// generous, and only a quarter of the memory is counted, so the limit
// stops a runner well before it swaps.
const (
	perTurnBudget = 256 << 10
	minMaxTurns   = 1024
	maxMaxTurns   = 100_000
	// fallbackMaxTurns is used where the memory cannot be read.
	fallbackMaxTurns = 10_000
)

// defaultMaxTurns is Config.MaxTurns when it is not set.
func defaultMaxTurns() int {
	mem := totalMemory()
	if mem <= 0 {
		return fallbackMaxTurns
	}
	return min(max(int(mem/4/perTurnBudget), minMaxTurns), maxMaxTurns)
}

// totalMemory is the machine's memory in bytes (0 when unknown), or the
// cgroup's limit when a container has a lower one.
func totalMemory() int64 {
	var total int64
	if f, err := os.Open("/proc/meminfo"); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if rest, ok := strings.CutPrefix(sc.Text(), "MemTotal:"); ok {
				kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
				total = kb << 10
				break
			}
		}
		f.Close()
	}
	if b, err := os.ReadFile("/sys/fs/cgroup/memory.max"); err == nil {
		if lim, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64); err == nil && lim > 0 && (total == 0 || lim < total) {
			total = lim
		}
	}
	return total
}
