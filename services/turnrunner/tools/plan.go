package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/waggle-os/core/libs/protocol"
)

// Plan limits.
const (
	maxPlanSteps      = 100
	maxPlanTitle      = 500
	maxPlanStepDetail = 4000
)

// Plan is a session's execution plan. It has no storage of its own: the
// session's log already holds every plan tool call that succeeded (the
// turn runner persists each finished call through the session store), so
// a turn rebuilds the plan by replaying those calls (ReplayPlan) and the
// plan survives whatever the runner survives — a restart, a kill -9, a
// turn resumed on another runner. It is safe for concurrent use.
type Plan struct {
	mu    sync.Mutex
	title string
	made  bool
	steps []planStep
}

type planStep struct {
	Title, Description, Command string
	Done                        bool
	Result                      string
}

// Plan tool names.
const (
	toolCreatePlan  = "create_plan"
	toolAddPlanStep = "add_plan_step"
	toolExecuteStep = "execute_step"
	toolShowPlan    = "show_plan"
)

// ReplayPlan rebuilds a session's plan from its tool events, in order
// (the session's history, then the turn's own finished calls). Only
// successful top-level calls count: a failed, denied or sub-agent call
// changed nothing.
func ReplayPlan(events ...[]protocol.ToolEvent) *Plan {
	p := &Plan{}
	for _, evs := range events {
		for _, ev := range evs {
			if ev.Status != "success" || ev.IsError || ev.Parent != "" {
				continue
			}
			switch ev.Name {
			case toolCreatePlan:
				var in createPlanInput
				if json.Unmarshal(ev.Input, &in) == nil {
					_, _ = p.create(&in)
				}
			case toolAddPlanStep:
				var in addPlanStepInput
				if json.Unmarshal(ev.Input, &in) == nil {
					_, _ = p.addStep(&in)
				}
			case toolExecuteStep:
				var in executeStepInput
				if json.Unmarshal(ev.Input, &in) == nil {
					_, _ = p.execute(&in)
				}
			}
		}
	}
	return p
}

var errNoPlan = errors.New("no plan created yet: use create_plan first")

func (p *Plan) create(in *createPlanInput) (string, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.title, p.made, p.steps = in.Title, true, nil
	return "Plan created: " + in.Title, nil
}

func (p *Plan) addStep(in *addPlanStepInput) (string, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.made {
		return "", errNoPlan
	}
	if len(p.steps) >= maxPlanSteps {
		return "", fmt.Errorf("the plan already has %d steps", maxPlanSteps)
	}
	p.steps = append(p.steps, planStep{Title: in.Title, Description: in.Description, Command: in.Command})
	return fmt.Sprintf("Step %d added: %s", len(p.steps), in.Title), nil
}

func (p *Plan) execute(in *executeStepInput) (string, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.made {
		return "", errNoPlan
	}
	for i := range p.steps {
		if !p.steps[i].Done {
			p.steps[i].Done, p.steps[i].Result = true, in.Result
			return fmt.Sprintf("Step %d completed: %s", i+1, p.steps[i].Title), nil
		}
	}
	return "All steps complete.", nil
}

func (p *Plan) show() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.made {
		return "No plan created."
	}
	var b strings.Builder
	done := 0
	for _, s := range p.steps {
		if s.Done {
			done++
		}
	}
	fmt.Fprintf(&b, "Plan: %s (%d of %d steps done)", p.title, done, len(p.steps))
	if len(p.steps) == 0 {
		b.WriteString("\nPlan has no steps.")
	}
	for i, s := range p.steps {
		icon, status := "○", "pending"
		if s.Done {
			icon, status = "✓", "done"
		}
		fmt.Fprintf(&b, "\n%s %d. %s [%s]", icon, i+1, s.Title, status)
		if s.Description != "" {
			fmt.Fprintf(&b, "\n   %s", oneLine(s.Description))
		}
		if s.Command != "" {
			fmt.Fprintf(&b, "\n   command: %s", oneLine(s.Command))
		}
		if s.Done && s.Result != "" {
			fmt.Fprintf(&b, "\n   result: %s", oneLine(s.Result))
		}
	}
	return b.String()
}

