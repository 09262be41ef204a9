// Package extract finds the entities and relations a text names without a
// model: capitalised phrases typed by their shape and by small word lists,
// relations from a few verb patterns between two entities of a sentence,
// and co-occurrence for the rest. It is deterministic and cheap (no I/O).
package extract

import (
	"regexp"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/waggle-os/core/services/sessionstore/graph"
)

// MaxEntities is how many entities one text yields at most (the first
// named win): a long reply must not flood the graph.
const MaxEntities = 10

// Confidences of the relations found.
const (
	// ConfidencePattern is a relation a verb pattern states ("X leads Y").
	ConfidencePattern = 0.8
	// ConfidenceContext is a relation read from context ("... at Acme").
	ConfidenceContext = 0.6
	// ConfidenceCooccurrence is two entities named in one sentence.
	ConfidenceCooccurrence = 0.3
)

// maxPairs bounds co-occurrence relations per text.
const maxPairs = 15

var (
	fence    = regexp.MustCompile("(?s)```.*?```")
	inline   = regexp.MustCompile("`[^`\n]*`")
	urlLike  = regexp.MustCompile(`\S+://\S+`)
	wordRe   = regexp.MustCompile(`[\p{L}\p{N}][\p{L}\p{N}+#&'.-]*`)
	sentEnds = regexp.MustCompile(`[.!?;:]\s+|\n+`)
)

// token is a word of a sentence with its byte span.
type token struct {
	text       string
	start, end int
}

// mention is an entity named in a sentence.
type mention struct {
	name, typ  string
	start, end int // span in the sentence
}

// Text extracts the entities and relations of text as a batch for
// graph.Backend.Apply (unchecked: run graph.Check).
func Text(text string) graph.Batch {
	text = fence.ReplaceAllString(text, "\n")
	text = inline.ReplaceAllString(text, " ")
	text = urlLike.ReplaceAllString(text, " ")
	var b graph.Batch
	seen := map[string]bool{}
	links := map[string]bool{}
	pairs := 0
	sents := sentences(text)
	found := make([][]mention, len(sents))
	for i, s := range sents {
		found[i] = mentions(s)
	}
	short := shortNames(found)
	for i, s := range sents {
		ms := found[i]
		for i, m := range ms {
			if full, ok := short[strings.ToLower(m.name)]; ok && !strings.Contains(m.name, " ") {
				ms[i].name, ms[i].typ = full.name, full.typ
			}
		}
		// Keep the entities this text may still add.
		kept := ms[:0]
		for _, m := range ms {
			k := graph.Normalize(m.name)
			if k == "" {
				continue
			}
			if !seen[k] {
				if len(seen) >= MaxEntities {
					continue
				}
				seen[k] = true
				b.Entities = append(b.Entities, graph.EntityInput{Name: m.name, Type: m.typ})
			} else if len(b.Entities) < graph.MaxBatch && !slices.ContainsFunc(b.Entities, func(e graph.EntityInput) bool { return graph.Normalize(e.Name) == k && e.Type == m.typ }) {
				// Seen again with another type: the store keeps the specific one.
				b.Entities = append(b.Entities, graph.EntityInput{Name: m.name, Type: m.typ})
			}
			kept = append(kept, m)
		}
		add := func(from, to mention, typ string, conf float64) bool {
			f, t := graph.Normalize(from.name), graph.Normalize(to.name)
			if f == t {
				return false
			}
			pair := f + "|" + t
			if links[pair+"|"+typ] {
				return true
			}
			links[pair+"|"+typ], links[pair] = true, true
			b.Relations = append(b.Relations, graph.RelationInput{From: from.name, To: to.name, Type: typ, Confidence: conf})
			return true
		}
		stated := map[[2]int]bool{}
		for i := 0; i+1 < len(kept); i++ {
			x, y := kept[i], kept[i+1]
			if typ, ok := verb(s[x.end:y.start], x, y); ok && add(x, y, typ, ConfidencePattern) {
				stated[[2]int{i, i + 1}] = true
			}
		}
		// "X leads Y at Acme Corp": the sentence's person works there.
		if p := slices.IndexFunc(kept, func(m mention) bool { return m.typ == graph.TypePerson }); p >= 0 {
			for j := p + 1; j < len(kept); j++ {
				if kept[j].typ == graph.TypeOrganisation && atOrFor(s[:kept[j].start]) && add(kept[p], kept[j], graph.RelWorksAt, ConfidenceContext) {
					stated[[2]int{p, j}] = true
				}
			}
		}
		for i := range kept {
			for j := i + 1; j < len(kept) && pairs < maxPairs; j++ {
				f, t := graph.Normalize(kept[i].name), graph.Normalize(kept[j].name)
				if stated[[2]int{i, j}] || links[f+"|"+t] || links[t+"|"+f] {
					continue
				}
				if add(kept[i], kept[j], graph.RelMentionedWith, ConfidenceCooccurrence) {
					pairs++
				}
			}
		}
	}
	return b
}

