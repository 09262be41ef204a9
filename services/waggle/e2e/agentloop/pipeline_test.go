package agentloop

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/waggle-os/core/libs/llmtest"
	"github.com/waggle-os/core/services/waggle/waggletest"
)

// The turn pipeline around the agent loop: GEPA, context compression, the
// credential pool, workflow capture, persona disclaimers and the schedule
// hint (docs/agent.md).

// helperCalls are the non-streamed requests (GEPA, summaries); turn calls stream.
func helperCalls(llm *llmtest.Server) (helpers, turns []*llmtest.Request) {
	for _, r := range llm.ChatRequests() {
		if r.Chat.Stream {
			turns = append(turns, r)
		} else {
			helpers = append(helpers, r)
		}
	}
	return helpers, turns
}

func lastMessage(r *llmtest.Request) llmtest.Message {
	return r.Chat.Messages[len(r.Chat.Messages)-1]
}

// gepaAnswer is the expansion call's scripted answer.
const gepaAnswer = `{"intent":"request","expanded":"Prepare a summary of the quarterly numbers: revenue, costs and margin per quarter, in a table, with a short commentary on the trend.","clarifyingQuestions":["Which quarters should I cover?","  Is this for an internal audience?  ","no question here","Should I include a chart?","Anything else?"]}`

const gepaExpanded = "Prepare a summary of the quarterly numbers: revenue, costs and margin per quarter, in a table, with a short commentary on the trend."

// TestGEPAExpandsVagueFirstMessage: a vague first message is expanded by
// one call; the client sees the step and gepa_choices, the model the
// expanded prompt, the disk the original; the second message is not expanded.
func TestGEPAExpandsVagueFirstMessage(t *testing.T) {
	llm := newLLM(t, llmtest.WithHandler(func(r *llmtest.Request) llmtest.Response {
		if !r.Chat.Stream {
			return llmtest.Reply(gepaAnswer)
		}
		return llmtest.Reply("Here you go.")
	}))
	srv := start(t, llm, map[string]string{"config.json": `{"gepa":true}`})

	evs := srv.Chat(chat("quarterly numbers")).All(t)
	want := []string{"step", "tool", "tool_result", "step", "gepa_choices", "token", "done"}
	if got := waggletest.Names(evs); !reflect.DeepEqual(got, want) {
		t.Fatalf("events %v, want %v%s", got, want, describe(evs))
	}
	if got := evs[3].Content(); got != "GEPA: Expanded prompt for better results" {
		t.Errorf("step %q", got)
	}
	wantChoices := `{"original":"quarterly numbers","expanded":"` + gepaExpanded + `","clarifyingQuestions":["Which quarters should I cover?","Is this for an internal audience?","Should I include a chart?"],"intent":"request"}`
	if got := string(evs[4].Data); got != wantChoices {
		t.Errorf("gepa_choices %s\nwant         %s", got, wantChoices)
	}
	helpers, turns := helperCalls(llm)
	if len(helpers) != 1 || len(turns) != 1 {
		t.Fatalf("%d helper and %d turn calls", len(helpers), len(turns))
	}
	if h := helpers[0].Chat; h.Model != "claude-sonnet-4-6" || lastMessage(helpers[0]).Content != "quarterly numbers" {
		t.Errorf("expansion call model %q, last message %+v", h.Model, lastMessage(helpers[0]))
	}
	wantPrompt := gepaExpanded + "\n\n(Original: \"quarterly numbers\")"
	if got := lastMessage(turns[0]); got.Role != "user" || got.Content != wantPrompt {
		t.Errorf("model got %+v, want %q", got, wantPrompt)
	}
	if d := done(t, evs); d.Content != "Here you go." {
		t.Errorf("done %+v", d)
	}
	if h := history(t, srv); len(h) != 2 || h[0].Content != "quarterly numbers" {
		t.Errorf("history %+v", h)
	}

	// The second message of the session is never expanded.
	evs = srv.Chat(chat("more detail")).All(t)
	if got := waggletest.Names(evs); !reflect.DeepEqual(got, []string{"step", "tool", "tool_result", "token", "done"}) {
		t.Fatalf("second turn events %v%s", got, describe(evs))
	}
	helpers, turns = helperCalls(llm)
	if len(helpers) != 1 || len(turns) != 2 || lastMessage(turns[1]).Content != "more detail" {
		t.Errorf("second turn: %d helper calls, model got %+v", len(helpers), lastMessage(turns[len(turns)-1]))
	}
}

