package contextapi

import (
	"net/http"

	"github.com/waggle-os/core/libs/protocol"
	"github.com/waggle-os/core/services/gateway/internal/forward"
	"github.com/waggle-os/core/services/gateway/internal/input"
	"github.com/waggle-os/core/services/gateway/internal/respond"
	"github.com/waggle-os/core/services/gateway/internal/teamauth"
)

// noIdentity is what the agent and /api/mind/identity say of a mind
// without an identity (the original's get_identity text).
const noIdentity = "No identity configured yet."

// mind is the mind a request reaches: the workspace the authorization
// step resolved (?workspace=, ?workspaceId= or the body's), or, without
// one or with "personal", the caller's personal mind.
func mind(r *http.Request) (protocol.MindRef, error) {
	sc, _ := teamauth.ScopeFrom(r.Context())
	m := protocol.MindRef{Workspace: sc.Workspace, User: sc.User}
	if m.Workspace != "" {
		if err := input.CheckSegment("workspace", m.Workspace); err != nil {
			return m, err
		}
	}
	return m, nil
}

func mindReader(_ http.ResponseWriter, r *http.Request) (protocol.MindRef, error) { return mind(r) }

// GET /api/identity?workspace= — the identity record, or the placeholder
// (configured false, every field null).
func (a api) getIdentity(w http.ResponseWriter, r *http.Request) {
	forward.Serve(a.d, w, r, mindReader, protocol.GetIdentity, http.StatusOK, nil)
}

// POST /api/identity {workspace?, name, role, department, personality,
// capabilities, system_prompt} — create or replace the mind's identity.
func (a api) setIdentity(w http.ResponseWriter, r *http.Request) {
	forward.Serve(a.d, w, r, func(w http.ResponseWriter, r *http.Request) (protocol.IdentitySetRequest, error) {
		var req protocol.IdentitySetRequest
		if err := a.strict(w, r, "identity", &req.Write); err != nil {
			return req, err
		}
		m, err := mind(r)
		req.MindRef = m
		return req, err
	}, protocol.SetIdentity, http.StatusOK, nil)
}

// GET /api/mind/identity — the identity as the agent reads it.
func (a api) mindIdentity(w http.ResponseWriter, r *http.Request) {
	forward.Serve(a.d, w, r, mindReader, protocol.GetIdentity, http.StatusOK, func(id protocol.Identity) any {
		text := id.IdentityContext()
		if text == "" {
			text = noIdentity
		}
		return struct {
			Identity string `json:"identity"`
		}{text}
	})
}

// GET /api/mind/awareness — the awareness as the agent reads it.
func (a api) mindAwareness(w http.ResponseWriter, r *http.Request) {
	forward.Serve(a.d, w, r, mindReader, protocol.GetAwareness, http.StatusOK, func(l protocol.AwarenessList) any {
		return struct {
			Awareness string `json:"awareness"`
		}{protocol.AwarenessContext(l.Items)}
	})
}

// skillInfo is one skill as GET /api/mind/skills lists it (the original's
// shape): its name and the length of its skill file.
type skillInfo struct {
	Name   string `json:"name"`
	Length int    `json:"length"`
}

// skillList is the body of GET /api/mind/skills.
type skillList struct {
	Skills []skillInfo `json:"skills"`
	Count  int         `json:"count"`
}

// GET /api/mind/skills?workspace= — the skills the agent has in the
// workspace: the workflow patterns captured from its turns (what /skills
// lists). The personal mind has none.
func (a api) mindSkills(w http.ResponseWriter, r *http.Request) {
	m, err := mind(r)
	if err != nil {
		respond.Error(w, a.d.Log, err)
		return
	}
	if m.Workspace == "" {
		respond.JSON(w, http.StatusOK, skillList{Skills: []skillInfo{}})
		return
	}
	forward.Serve(a.d, w, r, func(http.ResponseWriter, *http.Request) (protocol.WorkspaceRequest, error) {
		return protocol.WorkspaceRequest{Workspace: m.Workspace}, nil
	}, protocol.ListWorkflows, http.StatusOK, func(l protocol.WorkflowList) any {
		out := skillList{Skills: []skillInfo{}}
		for _, wf := range l.Workflows {
			out.Skills = append(out.Skills, skillInfo{Name: wf.Name, Length: len(wf.SkillMarkdown())})
		}
		out.Count = len(out.Skills)
		return out
	})
}
