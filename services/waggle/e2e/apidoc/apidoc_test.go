// Package apidoc checks the served OpenAPI description (GET
// /api/openapi.json) against real traffic: a real app, a scripted model,
// real HTTP and SSE bytes. Every response a request gets must be a status
// the description lists for that operation, with a content type it lists
// and a body its schema accepts; every event of a stream must match the
// stream's event catalogue (x-itemSchema).
package apidoc

import (
	"bytes"
	"encoding/json"
	"io"
	"mime"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/waggle-os/core/libs/llmtest"
	"github.com/waggle-os/core/services/waggle/waggletest"
)

const docURL = "https://waggle.invalid/openapi.json"

// spec is the served description, compiled for validation.
type spec struct {
	doc map[string]any
	c   *jsonschema.Compiler

	mu      sync.Mutex
	schemas map[string]*jsonschema.Schema
	// seen records "METHOD template status" and "event name" checked.
	seen map[string]bool
}

func loadSpec(t *testing.T, srv *waggletest.Server, headers ...string) *spec {
	t.Helper()
	resp := srv.Do(http.MethodGet, "/api/openapi.json", nil, headers...)
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /api/openapi.json: %d %s", resp.StatusCode, body)
	}
	raw, err := jsonschema.UnmarshalJSON(bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.AssertFormat()
	if err := c.AddResource(docURL, raw); err != nil {
		t.Fatal(err)
	}
	s := &spec{doc: raw.(map[string]any), c: c, schemas: map[string]*jsonschema.Schema{}, seen: map[string]bool{}}
	s.check(t, http.MethodGet, "/api/openapi.json", resp, body)
	return s
}

// pointer escapes one JSON-pointer token.
func pointer(tokens ...string) string {
	var b strings.Builder
	for _, tok := range tokens {
		b.WriteString("/")
		b.WriteString(strings.NewReplacer("~", "~0", "/", "~1").Replace(tok))
	}
	return b.String()
}

func (s *spec) lookup(ptr string) any {
	var cur any = s.doc
	for _, tok := range strings.Split(strings.TrimPrefix(ptr, "/"), "/") {
		tok = strings.NewReplacer("~1", "/", "~0", "~").Replace(tok)
		m, ok := cur.(map[string]any)
		if !ok {
			return nil
		}
		cur = m[tok]
	}
	return cur
}

func (s *spec) schema(t *testing.T, ptr string) *jsonschema.Schema {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if sch, ok := s.schemas[ptr]; ok {
		return sch
	}
	sch, err := s.c.Compile(docURL + "#" + ptr)
	if err != nil {
		t.Fatalf("compile %s: %v", ptr, err)
	}
	s.schemas[ptr] = sch
	return sch
}

// response finds the response object the description gives for status,
// following a $ref to a shared one: its JSON pointer, or "".
func (s *spec) response(method, template string, status int) string {
	ptr := pointer("paths", template, strings.ToLower(method), "responses", strconv.Itoa(status))
	obj, ok := s.lookup(ptr).(map[string]any)
	if !ok {
		return ""
	}
	if ref, ok := obj["$ref"].(string); ok {
		return strings.TrimPrefix(ref, "#")
	}
	return ptr
}

// check validates one non-streaming response.
func (s *spec) check(t *testing.T, method, template string, resp *http.Response, body []byte) {
	t.Helper()
	at := method + " " + template + " " + strconv.Itoa(resp.StatusCode)
	rptr := s.response(method, template, resp.StatusCode)
	if rptr == "" {
		t.Errorf("%s: status not in the description (body %s)", at, body)
		return
	}
	s.mu.Lock()
	s.seen[method+" "+template+" "+strconv.Itoa(resp.StatusCode)] = true
	s.mu.Unlock()
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	content, _ := s.lookup(rptr + "/content").(map[string]any)
	if _, ok := content[mt]; !ok {
		t.Errorf("%s: content type %q not in the description (%v)", at, mt, keys(content))
		return
	}
	if mt != "application/json" {
		return
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(body))
	if err != nil {
		t.Errorf("%s: body is not JSON: %s", at, body)
		return
	}
	if err := s.schema(t, rptr+pointer("content", "application/json", "schema")).Validate(v); err != nil {
		t.Errorf("%s: body %s does not match the description: %v", at, body, err)
	}
}

