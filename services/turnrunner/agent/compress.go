package agent

import (
	"container/list"
	"context"
	"crypto/sha256"
	"fmt"
	"math"
	"regexp"
	"strings"
	"sync"
	"time"

	openai "github.com/sashabaranov/go-openai"

	"github.com/waggle-os/core/libs/protocol"
)

// Context compression (config.json budgetModel): when the estimated
// context passes a share of the model's window, the oldest messages after
// a protected head are summarised by the budget model instead of being
// dropped; the newest messages (a token budget) stay verbatim. The summary
// is cached per session and extended, not redone: a later turn reuses it
// while the verbatim part still fits, and summarises only the messages
// added since when it no longer does. A failed summary call falls back to
// the sliding window (ApplyContextWindow); it never fails the turn.

// Defaults of CompressOptions (the original's createDefaultCompressionConfig;
// its "system prompt + 3" head is 4 history messages here, the system
// prompt being sent apart).
const (
	DefaultMaxContextTokens = 128000
	DefaultCompressAt       = 0.5
	DefaultHeadMessages     = 4
	DefaultTailTokens       = 20000
	summaryTimeout          = 60 * time.Second
	maxCachedSummaries      = 1024
	clearedToolResult       = "[Cleared: tool result]"
)

// CompressOptions configures context compression for a turn.
type CompressOptions struct {
	// Model writes the summary (the budget model).
	Model string
	// Session keys the summary cache (workspace and session).
	Session string
	// MaxContextTokens is the model's context window; default 128000.
	MaxContextTokens int
	// Threshold is the share of MaxContextTokens that triggers
	// compression; default 0.5.
	Threshold float64
	// HeadMessages are the oldest messages always kept; default 4.
	HeadMessages int
	// TailTokens is the token budget of the newest messages kept
	// verbatim; default 20000. The turn's own message is always kept.
	TailTokens int
}

func (o CompressOptions) withDefaults() CompressOptions {
	if o.MaxContextTokens <= 0 {
		o.MaxContextTokens = DefaultMaxContextTokens
	}
	if o.Threshold <= 0 {
		o.Threshold = DefaultCompressAt
	}
	if o.HeadMessages <= 0 {
		o.HeadMessages = DefaultHeadMessages
	}
	if o.TailTokens <= 0 {
		o.TailTokens = DefaultTailTokens
	}
	return o
}

func (o CompressOptions) limit() float64 { return float64(o.MaxContextTokens) * o.Threshold }

// CompressedStepText is the step announcing a compressed context.
func CompressedStepText(original, compressed int) string {
	return fmt.Sprintf("Context compressed: %d→%d tokens", original, compressed)
}

// compactionPrompt asks for the summary (the original's COMPACTION_PROMPT).
const compactionPrompt = `
CRITICAL: Respond with TEXT ONLY. Do NOT call any tools.
You already have all the context you need in the conversation above.

Summarize the conversation into a structured brief that enables continuation without loss
of essential context.

## Required Sections

1. **Primary Request** — What the user originally asked for and their intent
2. **Key Decisions** — Decisions made during the conversation, with rationale
3. **Work Completed** — What was actually done (files created, research found, plans made)
4. **Current State** — Where things stand right now
5. **Memory Saved** — What was saved to memory (so we do not re-save)
6. **Pending Work** — What remains to be done
7. **Critical Context** — Facts, names, numbers, file paths that must survive compaction
8. **Suggested Next Step** — What to do when the conversation resumes

## Rules
- Preserve ALL factual details: dates, numbers, names, file paths, decisions
- Preserve the user's stated preferences and corrections
- Compress process noise: tool call sequences, failed approaches, intermediate steps
- The summary must enable any persona to pick up the work without asking the user to repeat themselves
`

// SummaryMessage is the system message that stands for n summarised messages.
func SummaryMessage(n int, summary string) string {
	return fmt.Sprintf("[Conversation compressed — %d messages summarized]\n\n%s", n, summary)
}

var (
	codeChars = regexp.MustCompile(`[{}();=<>\[\]|&!+\-*/\\]`)
	nonASCII  = regexp.MustCompile(`[^\x00-\x7F]`)
)

