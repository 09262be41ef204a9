package main

import (
	"runtime/debug"
	"strings"
)

// version is set at link time by `make build` (-X main.version=…, from
// git describe); a plain `go build` or `go install` leaves "dev" and the
// build's own record (module version, VCS revision) says the rest.
var version = "dev"

// versionString is what `waggle version` prints after "waggle ".
func versionString() string {
	info, _ := debug.ReadBuildInfo()
	return describe(version, info)
}

// describe prefers the linked version; else the module's version (go
// install …@v1.2.3); else the VCS revision the binary was built from, with
// "-dirty" for uncommitted changes; else "dev".
func describe(linked string, info *debug.BuildInfo) string {
	if linked != "" && linked != "dev" {
		return linked
	}
	if info == nil {
		return "dev"
	}
	if v := info.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	var rev, dirty string
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				dirty = "-dirty"
			}
		}
	}
	if rev == "" {
		return "dev"
	}
	return "dev-" + strings.Clone(rev[:min(len(rev), 12)]) + dirty
}
