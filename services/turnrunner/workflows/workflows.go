// Package workflows is workflow capture: it notices when the same
// sequence of tool calls (at least 3) recurs across the turns of a
// workspace and names it as a pattern, once, so the user can be offered to
// turn it into a reusable command.
//
// The rule (the original's shouldSuggestCapture, applied to turns of a
// workspace rather than to sessions): a turn's sequence of model tool
// calls, if it has at least MinSteps calls, is compared with the
// workspace's earlier recorded sequences (the newest KeepSequences); an
// earlier sequence of at least MinSteps calls matches when
// Similarity ≥ MinSimilarity. With at least MinMatches earlier matches
// (so 3 occurrences in all) the sequence is a pattern, named after its
// first three distinct tools joined by "-then-". A pattern name is
// reported once per workspace, ever.
//
// State is kept by the runner in `<data-dir>/workspaces/<ws>/workflows.json`
// (see docs/agent.md for why there and not in the session store).
package workflows

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// Rule constants.
const (
	MinSteps      = 3
	MinMatches    = 2
	MinSimilarity = 0.6
	KeepSequences = 50
	// FileName is the state file under a workspace's directory.
	FileName = "workflows.json"
)

// Pattern is a detected workflow (the original's SkillTemplate shape).
type Pattern struct {
	Name            string   `json:"name"`
	Description     string   `json:"description"`
	TriggerPatterns []string `json:"triggerPatterns"`
	Steps           []string `json:"steps"`
	Tools           []string `json:"tools"`
	Category        string   `json:"category"`
}

// Captured is a pattern as stored: when it was found and how often its
// sequence had occurred by then.
type Captured struct {
	Pattern
	DetectedAt  string `json:"detectedAt"`
	Occurrences int    `json:"occurrences"`
}

// Sequence is one recorded turn's tool calls.
type Sequence struct {
	Session string   `json:"session"`
	Tools   []string `json:"tools"`
	At      string   `json:"at"`
}

// state is the workflows.json document.
type state struct {
	Sequences []Sequence `json:"sequences"`
	Patterns  []Captured `json:"patterns"`
}

// Similarity of two tool sequences, 0–1: 0.4 × the Jaccard index of their
// tool sets + 0.6 × their longest common subsequence over the longer length.
func Similarity(a, b []string) float64 {
	if len(a) == 0 || len(b) == 0 {
		return 0
	}
	setA, setB := map[string]bool{}, map[string]bool{}
	for _, x := range a {
		setA[x] = true
	}
	for _, x := range b {
		setB[x] = true
	}
	inter := 0
	for x := range setA {
		if setB[x] {
			inter++
		}
	}
	union := len(setA) + len(setB) - inter
	return float64(inter)/float64(union)*0.4 + float64(lcs(a, b))/float64(max(len(a), len(b)))*0.6
}

func lcs(a, b []string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for i := 1; i <= len(a); i++ {
		for j := 1; j <= len(b); j++ {
			if a[i-1] == b[j-1] {
				cur[j] = prev[j-1] + 1
			} else {
				cur[j] = max(prev[j], cur[j-1])
			}
		}
		prev, cur = cur, prev
		clear(cur)
	}
	return prev[len(b)]
}

// Detect applies the rule to a turn's sequence against earlier ones and
// returns the pattern and the number of occurrences (earlier matches + 1).
func Detect(seq []string, earlier [][]string) (Pattern, int, bool) {
	if len(seq) < MinSteps {
		return Pattern{}, 0, false
	}
	matches := 0
	for _, e := range earlier {
		if len(e) >= MinSteps && Similarity(seq, e) >= MinSimilarity {
			matches++
		}
	}
	if matches < MinMatches {
		return Pattern{}, 0, false
	}
	return NewPattern(seq), matches + 1, true
}

// NewPattern is the template of a sequence: named after its first three
// distinct tools, one step per call.
func NewPattern(seq []string) Pattern {
	var unique []string
	seen := map[string]bool{}
	for _, t := range seq {
		if !seen[t] {
			seen[t] = true
			unique = append(unique, t)
		}
	}
	steps := make([]string, len(seq))
	for i, t := range seq {
		steps[i] = fmt.Sprintf("Step %d: Use %s", i+1, t)
	}
	return Pattern{
		Name:            strings.Join(unique[:min(3, len(unique))], "-then-"),
		Description:     "Repeated workflow using: " + strings.Join(unique, ", "),
		TriggerPatterns: []string{},
		Steps:           steps,
		Tools:           unique,
		Category:        category(unique),
	}
}