// EstimateTokens estimates the tokens of text the original's way: UTF-16
// length divided by a characters-per-token ratio chosen from the first
// 2000 characters — 3.5 for JSON, 3.2 for code (more than 6% code
// symbols), 2.5 for mostly non-ASCII text, else 4 — rounded up.
func EstimateTokens(text string) int {
	if text == "" {
		return 0
	}
	return int(math.Ceil(float64(protocol.UTF16Len(text)) / charsPerToken(text)))
}

func charsPerToken(text string) float64 {
	if protocol.UTF16Len(text) < 20 {
		return 4
	}
	sample := text
	if u := []rune(text); len(u) > 2000 {
		sample = string(u[:2000])
	}
	n := float64(protocol.UTF16Len(sample))
	switch t := strings.TrimLeft(sample, " \t\r\n"); {
	case strings.HasPrefix(t, "{") || strings.HasPrefix(t, "["):
		return 3.5
	case float64(len(codeChars.FindAllStringIndex(sample, -1)))/n > 0.06:
		return 3.2
	case float64(len(nonASCII.FindAllStringIndex(sample, -1)))/n > 0.15:
		return 2.5
	}
	return 4
}

// messageTokens is one message's estimate: 4 tokens of framing plus its text.
func messageTokens(m protocol.Message) int { return 4 + EstimateTokens(m.Content) }

func toolTokens(ev protocol.ToolEvent) int {
	return 4 + EstimateTokens(string(ev.Input)) + EstimateTokens(ev.Result)
}

// contextTokens estimates a history and the tool events replayed with it.
func contextTokens(history []protocol.Message, tools []protocol.ToolEvent) int {
	n := 0
	turns := map[string]bool{}
	for _, m := range history {
		n += messageTokens(m)
		if m.Role == protocol.RoleAssistant && m.TurnID != "" {
			turns[m.TurnID] = true
		}
	}
	for _, ev := range tools {
		if turns[ev.TurnID] && ev.Name != AutoRecallTool {
			n += toolTokens(ev)
		}
	}
	return n
}

// regions splits history into a head of o.HeadMessages, a middle and a
// tail of at most o.TailTokens (always at least the last message).
func regions(history []protocol.Message, o CompressOptions) (headEnd, tailStart int) {
	headEnd = min(o.HeadMessages, len(history))
	tailStart = len(history)
	tokens := 0
	for i := len(history) - 1; i >= headEnd; i-- {
		t := messageTokens(history[i])
		if tokens+t > o.TailTokens && i < len(history)-1 {
			break
		}
		tokens += t
		tailStart = i
	}
	return headEnd, tailStart
}

// cachedSummary is a session's summary of history[head:covered].
type cachedSummary struct {
	session string
	head    int
	covered int
	digest  [32]byte
	summary string
}

func digest(msgs []protocol.Message) [32]byte {
	h := sha256.New()
	for _, m := range msgs {
		h.Write([]byte(m.Role))
		h.Write([]byte{0})
		h.Write([]byte(m.Content))
		h.Write([]byte{0})
	}
	var d [32]byte
	copy(d[:], h.Sum(nil))
	return d
}

// summaryCache keeps the newest summaries, least recently used dropped
// first. Only this runner's: a session moving to another runner pays one
// summary call there.
type summaryCache struct {
	mu    sync.Mutex
	order *list.List
	items map[string]*list.Element
}

func (c *summaryCache) get(session string) (cachedSummary, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.items[session]
	if !ok {
		return cachedSummary{}, false
	}
	c.order.MoveToFront(el)
	return el.Value.(cachedSummary), true
}

func (c *summaryCache) put(s cachedSummary) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.items == nil {
		c.items, c.order = map[string]*list.Element{}, list.New()
	}
	if el, ok := c.items[s.session]; ok {
		el.Value = s
		c.order.MoveToFront(el)
		return
	}
	c.items[s.session] = c.order.PushFront(s)
	for c.order.Len() > maxCachedSummaries {
		last := c.order.Back()
		delete(c.items, last.Value.(cachedSummary).session)
		c.order.Remove(last)
	}
}