// shortNames maps a single word onto the multi-word entity of the same
// text it is short for: a person's first or last name ("Ada" is "Ada
// Lovelace"), the last word of a project or organisation ("Falcon" is
// "Project Falcon"). A word two entities share is left alone.
func shortNames(found [][]mention) map[string]mention {
	out := map[string]mention{}
	ambiguous := map[string]bool{}
	for _, ms := range found {
		for _, m := range ms {
			words := strings.Fields(m.name)
			if len(words) < 2 {
				continue
			}
			var shorts []string
			switch m.typ {
			case graph.TypePerson:
				shorts = []string{words[0], words[len(words)-1]}
			case graph.TypeProject, graph.TypeOrganisation:
				if m.typ == graph.TypeProject || !orgSuffix[strings.ToLower(words[len(words)-1])] {
					shorts = []string{words[len(words)-1]}
				} else {
					shorts = []string{words[0]} // "Acme" is "Acme Corp"
				}
			}
			for _, w := range shorts {
				k := strings.ToLower(w)
				if prev, ok := out[k]; ok && prev.name != m.name {
					ambiguous[k] = true
				}
				out[k] = m
			}
		}
	}
	for k := range ambiguous {
		delete(out, k)
	}
	return out
}

// sentences splits text at sentence ends, not after an abbreviation
// ("Acme Corp. builds ..." is one sentence).
func sentences(text string) []string {
	var out []string
	start := 0
	for _, loc := range sentEnds.FindAllStringIndex(text, -1) {
		if text[loc[0]] == '.' && abbreviation(text[start:loc[0]], text[loc[1]:]) {
			continue
		}
		out = append(out, text[start:loc[0]+1])
		start = loc[1]
	}
	if start < len(text) {
		out = append(out, text[start:])
	}
	return out
}

// abbreviation reports whether the dot ending s abbreviates rather than
// ends a sentence: after a title always ("Dr. Hopper"); after a company
// suffix unless a capitalised word follows ("Acme Corp. builds" is one
// sentence, "Acme Corp. Noted." two).
func abbreviation(s, next string) bool {
	i := strings.LastIndexFunc(s, func(r rune) bool { return !unicode.IsLetter(r) })
	w := strings.ToLower(s[i+1:])
	if titles[w] {
		return true
	}
	r, _ := utf8.DecodeRuneInString(next)
	return orgSuffix[w] && !unicode.IsUpper(r)
}

var titles = map[string]bool{
	"dr": true, "mr": true, "mrs": true, "ms": true, "prof": true, "st": true, "jr": true, "sr": true, "vs": true,
	"etc": true, "e.g": true, "i.e": true,
}

// mentions finds the entities of one sentence in order.
func mentions(s string) []mention {
	var toks []token
	for _, loc := range wordRe.FindAllStringIndex(s, -1) {
		w := strings.TrimRight(s[loc[0]:loc[1]], ".'-")
		if w == "" {
			continue
		}
		toks = append(toks, token{w, loc[0], loc[0] + len(w)})
	}
	var out []mention
	for i := 0; i < len(toks); {
		t := toks[i]
		if !capitalised(t.text) || (stopword(t.text) && !tech(t.text)) {
			if tech(t.text) {
				out = append(out, mention{canonicalTech(t.text), graph.TypeTechnology, t.start, t.end})
			}
			i++
			continue
		}
		// A phrase: capitalised words next to each other, with "of" and
		// the like inside ("Bank of America").
		j := i + 1
		for j < len(toks) && onlySpace(s[toks[j-1].end:toks[j].start]) {
			w := toks[j].text
			if capitalised(w) && !stopword(w) {
				j++
				continue
			}
			if connectors[w] && j+1 < len(toks) && capitalised(toks[j+1].text) && onlySpace(s[toks[j].end:toks[j+1].start]) {
				j += 2
				continue
			}
			break
		}
		words := toks[i:j]
		if i == 0 && j == 1 && !tech(t.text) && !places[strings.ToLower(t.text)] {
			// One capitalised word opening a sentence is capitalised for
			// grammar as often as for a name ("Noted", "Sounds"): skipped.
			i = j
			continue
		}
		out = append(out, classify(s, words))
		i = j
	}
	return out
}

