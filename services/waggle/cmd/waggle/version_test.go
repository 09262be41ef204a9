package main

import (
	"runtime/debug"
	"testing"
)

func TestDescribe(t *testing.T) {
	vcs := func(rev, modified string) *debug.BuildInfo {
		return &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: []debug.BuildSetting{
			{Key: "vcs.revision", Value: rev}, {Key: "vcs.modified", Value: modified}}}
	}
	tests := []struct {
		name, linked string
		info         *debug.BuildInfo
		want         string
	}{
		{"make build", "v0.3.0-12-gfb64219", vcs("fb64219aaaaaaaaaaaaa", "false"), "v0.3.0-12-gfb64219"},
		{"go install at a tag", "dev", &debug.BuildInfo{Main: debug.Module{Version: "v0.3.0"}}, "v0.3.0"},
		{"go build in a checkout", "dev", vcs("fb64219c0ffee1234567", "false"), "dev-fb64219c0ffe"},
		{"with local edits", "dev", vcs("fb64219c0ffee1234567", "true"), "dev-fb64219c0ffe-dirty"},
		{"nothing known", "dev", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}, "dev"},
		{"no build info", "dev", nil, "dev"},
	}
	for _, tt := range tests {
		if got := describe(tt.linked, tt.info); got != tt.want {
			t.Errorf("%s: %q, want %q", tt.name, got, tt.want)
		}
	}
}
