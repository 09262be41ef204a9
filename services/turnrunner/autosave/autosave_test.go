package autosave

import (
	"reflect"
	"strings"
	"testing"
)

func TestExtract(t *testing.T) {
	long := "## Migration plan\n" +
		"Here is how the move to the new cluster will go, step by step, with the risks we found.\n" +
		"- Freeze writes on the old cluster during the cutover window\n" +
		"- Copy the snapshots to the new region and verify checksums\n" +
		"- Switch DNS once replication lag is under one second\n" +
		strings.Repeat("Further detail about the rollout and its checks. ", 6)
	for _, c := range []struct {
		name      string
		user, bot string
		want      []Fact
	}{
		{"trivial exchange", "hi", "Hello! How can I help?", nil},
		{"nothing worth keeping", "What is the capital of France today?", "Paris.", nil},
		{"stated preference", "I prefer dark mode in every editor. Thanks!", "Noted.",
			[]Fact{{"User preference: I prefer dark mode in every editor", "normal", true}}},
		{"name", "Please call me Sam from now on, it is shorter", "Sure, Sam.",
			[]Fact{{"User preference: Please call me Sam from now on, it is shorter", "normal", true}}},
		{"implicit style", "Can you give me the short version of the quarterly report?", "Revenue grew 4%.",
			[]Fact{{"Style note: User prefers concise responses", "normal", true}}},
		{"decision in the reply wins", "Which database should the team server use?",
			"We'll use PostgreSQL. It has full-text search built in.",
			[]Fact{{"Decision: We'll use PostgreSQL", "important", false}}},
		{"decision stated by the user", "We decided to ship the beta on Friday", "Great, good luck with it.",
			[]Fact{{"Decision: We decided to ship the beta on Friday", "important", false}}},
		{"correction", "That's incorrect, the office moved to Berlin", "Thanks, I stand corrected.",
			[]Fact{{"Correction from user: That's incorrect, the office moved to Berlin", "important", true}}},
		{"substantial reply", "How should we migrate the database to the new cluster?", long, []Fact{
			{"User asked: How should we migrate the database to the new cluster?", "temporary", false},
			{"Migration plan: Freeze writes on the old cluster during the cutover window; Copy the snapshots to the new region and verify checksums; Switch DNS once replication lag is under one second", "normal", false},
		}},
		{"recommendation", "ok", "After comparing both, I recommend the managed service because it removes the on-call burden.\n" +
			strings.Repeat("More text. ", 20), []Fact{
			{"Recommendation: After comparing both, I recommend the managed service because it removes the on-call burden.", "important", false},
		}},
		// Commands and directives are not something the user told us.
		{"slash command", "/research the history of the Hanseatic League in detail", long, nil},
		{"directives", "reload test #tokens 500 --fast seed=42 @bench", long, nil},
		{"a tag inside a real question", "How should we migrate the #database to the new cluster?", long, []Fact{
			{"User asked: How should we migrate the #database to the new cluster?", "temporary", false},
			{"Migration plan: Freeze writes on the old cluster during the cutover window; Copy the snapshots to the new region and verify checksums; Switch DNS once replication lag is under one second", "normal", false},
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := Extract(c.user, c.bot); !reflect.DeepEqual(got, c.want) {
				t.Errorf("Extract =\n%#v\nwant\n%#v", got, c.want)
			}
		})
	}
}

func TestStep(t *testing.T) {
	if got := Step(1); got != "Auto-saved 1 memory from this exchange." {
		t.Error(got)
	}
	if got := Step(3); got != "Auto-saved 3 memories from this exchange." {
		t.Error(got)
	}
}