// TestGEPARules: the budget model answers when configured; clear messages,
// slash commands and a failed or unhelpful expansion leave the message alone.
func TestGEPARules(t *testing.T) {
	cases := []struct {
		name, config, message, answer string
		status                        int
		helperModel                   string // "" = no expansion call
		modelGets                     string
	}{
		{"budget model answers", `{"budgetModel":"claude-haiku-3-5"}`, "quarterly numbers", gepaAnswer, 0, "claude-haiku-3-5",
			gepaExpanded + "\n\n(Original: \"quarterly numbers\")"},
		{"off switch", `{"budgetModel":"claude-haiku-3-5","gepa":false}`, "quarterly numbers", gepaAnswer, 0, "", "quarterly numbers"},
		{"off without budget model", `{}`, "quarterly numbers", gepaAnswer, 0, "", "quarterly numbers"},
		{"question", `{"gepa":true}`, "what are the quarterly numbers", gepaAnswer, 0, "", "what are the quarterly numbers"},
		{"action verb", `{"gepa":true}`, "review the draft", gepaAnswer, 0, "", "review the draft"},
		{"greeting intent", `{"gepa":true}`, "quarterly numbers", `{"intent":"greeting","expanded":"` + gepaExpanded + `"}`, 0, "claude-sonnet-4-6", "quarterly numbers"},
		{"expansion too short", `{"gepa":true}`, "quarterly numbers", `{"intent":"request","expanded":"the quarterly numbers"}`, 0, "claude-sonnet-4-6", "quarterly numbers"},
		{"call fails", `{"gepa":true}`, "quarterly numbers", "", http.StatusInternalServerError, "claude-sonnet-4-6", "quarterly numbers"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			llm := newLLM(t, llmtest.WithHandler(func(r *llmtest.Request) llmtest.Response {
				if !r.Chat.Stream {
					if tc.status != 0 {
						return llmtest.ErrorStatus(tc.status, "boom")
					}
					return llmtest.Reply(tc.answer)
				}
				return llmtest.Reply("ok")
			}))
			srv := start(t, llm, map[string]string{"config.json": tc.config})
			evs := srv.Chat(chat(tc.message)).All(t)
			done(t, evs)
			helpers, turns := helperCalls(llm)
			switch {
			case tc.helperModel == "" && len(helpers) != 0:
				t.Errorf("unexpected expansion call")
			case tc.helperModel != "" && (len(helpers) != 1 || helpers[0].Chat.Model != tc.helperModel):
				t.Errorf("expansion calls %d, want one to %s", len(helpers), tc.helperModel)
			}
			if got := lastMessage(turns[0]).Content; got != tc.modelGets {
				t.Errorf("model got %q, want %q", got, tc.modelGets)
			}
			if tc.modelGets == tc.message {
				for _, e := range evs {
					if e.Name == "gepa_choices" || e.Content() == "GEPA: Expanded prompt for better results" {
						t.Errorf("GEPA event without expansion: %s %s", e.Name, e.Data)
					}
				}
			}
		})
	}
}

// TestGEPANotOnSlashCommands: a rerouted command's prompt is never expanded.
func TestGEPANotOnSlashCommands(t *testing.T) {
	llm := newLLM(t, llmtest.WithHandler(func(r *llmtest.Request) llmtest.Response {
		if !r.Chat.Stream {
			return llmtest.Reply(gepaAnswer)
		}
		return llmtest.Reply("researched")
	}))
	srv := start(t, llm, map[string]string{"config.json": `{"gepa":true}`})
	done(t, srv.Chat(chat("/research bees")).All(t))
	if helpers, turns := helperCalls(llm); len(helpers) != 0 || len(turns) != 1 {
		t.Errorf("%d expansion calls, %d turn calls", len(helpers), len(turns))
	}
}

