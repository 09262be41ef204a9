package turn

import (
	"context"
	"errors"
	"time"

	"github.com/waggle-os/core/libs/protocol"
	"github.com/waggle-os/core/services/turnrunner/agent"
	"github.com/waggle-os/core/services/turnrunner/agentcontext"
	"github.com/waggle-os/core/services/turnrunner/subagent"
	"github.com/waggle-os/core/services/turnrunner/tools"
	"github.com/waggle-os/core/services/turnrunner/turnevents"
	"github.com/waggle-os/core/services/turnrunner/turntools"
)

// errSubAgentEnded releases a placed sub-agent's environment.
var errSubAgentEnded = errors.New("sub-agent ended")

// SubAgentEnv rebuilds, on a runner that does not run turn req, what the
// turn's sub-agents draw from (subagent.BuildEnv): the inputs, the team's
// tool policy, the persona, the built-in and MCP tools and the model's
// keys, read as a resumed turn reads them — from the turn's identity, not
// from anything the parent's runner sends. A policy that cannot be read
// fails the build (no tool runs unvouched for). step shows a step in the
// parent's stream. The environment's Close ends what it holds.
func SubAgentEnv(ctx context.Context, d *Deps, req protocol.TurnRequest, model string, step func(string)) (subagent.Env, error) {
	cctx, cancel := context.WithCancelCause(ctx)
	t := &Turn{deps: d, req: req, ctx: cctx, cancel: cancel, started: time.Now(), pub: turnevents.StepsOnly(step)}
	env, err := t.subAgentEnv(model)
	if err != nil {
		cancel(err)
		return subagent.Env{}, err
	}
	env.Close = func() { cancel(errSubAgentEnded) }
	return env, nil
}

// subAgentEnv is SubAgentEnv's work on the stand-in turn t.
func (t *Turn) subAgentEnv(model string) (subagent.Env, error) {
	mc := t.deps.Settings.Get()
	ctxl := t.contextLoader()
	in, err := ctxl.Inputs(t.ctx, mc)
	if err != nil {
		return subagent.Env{}, err
	}
	var policy protocol.ToolPolicy
	if t.req.User != "" {
		if policy, err = t.deps.Policies.Policy(t.ctx, t.req.User, t.req.Workspace, time.Now()); err != nil {
			return subagent.Env{}, err
		}
	}
	persona := in.Persona
	mem := agentcontext.Memory{Store: ctxl.Store, User: t.req.User}
	env := tools.Env{FilesDir: t.filesDir(), Workspace: t.req.Workspace, Memory: mem,
		WebSearch: turntools.WebSearch(mc.WebSearch, func(p string) string { return t.deps.Settings.SearchKey(t.ctx, in.Workspace.TeamID, p) }),
		Plan:      tools.ReplayPlan(in.HistoryTools, in.TurnTools),
		Knowledge: mem, Mind: agentcontext.Mind{Store: ctxl.Store, Workspace: t.req.Workspace, User: t.req.User}}
	offer := turntools.Choose(t.ctx, t.deps.Tools, t.deps.MCP, env, t.mcpStep, persona, policy)
	workers, blocked := offer.Workers, offer.Blocked
	areq := agent.Request{Model: agent.ModelChoice{Model: model}}
	t.pipeline().LoopOptions(&areq, mc, in.History, "")
	return subagent.Env{Offered: workers, Blocked: blocked, APIKeys: areq.APIKeys, Prices: mc.Prices, Persona: ctxl.Persona, ReadOnly: persona.ReadOnly}, nil
}
