package groups_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/waggle-os/core/libs/protocol"
	"github.com/waggle-os/core/services/sessionstore/groups"
	"github.com/waggle-os/core/services/sessionstore/groups/groupstest"
)

func TestParseCreate(t *testing.T) {
	tests := []struct {
		body    string
		wantErr string
		check   func(protocol.AgentGroup) bool
	}{
		{`{}`, "name is required", nil},
		{`{"name":""}`, "name is required", nil},
		{`{"name":"  "}`, "name is required", nil},
		{`{"name":null,"strategy":"parallel"}`, "name is required", nil},
		{`{"name":5}`, "name must be a string", nil},
		{`{"name":"g"}`, "strategy is required (parallel, sequential or coordinator)", nil},
		{`{"name":"g","strategy":"random"}`, "strategy must be one of: parallel, sequential, coordinator", nil},
		{`{"name":"g","strategy":3}`, "strategy must be one of: parallel, sequential, coordinator", nil},
		{`{"name":"g","strategy":"parallel","description":7}`, "description must be a string", nil},
		{`{"name":"g","strategy":"parallel","members":{}}`, "members must be an array", nil},
		{`{"name":"g","strategy":"parallel","members":[1]}`, "members[0] must be an object", nil},
		{`{"name":"g","strategy":"parallel","members":[{"agentId":"a"},{"agentId":""}]}`, "members[1].agentId must be a non-empty string", nil},
		{`{"name":"g","strategy":"parallel","members":[{"agentId":4}]}`, "members[0].agentId must be a non-empty string", nil},
		{`{"name":"g","strategy":"parallel","members":[{"agentId":"a","roleInGroup":1}]}`, "members[0].roleInGroup must be a string", nil},
		{`{"name":"g","strategy":"parallel","members":[{"agentId":"a","executionOrder":1.5}]}`, "members[0].executionOrder must be an integer", nil},
		{`{"name":"g","strategy":"parallel","members":[{"agentId":"a","executionOrder":"1"}]}`, "members[0].executionOrder must be an integer", nil},
		{`{"name":"g","strategy":"sequential"}`, "", func(g protocol.AgentGroup) bool {
			return g.Name == "g" && g.Strategy == "sequential" && g.Members != nil && len(g.Members) == 0 && g.Description == nil
		}},
		{`{"name":"g","strategy":"coordinator","description":"d","members":[{"agentId":"a","roleInGroup":"lead","executionOrder":5},{"agentId":"b"}]}`, "",
			func(g protocol.AgentGroup) bool {
				return *g.Description == "d" && g.Members[0] == protocol.AgentGroupMember{AgentID: "a", RoleInGroup: "lead", ExecutionOrder: 5} &&
					g.Members[1] == protocol.AgentGroupMember{AgentID: "b", RoleInGroup: "worker", ExecutionOrder: 1}
			}},
	}
	for _, tt := range tests {
		t.Run(tt.body, func(t *testing.T) {
			g, err := groups.Parse(protocol.AgentGroup{}, groupstest.Fields(t, tt.body), true)
			if tt.wantErr != "" {
				e := protocol.AsError(err)
				if e == nil || e.Kind != protocol.Invalid || e.Message != tt.wantErr {
					t.Fatalf("err = %v, want 400 %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !tt.check(g) {
				t.Fatalf("group = %+v", g)
			}
		})
	}
}

func TestParseUpdate(t *testing.T) {
	d := "old"
	base := protocol.AgentGroup{ID: "x", Name: "n", Description: &d, Strategy: "parallel",
		Members: []protocol.AgentGroupMember{{AgentID: "a", RoleInGroup: "worker"}}, CreatedAt: "c"}
	tests := []struct {
		body    string
		wantErr string
		check   func(protocol.AgentGroup) bool
	}{
		{`{}`, "", func(g protocol.AgentGroup) bool {
			return g.Name == "n" && *g.Description == "old" && len(g.Members) == 1
		}},
		{`{"name":"m","id":"evil","createdAt":"z"}`, "", func(g protocol.AgentGroup) bool { return g.Name == "m" && g.ID == "x" && g.CreatedAt == "c" }},
		{`{"description":null}`, "", func(g protocol.AgentGroup) bool { return g.Description == nil }},
		{`{"strategy":"sequential","members":[]}`, "", func(g protocol.AgentGroup) bool { return g.Strategy == "sequential" && len(g.Members) == 0 }},
		{`{"name":null}`, "name is required", nil},
		{`{"name":""}`, "name is required", nil},
		{`{"strategy":null}`, "strategy is required (parallel, sequential or coordinator)", nil},
		{`{"strategy":"x"}`, "strategy must be one of: parallel, sequential, coordinator", nil},
		{`{"members":null}`, "members must be an array", nil},
	}
	for _, tt := range tests {
		t.Run(tt.body, func(t *testing.T) {
			in := base
			in.Members = append([]protocol.AgentGroupMember(nil), base.Members...)
			g, err := groups.Parse(in, groupstest.Fields(t, tt.body), false)
			if tt.wantErr != "" {
				if e := protocol.AsError(err); e == nil || e.Kind != protocol.Invalid || e.Message != tt.wantErr {
					t.Fatalf("err = %v, want 400 %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || !tt.check(g) {
				t.Fatalf("group = %+v, err %v", g, err)
			}
		})
	}
}

func TestStoreCorruptFileKeptAside(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, groups.FileName)
	os.WriteFile(path, []byte("[{broken"), 0o644)
	s, _ := groups.New(groups.Config{DataDir: dir}, nil)
	if gs, err := s.List(); err != nil || len(gs) != 0 {
		t.Fatalf("corrupt file: %v %v", gs, err)
	}
	if _, err := s.Create(groupstest.Fields(t, `{"name":"g","strategy":"parallel"}`)); err != nil {
		t.Fatal(err)
	}
	matches, _ := filepath.Glob(path + ".corrupt-*")
	if len(matches) != 1 {
		t.Fatalf("backups %v", matches)
	}
	if b, _ := os.ReadFile(matches[0]); !strings.Contains(string(b), "broken") {
		t.Fatalf("backup content %q", b)
	}
}

// The file holds the groups as an indented JSON array.
func TestFileFormat(t *testing.T) {
	dir := t.TempDir()
	s, err := groups.New(groups.Config{DataDir: dir}, nil)
	if err != nil {
		t.Fatal(err)
	}
	g, err := s.Create(groupstest.Fields(t, `{"name":"team","strategy":"sequential","members":[{"agentId":"a"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(filepath.Join(dir, groups.FileName))
	want, _ := json.MarshalIndent([]protocol.AgentGroup{g}, "", "  ")
	if string(data) != string(want)+"\n" {
		t.Fatalf("file =\n%s\nwant\n%s", data, want)
	}
}

// A group's team is set when it is created and never moved by an update
// (the gateway authorized the creator in that team only).
func TestParseTeamOnCreateOnly(t *testing.T) {
	g, err := groups.Parse(protocol.AgentGroup{}, groupstest.Fields(t, `{"name":"n","strategy":"parallel","teamId":"acme"}`), true)
	if err != nil || g.TeamID != "acme" {
		t.Fatalf("create: %+v %v", g, err)
	}
	g, err = groups.Parse(g, groupstest.Fields(t, `{"teamId":"evil"}`), false)
	if err != nil || g.TeamID != "acme" {
		t.Fatalf("update moved the group: %+v %v", g, err)
	}
	if _, err := groups.Parse(protocol.AgentGroup{}, groupstest.Fields(t, `{"name":"n","strategy":"parallel","teamId":3}`), true); protocol.KindOf(err) != protocol.Invalid {
		t.Fatalf("non-string teamId: %v", err)
	}
}