// seedSession writes a session file of n alternating messages of 39
// characters each (10 tokens + 4 of framing = 14 estimated tokens).
func seedSession(n int) string {
	var b strings.Builder
	b.WriteString(`{"type":"meta","title":null,"created":"2026-01-01T00:00:00.000Z"}` + "\n")
	for i := range n {
		role := "user"
		if i%2 == 1 {
			role = "assistant"
		}
		fmt.Fprintf(&b, `{"role":%q,"content":"message number %02d of the seeded session","timestamp":"2026-01-01T00:00:%02d.000Z"}`+"\n", role, i, i)
	}
	return b.String()
}

const (
	compressConfig = `{"budgetModel":"claude-haiku-3-5","gepa":false,"compression":{"maxContextTokens":400,"threshold":0.5,"headMessages":2,"tailTokens":60}}`
	summaryText    = "The user and the assistant walked through seeded messages."
	nextMessage    = "please carry on with the seeded session" // 39 characters: 14 tokens
)

// TestContextCompression: past the threshold the middle of the history is
// summarised by the budget model; the model receives head, summary and
// tail; the next turn reuses the cached summary (no second summary call).
func TestContextCompression(t *testing.T) {
	llm := newLLM(t, llmtest.WithHandler(func(r *llmtest.Request) llmtest.Response {
		if !r.Chat.Stream {
			return llmtest.Reply(summaryText)
		}
		return llmtest.Reply("noted") // 4 + 2 = 6 tokens
	}))
	srv := start(t, llm, map[string]string{
		"config.json": compressConfig,
		"workspaces/" + ws + "/sessions/" + session + ".jsonl": seedSession(20),
	})

	// 21 messages × 14 = 294 tokens > 400 × 0.5. Head: 2 messages; tail:
	// the newest 4 (56 ≤ 60 tokens); the 15 between are summarised. The
	// summary message ("[Conversation compressed — 15 messages summarized]
	// \n\n" + summaryText, 110 characters starting with "[" so 3.5 per
	// token) is 4 + 32 = 36 tokens: 28 + 36 + 56 = 120.
	evs := srv.Chat(chat(nextMessage)).All(t)
	want := []string{"step", "tool", "tool_result", "step", "token", "done"}
	if got := waggletest.Names(evs); !reflect.DeepEqual(got, want) {
		t.Fatalf("events %v, want %v%s", got, want, describe(evs))
	}
	if got := evs[3].Content(); got != "Context compressed: 294→120 tokens" {
		t.Errorf("step %q", got)
	}
	helpers, turns := helperCalls(llm)
	if len(helpers) != 1 || helpers[0].Chat.Model != "claude-haiku-3-5" {
		t.Fatalf("summary calls %d", len(helpers))
	}
	sum := helpers[0].Chat.Messages
	if len(sum) != 16 || sum[0].Content != "message number 02 of the seeded session" ||
		sum[14].Content != "message number 16 of the seeded session" || !strings.Contains(sum[15].Content, "Summarize the conversation") {
		t.Errorf("summary request %+v", sum)
	}
	wantSummary := "[Conversation compressed — 15 messages summarized]\n\n" + summaryText
	checkContext := func(r *llmtest.Request, verbatimFrom int, newest []string) {
		t.Helper()
		m := r.Chat.Messages[1:] // after the system prompt
		if len(m) != 3+len(newest) || m[0].Content != "message number 00 of the seeded session" ||
			m[1].Content != "message number 01 of the seeded session" || m[2].Role != "system" || m[2].Content != wantSummary {
			t.Fatalf("context %+v", m)
		}
		for i, c := range newest {
			if m[3+i].Content != c {
				t.Errorf("message %d = %q, want %q", verbatimFrom+i, m[3+i].Content, c)
			}
		}
	}
	checkContext(turns[0], 17, []string{
		"message number 17 of the seeded session", "message number 18 of the seeded session",
		"message number 19 of the seeded session", nextMessage,
	})

	// 23 messages: 294 + 6 + 14 = 314 tokens. Head, the cached summary and
	// everything since message 17 (4×14 + 6 + 14 = 76) come to 140 ≤ 200:
	// the summary is reused, the newer messages go verbatim.
	evs = srv.Chat(chat(nextMessage)).All(t)
	if got := named(evs, "step"); len(got) != 2 || got[1].Content() != "Context compressed: 314→140 tokens" {
		t.Errorf("second turn steps %s", describe(got))
	}
	helpers, turns = helperCalls(llm)
	if len(helpers) != 1 {
		t.Errorf("%d summary calls after two turns, want 1 (cached)", len(helpers))
	}
	checkContext(turns[1], 17, []string{
		"message number 17 of the seeded session", "message number 18 of the seeded session",
		"message number 19 of the seeded session", nextMessage, "noted", nextMessage,
	})
	if h := history(t, srv); len(h) != 24 {
		t.Errorf("history has %d messages, want 24 (nothing dropped on disk)", len(h))
	}
}

