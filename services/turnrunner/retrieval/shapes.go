package retrieval

import (
	"fmt"
	"slices"
	"strings"

	"github.com/waggle-os/core/libs/protocol"
)

// ModelDefaultShape is the started event's shape when the request named no
// recognised shape: the shape then follows from the model (shapeForModel).
const ModelDefaultShape = "(model-default)"

// Shape names of protocol.AgentRunShapes.
const (
	ShapeClaude             = "claude"
	ShapeQwenThinking       = "qwen-thinking"
	ShapeQwenNonThinking    = "qwen-non-thinking"
	ShapeGPT                = "gpt"
	ShapeGenericSimple      = "generic-simple"
	ShapeClaudeGen1V1       = "claude-gen1-v1"
	ShapeQwenThinkingGen1V1 = "qwen-thinking-gen1-v1"
)

// shapeChoice is the outcome of reading a request's shape.
type shapeChoice struct {
	// override is the requested shape when it is recognised, else "".
	override string
	// requested is the request's shape, nil when it named none.
	requested *string
	// recognized is true when the request named a known shape or none.
	recognized bool
	// name is the shape the run uses.
	name string
}

// chooseShape applies reference §5.4: a recognised shape overrides, an
// unknown one falls back to the model's default without an error.
func chooseShape(requested, model string) shapeChoice {
	var c shapeChoice
	if requested != "" {
		c.requested = &requested
		if slices.Contains(protocol.AgentRunShapes, requested) {
			c.override = requested
		}
	}
	c.recognized = c.override != "" || requested == ""
	c.name = c.override
	if c.name == "" {
		c.name = shapeForModel(model)
	}
	return c
}

// startedShape is the started event's shape field.
func (c shapeChoice) startedShape() string {
	if c.override != "" {
		return c.override
	}
	return ModelDefaultShape
}

// shapeForModel picks a model's default shape from its name: Claude models
// get the claude shape, Qwen models the thinking shape unless the name says
// they do not think (instruct / non-thinking variants), GPT and o-series
// models the gpt shape, and anything else the plain generic one.
func shapeForModel(model string) string {
	m := strings.ToLower(model)
	switch {
	case strings.Contains(m, "claude"):
		return ShapeClaude
	case strings.Contains(m, "qwen"):
		if strings.Contains(m, "non-thinking") || strings.Contains(m, "instruct") {
			return ShapeQwenNonThinking
		}
		return ShapeQwenThinking
	case strings.Contains(m, "gpt") || strings.HasPrefix(m, "o1") || strings.HasPrefix(m, "o3") || strings.HasPrefix(m, "o4"):
		return ShapeGPT
	default:
		return ShapeGenericSimple
	}
}

// The system prompts. Each starts from the same duty (answer from the
// workspace, retrieve before answering, admit gaps) and differs only in
// what that model family needs said: where reasoning goes, and how strict
// the answer's layout is. They are kept short on purpose — the question
// and the retrieved passages are what should fill the context.
const (
	promptCore = "You answer one question for the user from their own workspace: saved memories and past conversations. " +
		"Use the `retrieve` tool to search it; each call takes one focused search query and returns the best-matching passages, numbered, with a relevance score. " +
		"Search before you answer, and search again with different words when the first results miss. " +
		"Answer only from what the passages say; when they do not contain the answer, say so plainly instead of guessing."

	promptClaude = "Plan briefly, then call `retrieve` as often as the question needs — several calls in one step are fine. " +
		"When you have enough, write the final answer without calling the tool, and cite the passages you relied on as [result N]."

	promptQwenThinking = "Think inside <think>…</think> before each action and keep that reasoning short. " +
		"Everything after </think> in your last message is the answer the user sees, so put nothing but the answer there, citing passages as [result N]."

	promptQwenNonThinking = "Do not write out your reasoning and do not use <think> blocks. " +
		"Either call `retrieve`, or give the final answer directly, citing passages as [result N]."

	promptGPT = "Call the `retrieve` function for the facts you need, then reply with a concise Markdown answer (no tool call) that cites passages as [result N]."

	promptGenericSimple = "Steps: 1) call `retrieve` with a short query; 2) read the results; 3) retrieve again if needed; 4) write the answer in plain words. " +
		"Do not call the tool in the message that contains your answer."

	promptGen1Layout = "Lay the final answer out in three parts: **Answer** (the direct answer in a few sentences), " +
		"**Evidence** (a bullet per supporting passage, with its [result N]), and **Gaps** (what the workspace did not tell you, or \"None\")."
)

// shapePrompts maps each shape to its instructions after promptCore.
var shapePrompts = map[string]string{
	ShapeClaude:             promptClaude,
	ShapeQwenThinking:       promptQwenThinking,
	ShapeQwenNonThinking:    promptQwenNonThinking,
	ShapeGPT:                promptGPT,
	ShapeGenericSimple:      promptGenericSimple,
	ShapeClaudeGen1V1:       promptClaude + " " + promptGen1Layout,
	ShapeQwenThinkingGen1V1: promptQwenThinking + " " + promptGen1Layout,
}

// systemPrompt is the run's system message for a shape and persona, with
// the budget the model works within so it can plan its searches.
func systemPrompt(shape, persona string, maxSteps, maxRetrievals int) string {
	var b strings.Builder
	b.WriteString(promptCore)
	b.WriteString("\n\n")
	b.WriteString(shapePrompts[shape])
	fmt.Fprintf(&b, "\n\nBudget: at most %d steps, and at most %d `retrieve` calls per step.", maxSteps, maxRetrievals)
	if persona != "" {
		fmt.Fprintf(&b, "\nPersona: respond as the %q persona — its expertise, tone and priorities.", persona)
	}
	return b.String()
}
