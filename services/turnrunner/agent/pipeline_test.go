package agent

import (
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	openai "github.com/sashabaranov/go-openai"

	"github.com/waggle-os/core/libs/protocol"
)

func TestIsVague(t *testing.T) {
	cases := []struct {
		msg  string
		want bool
	}{
		{"quarterly numbers", true},
		{"  make it better  ", true},
		{"the usual", true},
		{"", false},
		{"   ", false},
		{"/research bees", false},
		{"what are the numbers", false},
		{"numbers?", false},
		{"Hi there", false},
		{"thanks a lot", false},
		{"Good morning", false},
		{"write a poem", false},
		{"Fix the login", false},
		{"implement the parser", false},
		{"notes/todo", false},
		{"the readme.md", false},
		{"report.pdf please", false},
		{"see https://example.com", false},
		{"see www.example.com", false},
		{"one two three four five six seven eight nine", true},
		{"one two three four five six seven eight nine ten", false},
		{strings.Repeat("x", 100), true},
		{strings.Repeat("x", 101), false},
		{strings.Repeat("é", 100), true}, // UTF-16 units, not bytes
	}
	for _, tc := range cases {
		if got := IsVague(tc.msg); got != tc.want {
			t.Errorf("IsVague(%q) = %v, want %v", tc.msg, got, tc.want)
		}
	}
}

func TestParseExpansion(t *testing.T) {
	long := "Write a one-page summary of the quarterly numbers with a table."
	cases := []struct {
		name, answer string
		ok           bool
		want         expansion
	}{
		{"plain", `{"intent":"request","expanded":"` + long + `","clarifyingQuestions":["Which quarter?","ok?","no","  For whom?  "]}`, true,
			expansion{Intent: "request", Expanded: long, Questions: []string{"Which quarter?", "For whom?"}}},
		{"fenced with text", "Sure:\n```json\n{\"intent\":\"Command\",\"expanded\":\"" + long + "\"}\n```", true,
			expansion{Intent: "command", Expanded: long}},
		{"missing intent is a request", `{"expanded":"` + long + `"}`, true, expansion{Intent: "request", Expanded: long}},
		{"at most three questions", `{"intent":"request","expanded":"` + long + `","clarifyingQuestions":["Aaaaa 1?","Aaaaa 2?","Aaaaa 3?","Aaaaa 4?"]}`, true,
			expansion{Intent: "request", Expanded: long, Questions: []string{"Aaaaa 1?", "Aaaaa 2?", "Aaaaa 3?"}}},
		{"greeting", `{"intent":"greeting","expanded":"` + long + `"}`, false, expansion{}},
		{"question", `{"intent":"question","expanded":"` + long + `"}`, false, expansion{}},
		{"empty expansion", `{"intent":"request","expanded":""}`, false, expansion{}},
		{"not 1.5 times longer", `{"intent":"request","expanded":"quarterly numbers, please"}`, false, expansion{}},
		{"not JSON", "I would expand it as follows", false, expansion{}},
		{"broken JSON", `{"intent":`, false, expansion{}},
	}
	for _, tc := range cases {
		got, ok := parseExpansion("quarterly numbers", tc.answer)
		if ok != tc.ok || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: %+v %v, want %+v %v", tc.name, got, ok, tc.want, tc.ok)
		}
	}
	if got := ExpandedMessage("E", `say "hi"`); got != "E\n\n(Original: \"say \"hi\"\")" {
		t.Errorf("ExpandedMessage %q", got)
	}
}

func TestEstimateTokens(t *testing.T) {
	cases := []struct {
		text string
		want int
	}{
		{"", 0},
		{"short", 2},                     // < 20 units: prose, ceil(5/4)
		{strings.Repeat("word ", 8), 10}, // 40 prose characters / 4
		{`{"a": "` + strings.Repeat("x", 28) + `"}`, 11},          // 37 characters of JSON / 3.5
		{"if (a) { b(); } else { c(); } x = y;", 12},              // 37 characters, 16 code symbols: / 3.2
		{strings.Repeat("é", 40), 16},                             // non-ASCII: / 2.5
		{"[Conversation compressed — 1 messages summarized]", 14}, // 49 units starting with "[": JSON ratio, ceil(49/3.5)
	}
	for _, tc := range cases {
		if got := EstimateTokens(tc.text); got != tc.want {
			t.Errorf("EstimateTokens(%q) = %d, want %d", tc.text, got, tc.want)
		}
	}
}