// TestContextCompressionFallsBack: a failing summary call does not fail
// the turn; the history goes to the model through the sliding window.
func TestContextCompressionFallsBack(t *testing.T) {
	llm := newLLM(t, llmtest.WithHandler(func(r *llmtest.Request) llmtest.Response {
		if !r.Chat.Stream {
			return llmtest.ErrorStatus(http.StatusServiceUnavailable, "summariser down")
		}
		return llmtest.Reply("still here")
	}))
	srv := start(t, llm, map[string]string{
		"config.json": compressConfig,
		"workspaces/" + ws + "/sessions/" + session + ".jsonl": seedSession(20),
	})
	evs := srv.Chat(chat(nextMessage)).All(t)
	if got := waggletest.Names(evs); !reflect.DeepEqual(got, []string{"step", "tool", "tool_result", "token", "done"}) {
		t.Fatalf("events %v%s", got, describe(evs))
	}
	_, turns := helperCalls(llm)
	if m := turns[0].Chat.Messages; len(m) != 22 || m[1].Content != "message number 00 of the seeded session" || m[21].Content != nextMessage {
		t.Errorf("model got %d messages: %+v", len(m), m)
	}
}

// TestCredentialPoolRotation: a 429 on the first key moves to the next
// one with a step; the next turn starts on the key that works; no key
// appears in any event.
func TestCredentialPoolRotation(t *testing.T) {
	llm := newLLM(t, llmtest.WithHandler(func(r *llmtest.Request) llmtest.Response {
		if r.Header.Get("Authorization") == "Bearer sk-first-secret" {
			return llmtest.RateLimited("")
		}
		return llmtest.Reply("answered")
	}))
	srv := start(t, llm, map[string]string{"config.json": `{"apiKeys":["sk-first-secret","sk-second-secret"]}`})

	evs := srv.Chat(chat("hello")).All(t)
	want := []string{"step", "tool", "tool_result", "step", "token", "done"}
	if got := waggletest.Names(evs); !reflect.DeepEqual(got, want) {
		t.Fatalf("events %v, want %v%s", got, want, describe(evs))
	}
	if got := evs[3].Content(); got != "API key rotated — retrying with next credential" {
		t.Errorf("step %q", got)
	}
	reqs := llm.ChatRequests()
	if len(reqs) != 2 || reqs[0].Header.Get("Authorization") != "Bearer sk-first-secret" ||
		reqs[1].Header.Get("Authorization") != "Bearer sk-second-secret" {
		t.Fatalf("authorization headers %v", authHeaders(reqs))
	}
	evs2 := srv.Chat(chat("again")).All(t)
	if reqs = llm.ChatRequests(); len(reqs) != 3 || reqs[2].Header.Get("Authorization") != "Bearer sk-second-secret" {
		t.Errorf("second turn headers %v", authHeaders(reqs))
	}
	for _, e := range append(evs, evs2...) {
		if strings.Contains(string(e.Data), "secret") {
			t.Errorf("a key leaked into %s %s", e.Name, e.Data)
		}
	}
}