// compressContext returns the history (the turn's message last) and tool
// events to send: unchanged under the threshold, compressed over it, the
// sliding window when the summary call fails. quiet suppresses the step (a
// resumed turn announced it already).
func (r *run) compressContext(ctx context.Context, history []protocol.Message, tools []protocol.ToolEvent, quiet bool) ([]protocol.Message, []protocol.ToolEvent) {
	o := r.req.Compress.withDefaults()
	original := contextTokens(history, tools)
	if float64(original) <= o.limit() {
		return history, tools
	}
	headEnd, tailStart := regions(history, o)
	if tailStart-headEnd <= 2 {
		return history, tools // too little to summarise
	}
	head := history[:headEnd]
	var sum cachedSummary
	prev, ok := r.a.cache.get(o.Session)
	valid := ok && prev.head == headEnd && prev.covered > headEnd && prev.covered <= tailStart &&
		digest(history[headEnd:prev.covered]) == prev.digest
	switch {
	case valid && prev.covered == tailStart:
		sum = prev
	case valid && float64(contextTokens(assemble(head, prev, history[prev.covered:]), tools)) <= o.limit():
		// The messages added since still fit verbatim: no new summary.
		sum, tailStart = prev, prev.covered
	default:
		from, previous := headEnd, ""
		if valid {
			from, previous = prev.covered, prev.summary
		}
		text, err := r.summarize(ctx, o.Model, history[from:tailStart], previous)
		if err != nil || strings.TrimSpace(text) == "" {
			if ctx.Err() == nil {
				r.logger().Warn("context summary failed; using the sliding window", "model", o.Model, "err", err)
			}
			return ApplyContextWindow(history, MaxContextMessages), tools
		}
		sum = cachedSummary{session: o.Session, head: headEnd, covered: tailStart,
			digest: digest(history[headEnd:tailStart]), summary: text}
		r.a.cache.put(sum)
	}
	out := assemble(head, sum, history[tailStart:])
	kept := prunedTools(tools, history[tailStart:])
	if !quiet {
		r.step(CompressedStepText(original, contextTokens(out, kept)))
	}
	return out, kept
}

// assemble is head, the summary message, then the verbatim messages.
func assemble(head []protocol.Message, sum cachedSummary, rest []protocol.Message) []protocol.Message {
	out := make([]protocol.Message, 0, len(head)+1+len(rest))
	out = append(out, head...)
	out = append(out, protocol.Message{Role: protocol.RoleSystem, Content: SummaryMessage(sum.covered-sum.head, sum.summary)})
	return append(out, rest...)
}

// prunedTools clears the results of tool calls outside the verbatim tail:
// they are the bulkiest and oldest part of the context.
func prunedTools(tools []protocol.ToolEvent, tail []protocol.Message) []protocol.ToolEvent {
	recent := map[string]bool{}
	for _, m := range tail {
		recent[m.TurnID] = true
	}
	out := make([]protocol.ToolEvent, len(tools))
	for i, ev := range tools {
		out[i] = ev
		if !recent[ev.TurnID] {
			out[i].Result = clearedToolResult
		}
	}
	return out
}

// summarize asks the model for a summary of msgs, building on previous.
func (r *run) summarize(ctx context.Context, model string, msgs []protocol.Message, previous string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, summaryTimeout)
	defer cancel()
	return r.complete(ctx, model, SummaryRequest(msgs, previous), 2000, 0.1)
}

// SummaryRequest is the transcript the summariser gets: the previous
// summary (when extending one), the messages (system ones as user text),
// then the compaction instruction.
func SummaryRequest(msgs []protocol.Message, previous string) []openai.ChatCompletionMessage {
	out := make([]openai.ChatCompletionMessage, 0, len(msgs)+2)
	if previous != "" {
		out = append(out, openai.ChatCompletionMessage{Role: openai.ChatMessageRoleSystem, Content: "You are summarizing a conversation that has been compressed before. Here is the previous summary:\n\n" +
			previous + "\n\nNow incorporate the new messages below into an updated summary."})
	}
	for _, m := range msgs {
		if m.Content == "" {
			continue
		}
		role := openai.ChatMessageRoleUser
		if m.Role == protocol.RoleAssistant {
			role = openai.ChatMessageRoleAssistant
		}
		out = append(out, openai.ChatCompletionMessage{Role: role, Content: m.Content})
	}
	return append(out, openai.ChatCompletionMessage{Role: openai.ChatMessageRoleUser, Content: compactionPrompt})
}