func userMsgs(contents ...string) []protocol.Message {
	out := make([]protocol.Message, len(contents))
	for i, c := range contents {
		out[i] = protocol.Message{Role: protocol.RoleUser, Content: c}
	}
	return out
}

func TestRegions(t *testing.T) {
	ten := strings.Repeat("w", 40) // 4 + 10 = 14 tokens
	cases := []struct {
		name          string
		n             int
		o             CompressOptions
		head, tailPos int
	}{
		{"tail fits four", 10, CompressOptions{HeadMessages: 2, TailTokens: 60}, 2, 6},
		{"tail at least the last message", 10, CompressOptions{HeadMessages: 2, TailTokens: 1}, 2, 9},
		{"tail never eats the head", 5, CompressOptions{HeadMessages: 2, TailTokens: 1000}, 2, 2},
		{"short history", 1, CompressOptions{HeadMessages: 4, TailTokens: 10}, 1, 1},
	}
	for _, tc := range cases {
		contents := make([]string, tc.n)
		for i := range contents {
			contents[i] = ten
		}
		head, tail := regions(userMsgs(contents...), tc.o.withDefaults())
		if head != tc.head || tail != tc.tailPos {
			t.Errorf("%s: head %d tail %d, want %d %d", tc.name, head, tail, tc.head, tc.tailPos)
		}
	}
}

func TestContextTokensCountsReplayedTools(t *testing.T) {
	h := []protocol.Message{
		{Role: protocol.RoleUser, Content: "abcd"},
		{Role: protocol.RoleAssistant, Content: "efgh", TurnID: "t1"},
	}
	tools := []protocol.ToolEvent{
		{TurnID: "t1", Name: "read_file", Input: []byte(`{}`), Result: "12345678"}, // 4 + 1 + 2
		{TurnID: "t1", Name: AutoRecallTool, Result: "ignored"},
		{TurnID: "t9", Name: "bash", Result: "not in this history"},
	}
	if got := contextTokens(h, tools); got != 5+5+7 {
		t.Errorf("contextTokens = %d, want 17", got)
	}
	pruned := prunedTools(tools, h[1:])
	if pruned[0].Result != "12345678" || pruned[2].Result != clearedToolResult || tools[2].Result != "not in this history" {
		t.Errorf("pruned %+v (original %+v)", pruned, tools)
	}
}

func TestSummaryRequest(t *testing.T) {
	h := []protocol.Message{
		{Role: protocol.RoleSystem, Content: "[Context summary]"},
		{Role: protocol.RoleUser, Content: "u"},
		{Role: protocol.RoleAssistant, Content: ""},
		{Role: protocol.RoleAssistant, Content: "a"},
	}
	got := SummaryRequest(h, "")
	if len(got) != 4 || got[0].Role != openai.ChatMessageRoleUser || got[2].Role != openai.ChatMessageRoleAssistant ||
		got[3].Content != compactionPrompt {
		t.Errorf("summary request %+v", got)
	}
	got = SummaryRequest(h[1:2], "PREV")
	if len(got) != 3 || got[0].Role != openai.ChatMessageRoleSystem || !strings.Contains(got[0].Content, "previous summary:\n\nPREV\n\n") {
		t.Errorf("iterative summary request %+v", got)
	}
}

func TestSummaryCacheEvictsLeastRecentlyUsed(t *testing.T) {
	var c summaryCache
	for i := range maxCachedSummaries + 1 {
		c.put(cachedSummary{session: fmt.Sprint(i), summary: fmt.Sprint(i)})
		if i == 0 {
			c.get("0") // keep 0 fresh
		}
		if i == 1 {
			c.get("0")
		}
	}
	if _, ok := c.get("0"); !ok {
		t.Error("recently used entry evicted")
	}
	if _, ok := c.get("1"); ok {
		t.Error("least recently used entry kept")
	}
	c.put(cachedSummary{session: "0", summary: "new"})
	if s, _ := c.get("0"); s.summary != "new" || c.order.Len() != maxCachedSummaries {
		t.Errorf("replace: %+v, %d entries", s, c.order.Len())
	}
}