// TestCredentialPoolExhausted: when every key is refused the user gets
// the invalid-key message, which names no key.
func TestCredentialPoolExhausted(t *testing.T) {
	llm := newLLM(t, llmtest.WithHandler(func(r *llmtest.Request) llmtest.Response {
		return llmtest.ErrorStatus(http.StatusUnauthorized, "Incorrect API key provided: "+strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer "))
	}))
	srv := start(t, llm, map[string]string{"config.json": `{"apiKeys":["sk-a-secret","sk-b-secret"]}`})
	evs := srv.Chat(chat("hello")).All(t)
	want := []string{"step", "tool", "tool_result", "step", "error"}
	if got := waggletest.Names(evs); !reflect.DeepEqual(got, want) {
		t.Fatalf("events %v, want %v%s", got, want, describe(evs))
	}
	if got := string(evs[4].Data); got != `{"message":"The model server refused the API key. Save a valid one in the app's Vault (POST /api/vault) or set WAGGLE_LLM_API_KEY."}` {
		t.Errorf("error %s", got)
	}
	if got := authHeaders(llm.ChatRequests()); !reflect.DeepEqual(got, []string{"Bearer sk-a-secret", "Bearer sk-b-secret"}) {
		t.Errorf("headers %v", got)
	}
	lines := sessionLines(t, srv)
	if raw, _ := json.Marshal(lines); strings.Contains(string(raw), "secret") {
		t.Errorf("a key reached the session file: %s", raw)
	}
}

func authHeaders(reqs []*llmtest.Request) []string {
	out := make([]string, len(reqs))
	for i, r := range reqs {
		out[i] = r.Header.Get("Authorization")
	}
	return out
}

// threeTools is a model step calling three read-only tools, then a reply.
func threeTools(turn int) []llmtest.Response {
	return []llmtest.Response{
		steps(
			llmtest.ToolCall(0, fmt.Sprintf("c%d_a", turn), "list_files", `{}`, 1),
			llmtest.ToolCall(1, fmt.Sprintf("c%d_b", turn), "search_files", `{"pattern":"*.md"}`, 1),
			llmtest.ToolCall(2, fmt.Sprintf("c%d_c", turn), "search_content", `{"pattern":"todo"}`, 1),
		),
		llmtest.Reply("checked"),
	}
}

// TestWorkflowCapture: the same three-tool sequence in three turns of a
// workspace is announced once, on the third; a fourth stays quiet; the
// session store keeps the pattern in the workspace's workflows.json and
// /skills lists it.
func TestWorkflowCapture(t *testing.T) {
	var script []llmtest.Response
	for i := range 4 {
		script = append(script, threeTools(i)...)
	}
	llm := newLLM(t, llmtest.WithResponses(script...))
	srv := start(t, llm, nil)

	wantNote := `{"type":"workflow_captured","title":"Pattern detected","message":"Detected repeating workflow: list_files-then-search_files-then-search_content. Save as a reusable skill?","pattern":{"name":"list_files-then-search_files-then-search_content","description":"Repeated workflow using: list_files, search_files, search_content","triggerPatterns":[],"steps":["Step 1: Use list_files","Step 2: Use search_files","Step 3: Use search_content"],"tools":["list_files","search_files","search_content"],"category":"general"}}`
	for i := range 4 {
		body := chat("check the notes")
		body["session"] = fmt.Sprintf("s%d", i) // across sessions of one workspace
		evs := srv.Chat(body).All(t)
		d := done(t, evs)
		notes := named(evs, "notification")
		switch i {
		case 2:
			if len(notes) != 1 || string(notes[0].Data) != wantNote {
				t.Fatalf("turn 3 notifications %s\nwant %s", describe(notes), wantNote)
			}
			if n := len(evs); evs[n-2].Name != "notification" {
				t.Errorf("notification is not right before done:%s", describe(evs))
			}
		default:
			if len(notes) != 0 {
				t.Errorf("turn %d notifications %s", i+1, describe(notes))
			}
		}
		if d.Content != "checked" {
			t.Errorf("turn %d done %+v", i+1, d)
		}
	}
	// /skills lists the captured pattern as the workspace's skill.
	d := done(t, srv.Chat(chat("/skills")).All(t))
	if want := "## Active Skills\n\n- `list_files-then-search_files-then-search_content`\n\n_1 skill(s) loaded._"; d.Content != want {
		t.Errorf("/skills %q, want %q", d.Content, want)
	}
	raw, err := os.ReadFile(filepath.Join(srv.DataDir, "workspaces", ws, "workflows.json"))
	if err != nil {
		t.Fatal(err)
	}
	var st struct {
		Patterns []struct {
			Name        string `json:"name"`
			Occurrences int    `json:"occurrences"`
		} `json:"patterns"`
		Sequences []json.RawMessage `json:"sequences"`
	}
	if err := json.Unmarshal(raw, &st); err != nil || len(st.Patterns) != 1 || st.Patterns[0].Occurrences != 3 || len(st.Sequences) != 4 {
		t.Errorf("workflows.json %s (%v)", raw, err)
	}
}

// TestPersonaDisclaimersAndScheduleHint: a regulated persona's disclaimer
// is appended only under the keyword rule; the schedule hint only when
// recurring work is mentioned. Both reach done and the session file.
func TestPersonaDisclaimersAndScheduleHint(t *testing.T) {
	const (
		hr      = "\n\n---\n*This is general HR guidance, not legal advice. Consult your legal team for binding decisions.*"
		legal   = "\n\n---\n*This is AI-assisted legal analysis, not legal advice. This does not create an attorney-client relationship. Consult a licensed attorney for binding legal guidance.*"
		finance = "\n\n---\n*Financial figures are estimates based on available data. Verify with your accountant or financial advisor before making decisions.*"
		hint    = "\n\n💡 *Want this to run automatically? Use /schedule or ask me to set up a recurring task.*"
	)
	cases := []struct{ persona, reply, want string }{
		{"hr-manager", "Our leave Policy covers parental leave.", "Our leave Policy covers parental leave." + hr},
		{"hr-manager", "The leave request is approved.", "The leave request is approved."},
		{"hr-manager", "This policy on leave is not legal advice.", "This policy on leave is not legal advice."},
		{"legal-professional", "The contract has an indemnity clause.", "The contract has an indemnity clause." + legal},
		{"finance-owner", "Revenue beat the forecast.", "Revenue beat the forecast." + finance},
		{"finance-owner", "Revenue is reviewed monthly against the forecast.", "Revenue is reviewed monthly against the forecast." + finance + hint},
		{"", "I will send the report every week.", "I will send the report every week." + hint},
		{"", "Revenue beat the forecast.", "Revenue beat the forecast."},
	}
	for i, tc := range cases {
		t.Run(fmt.Sprintf("%d-%s", i, tc.persona), func(t *testing.T) {
			llm := newLLM(t, llmtest.WithResponses(llmtest.Reply(tc.reply)))
			srv := start(t, llm, nil)
			body := chat("hello")
			if tc.persona != "" {
				body["persona"] = tc.persona
			}
			evs := srv.Chat(body).All(t)
			if d := done(t, evs); d.Content != tc.want {
				t.Errorf("done content %q\nwant         %q", d.Content, tc.want)
			}
			var streamed strings.Builder
			for _, e := range named(evs, "token") {
				streamed.WriteString(e.Content())
			}
			if streamed.String() != tc.reply {
				t.Errorf("streamed %q", streamed.String())
			}
			if h := history(t, srv); len(h) != 2 || h[1].Content != tc.want {
				t.Errorf("history %+v", h)
			}
		})
	}
}

// TestWorkspaceBudgetWarning: once a workspace's recorded spend reaches
// its workspace.json budget, its turns start with the warning step.
func TestWorkspaceBudgetWarning(t *testing.T) {
	llm := newLLM(t, llmtest.WithResponses(
		steps(llmtest.Content("pricey"), llmtest.WithUsage(100000, 10000)),
		llmtest.Reply("still answering"),
	))
	srv := start(t, llm, map[string]string{
		"workspaces/" + ws + "/workspace.json": `{"id":"ws1","name":"Team","budget":2,"created":"2026-01-01T00:00:00.000Z"}`,
	})
	body := chat("hello")
	body["model"] = "claude-opus-4-6"
	evs := srv.Chat(body).All(t) // 100000 in + 10000 out on Opus: $2.25
	if d := done(t, evs); d.Cost != 2.25 {
		t.Fatalf("first turn %+v", d)
	}
	if got := evs[0].Content(); got != "Recalling relevant memories..." {
		t.Errorf("first turn starts with %q", got)
	}
	evs = srv.Chat(body).All(t)
	want := []string{"step", "step", "tool", "tool_result", "token", "done"}
	if got := waggletest.Names(evs); !reflect.DeepEqual(got, want) {
		t.Fatalf("events %v, want %v%s", got, want, describe(evs))
	}
	if got := evs[0].Content(); got != "⚠️ Budget limit reached ($2.25 / $2.00). Responses may be limited." {
		t.Errorf("warning %q", got)
	}
	if d := done(t, evs); d.Content != "still answering" {
		t.Errorf("done %+v", d)
	}
}

// TestPersonas: the catalogue is listed without prompts; a built-in
// persona's instructions reach the system prompt and its tool filter
// decides what the model is offered.
func TestPersonas(t *testing.T) {
	llm := newLLM(t, llmtest.WithResponses(llmtest.Reply("ok"), llmtest.Reply("ok")))
	srv := start(t, llm, nil)

	var list struct {
		Personas []map[string]any `json:"personas"`
	}
	if st := srv.JSON(http.MethodGet, "/api/personas", nil, &list); st != http.StatusOK {
		t.Fatalf("status %d", st)
	}
	var ids []string
	for _, p := range list.Personas {
		ids = append(ids, p["id"].(string))
		if _, ok := p["systemPrompt"]; ok {
			t.Errorf("persona %s lists its system prompt", p["id"])
		}
	}
	// The original's 22, in its order.
	want := []string{"researcher", "writer", "analyst", "coder", "project-manager", "executive-assistant", "sales-rep", "marketer",
		"product-manager-senior", "hr-manager", "legal-professional", "finance-owner", "consultant", "general-purpose", "planner",
		"verifier", "coordinator", "support-agent", "ops-manager", "data-engineer", "recruiter", "creative-director"}
	if !reflect.DeepEqual(ids, want) {
		t.Fatalf("personas %v, want %v", ids, want)
	}
	raw, _ := json.Marshal(list.Personas[slices.Index(ids, "hr-manager")])
	if want := `{"bestFor":["Onboarding checklists and new hire documentation","Policy compliance review and employee communications","Job descriptions with role-specific competencies"],"description":"Policy management, onboarding workflows, compliance, employee relations","icon":"👥","id":"hr-manager","isReadOnly":false,"name":"HR Manager","suggestedCommands":["/draft","/research","/catchup"],"tagline":"Policy-first, compliance-aware, people-focused.","wontDo":"Will not provide binding legal advice — always flags when legal review is needed.","workspaceAffinity":["hr","people","policy","compliance"]}`; string(raw) != want {
		t.Errorf("hr-manager %s\nwant       %s", raw, want)
	}

	offered := func(r *llmtest.Request) []string {
		var out []string
		for _, tl := range r.Chat.Tools {
			out = append(out, tl.Function.Name)
		}
		return out
	}
	body := chat("hello")
	body["persona"] = "hr-manager"
	done(t, srv.Chat(body).All(t))
	req := llm.ChatRequests()[0]
	if got, want := offered(req), []string{"read_file", "write_file", "search_files", "save_memory", "search_memory", "generate_docx", "read_document", "create_plan", "add_plan_step", "execute_step", "show_plan"}; !reflect.DeepEqual(got, want) {
		t.Errorf("hr-manager offered %v, want %v", got, want)
	}
	if sys := req.Chat.Messages[0].Content; !strings.Contains(sys, "## Persona: HR Manager\nYou specialize in HR policy") {
		t.Errorf("system prompt lacks the persona's instructions:\n%s", sys)
	}

	body["persona"] = "someone-custom"
	body["session"] = "s2"
	done(t, srv.Chat(body).All(t))
	// An unknown persona filters nothing: every built-in tool, web_fetch
	// included (web_search needs a provider).
	got := offered(llm.ChatRequests()[1])
	for _, name := range []string{"read_file", "write_file", "edit_file", "list_files", "search_files", "search_content", "bash",
		"save_memory", "search_memory", "generate_docx", "web_fetch", "git_status", "git_diff", "git_log", "git_commit",
		"git_branch", "read_document", "generate_xlsx", "create_plan", "add_plan_step", "execute_step", "show_plan",
		"get_identity", "get_awareness", "add_task"} {
		if !slices.Contains(got, name) {
			t.Errorf("a custom persona filters %s: %v", name, got)
		}
	}
}
