package openapi

import (
	"encoding/json"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestDocumentIsConsistent checks what an OpenAPI tool would reject or a
// reader would trip over: dangling $refs, undeclared or unused path
// parameters, duplicate operation ids, operations without a success
// response.
func TestDocumentIsConsistent(t *testing.T) {
	var doc map[string]any
	if err := json.Unmarshal(JSON(), &doc); err != nil {
		t.Fatal(err)
	}
	if doc["openapi"] != "3.1.0" {
		t.Fatalf("openapi = %v", doc["openapi"])
	}
	// Every $ref points at something that exists.
	var walk func(v any, at string)
	walk = func(v any, at string) {
		switch x := v.(type) {
		case map[string]any:
			if r, ok := x["$ref"].(string); ok {
				if resolve(doc, r) == nil {
					t.Errorf("%s: $ref %s resolves to nothing", at, r)
				}
			}
			for k, c := range x {
				walk(c, at+"/"+k)
			}
		case []any:
			for _, c := range x {
				walk(c, at+"/[]")
			}
		}
	}
	walk(doc, "#")

	health := doc["paths"].(map[string]any)["/health"].(map[string]any)["get"].(map[string]any)
	if sec, ok := health["security"].([]any); !ok || len(sec) != 0 {
		t.Errorf("GET /health security = %v, want [] (no authentication)", health["security"])
	}

	params := regexp.MustCompile(`\{([^}]+)\}`)
	ids := map[string]string{}
	d := Build()
	for path, item := range d.Paths {
		var inPath []string
		for _, m := range params.FindAllStringSubmatch(path, -1) {
			inPath = append(inPath, m[1])
		}
		for method, op := range item {
			at := strings.ToUpper(method) + " " + path
			if prev, dup := ids[op.OperationID]; dup || op.OperationID == "" {
				t.Errorf("%s: operationId %q (also %s)", at, op.OperationID, prev)
			}
			ids[op.OperationID] = at
			var declared []string
			for _, p := range op.Parameters {
				if p.In == "path" {
					declared = append(declared, p.Name)
					if !p.Required {
						t.Errorf("%s: path parameter %s not required", at, p.Name)
					}
				}
			}
			if !slices.Equal(declared, inPath) {
				t.Errorf("%s: path parameters %q declared, %q in the path", at, declared, inPath)
			}
			ok := false
			for code, r := range op.Responses {
				if code[0] == '2' {
					ok = true
				}
				if r.Ref == "" && r.Description == "" {
					t.Errorf("%s: response %s has no description", at, code)
				}
			}
			if !ok {
				t.Errorf("%s: no success response", at)
			}
			if len(op.Tags) != 1 || !slices.ContainsFunc(d.Tags, func(tg Tag) bool { return tg.Name == op.Tags[0] }) {
				t.Errorf("%s: tags %q are not among the document's", at, op.Tags)
			}
		}
	}
}

// TestEventCatalogues checks that both event streams describe every event
// the contract names, stream_gap included, as {event, id?, data}.
func TestEventCatalogues(t *testing.T) {
	d := Build()
	for name, events := range map[string][]string{
		"ChatEvent":     {"token", "step", "tool", "tool_result", "file_created", "approval_required", "gepa_choices", "model_switch", "notification", "stream_gap", "done", "error"},
		"AgentRunEvent": {"started", "progress", "finalized", "error", "done"},
	} {
		union := d.Components.Schemas[name]
		if union == nil || len(union.OneOf) != len(events) {
			t.Fatalf("%s: %+v", name, union)
		}
		for _, e := range events {
			env := d.Components.Schemas[name+"."+e]
			if env == nil {
				t.Errorf("%s has no %s", name, e)
				continue
			}
			if env.Properties["event"].Const != e || env.Properties["data"] == nil || !slices.Equal(env.Required, []string{"event", "data"}) {
				t.Errorf("%s.%s: %+v", name, e, env)
			}
		}
	}
	gap := d.Components.Schemas["StreamGapData"]
	if !slices.Equal(gap.Required, []string{"missed", "message"}) {
		t.Errorf("StreamGapData: %+v", gap)
	}
}

func resolve(doc map[string]any, ref string) any {
	path, ok := strings.CutPrefix(ref, "#/")
	if !ok {
		return nil
	}
	var cur any = doc
	for _, part := range strings.Split(path, "/") {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil
		}
		cur = m[part]
	}
	return cur
}