// checkEvents validates every event of a stream against the operation's
// x-itemSchema.
func (s *spec) checkEvents(t *testing.T, method, template string, evs []waggletest.Event) {
	t.Helper()
	ptr := pointer("paths", template, strings.ToLower(method), "responses", "200", "content", "text/event-stream", "x-itemSchema")
	sch := s.schema(t, ptr)
	for _, e := range evs {
		data, err := jsonschema.UnmarshalJSON(bytes.NewReader(e.Data))
		if err != nil {
			t.Errorf("%s %s: event %s data is not JSON: %s", method, template, e.Name, e.Data)
			continue
		}
		item := map[string]any{"event": e.Name, "data": data}
		if e.ID != 0 {
			item["id"] = strconv.FormatUint(e.ID, 10)
		}
		if err := sch.Validate(item); err != nil {
			t.Errorf("%s %s: event %s %s does not match the catalogue: %v", method, template, e.Name, e.Data, err)
		}
		s.mu.Lock()
		s.seen[template+" event "+e.Name] = true
		s.mu.Unlock()
	}
}

func keys(m map[string]any) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// call makes a request and checks its response; it returns the body.
func (s *spec) call(t *testing.T, srv *waggletest.Server, method, path, template string, body any, headers ...string) (int, []byte) {
	t.Helper()
	resp := srv.Do(method, path, body, headers...)
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	s.check(t, method, template, resp, data)
	return resp.StatusCode, data
}

// stream posts and checks an event stream end to end.
func (s *spec) stream(t *testing.T, srv *waggletest.Server, method, path, template string, body any) []waggletest.Event {
	t.Helper()
	resp := srv.Do(method, path, body)
	if resp.StatusCode != http.StatusOK {
		defer resp.Body.Close()
		data, _ := io.ReadAll(resp.Body)
		t.Fatalf("%s %s: %d %s", method, path, resp.StatusCode, data)
	}
	s.mu.Lock()
	s.seen[method+" "+template+" 200"] = true
	s.mu.Unlock()
	st := waggletest.NewStream(resp)
	defer st.Close()
	evs := st.All(t)
	s.checkEvents(t, method, template, evs)
	return evs
}

func field(t *testing.T, data []byte, key string) string {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatalf("decode %s: %v", data, err)
	}
	v, _ := m[key].(string)
	return v
}