// category is the original's inferCategoryFromTools.
func category(tools []string) string {
	j := strings.ToLower(strings.Join(tools, " "))
	switch {
	case strings.Contains(j, "web_search") || strings.Contains(j, "web_fetch"):
		return "research"
	case strings.Contains(j, "git_") || strings.Contains(j, "edit_file") || strings.Contains(j, "code"):
		return "coding"
	case strings.Contains(j, "memory"):
		return "knowledge"
	case strings.Contains(j, "draft") || strings.Contains(j, "write") || strings.Contains(j, "docx"):
		return "writing"
	case strings.Contains(j, "plan") || strings.Contains(j, "task"):
		return "planning"
	}
	return "general"
}

// Store keeps the workflow state of every workspace under a data
// directory. It serialises its own reads and writes; one Store per data
// directory per process.
type Store struct {
	dataDir string
	mu      sync.Mutex
}

// NewStore returns a store for dataDir; it touches nothing until used.
func NewStore(dataDir string) *Store { return &Store{dataDir: dataDir} }

func (s *Store) path(workspace string) string {
	return filepath.Join(s.dataDir, "workspaces", workspace, FileName)
}

// Observe records a turn's tool sequence for workspace and returns the
// pattern it completes, if this is the first time that pattern is seen.
// Sequences shorter than MinSteps are not recorded.
func (s *Store) Observe(workspace, session string, seq []string, now time.Time) (Pattern, bool, error) {
	if len(seq) < MinSteps {
		return Pattern{}, false, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	st, err := s.load(workspace)
	if err != nil {
		return Pattern{}, false, err
	}
	earlier := make([][]string, len(st.Sequences))
	for i, q := range st.Sequences {
		earlier[i] = q.Tools
	}
	p, n, found := Detect(seq, earlier)
	stamp := now.UTC().Format("2006-01-02T15:04:05.000Z")
	st.Sequences = append(st.Sequences, Sequence{Session: session, Tools: append([]string(nil), seq...), At: stamp})
	if len(st.Sequences) > KeepSequences {
		st.Sequences = st.Sequences[len(st.Sequences)-KeepSequences:]
	}
	fresh := found
	for _, c := range st.Patterns {
		if found && c.Name == p.Name {
			fresh = false
		}
	}
	if fresh {
		st.Patterns = append(st.Patterns, Captured{Pattern: p, DetectedAt: stamp, Occurrences: n})
	}
	if err := s.save(workspace, st); err != nil {
		return Pattern{}, false, err
	}
	return p, fresh, nil
}

// List returns workspace's captured patterns, oldest first.
func (s *Store) List(workspace string) ([]Captured, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, err := s.load(workspace)
	if err != nil {
		return nil, err
	}
	return st.Patterns, nil
}

func (s *Store) load(workspace string) (state, error) {
	var st state
	b, err := os.ReadFile(s.path(workspace))
	if errors.Is(err, fs.ErrNotExist) {
		return st, nil
	}
	if err != nil {
		return st, fmt.Errorf("workflows: read %s: %w", workspace, err)
	}
	if err := json.Unmarshal(b, &st); err != nil {
		// A damaged file costs the history of sequences, not the turn.
		return state{}, nil
	}
	return st, nil
}

// save writes the state through a temporary file, synced and renamed, so
// a crash leaves the old or the new file, never half of one.
func (s *Store) save(workspace string, st state) error {
	path := s.path(workspace)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("workflows: save %s: %w", workspace, err)
	}
	b, err := json.Marshal(st)
	if err != nil {
		return fmt.Errorf("workflows: encode %s: %w", workspace, err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".workflows-*")
	if err != nil {
		return fmt.Errorf("workflows: save %s: %w", workspace, err)
	}
	_, werr := tmp.Write(b)
	serr := tmp.Sync()
	cerr := tmp.Close()
	if err := errors.Join(werr, serr, cerr); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("workflows: save %s: %w", workspace, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("workflows: save %s: %w", workspace, err)
	}
	return nil
}