func onlySpace(s string) bool { return strings.TrimSpace(s) == "" }

// capitalised: starts with an upper-case letter (or is an acronym).
func capitalised(w string) bool {
	r, _ := utf8.DecodeRuneInString(w)
	return unicode.IsUpper(r)
}

var connectors = map[string]bool{"of": true, "de": true, "van": true, "von": true, "der": true, "da": true, "&": true, "for": false}

// classify types a capitalised phrase by its words.
func classify(s string, words []token) mention {
	names := make([]string, len(words))
	for i, w := range words {
		names[i] = w.text
	}
	m := mention{name: strings.Join(names, " "), start: words[0].start, end: words[len(words)-1].end}
	first, last := strings.ToLower(names[0]), strings.ToLower(strings.TrimRight(names[len(names)-1], "."))
	before := strings.ToLower(strings.TrimSpace(s[:m.start]))
	after := strings.ToLower(strings.TrimSpace(s[m.end:]))
	switch {
	case len(names) > 1 && orgSuffix[last]:
		m.typ = graph.TypeOrganisation
	case len(names) > 1 && first == "project", strings.HasPrefix(after, "project"):
		m.typ = graph.TypeProject
	case len(names) == 1 && tech(names[0]):
		m.name, m.typ = canonicalTech(names[0]), graph.TypeTechnology
	case places[strings.ToLower(m.name)] || endsWithAny(before, " in", " from", " to"):
		m.typ = graph.TypePlace
	case len(names) > 1 && len(names) <= 3 && personLike(names) || endsWithAny(before, " mr", " ms", " mrs", " dr"):
		m.typ = graph.TypePerson
	case endsWithAny(before, " at", " for", " joined"):
		m.typ = graph.TypeOrganisation
	default:
		m.typ = graph.TypeConcept
	}
	return m
}

func endsWithAny(s string, suffixes ...string) bool {
	s = " " + s
	for _, x := range suffixes {
		if strings.HasSuffix(s, x) {
			return true
		}
	}
	return false
}

// personLike: every word Title-case letters only (not an acronym).
func personLike(names []string) bool {
	for _, n := range names {
		rs := []rune(n)
		if len(rs) < 2 || !unicode.IsUpper(rs[0]) {
			return false
		}
		for _, r := range rs[1:] {
			if !unicode.IsLower(r) && r != '\'' && r != '-' {
				return false
			}
		}
	}
	return true
}

// verbs between two entities of a sentence state a relation. The text
// between them may start with "who", "which" or an adverb.
var verbs = []struct {
	re  *regexp.Regexp
	typ string
}{
	{regexp.MustCompile(`^(leads|led|heads|headed|manages|managed|runs|ran|is leading|is the lead of|is the head of|is in charge of|owns)$`), graph.RelLeads},
	{regexp.MustCompile(`^(works at|works for|worked at|worked for|is at|joined|is employed by|is with)$`), graph.RelWorksAt},
	{regexp.MustCompile(`^(depends on|relies on|requires|needs|is built on|builds on)$`), graph.RelDependsOn},
	{regexp.MustCompile(`^(uses|used|is built with|is written in|runs on|is powered by)$`), graph.RelUses},
	{regexp.MustCompile(`^(is part of|belongs to|is a team at|is a project of|is a product of)$`), graph.RelPartOf},
	{regexp.MustCompile(`^(is based in|is located in|lives in|is in|is headquartered in|moved to)$`), graph.RelLocatedIn},
}

var filler = regexp.MustCompile(`^(?:,?\s*(?:who|which|that)\s+)?(?:also\s+|now\s+|currently\s+|still\s+)?`)

// verb reads the text between two mentions as a relation.
func verb(between string, x, y mention) (string, bool) {
	b := strings.ToLower(strings.Join(strings.Fields(between), " "))
	b = strings.TrimSpace(filler.ReplaceAllString(b, ""))
	b = strings.TrimSuffix(strings.TrimSuffix(b, " the"), " a")
	for _, v := range verbs {
		if v.re.MatchString(b) {
			return v.typ, true
		}
	}
	// "Ada Lovelace at Acme Corp" (a person at an organisation).
	if (b == "at" || b == "from" || b == "of") && x.typ == graph.TypePerson && y.typ == graph.TypeOrganisation {
		return graph.RelWorksAt, true
	}
	return "", false
}

