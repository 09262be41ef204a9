package tools

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestDecodeIsStrict: the arguments a tool runs are exactly the ones its
// canonical Input shows, so anything encoding/json would read loosely
// (another case, a repeated key, an unknown key, a wrong type) is refused.
func TestDecodeIsStrict(t *testing.T) {
	tests := []struct {
		tool, input, wantErr string
	}{
		{"bash", `{"command":"ls","Command":"touch x"}`, `unknown key "Command"`},
		{"bash", `{"COMMAND":"touch x"}`, `unknown key "COMMAND"`},
		{"write_file", `{"path":"notes.txt","Path":"autorun.sh","content":"x"}`, `unknown key "Path"`},
		{"bash", `{"command":"ls","command":"touch x"}`, `duplicate key "command"`},
		{"write_file", `{"path":"a","content":"x","path":"b"}`, `duplicate key "path"`},
		{"save_memory", `{"content":"c","tags":[{"a":1,"a":2}]}`, `duplicate key "a"`},
		{"bash", `{"command":"ls","cwd":"/"}`, `unknown key "cwd"`},
		{"edit_file", `{"path":"a","old_string":"x","new_string":"y","file_path":"b"}`, `unknown key "file_path"`},
		{"bash", `{"command":5}`, "cannot unmarshal number"},
		{"write_file", `{"path":["a"],"content":"x"}`, "cannot unmarshal array"},
		{"bash", `{"command":"ls","timeout":"soon"}`, "not a number"},
		{"bash", `["ls"]`, "must be a JSON object"},
		{"bash", `"ls"`, "must be a JSON object"},
		{"bash", `{"command":"ls"} {"command":"rm"}`, "after top-level value"},
		{"bash", `{"command":"ls"`, "unexpected end of JSON input"},
		{"bash", `{"command":""}`, "command is required"},
		{"bash", `{"command":"ls","timeout":-1}`, "timeout must be a positive"},
		{"write_file", `{"path":"a"}`, "content is required"},
	}
	r := NewRegistry(DefaultConfig())
	for _, tt := range tests {
		t.Run(tt.tool+" "+tt.input, func(t *testing.T) {
			tool, _ := r.Get(tt.tool)
			c, err := tool.Decode(json.RawMessage(tt.input))
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("Decode = %s, %v; want an error containing %q", c.Input, err, tt.wantErr)
			}
			if strings.Contains(err.Error(), "touch") {
				t.Errorf("the error repeats a value: %v", err)
			}
		})
	}
}

// TestDecodeCanonicalInput: the canonical Input is the decoded value
// re-encoded — lenient spellings become the values that run.
func TestDecodeCanonicalInput(t *testing.T) {
	tests := []struct{ tool, input, want string }{
		{"bash", `{"command":"ls -la"}`, `{"command":"ls -la"}`},
		{"bash", ` { "timeout" : "5", "command" : "ls" } `, `{"command":"ls","timeout":5}`},
		{"bash", `{"comm\u0061nd":"ls","timeout":null}`, `{"command":"ls"}`},
		{"write_file", `{"content":"x","path":"a.txt"}`, `{"path":"a.txt","content":"x"}`},
		{"edit_file", `{"path":"a","old_string":"x","new_string":"y","replace_all":"true"}`,
			`{"path":"a","old_string":"x","new_string":"y","replace_all":true}`},
		{"list_files", ``, `{}`},
		{"list_files", `null`, `{}`},
		{"save_memory", `{"content":"c","tags":"a, b"}`, `{"content":"c","tags":["a","b"]}`},
		{"read_file", `{"path":"a","offset":"2","limit":3}`, `{"path":"a","offset":2,"limit":3}`},
		// The name that is written, not the one asked for.
		{"generate_docx", `{"path":" reports/q1 ","content":"x"}`, `{"path":"reports/q1.docx","content":"x"}`},
		{"generate_docx", `{"path":"a.DOCX","content":"x"}`, `{"path":"a.DOCX","content":"x"}`},
	}
	r := NewRegistry(DefaultConfig())
	for _, tt := range tests {
		tool, _ := r.Get(tt.tool)
		c, err := tool.Decode(json.RawMessage(tt.input))
		if err != nil || string(c.Input) != tt.want {
			t.Errorf("%s %s: Input = %s, %v; want %s", tt.tool, tt.input, c.Input, err, tt.want)
		}
	}
}

// TestDecodeAcceptsEverySchemaProperty: strictness must not refuse a key
// the schema offers the model.
func TestDecodeAcceptsEverySchemaProperty(t *testing.T) {
	r := NewRegistry(DefaultConfig())
	for _, name := range r.Names() {
		tool, _ := r.Get(name)
		var s struct {
			Properties map[string]json.RawMessage `json:"properties"`
		}
		if err := json.Unmarshal(tool.Schema(), &s); err != nil {
			t.Fatal(err)
		}
		for prop := range s.Properties {
			_, err := tool.Decode(json.RawMessage(`{"` + prop + `":null}`))
			if err != nil && strings.Contains(err.Error(), "unknown key") {
				t.Errorf("%s refuses its schema's property %q: %v", name, prop, err)
			}
		}
	}
}
