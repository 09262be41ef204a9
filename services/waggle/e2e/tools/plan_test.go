package tools

import (
	"slices"
	"syscall"
	"testing"

	"github.com/waggle-os/core/services/waggle/waggletest"
)

// TestPlanSurvivesKill9: a plan built over several turns is kept with the
// session: after the server is killed with SIGKILL and started again on
// the same data directory, show_plan shows the same steps, the finished
// one with its result, and execute_step goes on with the next step.
func TestPlanSurvivesKill9(t *testing.T) {
	llm := callerModel(t)
	dir := t.TempDir()
	p := waggletest.StartProc(t, waggleBin, waggletest.ProcDataDir(dir), waggletest.ProcEnv("WAGGLE_LLM_URL="+llm.URL()))
	evs := runChat(t, p, "plans", "create_plan", map[string]any{"title": "Hive inspection"})
	if s := waggletest.Steps(evs); !slices.Contains(s, `Creating plan: "Hive inspection"...`) {
		t.Errorf("steps %q", s)
	}
	runChat(t, p, "plans", "add_plan_step", map[string]any{"title": "Check the queen"})
	runChat(t, p, "plans", "add_plan_step", map[string]any{"title": "Count frames", "description": "all boxes"})
	runChat(t, p, "plans", "execute_step", map[string]any{"result": "queen seen, eggs present"})

	if err := syscall.Kill(p.Pid(), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	p.Stop(t) // waits for the exit

	p2 := waggletest.StartProc(t, waggleBin, waggletest.ProcDataDir(dir), waggletest.ProcEnv("WAGGLE_LLM_URL="+llm.URL()))
	runChat(t, p2, "plans", "show_plan", map[string]any{})
	res := toolResults(llm)
	want := "Plan: Hive inspection (1 of 2 steps done)\n" +
		"✓ 1. Check the queen [done]\n   result: queen seen, eggs present\n" +
		"○ 2. Count frames [pending]\n   all boxes"
	if got := res[len(res)-1]; got != want {
		t.Fatalf("show_plan after kill -9:\n%s\nwant\n%s", got, want)
	}
	runChat(t, p2, "plans", "execute_step", map[string]any{"result": "9 frames"})
	if got := toolResults(llm); got[len(got)-1] != "Step 2 completed: Count frames" {
		t.Errorf("execute_step after the restart: %q", got[len(got)-1])
	}
}
