package jsonpos

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestAnnotate(t *testing.T) {
	tests := []struct {
		name, in string
		into     any
		want     string
	}{
		{"missing comma", "{\n  \"defaultModel\": \"a\"\n  \"fallbackModel\": \"b\"\n}", &map[string]any{}, "line 3, column 3: invalid character '\"' after object key:value pair"},
		{"trailing comma", "{\"a\": 1,}", &map[string]any{}, "line 1, column 9: invalid character '}' looking for beginning of object key string"},
		{"wrong type", "{\n\t\"n\": \"x\"\n}", &struct{ N int }{}, "line 2, column 9: json: cannot unmarshal string into Go struct field .N of type int"},
		{"multibyte before", "{\"é\": 1 2}", &map[string]any{}, "line 1, column 9: invalid character '2' after object key:value pair"},
		{"not JSON at all", "model: x", &map[string]any{}, "line 1, column 1: invalid character 'm' looking for beginning of value"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			data := []byte(tt.in)
			err := Annotate(data, json.Unmarshal(data, tt.into))
			if err == nil || err.Error() != tt.want {
				t.Fatalf("got %v\nwant %s", err, tt.want)
			}
		})
	}
}

func TestCheck(t *testing.T) {
	if err := Check([]byte(`{"defaultModel":"x"}`)); err != nil {
		t.Fatal(err)
	}
	if err := Check([]byte(`[1]`)); err == nil || !strings.HasPrefix(err.Error(), "line 1, column 1:") {
		t.Fatalf("an array is not a config object: %v", err)
	}
	if err := Check([]byte("{\n")); err == nil {
		t.Fatal("a truncated object passed")
	}
}
