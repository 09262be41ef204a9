package agent

import (
	"context"
	"encoding/json"
	"regexp"
	"strings"
	"time"

	openai "github.com/sashabaranov/go-openai"

	"github.com/waggle-os/core/libs/protocol"
)

// GEPA ("prompt expansion"): a vague first message of a session is
// expanded by one model call before the turn's model sees it. The client
// is told (step GEPAStepText, then gepa_choices when the model proposed
// clarifying questions); the model gets `<expanded>\n\n(Original:
// "<original>")` as the user message; the session file keeps what the
// user typed. Any failure of the expansion call leaves the message as it
// was: GEPA never fails a turn.

// GEPAStepText announces an expanded prompt.
const GEPAStepText = "GEPA: Expanded prompt for better results"

// expandTimeout bounds the expansion call: it delays the first token.
const expandTimeout = 20 * time.Second

// ExpandOptions turns GEPA on for a turn.
type ExpandOptions struct {
	// Model answers the expansion call (the budget model when configured,
	// else the turn's model).
	Model string
}

// GepaChoicesData is the data of a gepa_choices event.
type GepaChoicesData struct {
	Original            string   `json:"original"`
	Expanded            string   `json:"expanded"`
	ClarifyingQuestions []string `json:"clarifyingQuestions"`
	Intent              string   `json:"intent"`
}

// Words that make a message clear enough by its first word: the
// original's action verbs plus the smart router's "real work" words, the
// greetings and thanks its classifier called "greeting", and the openers
// of a question its classifier called "question".
var (
	clearOpeners = wordSet(
		// action verbs (original ACTION_VERBS)
		"search", "find", "create", "write", "read", "edit", "delete", "show", "list", "run", "execute",
		"generate", "draft", "plan", "research", "review", "analyze", "help",
		// smart-router work words
		"debug", "fix", "refactor", "implement", "architect", "design", "migrate", "deploy", "build",
		"test", "develop", "configure", "setup", "install",
		// greetings and thanks
		"hi", "hello", "hey", "hiya", "yo", "thanks", "thank", "thx", "cheers", "bye", "goodbye",
		"good", "morning", "evening",
		// question openers
		"what", "what's", "whats", "why", "how", "when", "where", "who", "whom", "whose", "which",
		"is", "are", "am", "was", "were", "can", "could", "would", "should", "will", "do", "does",
		"did", "may", "might", "shall",
	)
	pathLike   = regexp.MustCompile(`[/\\]|\.\w{1,5}$|\.\w{1,5}\s`)
	urlLike    = regexp.MustCompile(`https?://|www\.`)
	leadingWrd = regexp.MustCompile(`^[\p{L}'’]+`)
)

func wordSet(ws ...string) map[string]bool {
	m := make(map[string]bool, len(ws))
	for _, w := range ws {
		m[w] = true
	}
	return m
}

// IsVague is GEPA's rule for a message worth expanding: after trimming it
// is not empty, not a slash command, at most 100 UTF-16 units and fewer
// than 10 words, has no question mark, no file path or extension, no URL,
// and its first word is not an action verb, a greeting or a question
// opener (see clearOpeners). The model may still decline (intent greeting
// or question, or an expansion not 1.5 times longer).
func IsVague(message string) bool {
	m := strings.TrimSpace(message)
	switch {
	case m == "", strings.HasPrefix(m, "/"), protocol.UTF16Len(m) > 100, len(strings.Fields(m)) >= 10,
		strings.Contains(m, "?"), pathLike.MatchString(m), urlLike.MatchString(m):
		return false
	}
	first := strings.ToLower(leadingWrd.FindString(m))
	return !clearOpeners[first]
}

// expandPrompt is the instruction of the expansion call (the original's
// classifier, prompt expander and clarifying-question prompts in one).
const expandPrompt = `You improve the first message a user sends to an AI assistant before the assistant sees it.

1. Classify the message's intent as exactly one of: question (asking for information), command (directing an action), observation (stating a fact), request (asking for help), greeting (social pleasantry).
2. Unless the intent is greeting or question, expand the brief or vague message into a detailed, well-structured prompt: add context, specify the desired format and clarify ambiguities, so an AI assistant can act on it. Do not invent facts about the user.
3. Write up to 3 short clarifying questions the assistant could ask about the message, one per entry.

Answer with a JSON object only, no other text:
{"intent": "<intent>", "expanded": "<expanded prompt, or empty>", "clarifyingQuestions": ["<question>", ...]}`

