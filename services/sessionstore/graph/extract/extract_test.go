package extract_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/waggle-os/core/services/sessionstore/graph"
	"github.com/waggle-os/core/services/sessionstore/graph/extract"
)

// summary renders a batch as "name:type" and "from -type-> to" lines
// in order, for readable expectations.
func summary(b graph.Batch) (ents, rels []string) {
	seen := map[string]bool{}
	for _, e := range b.Entities {
		s := e.Name + ":" + e.Type
		if !seen[s] {
			ents = append(ents, s)
			seen[s] = true
		}
	}
	for _, r := range b.Relations {
		rels = append(rels, fmt.Sprintf("%s -%s-> %s", r.From, r.Type, r.To))
	}
	return ents, rels
}

func has(list []string, want string) bool {
	for _, s := range list {
		if s == want {
			return true
		}
	}
	return false
}

func TestFalconSentence(t *testing.T) {
	b := extract.Text("Ada Lovelace leads Project Falcon at Acme Corp.")
	if err := graph.Check(&b); err != nil {
		t.Fatal(err)
	}
	ents, rels := summary(b)
	for _, want := range []string{"Ada Lovelace:person", "Project Falcon:project", "Acme Corp:organisation"} {
		if !has(ents, want) {
			t.Errorf("missing entity %s in %v", want, ents)
		}
	}
	for _, want := range []string{"Ada Lovelace -leads-> Project Falcon", "Ada Lovelace -works_at-> Acme Corp", "Project Falcon -mentioned_with-> Acme Corp"} {
		if !has(rels, want) {
			t.Errorf("missing relation %s in %v", want, rels)
		}
	}
	if len(ents) != 3 || len(rels) != 3 {
		t.Errorf("extra findings: %v %v", ents, rels)
	}
}

func TestPatternsAndTypes(t *testing.T) {
	cases := []struct {
		text       string
		ents, rels []string
	}{
		{"Yesterday Grace Hopper joined Globex Inc. She was happy.",
			[]string{"Grace Hopper:person", "Globex Inc:organisation"}, []string{"Grace Hopper -works_at-> Globex Inc"}},
		{"The billing service depends on PostgreSQL and uses redis for caching.",
			[]string{"PostgreSQL:technology", "Redis:technology"}, nil},
		{"Project Kestrel relies on Kafka.",
			[]string{"Project Kestrel:project", "Kafka:technology"}, []string{"Project Kestrel -depends_on-> Kafka"}},
		{"Linus Torvalds, who now lives in Portland, wrote Git.",
			[]string{"Linus Torvalds:person", "Portland:place", "Git:technology"}, nil},
		{"Umbrella Labs is based in Berlin.",
			[]string{"Umbrella Labs:organisation", "Berlin:place"}, []string{"Umbrella Labs -located_in-> Berlin"}},
	}
	for _, c := range cases {
		b := extract.Text(c.text)
		if err := graph.Check(&b); err != nil {
			t.Fatalf("%q: %v", c.text, err)
		}
		ents, rels := summary(b)
		for _, want := range c.ents {
			if !has(ents, want) {
				t.Errorf("%q: missing entity %s in %v", c.text, want, ents)
			}
		}
		for _, want := range c.rels {
			if !has(rels, want) {
				t.Errorf("%q: missing relation %s in %v", c.text, want, rels)
			}
		}
		for _, e := range ents {
			if strings.HasPrefix(e, "Yesterday") || strings.HasPrefix(e, "She") || strings.HasPrefix(e, "The") {
				t.Errorf("%q: a sentence word became an entity: %v", c.text, ents)
			}
		}
	}
}

func TestNoEntitiesInPlainText(t *testing.T) {
	for _, text := range []string{"", "ok, thanks! I'll do that tomorrow.", "```go\nfunc Main() { Foo.Bar() }\n```", "see https://Example.com/Path"} {
		if b := extract.Text(text); len(b.Entities) != 0 {
			t.Errorf("%q: entities %+v", text, b.Entities)
		}
	}
}

func TestAtMostTenEntities(t *testing.T) {
	var names []string
	for i := range 30 {
		names = append(names, fmt.Sprintf("Zeta%c Corp", 'A'+i))
	}
	b := extract.Text("We met " + strings.Join(names, ", ") + ".")
	if err := graph.Check(&b); err != nil {
		t.Fatal(err)
	}
	keys := map[string]bool{}
	for _, e := range b.Entities {
		keys[graph.Normalize(e.Name)] = true
	}
	if len(keys) != extract.MaxEntities {
		t.Fatalf("%d entities, want %d", len(keys), extract.MaxEntities)
	}
}

func TestShortNamesAreTheFullEntity(t *testing.T) {
	b := extract.Text("Ada Lovelace leads Project Falcon at Acme Corp. Noted: Ada runs Falcon. Everyone at Acme likes it.")
	if err := graph.Check(&b); err != nil {
		t.Fatal(err)
	}
	ents, rels := summary(b)
	for _, e := range ents {
		if e == "Ada:concept" || e == "Falcon:concept" || e == "Noted:concept" || e == "Acme:organisation" || strings.HasPrefix(e, "Everyone") {
			t.Errorf("a short name or a sentence word became its own entity: %v", ents)
		}
	}
	if len(ents) != 3 {
		t.Errorf("entities %v", ents)
	}
	if !has(rels, "Ada Lovelace -leads-> Project Falcon") {
		t.Errorf("relations %v", rels)
	}
}
