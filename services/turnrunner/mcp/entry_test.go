package mcp

import (
	"reflect"
	"slices"
	"testing"

	"github.com/waggle-os/core/libs/protocol"
)

// TestEntryFieldsMatchAPI: the API's strict decoding (protocol.MCPServerEntry)
// accepts exactly the fields the runner reads, so nothing valid is refused
// and nothing refused would have been read.
func TestEntryFieldsMatchAPI(t *testing.T) {
	tags := func(v any) []string {
		var out []string
		rt := reflect.TypeOf(v)
		for i := range rt.NumField() {
			out = append(out, rt.Field(i).Tag.Get("json"))
		}
		slices.Sort(out)
		return out
	}
	runner, api := tags(ServerConfig{}), tags(protocol.MCPServerEntry{})
	// trust is omitzero on the runner's side (a struct), omitempty on the API's.
	for i, tag := range runner {
		if tag == "trust,omitzero" {
			runner[i] = "trust,omitempty"
		}
	}
	slices.Sort(runner)
	if !slices.Equal(runner, api) {
		t.Fatalf("runner fields %v, API fields %v", runner, api)
	}
}