// atOrFor reports whether an entity follows "at" or "for".
func atOrFor(before string) bool {
	return endsWithAny(strings.ToLower(strings.TrimSpace(before)), " at", " for")
}

var orgSuffix = map[string]bool{
	"corp": true, "corporation": true, "inc": true, "incorporated": true, "ltd": true, "limited": true, "llc": true,
	"plc": true, "gmbh": true, "ag": true, "company": true, "co": true, "labs": true, "group": true, "foundation": true,
	"university": true, "institute": true, "bank": true, "agency": true, "systems": true, "technologies": true,
	"partners": true, "ventures": true, "capital": true, "studios": true, "ministry": true, "council": true,
}

var places = map[string]bool{
	"london": true, "paris": true, "berlin": true, "new york": true, "new york city": true, "san francisco": true,
	"tokyo": true, "belgrade": true, "amsterdam": true, "boston": true, "seattle": true, "chicago": true,
	"europe": true, "asia": true, "africa": true, "america": true, "usa": true, "uk": true, "germany": true,
	"france": true, "spain": true, "italy": true, "serbia": true, "japan": true, "china": true, "india": true,
	"canada": true, "brazil": true, "australia": true, "munich": true, "madrid": true, "rome": true, "vienna": true,
	"zurich": true, "dublin": true, "toronto": true, "sydney": true, "singapore": true, "los angeles": true,
}

// techs maps the lower-case spellings of well-known technologies onto
// their usual name.
var techs = map[string]string{
	"postgresql": "PostgreSQL", "postgres": "PostgreSQL", "mysql": "MySQL", "sqlite": "SQLite", "redis": "Redis",
	"kafka": "Kafka", "nats": "NATS", "kubernetes": "Kubernetes", "k8s": "Kubernetes", "docker": "Docker",
	"terraform": "Terraform", "react": "React", "vue": "Vue", "angular": "Angular", "svelte": "Svelte",
	"nodejs": "Node.js", "node.js": "Node.js", "deno": "Deno", "python": "Python", "javascript": "JavaScript",
	"typescript": "TypeScript", "java": "Java", "kotlin": "Kotlin", "swift": "Swift", "rust": "Rust",
	"golang": "Go", "ruby": "Ruby", "rails": "Rails", "django": "Django", "flask": "Flask", "fastapi": "FastAPI",
	"graphql": "GraphQL", "grpc": "gRPC", "aws": "AWS", "azure": "Azure", "gcp": "GCP", "linux": "Linux",
	"git": "Git", "github": "GitHub", "gitlab": "GitLab", "jira": "Jira", "tensorflow": "TensorFlow",
	"pytorch": "PyTorch", "elasticsearch": "Elasticsearch", "mongodb": "MongoDB", "dynamodb": "DynamoDB",
	"nginx": "nginx", "tauri": "Tauri", "electron": "Electron", "webassembly": "WebAssembly", "wasm": "WebAssembly",
	"c++": "C++", "c#": "C#", "php": "PHP", "scala": "Scala", "haskell": "Haskell", "elixir": "Elixir",
	"spark": "Spark", "hadoop": "Hadoop", "snowflake": "Snowflake", "bigquery": "BigQuery", "openapi": "OpenAPI",
	"rabbitmq": "RabbitMQ", "clickhouse": "ClickHouse", "prometheus": "Prometheus", "grafana": "Grafana",
}

func tech(w string) bool { _, ok := techs[strings.ToLower(w)]; return ok }

func canonicalTech(w string) string { return techs[strings.ToLower(w)] }

// stopword: a word that is capitalised for grammar, not because it names
// something (sentence starts, pronouns, days and months).
func stopword(w string) bool { return stopwords[strings.ToLower(w)] }

var stopwords = func() map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.Fields(`a an the this that these those there here it its i i'm i've i'd i'll me my mine
		we we're we've our ours you you're your yours he him his she her hers they them their what which who whom whose
		when where why how if then else and or but so yet also however therefore thus still just only even not no yes
		ok okay sure please thanks thank hello hi hey dear let lets let's can could would should will shall may might must
		do does did done is are was were be been being have has had get got make made see look note remember great good
		fine well now today yesterday tomorrow tonight soon later first second third next last finally after before
		once while since until because although though as at by for from in into of on onto to with without about above
		below over under between all any each every some many much more most few other another such same both either
		neither one two three monday tuesday wednesday thursday friday saturday sunday january february march april june
		july august september october november december here's there's that's it's what's let's sounds done summary
		step steps option options yes certainly absolutely regarding re fyi btw update updates new`) {
		m[w] = true
	}
	return m
}()