// expansion is the parsed answer of the expansion call.
type expansion struct {
	Intent    string   `json:"intent"`
	Expanded  string   `json:"expanded"`
	Questions []string `json:"clarifyingQuestions"`
}

// parseExpansion reads the model's answer (a JSON object, perhaps in a
// code fence or with text around it) and applies the original's rules:
// greetings and questions are not expanded, an expansion must be more than
// 1.5 times as long as the original, and a clarifying question is a
// trimmed line longer than 5 characters containing "?" (at most 3). ok is
// false when there is nothing to expand.
func parseExpansion(original, answer string) (expansion, bool) {
	start, end := strings.Index(answer, "{"), strings.LastIndex(answer, "}")
	if start < 0 || end <= start {
		return expansion{}, false
	}
	var e expansion
	if err := json.Unmarshal([]byte(answer[start:end+1]), &e); err != nil {
		return expansion{}, false
	}
	e.Intent = strings.ToLower(strings.TrimSpace(e.Intent))
	e.Expanded = strings.TrimSpace(e.Expanded)
	if e.Intent == "greeting" || e.Intent == "question" || e.Expanded == "" ||
		float64(protocol.UTF16Len(e.Expanded)) <= float64(protocol.UTF16Len(original))*1.5 {
		return expansion{}, false
	}
	if e.Intent == "" {
		e.Intent = "request"
	}
	var qs []string
	for _, q := range e.Questions {
		q = strings.TrimSpace(q)
		if protocol.UTF16Len(q) > 5 && strings.Contains(q, "?") && len(qs) < 3 {
			qs = append(qs, q)
		}
	}
	e.Questions = qs
	return e, true
}

// ExpandedMessage is the user message the model gets for an expanded prompt.
func ExpandedMessage(expanded, original string) string {
	return expanded + "\n\n(Original: \"" + original + "\")"
}

// expand runs GEPA for the turn's message and returns what the model gets
// instead ("" to keep the message).
func (r *run) expand(ctx context.Context) string {
	opts := r.req.Expand
	if opts == nil || !IsVague(r.req.Message) {
		return ""
	}
	ctx, cancel := context.WithTimeout(ctx, expandTimeout)
	defer cancel()
	answer, err := r.complete(ctx, opts.Model, []openai.ChatCompletionMessage{
		{Role: openai.ChatMessageRoleSystem, Content: expandPrompt},
		{Role: openai.ChatMessageRoleUser, Content: r.req.Message},
	}, 800, 0.2)
	if err != nil {
		return ""
	}
	e, ok := parseExpansion(r.req.Message, answer)
	if !ok {
		return ""
	}
	r.step(GEPAStepText)
	if len(e.Questions) > 0 {
		r.emit(protocol.EventGepaChoices, GepaChoicesData{
			Original: r.req.Message, Expanded: e.Expanded, ClarifyingQuestions: e.Questions, Intent: e.Intent,
		})
	}
	return ExpandedMessage(e.Expanded, r.req.Message)
}

// complete makes one non-streamed helper call (GEPA, compression) with the
// turn's key; its usage is reported apart from the turn's model (Extra).
func (r *run) complete(ctx context.Context, model string, msgs []openai.ChatCompletionMessage, maxTokens int, temperature float32) (string, error) {
	resp, err := r.a.client.CreateChatCompletion(r.keyed(ctx), openai.ChatCompletionRequest{
		Model: model, Messages: msgs, MaxTokens: maxTokens, Temperature: temperature,
	})
	if err != nil {
		if r.pool != nil {
			// A refused or rate-limited key is set aside for the turn's
			// own calls too, silently: the helper call is not the turn.
			if next, ok := r.pool.fail(r.key, statusOf(err), time.Now()); ok {
				r.key = next
			}
		}
		return "", r.modelError(err)
	}
	if resp.Usage.PromptTokens > 0 || resp.Usage.CompletionTokens > 0 {
		r.res.Extra = append(r.res.Extra, ExtraUsage{
			Model: model, InputTokens: resp.Usage.PromptTokens, OutputTokens: resp.Usage.CompletionTokens,
			Cost: Cost(model, resp.Usage.PromptTokens, resp.Usage.CompletionTokens, r.req.Prices),
		})
	}
	if len(resp.Choices) == 0 {
		return "", nil
	}
	return resp.Choices[0].Message.Content, nil
}