// TestTrafficMatchesDescription drives most routes of the API, their
// success and their usual errors, and checks every answer against the
// description the server itself serves.
func TestTrafficMatchesDescription(t *testing.T) {
	pause := llmtest.NewPause()
	defer pause.Release()
	llm := llmtest.New(llmtest.WithResponses(
		// A chat turn that writes a file (yolo: no approval) and replies.
		llmtest.Response{Steps: llmtest.Steps(llmtest.Content("Writing. "),
			llmtest.ToolCall(0, "call_w", "write_file", `{"path":"notes/a.txt","content":"hello"}`, 2), llmtest.WithUsage(20, 5))},
		llmtest.Response{Steps: llmtest.Steps(llmtest.Content("Done."), llmtest.WithUsage(30, 3))},
		// A turn whose tool call waits for an approval.
		llmtest.Response{Steps: llmtest.Steps(llmtest.ToolCall(0, "call_b", "write_file", `{"path":"notes/b.txt","content":"bye"}`, 1))},
		llmtest.Response{Steps: llmtest.Steps(llmtest.Content("Wrote b."))},
		// A turn cancelled while the model streams.
		llmtest.Response{Steps: llmtest.Steps(llmtest.Content("Partial "), llmtest.Wait(pause))},
		// A retrieval run: one retrieval, then the answer.
		llmtest.Response{Steps: llmtest.Steps(llmtest.ToolCall(0, "call_r", "retrieve", `{"query":"notes"}`, 1), llmtest.WithUsage(40, 4))},
		llmtest.Response{Steps: llmtest.Steps(llmtest.Content("The notes say hello."), llmtest.WithUsage(50, 5))},
	))
	llm.Start()
	defer llm.Close()
	srv := waggletest.Start(t, waggletest.WithLLM(llm.URL()))
	s := loadSpec(t, srv)

	// Health, metrics, personas; a foreign Host is refused on any route.
	s.call(t, srv, http.MethodGet, "/health", "/health", nil)
	for _, route := range [][2]string{{"/health", "/health"}, {"/api/personas", "/api/personas"}} {
		req, err := http.NewRequest(http.MethodGet, srv.URL+route[0], nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Host = "rebind.example"
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden {
			t.Errorf("GET %s with a foreign Host: %d %s", route[0], resp.StatusCode, body)
		}
		s.check(t, http.MethodGet, route[1], resp, body)
	}
	s.call(t, srv, http.MethodGet, "/metrics", "/metrics", nil)
	s.call(t, srv, http.MethodGet, "/api/personas", "/api/personas", nil)

	// Workspaces.
	_, created := s.call(t, srv, http.MethodPost, "/api/workspaces", "/api/workspaces", map[string]any{"name": "Hive Notes", "budget": 3})
	ws := field(t, created, "id")
	s.call(t, srv, http.MethodPost, "/api/workspaces", "/api/workspaces", map[string]any{})
	s.call(t, srv, http.MethodGet, "/api/workspaces", "/api/workspaces", nil)
	s.call(t, srv, http.MethodGet, "/api/workspaces/"+ws, "/api/workspaces/{id}", nil)
	s.call(t, srv, http.MethodGet, "/api/workspaces/nope", "/api/workspaces/{id}", nil)
	s.call(t, srv, http.MethodGet, "/api/workspaces/bad%20id", "/api/workspaces/{id}", nil)
	s.call(t, srv, http.MethodPatch, "/api/workspaces/"+ws, "/api/workspaces/{id}", map[string]any{"model": "m1", "extra": true})

	// A chat turn with tools, then its history and session routes.
	chat := map[string]any{"message": "write a note", "workspace": ws, "session": "s1", "autonomy": map[string]any{"level": "yolo"}}
	evs := s.stream(t, srv, http.MethodPost, "/api/chat", "/api/chat", chat)
	if evs[len(evs)-1].Name != "done" {
		t.Fatalf("chat ended with %s", evs[len(evs)-1].Name)
	}
	s.call(t, srv, http.MethodGet, "/api/history?workspace="+ws+"&session=s1", "/api/history", nil)
	s.call(t, srv, http.MethodGet, "/api/history?workspace=../x", "/api/history", nil)
	s.call(t, srv, http.MethodPost, "/api/chat", "/api/chat", map[string]any{"workspace": ws})
	s.call(t, srv, http.MethodPost, "/api/chat", "/api/chat", map[string]any{"message": "hi", "workspacePath": "/etc"})
	s.call(t, srv, http.MethodPost, "/api/chat", "/api/chat", map[string]any{"message": "hi", "multitask": "sometimes"})
	s.call(t, srv, http.MethodPost, "/api/chat", "/api/chat", "{not json", "Content-Type", "application/json")
	s.call(t, srv, http.MethodPost, "/api/chat", "/api/chat", "plain", "Content-Type", "text/plain")
	s.call(t, srv, http.MethodPost, "/api/chat", "/api/chat", map[string]any{"message": strings.Repeat("a", 1<<20)})

	// Follow the finished turn from its first event; unknown turns are 404.
	resp := srv.Do(http.MethodPost, "/api/chat", map[string]any{"message": "/help", "workspace": ws, "session": "s2"})
	turnID := resp.Header.Get("X-Waggle-Turn-Id")
	st := waggletest.NewStream(resp)
	cmdEvs := st.All(t)
	st.Close()
	s.checkEvents(t, http.MethodPost, "/api/chat", cmdEvs)
	s.stream(t, srv, http.MethodGet, "/api/chat/turns/"+turnID+"/events", "/api/chat/turns/{turnId}/events", nil)
	s.stream(t, srv, http.MethodGet, "/api/chat/turns/"+turnID+"/events?after=1", "/api/chat/turns/{turnId}/events", nil)
	s.call(t, srv, http.MethodGet, "/api/chat/turns/"+turnID+"/events?after=x", "/api/chat/turns/{turnId}/events", nil)
	s.call(t, srv, http.MethodGet, "/api/chat/turns/no-such-turn/events", "/api/chat/turns/{turnId}/events", nil)
	s.call(t, srv, http.MethodPost, "/api/chat/turns/no-such-turn/cancel", "/api/chat/turns/{turnId}/cancel", nil)
	s.call(t, srv, http.MethodPost, "/api/chat/turns/"+turnID+"/cancel", "/api/chat/turns/{turnId}/cancel", nil)

	// A gated tool call: approval_required, the pending list, the decision.
	resp = srv.Do(http.MethodPost, "/api/chat", map[string]any{"message": "write b", "workspace": ws, "session": "s3"})
	st = waggletest.NewStream(resp)
	var gated []waggletest.Event
	for {
		e, err := st.Next()
		if err != nil {
			t.Fatalf("stream ended before approval_required: %v", err)
		}
		gated = append(gated, e)
		if e.Name == "approval_required" {
			break
		}
	}
	var ask struct {
		RequestID string `json:"requestId"`
	}
	gated[len(gated)-1].Decode(t, &ask)
	s.call(t, srv, http.MethodGet, "/api/approval/pending", "/api/approval/pending", nil)
	s.call(t, srv, http.MethodPost, "/api/approval/"+ask.RequestID, "/api/approval/{requestId}", map[string]any{"approved": "yes"})
	s.call(t, srv, http.MethodPost, "/api/approval/"+ask.RequestID, "/api/approval/{requestId}", map[string]any{"approved": true, "always": true, "sourceWorkspaceId": ws})
	s.call(t, srv, http.MethodPost, "/api/approval/"+ask.RequestID, "/api/approval/{requestId}", map[string]any{"approved": true})
	s.call(t, srv, http.MethodPost, "/api/approval/unknown", "/api/approval/{requestId}", map[string]any{"approved": false})
	for {
		e, err := st.Next()
		if err != nil {
			break
		}
		gated = append(gated, e)
	}
	st.Close()
	s.checkEvents(t, http.MethodPost, "/api/chat", gated)
	_, grants := s.call(t, srv, http.MethodGet, "/api/approval/grants", "/api/approval/grants", nil)
	var gl struct {
		Grants []struct {
			ID string `json:"id"`
		} `json:"grants"`
	}
	_ = json.Unmarshal(grants, &gl)
	if len(gl.Grants) == 1 {
		s.call(t, srv, http.MethodDelete, "/api/approval/grants/"+gl.Grants[0].ID, "/api/approval/grants/{id}", nil)
	} else {
		t.Errorf("grants after an always approval: %s", grants)
	}
	s.call(t, srv, http.MethodDelete, "/api/approval/grants/none", "/api/approval/grants/{id}", nil)
	s.call(t, srv, http.MethodPost, "/api/approval/grants/clear", "/api/approval/grants/clear", nil)

	// A turn cancelled mid-reply ends with an error event.
	resp = srv.Do(http.MethodPost, "/api/chat", map[string]any{"message": "write c", "workspace": ws, "session": "s4"})
	st = waggletest.NewStream(resp)
	var cancelled []waggletest.Event
	for {
		e, err := st.Next()
		if err != nil {
			t.Fatalf("stream ended before the first token: %v", err)
		}
		cancelled = append(cancelled, e)
		if e.Name == "token" {
			break
		}
	}
	s.call(t, srv, http.MethodPost, "/api/chat/turns/"+resp.Header.Get("X-Waggle-Turn-Id")+"/cancel", "/api/chat/turns/{turnId}/cancel", nil)
	for {
		e, err := st.Next()
		if err != nil {
			break
		}
		cancelled = append(cancelled, e)
	}
	st.Close()
	s.checkEvents(t, http.MethodPost, "/api/chat", cancelled)
	if last := cancelled[len(cancelled)-1]; last.Name != "error" {
		t.Errorf("a cancelled turn ended with %s %s", last.Name, last.Data)
	}

	// Sessions.
	s.call(t, srv, http.MethodGet, "/api/workspaces/"+ws+"/sessions", "/api/workspaces/{id}/sessions", nil)
	s.call(t, srv, http.MethodPost, "/api/workspaces/"+ws+"/sessions", "/api/workspaces/{id}/sessions", map[string]any{"title": "Fresh"})
	s.call(t, srv, http.MethodPost, "/api/workspaces/nope/sessions", "/api/workspaces/{id}/sessions", nil)
	s.call(t, srv, http.MethodGet, "/api/workspaces/"+ws+"/sessions/search?q=note", "/api/workspaces/{id}/sessions/search", nil)
	s.call(t, srv, http.MethodGet, "/api/workspaces/"+ws+"/sessions/search?q=n", "/api/workspaces/{id}/sessions/search", nil)
	s.call(t, srv, http.MethodGet, "/api/workspaces/"+ws+"/sessions/s1/export", "/api/workspaces/{id}/sessions/{sessionId}/export", nil)
	s.call(t, srv, http.MethodGet, "/api/workspaces/"+ws+"/sessions/none/export", "/api/workspaces/{id}/sessions/{sessionId}/export", nil)
	s.call(t, srv, http.MethodGet, "/api/workspaces/"+ws+"/sessions/s1/timeline", "/api/workspaces/{id}/sessions/{sessionId}/timeline", nil)
	s.call(t, srv, http.MethodPost, "/api/workspaces/"+ws+"/sessions/s1/branch", "/api/workspaces/{id}/sessions/{sessionId}/branch", map[string]any{"at": 0})
	s.call(t, srv, http.MethodPost, "/api/workspaces/"+ws+"/sessions/s1/branch", "/api/workspaces/{id}/sessions/{sessionId}/branch", map[string]any{"at": 1})
	s.call(t, srv, http.MethodPost, "/api/workspaces/"+ws+"/sessions/none/branch", "/api/workspaces/{id}/sessions/{sessionId}/branch", map[string]any{"at": 0})
	s.call(t, srv, http.MethodPatch, "/api/sessions/s1?workspace="+ws, "/api/sessions/{sessionId}", map[string]any{"title": "Renamed"})
	s.call(t, srv, http.MethodPatch, "/api/sessions/s1?workspace="+ws, "/api/sessions/{sessionId}", map[string]any{})
	s.call(t, srv, http.MethodGet, "/api/sessions/s1/summary?workspace="+ws, "/api/sessions/{sessionId}/summary", nil)
	s.call(t, srv, http.MethodGet, "/api/sessions/none/summary", "/api/sessions/{sessionId}/summary", nil)
	s.call(t, srv, http.MethodDelete, "/api/chat/history?workspace="+ws+"&session=s1", "/api/chat/history", nil)
	s.call(t, srv, http.MethodDelete, "/api/sessions/s2?workspace="+ws, "/api/sessions/{sessionId}", nil)
	s.call(t, srv, http.MethodDelete, "/api/sessions/s2?workspace="+ws, "/api/sessions/{sessionId}", nil)

	// A retrieval run, and its rejections.
	s.stream(t, srv, http.MethodPost, "/api/agent/run", "/api/agent/run", map[string]any{"question": "What do the notes say?", "workspace": ws})
	s.call(t, srv, http.MethodPost, "/api/agent/run", "/api/agent/run", map[string]any{})
	s.call(t, srv, http.MethodPost, "/api/agent/run", "/api/agent/run", map[string]any{"question": "q", "maxSteps": 0})
	s.call(t, srv, http.MethodPost, "/api/agent/abort", "/api/agent/abort", map[string]any{"workspaceId": ws})
	s.call(t, srv, http.MethodPost, "/api/agent/abort", "/api/agent/abort", map[string]any{})

	// Commands, agent, groups.
	s.call(t, srv, http.MethodGet, "/api/commands", "/api/commands", nil)
	s.call(t, srv, http.MethodGet, "/api/commands?q=he", "/api/commands", nil)
	s.call(t, srv, http.MethodPost, "/api/commands/execute", "/api/commands/execute", map[string]any{"command": "/help", "workspaceId": ws})
	s.call(t, srv, http.MethodPost, "/api/commands/execute", "/api/commands/execute", map[string]any{})
	s.call(t, srv, http.MethodGet, "/api/agent/status", "/api/agent/status", nil)
	s.call(t, srv, http.MethodGet, "/api/agent/cost", "/api/agent/cost", nil)
	s.call(t, srv, http.MethodPost, "/api/agent/cost/reset", "/api/agent/cost/reset", nil)
	s.call(t, srv, http.MethodGet, "/api/agent/model", "/api/agent/model", nil)
	s.call(t, srv, http.MethodPut, "/api/agent/model", "/api/agent/model", map[string]any{"model": "m2"})
	s.call(t, srv, http.MethodPut, "/api/agent/model", "/api/agent/model", map[string]any{})
	s.call(t, srv, http.MethodGet, "/api/agents/active", "/api/agents/active", nil)
	_, group := s.call(t, srv, http.MethodPost, "/api/agent-groups", "/api/agent-groups", map[string]any{
		"name": "Pair", "strategy": "sequential", "members": []any{map[string]any{"agentId": "researcher", "roleInGroup": "lead", "executionOrder": 0}}})
	gid := field(t, group, "id")
	s.call(t, srv, http.MethodPost, "/api/agent-groups", "/api/agent-groups", map[string]any{})
	s.call(t, srv, http.MethodGet, "/api/agent-groups", "/api/agent-groups", nil)
	s.call(t, srv, http.MethodGet, "/api/agent-groups/"+gid, "/api/agent-groups/{id}", nil)
	s.call(t, srv, http.MethodGet, "/api/agent-groups/none", "/api/agent-groups/{id}", nil)
	s.call(t, srv, http.MethodPatch, "/api/agent-groups/"+gid, "/api/agent-groups/{id}", map[string]any{"description": "two"})
	s.call(t, srv, http.MethodPost, "/api/agent-groups/"+gid+"/run", "/api/agent-groups/{id}/run", map[string]any{})
	_, job := s.call(t, srv, http.MethodPost, "/api/agent-groups/"+gid+"/run", "/api/agent-groups/{id}/run", map[string]any{"task": "summarise", "workspaceId": ws})
	s.call(t, srv, http.MethodGet, "/api/agent-groups/"+gid+"/runs/"+field(t, job, "jobId"), "/api/agent-groups/{id}/runs/{jobId}", nil)
	s.call(t, srv, http.MethodGet, "/api/agent-groups/"+gid+"/runs/none", "/api/agent-groups/{id}/runs/{jobId}", nil)
	s.call(t, srv, http.MethodDelete, "/api/agent-groups/"+gid, "/api/agent-groups/{id}", nil)

	// Memory frames.
	_, saved := s.call(t, srv, http.MethodPost, "/api/memory/frames", "/api/memory/frames", map[string]any{"content": "Bees keep the hive at 35 °C", "workspace": ws, "importance": 3})
	frameID := field(t, saved, "frameId")
	s.call(t, srv, http.MethodPost, "/api/memory/frames", "/api/memory/frames", map[string]any{"content": "Bees keep the hive at 35 °C", "workspace": ws})
	s.call(t, srv, http.MethodPost, "/api/memory/frames", "/api/memory/frames", map[string]any{"content": "personal note", "source": "user_stated", "importance": "critical"})
	s.call(t, srv, http.MethodPost, "/api/memory/frames", "/api/memory/frames", map[string]any{"content": " "})
	s.call(t, srv, http.MethodPost, "/api/memory/frames", "/api/memory/frames", map[string]any{"content": "x", "source": "rumour"})
	s.call(t, srv, http.MethodGet, "/api/memory/frames?workspace="+ws, "/api/memory/frames", nil)
	s.call(t, srv, http.MethodGet, "/api/memory/frames?since=yesterday", "/api/memory/frames", nil)
	s.call(t, srv, http.MethodGet, "/api/memory/search?q=hive&workspace="+ws, "/api/memory/search", nil)
	s.call(t, srv, http.MethodGet, "/api/memory/search", "/api/memory/search", nil)
	s.call(t, srv, http.MethodGet, "/api/memory/stats?workspace="+ws, "/api/memory/stats", nil)
	s.call(t, srv, http.MethodGet, "/api/memory/stats", "/api/memory/stats", nil)
	s.call(t, srv, http.MethodPatch, "/api/memory/frames/"+frameID+"/access?workspace="+ws, "/api/memory/frames/{id}/access", nil)
	s.call(t, srv, http.MethodPut, "/api/memory/frames/"+frameID+"?workspace="+ws, "/api/memory/frames/{id}", map[string]any{"content": "Bees keep the brood at 35 °C", "importance": "important"})
	s.call(t, srv, http.MethodPut, "/api/memory/frames/none?workspace="+ws, "/api/memory/frames/{id}", map[string]any{"content": "x"})
	s.call(t, srv, http.MethodDelete, "/api/memory/frames/"+frameID+"?workspace="+ws, "/api/memory/frames/{id}", nil)
	s.call(t, srv, http.MethodDelete, "/api/memory/frames/"+frameID+"?workspace="+ws, "/api/memory/frames/{id}", nil)
	s.call(t, srv, http.MethodDelete, "/api/memory/frames/bad%20id", "/api/memory/frames/{id}", nil)

	// MCP, teams (no PostgreSQL here: the teams service is absent).
	s.call(t, srv, http.MethodGet, "/api/mcp/servers?workspace="+ws, "/api/mcp/servers", nil)
	s.call(t, srv, http.MethodGet, "/api/teams", "/api/teams", nil)
	s.call(t, srv, http.MethodGet, "/api/tokens", "/api/tokens", nil)

	// The workspace goes last: deleting it removes its sessions.
	s.call(t, srv, http.MethodDelete, "/api/workspaces/"+ws, "/api/workspaces/{id}", nil)
	s.call(t, srv, http.MethodDelete, "/api/workspaces/"+ws, "/api/workspaces/{id}", nil)

	// The catalogue events this traffic must have produced and checked.
	for _, e := range []string{"token", "step", "tool", "tool_result", "file_created", "approval_required", "done", "error"} {
		if !s.seen["/api/chat event "+e] && !s.seen["/api/chat/turns/{turnId}/events event "+e] {
			t.Errorf("no %s event was checked", e)
		}
	}
	for _, e := range []string{"started", "progress", "finalized", "done"} {
		if !s.seen["/api/agent/run event "+e] {
			t.Errorf("no agent-run %s event was checked", e)
		}
	}
	t.Logf("checked %d responses and events against the description", len(s.seen))
	s.logUnexercised(t)
}

// logUnexercised names the operations no answer of the test reached with
// a 2xx (the team routes need PostgreSQL: TestTeamTrafficMatchesDescription).
func (s *spec) logUnexercised(t *testing.T) {
	paths, _ := s.doc["paths"].(map[string]any)
	var missing []string
	for path, item := range paths {
		for method, op := range item.(map[string]any) {
			for code := range op.(map[string]any)["responses"].(map[string]any) {
				if code[0] == '2' && !s.seen[strings.ToUpper(method)+" "+path+" "+code] {
					missing = append(missing, strings.ToUpper(method)+" "+path+" "+code)
				}
			}
		}
	}
	slices.Sort(missing)
	t.Logf("no success answer checked for %d operations: %v", len(missing), missing)
}
