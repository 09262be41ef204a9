package agentcontext

import (
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/waggle-os/core/libs/llmtest"
)

type personaEntry struct {
	ID         string `json:"id"`
	Name       string `json:"name"`
	IsReadOnly bool   `json:"isReadOnly"`
}

func toolNames(req *llmtest.Request) []string {
	var out []string
	for _, tl := range req.Chat.Tools {
		out = append(out, tl.Function.Name)
	}
	return out
}

// TestCustomPersonasCRUD: custom personas are created, listed after the
// built-ins, patched and deleted with the original's shapes and errors;
// built-ins cannot be changed.
func TestCustomPersonasCRUD(t *testing.T) {
	srv, _ := start(t)
	var list struct {
		Personas []personaEntry `json:"personas"`
	}
	srv.JSON(http.MethodGet, "/api/personas", nil, &list)
	builtIns := len(list.Personas)
	if !slices.ContainsFunc(list.Personas, func(p personaEntry) bool { return p.ID == "general-purpose" }) ||
		!slices.ContainsFunc(list.Personas, func(p personaEntry) bool { return p.ID == "planner" && p.IsReadOnly }) {
		t.Fatalf("built-ins %+v", list.Personas)
	}

	var created obj
	if st := srv.JSON(http.MethodPost, "/api/personas", obj{"name": "Deal Critic", "systemPrompt": "Find the weak spots in every deal.", "tools": []string{"read_file"}}, &created); st != http.StatusCreated {
		t.Fatalf("create: %d %v", st, created)
	}
	if created["id"] != "deal-critic" || created["icon"] != "🤖" || created["systemPrompt"] != "Find the weak spots in every deal." {
		t.Errorf("created %v", created)
	}
	for _, tc := range []struct {
		method, path string
		body         obj
		want         int
	}{
		{http.MethodPost, "/api/personas", obj{"name": "No prompt"}, http.StatusBadRequest},
		{http.MethodPost, "/api/personas", obj{"name": "X", "systemPrompt": "y", "colour": "red"}, http.StatusBadRequest},
		{http.MethodPost, "/api/personas", obj{"id": "coder", "name": "Coder 2", "systemPrompt": "y"}, http.StatusConflict},
		{http.MethodPatch, "/api/personas/coder", obj{"name": "Mine"}, http.StatusForbidden},
		{http.MethodDelete, "/api/personas/coder", nil, http.StatusForbidden},
		{http.MethodPatch, "/api/personas/nobody", obj{"name": "Mine"}, http.StatusNotFound},
		{http.MethodDelete, "/api/personas/nobody", nil, http.StatusNotFound},
	} {
		if st := srv.JSON(tc.method, tc.path, tc.body, nil); st != tc.want {
			t.Errorf("%s %s %v: %d, want %d", tc.method, tc.path, tc.body, st, tc.want)
		}
	}

	var patched obj
	if st := srv.JSON(http.MethodPatch, "/api/personas/deal-critic", obj{"description": "Reads deals", "isReadOnly": true}, &patched); st != 200 ||
		patched["description"] != "Reads deals" || patched["isReadOnly"] != true || patched["name"] != "Deal Critic" {
		t.Errorf("patch: %d %v", st, patched)
	}
	srv.JSON(http.MethodGet, "/api/personas", nil, &list)
	if len(list.Personas) != builtIns+1 || list.Personas[builtIns] != (personaEntry{ID: "deal-critic", Name: "Deal Critic", IsReadOnly: true}) {
		t.Errorf("list %+v", list.Personas)
	}
	if _, err := os.Stat(filepath.Join(srv.DataDir, "personas.json")); err != nil {
		t.Errorf("personas.json: %v", err)
	}
	var del obj
	if st := srv.JSON(http.MethodDelete, "/api/personas/deal-critic", nil, &del); st != 200 || del["deleted"] != true || del["id"] != "deal-critic" {
		t.Errorf("delete: %d %v", st, del)
	}
	srv.JSON(http.MethodGet, "/api/personas", nil, &list)
	if len(list.Personas) != builtIns {
		t.Errorf("after delete %+v", list.Personas)
	}
}

// TestReadOnlyPersonasGetNoWriteTools: a read-only persona (built-in or
// custom) is offered no tool that writes or runs commands; a custom
// persona's prompt reaches the model; the workspace's personaId (the
// original's key) picks the persona.
func TestReadOnlyPersonasGetNoWriteTools(t *testing.T) {
	srv, llm := start(t)
	writes := []string{"write_file", "edit_file", "bash", "save_memory", "generate_docx"}
	offered := func(persona string) ([]string, string) {
		before := len(llm.ChatRequests())
		body := obj{"message": "Review the plan in notes.md please", "workspace": ws, "session": "s-" + persona}
		if persona != "" {
			body["persona"] = persona
		}
		evs := srv.Chat(body).All(t)
		if evs[len(evs)-1].Name != "done" {
			t.Fatalf("persona %s: %v", persona, evs)
		}
		req := llm.ChatRequests()[before]
		return toolNames(req), req.Chat.Messages[0].Content
	}

	all, _ := offered("")
	if !slices.Contains(all, "write_file") || !slices.Contains(all, "save_memory") {
		t.Fatalf("default tools %v", all)
	}
	tools, sys := offered("planner")
	for _, w := range writes {
		if slices.Contains(tools, w) {
			t.Errorf("planner offered %s: %v", w, tools)
		}
	}
	if !slices.Contains(tools, "read_file") {
		t.Errorf("planner tools %v", tools)
	}
	mustContain(t, "planner prompt", sys, "## Persona: Planner", "This persona is read-only")

	if st := srv.JSON(http.MethodPost, "/api/personas", obj{"name": "Auditor", "systemPrompt": "Audit everything twice.", "isReadOnly": true}, nil); st != http.StatusCreated {
		t.Fatalf("create: %d", st)
	}
	tools, sys = offered("auditor")
	for _, w := range writes {
		if slices.Contains(tools, w) {
			t.Errorf("auditor offered %s: %v", w, tools)
		}
	}
	mustContain(t, "custom persona prompt", sys, "## Persona: Auditor\nAudit everything twice.", "read-only")

	// The workspace's personaId picks the persona when the chat names none.
	if st := srv.JSON(http.MethodPatch, "/api/workspaces/"+ws, obj{"personaId": "verifier"}, nil); st != 200 {
		t.Fatalf("patch workspace: %d", st)
	}
	tools, sys = offered("")
	mustContain(t, "workspace persona prompt", sys, "## Persona: Verifier")
	if slices.Contains(tools, "write_file") {
		t.Errorf("verifier workspace offered write_file: %v", tools)
	}
}