// checkText requires a non-empty text of at most limit characters.
func checkText(name, v string, limit int, required bool) error {
	if required && strings.TrimSpace(v) == "" {
		return fmt.Errorf("%s is required", name)
	}
	if utf8.RuneCountInString(v) > limit {
		return fmt.Errorf("%s is longer than %d characters", name, limit)
	}
	return nil
}

// planTool is the part every plan tool shares: it is offered only when
// the turn has a plan (Env.Plan).
type planTool struct{}

// Available implements Availability.
func (planTool) Available(env Env) bool { return env.Plan != nil }

// withPlan runs f on the turn's plan.
func withPlan[In any](f func(p *Plan, in *In) (string, error)) func(context.Context, Env, *In) (string, error) {
	return func(_ context.Context, env Env, in *In) (string, error) {
		if env.Plan == nil {
			return "", errors.New("plans are not available in this turn")
		}
		return f(env.Plan, in)
	}
}

type createPlanTool struct{ planTool }

func (createPlanTool) Name() string { return toolCreatePlan }

func (createPlanTool) Description() string {
	return "Create a new execution plan for this conversation, replacing any earlier one. Add its steps with " +
		"add_plan_step, mark them done in order with execute_step, and show it with show_plan. The plan is kept " +
		"with the conversation."
}

func (createPlanTool) Schema() json.RawMessage {
	return json.RawMessage(`{"type":"object","properties":{` +
		`"title":{"type":"string","description":"Plan title"}},"required":["title"]}`)
}

type createPlanInput struct {
	Title string `json:"title"`
}

func (in *createPlanInput) validate() error {
	in.Title = strings.TrimSpace(in.Title)
	return checkText("title", in.Title, maxPlanTitle, true)
}

func (createPlanTool) Decode(input json.RawMessage) (Call, error) {
	return decodeCall(input, withPlan((*Plan).create))
}

type addPlanStepTool struct{ planTool }

func (addPlanStepTool) Name() string { return toolAddPlanStep }

func (addPlanStepTool) Description() string {
	return "Add a step to the end of the current plan."
}

func (addPlanStepTool) Schema() json.RawMessage {
	return json.RawMessage(`{"type":"object","properties":{` +
		`"title":{"type":"string","description":"Step title"},` +
		`"description":{"type":"string","description":"What the step involves (optional)"},` +
		`"command":{"type":"string","description":"A command the step will run (optional; recorded, not run)"}` +
		`},"required":["title"]}`)
}

type addPlanStepInput struct {
	Title       string `json:"title"`
	Description string `json:"description,omitempty"`
	Command     string `json:"command,omitempty"`
}

func (in *addPlanStepInput) validate() error {
	in.Title = strings.TrimSpace(in.Title)
	return errors.Join(
		checkText("title", in.Title, maxPlanTitle, true),
		checkText("description", in.Description, maxPlanStepDetail, false),
		checkText("command", in.Command, maxPlanStepDetail, false))
}

func (addPlanStepTool) Decode(input json.RawMessage) (Call, error) {
	return decodeCall(input, withPlan((*Plan).addStep))
}

type executeStepTool struct{ planTool }

func (executeStepTool) Name() string { return toolExecuteStep }

func (executeStepTool) Description() string {
	return "Mark the current (first unfinished) plan step as done, with the result of doing it. Do the step's work " +
		"with the other tools first."
}

func (executeStepTool) Schema() json.RawMessage {
	return json.RawMessage(`{"type":"object","properties":{` +
		`"result":{"type":"string","description":"What doing the step produced"}},"required":["result"]}`)
}

type executeStepInput struct {
	Result string `json:"result"`
}

func (in *executeStepInput) validate() error {
	return checkText("result", in.Result, maxPlanStepDetail, true)
}

func (executeStepTool) Decode(input json.RawMessage) (Call, error) {
	return decodeCall(input, withPlan((*Plan).execute))
}

type showPlanTool struct{ planTool }

func (showPlanTool) Name() string { return toolShowPlan }

func (showPlanTool) Description() string {
	return "Show the current plan: its steps, which are done, and their results."
}

func (showPlanTool) Schema() json.RawMessage {
	return json.RawMessage(`{"type":"object","properties":{},"required":[]}`)
}

func (showPlanTool) Decode(input json.RawMessage) (Call, error) {
	return decodeCall(input, withPlan(func(p *Plan, _ *noArgs) (string, error) { return p.show(), nil }))
}