func TestKeyPool(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	p := newKeyPool([]string{"k1", "k2", "k3"})
	steps := []struct {
		name   string
		do     func() (int, bool)
		want   int
		wantOK bool
	}{
		{"first key first", func() (int, bool) { return p.pick(now), true }, 0, true},
		{"429 moves on", func() (int, bool) { return p.fail(0, http.StatusTooManyRequests, now) }, 1, true},
		{"resting key skipped", func() (int, bool) { return p.pick(now), true }, 1, true},
		{"500 does not rotate", func() (int, bool) { return p.fail(1, http.StatusInternalServerError, now) }, 1, false},
		{"401 refuses for good", func() (int, bool) { return p.fail(1, http.StatusUnauthorized, now) }, 2, true},
		{"last key exhausted", func() (int, bool) { return p.fail(2, http.StatusTooManyRequests, now) }, 2, false},
		{"all resting: the one resting least", func() (int, bool) { return p.pick(now.Add(time.Minute)), true }, 0, true},
		{"rested key comes back", func() (int, bool) { return p.pick(now.Add(rateLimitCooldown)), true }, 0, true},
	}
	for _, s := range steps {
		got, ok := s.do()
		if got != s.want || ok != s.wantOK {
			t.Errorf("%s: %d %v, want %d %v", s.name, got, ok, s.want, s.wantOK)
		}
	}
	all := newKeyPool([]string{"a", "b"})
	all.fail(0, http.StatusUnauthorized, now)
	all.fail(1, http.StatusUnauthorized, now)
	if got := all.pick(now); got != 0 {
		t.Errorf("all refused: pick %d, want 0", got)
	}
}

func TestKeyPoolsShareStatePerList(t *testing.T) {
	var k keyPools
	a := k.get([]string{"x", "y"})
	if k.get([]string{"x", "y"}) != a || k.get([]string{"y", "x"}) == a {
		t.Error("pools are not one per key list")
	}
}

func TestModelErrorRedactsKeys(t *testing.T) {
	inner := &openai.APIError{HTTPStatusCode: 401, Message: "Incorrect API key provided: sk-live-123"}
	err := error(&ModelError{Model: "m", Err: inner, secrets: []string{"sk-live-123", ""}})
	if strings.Contains(err.Error(), "sk-live-123") || !strings.Contains(err.Error(), "[redacted]") {
		t.Errorf("error text %q", err)
	}
	var apiErr *openai.APIError
	if !errors.As(err, &apiErr) || statusOf(err) != 401 {
		t.Error("redaction hides the status")
	}
}

func TestAuthorizeUsesTheContextKey(t *testing.T) {
	req, _ := http.NewRequest(http.MethodPost, "http://x/v1/chat/completions", nil)
	req.Header.Set("Authorization", "Bearer default")
	if got := authorize(req); got.Header.Get("Authorization") != "Bearer default" {
		t.Errorf("without a key: %q", got.Header.Get("Authorization"))
	}
	keyed := req.WithContext(withAPIKey(req.Context(), "pool-key"))
	if got := authorize(keyed); got.Header.Get("Authorization") != "Bearer pool-key" || req.Header.Get("Authorization") != "Bearer default" {
		t.Errorf("with a key: %q (original %q)", got.Header.Get("Authorization"), req.Header.Get("Authorization"))
	}
}

func TestGEPAEnabled(t *testing.T) {
	on, off := true, false
	cases := []struct {
		mc   ModelConfig
		want bool
	}{
		{ModelConfig{}, false},
		{ModelConfig{BudgetModel: "b"}, true},
		{ModelConfig{BudgetModel: "b", GEPA: &off}, false},
		{ModelConfig{GEPA: &on}, true},
	}
	for _, tc := range cases {
		if got := tc.mc.GEPAEnabled(); got != tc.want {
			t.Errorf("%+v: %v, want %v", tc.mc, got, tc.want)
		}
	}
}
