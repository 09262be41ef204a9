package agentcontext

import (
	"testing"

	"github.com/waggle-os/core/libs/protocol"
)

func TestKeyKnowledgeText(t *testing.T) {
	g := protocol.KnowledgeGraph{
		Entities: []protocol.KnowledgeEntity{{ID: "e1", Name: "Ada Lovelace", Type: "person"}, {ID: "e2", Name: "Project Falcon", Type: "project"}},
		Relations: []protocol.KnowledgeRelation{
			{Source: "e1", Target: "e2", Type: "works_at"},
			{Source: "e1", Target: "e2", Type: "mentioned_with"},
			{Source: "e1", Target: "e9", Type: "leads"}, // an end outside the top entities
		},
	}
	want := "## Key knowledge of this workspace\n- Ada Lovelace (person)\n- Project Falcon (project)\n- Ada Lovelace works at Project Falcon"
	if got := KeyKnowledgeText(g); got != want {
		t.Errorf("KeyKnowledgeText =\n%s\nwant\n%s", got, want)
	}
}
