package protocol

import "strings"

// Profile is what the user tells Waggle about themselves (the original's
// profile.json shape): identity, writing style, brand and preferences. The
// agent's system prompt carries its identity and preferences. Locally there
// is one profile; on a team server one per user.
type Profile struct {
	Name                   string               `json:"name"`
	Role                   string               `json:"role"`
	Company                string               `json:"company"`
	Industry               string               `json:"industry"`
	Bio                    string               `json:"bio"`
	AvatarURL              string               `json:"avatarUrl"`
	IdentitySuggestions    []IdentitySuggestion `json:"identitySuggestions"`
	WritingStyle           WritingStyle         `json:"writingStyle"`
	Brand                  Brand                `json:"brand"`
	Interests              []string             `json:"interests"`
	CommunicationStyle     string               `json:"communicationStyle"`
	Language               string               `json:"language"`
	Timezone               string               `json:"timezone"`
	QuestionnaireCompleted bool                 `json:"questionnaireCompleted"`
	CreatedAt              string               `json:"createdAt"`
	UpdatedAt              string               `json:"updatedAt"`
}

// IdentitySuggestion is an identity fact awaiting the user's review.
type IdentitySuggestion struct {
	Field      string  `json:"field"`
	Value      string  `json:"value"`
	Confidence float64 `json:"confidence"`
	SourceHint string  `json:"sourceHint"`
	// ExtractedAt is when the suggestion was made (RFC 3339).
	ExtractedAt string `json:"extractedAt"`
}

// WritingStyle is how the user writes; Analyzed says it was measured.
type WritingStyle struct {
	Tone           string   `json:"tone"`
	SentenceLength string   `json:"sentenceLength"`
	Vocabulary     string   `json:"vocabulary"`
	Structure      string   `json:"structure"`
	Samples        []string `json:"samples"`
	Analyzed       bool     `json:"analyzed"`
}

// Brand is the user's visual identity for generated documents.
type Brand struct {
	CompanyName     string      `json:"companyName"`
	PrimaryColor    string      `json:"primaryColor"`
	SecondaryColor  string      `json:"secondaryColor"`
	AccentColor     string      `json:"accentColor"`
	FontHeading     string      `json:"fontHeading"`
	FontBody        string      `json:"fontBody"`
	LogoDescription string      `json:"logoDescription"`
	Styles          BrandStyles `json:"styles"`
	Analyzed        bool        `json:"analyzed"`
}

// BrandStyles are per-format document styles.
type BrandStyles struct {
	Docx DocStyle `json:"docx"`
	Pptx DocStyle `json:"pptx"`
	PDF  DocStyle `json:"pdf"`
	Xlsx DocStyle `json:"xlsx"`
}

// DocStyle is one format's style; each format uses its own keys (the
// original's), the rest stay empty and are not written.
type DocStyle struct {
	Margins      string `json:"margins,omitempty"`
	HeaderStyle  string `json:"headerStyle,omitempty"`
	Layout       string `json:"layout,omitempty"`
	ColorScheme  string `json:"colorScheme,omitempty"`
	CoverPage    string `json:"coverPage,omitempty"`
	ReportStyle  string `json:"reportStyle,omitempty"`
	HeaderFormat string `json:"headerFormat,omitempty"`
	ChartColors  string `json:"chartColors,omitempty"`
	Notes        string `json:"notes"`
}

// DefaultBrandPrimary is the default brand colour; a profile whose primary
// colour differs was set by the user.
const DefaultBrandPrimary = "#D4A84B"

// DefaultProfile is the profile of a user who saved none (the original's
// defaults); created and updated are left empty.
func DefaultProfile() Profile {
	return Profile{
		IdentitySuggestions: []IdentitySuggestion{},
		WritingStyle:        WritingStyle{Tone: "professional", SentenceLength: "medium", Vocabulary: "moderate", Structure: "mixed", Samples: []string{}},
		Brand: Brand{
			PrimaryColor: DefaultBrandPrimary, SecondaryColor: "#1a1a1a", AccentColor: "#3b82f6",
			FontHeading: "Inter", FontBody: "Inter",
			Styles: BrandStyles{
				Docx: DocStyle{Margins: "normal", HeaderStyle: "bold"},
				Pptx: DocStyle{Layout: "16:9", ColorScheme: "dark"},
				PDF:  DocStyle{CoverPage: "standard", ReportStyle: "professional"},
				Xlsx: DocStyle{HeaderFormat: "bold-bordered", ChartColors: "brand"},
			},
		},
		Interests:          []string{},
		CommunicationStyle: "balanced",
		Language:           "en",
		Timezone:           "UTC",
	}
}

// ProfileUpdate is PUT /api/profile: a partial profile. A field that is
// absent or null keeps its value; writingStyle, brand and brand.styles
// merge field by field (the original's rule).
type ProfileUpdate struct {
	Name                   *string               `json:"name,omitempty"`
	Role                   *string               `json:"role,omitempty"`
	Company                *string               `json:"company,omitempty"`
	Industry               *string               `json:"industry,omitempty"`
	Bio                    *string               `json:"bio,omitempty"`
	AvatarURL              *string               `json:"avatarUrl,omitempty"`
	IdentitySuggestions    *[]IdentitySuggestion `json:"identitySuggestions,omitempty"`
	WritingStyle           *WritingStyleUpdate   `json:"writingStyle,omitempty"`
	Brand                  *BrandUpdate          `json:"brand,omitempty"`
	Interests              *[]string             `json:"interests,omitempty"`
	CommunicationStyle     *string               `json:"communicationStyle,omitempty"`
	Language               *string               `json:"language,omitempty"`
	Timezone               *string               `json:"timezone,omitempty"`
	QuestionnaireCompleted *bool                 `json:"questionnaireCompleted,omitempty"`
	// CreatedAt and UpdatedAt are accepted (the web app sends back what it
	// read) and ignored: the store keeps its own.
	CreatedAt *string `json:"createdAt,omitempty"`
	UpdatedAt *string `json:"updatedAt,omitempty"`
}

// WritingStyleUpdate is a partial WritingStyle.
type WritingStyleUpdate struct {
	Tone           *string   `json:"tone,omitempty"`
	SentenceLength *string   `json:"sentenceLength,omitempty"`
	Vocabulary     *string   `json:"vocabulary,omitempty"`
	Structure      *string   `json:"structure,omitempty"`
	Samples        *[]string `json:"samples,omitempty"`
	Analyzed       *bool     `json:"analyzed,omitempty"`
}

// BrandUpdate is a partial Brand; Styles replaces only the formats it names.
type BrandUpdate struct {
	CompanyName     *string `json:"companyName,omitempty"`
	PrimaryColor    *string `json:"primaryColor,omitempty"`
	SecondaryColor  *string `json:"secondaryColor,omitempty"`
	AccentColor     *string `json:"accentColor,omitempty"`
	FontHeading     *string `json:"fontHeading,omitempty"`
	FontBody        *string `json:"fontBody,omitempty"`
	LogoDescription *string `json:"logoDescription,omitempty"`
	Styles          *struct {
		Docx *DocStyle `json:"docx,omitempty"`
		Pptx *DocStyle `json:"pptx,omitempty"`
		PDF  *DocStyle `json:"pdf,omitempty"`
		Xlsx *DocStyle `json:"xlsx,omitempty"`
	} `json:"styles,omitempty"`
	Analyzed *bool `json:"analyzed,omitempty"`
}

// Profile text limits: a profile is prompt material, not a document store.
const (
	MaxProfileField   = 2000
	MaxProfileList    = 50
	MaxProfileSamples = 10
)

// Apply merges u into p and returns the result, or an Invalid error naming
// the first field over its limit.
func (u ProfileUpdate) Apply(p Profile) (Profile, error) {
	set(&p.Name, u.Name)
	set(&p.Role, u.Role)
	set(&p.Company, u.Company)
	set(&p.Industry, u.Industry)
	set(&p.Bio, u.Bio)
	set(&p.AvatarURL, u.AvatarURL)
	set(&p.IdentitySuggestions, u.IdentitySuggestions)
	set(&p.Interests, u.Interests)
	set(&p.CommunicationStyle, u.CommunicationStyle)
	set(&p.Language, u.Language)
	set(&p.Timezone, u.Timezone)
	set(&p.QuestionnaireCompleted, u.QuestionnaireCompleted)
	if w := u.WritingStyle; w != nil {
		set(&p.WritingStyle.Tone, w.Tone)
		set(&p.WritingStyle.SentenceLength, w.SentenceLength)
		set(&p.WritingStyle.Vocabulary, w.Vocabulary)
		set(&p.WritingStyle.Structure, w.Structure)
		set(&p.WritingStyle.Samples, w.Samples)
		set(&p.WritingStyle.Analyzed, w.Analyzed)
	}
	if b := u.Brand; b != nil {
		set(&p.Brand.CompanyName, b.CompanyName)
		set(&p.Brand.PrimaryColor, b.PrimaryColor)
		set(&p.Brand.SecondaryColor, b.SecondaryColor)
		set(&p.Brand.AccentColor, b.AccentColor)
		set(&p.Brand.FontHeading, b.FontHeading)
		set(&p.Brand.FontBody, b.FontBody)
		set(&p.Brand.LogoDescription, b.LogoDescription)
		set(&p.Brand.Analyzed, b.Analyzed)
		if s := b.Styles; s != nil {
			set(&p.Brand.Styles.Docx, s.Docx)
			set(&p.Brand.Styles.Pptx, s.Pptx)
			set(&p.Brand.Styles.PDF, s.PDF)
			set(&p.Brand.Styles.Xlsx, s.Xlsx)
		}
	}
	if p.IdentitySuggestions == nil {
		p.IdentitySuggestions = []IdentitySuggestion{}
	}
	if p.Interests == nil {
		p.Interests = []string{}
	}
	if p.WritingStyle.Samples == nil {
		p.WritingStyle.Samples = []string{}
	}
	return p, p.check()
}

func set[T any](dst *T, v *T) {
	if v != nil {
		*dst = *v
	}
}

// check enforces the text limits.
func (p Profile) check() error {
	fields := map[string]string{
		"name": p.Name, "role": p.Role, "company": p.Company, "industry": p.Industry, "bio": p.Bio,
		"avatarUrl": p.AvatarURL, "communicationStyle": p.CommunicationStyle, "language": p.Language,
		"timezone": p.Timezone, "brand.logoDescription": p.Brand.LogoDescription,
	}
	for name, v := range fields {
		if len(v) > MaxProfileField {
			return Errorf(Invalid, "profile %s is longer than %d bytes", name, MaxProfileField)
		}
	}
	if len(p.Interests) > MaxProfileList || len(p.IdentitySuggestions) > MaxProfileList {
		return Errorf(Invalid, "profile lists hold at most %d entries", MaxProfileList)
	}
	if len(p.WritingStyle.Samples) > MaxProfileSamples {
		return Errorf(Invalid, "profile writingStyle.samples holds at most %d samples", MaxProfileSamples)
	}
	for _, s := range append(append([]string{}, p.Interests...), p.WritingStyle.Samples...) {
		if len(s) > MaxProfileField {
			return Errorf(Invalid, "profile entries are at most %d bytes", MaxProfileField)
		}
	}
	return nil
}

// ProfileRequest names whose profile: User on a team server, "" locally.
type ProfileRequest struct {
	User string `json:"user,omitempty"`
}

// ProfileUpdateRequest merges Update into User's profile.
type ProfileUpdateRequest struct {
	User   string        `json:"user,omitempty"`
	Update ProfileUpdate `json:"update"`
	// AddSample appends a writing sample (the newest MaxProfileSamples are kept),
	// under the same lock as the update: POST /api/profile/analyze-style
	// keeps the text it analysed without reading the profile first.
	AddSample string `json:"addSample,omitempty"`
}

// Profile analyses (POST /api/profile/analyze-style, /analyze-brand,
// /research): the kinds of ProfileAnalysisRequest.
const (
	AnalyzeStyle = "style"
	AnalyzeBrand = "brand"
	AnalyzeBio   = "bio"
)

// Sizes of what a profile analysis reads (the original's).
const (
	MinStyleSample   = 50
	StyleSampleChars = 1500
	KeptSampleChars  = 2000
	BrandTextChars   = 2000
)

// ProfileAnalysisRequest asks a turn runner's model to read a writing
// sample (Kind AnalyzeStyle, Text), a brand description (AnalyzeBrand,
// Text) or the profile (AnalyzeBio, Profile) once.
type ProfileAnalysisRequest struct {
	Kind    string   `json:"kind"`
	Text    string   `json:"text,omitempty"`
	Profile *Profile `json:"profile,omitempty"`
}

// ProfileAnalysis is what the model found, already checked: style values
// from the allowed lists, hex colours, short one-line fonts, a bounded bio.
// Fields it did not give (or gave wrong) are nil / empty.
type ProfileAnalysis struct {
	WritingStyle *WritingStyleUpdate `json:"writingStyle,omitempty"`
	Brand        *BrandUpdate        `json:"brand,omitempty"`
	Bio          string              `json:"bio,omitempty"`
}

// IdentityLine is the profile's identity as one line ("Name: Ada. Role:
// CTO"), "" when none is set.
func (p Profile) IdentityLine() string {
	var parts []string
	for _, kv := range [][2]string{{"Name", p.Name}, {"Role", p.Role}, {"Company", p.Company}, {"Industry", p.Industry}} {
		if v := strings.TrimSpace(kv[1]); v != "" {
			parts = append(parts, kv[0]+": "+v)
		}
	}
	return strings.Join(parts, ". ")
}

// WorkspaceNowRequest asks for a workspace's current state. Only the
// workspace's own frames count: personal frames never reach a briefing
// another team member could read.
type WorkspaceNowRequest struct {
	Workspace string `json:"workspace"`
	// ExceptSession leaves a session out of the briefing: a turn's own
	// conversation is not one of its workspace's other threads.
	ExceptSession string `json:"exceptSession,omitempty"`
}

// WorkspaceNow is a workspace's current state (the original's
// GET /api/workspaces/:id/context shape): what it is about, its recent
// threads and decisions, suggested prompts and counts. The agent's system
// prompt, /catchup and /now show it.
type WorkspaceNow struct {
	Workspace         WorkspaceBrief  `json:"workspace"`
	Summary           string          `json:"summary"`
	RecentThreads     []ThreadBrief   `json:"recentThreads"`
	RecentDecisions   []DatedText     `json:"recentDecisions"`
	SuggestedPrompts  []string        `json:"suggestedPrompts"`
	RecentMemories    []MemoryBrief   `json:"recentMemories"`
	ProgressItems     []ProgressItem  `json:"progressItems"`
	Stats             WorkspaceCounts `json:"stats"`
	LastActive        string          `json:"lastActive"`
	Greeting          string          `json:"greeting"`
	PendingTasks      []string        `json:"pendingTasks"`
	UpcomingSchedules []string        `json:"upcomingSchedules"`
	NextActions       []string        `json:"nextActions"`
}

// WorkspaceBrief names the workspace a WorkspaceNow describes.
type WorkspaceBrief struct {
	ID        string `json:"id"`
	Name      string `json:"name"`
	Group     string `json:"group,omitempty"`
	Model     string `json:"model,omitempty"`
	Directory string `json:"directory,omitempty"`
	PersonaID string `json:"personaId,omitempty"`
}

// ThreadBrief is one recent session.
type ThreadBrief struct {
	ID         string `json:"id"`
	Title      string `json:"title"`
	LastActive string `json:"lastActive"`
}

// DatedText is a line with the day it was recorded (YYYY-MM-DD).
type DatedText struct {
	Content string `json:"content"`
	Date    string `json:"date"`
}

// MemoryBrief is a frame as the briefing shows it.
type MemoryBrief struct {
	Content    string `json:"content"`
	Importance string `json:"importance"`
	Date       string `json:"date"`
}

// ProgressItem is a task, blocker or completed item found in the
// workspace's frames.
type ProgressItem struct {
	Type    string `json:"type"`
	Content string `json:"content"`
	Date    string `json:"date"`
}

// WorkspaceCounts are a workspace's sizes.
type WorkspaceCounts struct {
	MemoryCount  int `json:"memoryCount"`
	SessionCount int `json:"sessionCount"`
	FileCount    int `json:"fileCount"`
}

// CustomPersona is a persona the user made (the original's shape, without
// the model preference's effect: the workspace or request picks the
// model). Locally there is one set; on a team server each user has theirs.
type CustomPersona struct {
	ID                string   `json:"id"`
	Name              string   `json:"name"`
	Description       string   `json:"description"`
	Icon              string   `json:"icon"`
	SystemPrompt      string   `json:"systemPrompt"`
	ModelPreference   string   `json:"modelPreference"`
	Tools             []string `json:"tools"`
	WorkspaceAffinity []string `json:"workspaceAffinity"`
	SuggestedCommands []string `json:"suggestedCommands"`
	DefaultWorkflow   *string  `json:"defaultWorkflow"`
	IsReadOnly        bool     `json:"isReadOnly"`
}

// CustomPersonaWrite is the body of POST /api/personas (name and
// systemPrompt required) and PATCH /api/personas/{id} (any subset).
type CustomPersonaWrite struct {
	ID                *string   `json:"id,omitempty"`
	Name              *string   `json:"name,omitempty"`
	Description       *string   `json:"description,omitempty"`
	Icon              *string   `json:"icon,omitempty"`
	SystemPrompt      *string   `json:"systemPrompt,omitempty"`
	ModelPreference   *string   `json:"modelPreference,omitempty"`
	Tools             *[]string `json:"tools,omitempty"`
	WorkspaceAffinity *[]string `json:"workspaceAffinity,omitempty"`
	SuggestedCommands *[]string `json:"suggestedCommands,omitempty"`
	DefaultWorkflow   *string   `json:"defaultWorkflow,omitempty"`
	IsReadOnly        *bool     `json:"isReadOnly,omitempty"`
}

// Custom persona limits.
const (
	MaxCustomPersonas   = 50
	MaxPersonaPrompt    = 16000
	MaxPersonaField     = 500
	MaxPersonaListItems = 50
)

// Apply merges w into p and checks the result's limits.
func (w CustomPersonaWrite) Apply(p CustomPersona) (CustomPersona, error) {
	set(&p.Name, w.Name)
	set(&p.Description, w.Description)
	set(&p.Icon, w.Icon)
	set(&p.SystemPrompt, w.SystemPrompt)
	set(&p.ModelPreference, w.ModelPreference)
	set(&p.Tools, w.Tools)
	set(&p.WorkspaceAffinity, w.WorkspaceAffinity)
	set(&p.SuggestedCommands, w.SuggestedCommands)
	set(&p.IsReadOnly, w.IsReadOnly)
	if w.DefaultWorkflow != nil {
		p.DefaultWorkflow = w.DefaultWorkflow
	}
	for _, l := range []*[]string{&p.Tools, &p.WorkspaceAffinity, &p.SuggestedCommands} {
		if *l == nil {
			*l = []string{}
		}
		if len(*l) > MaxPersonaListItems {
			return p, Errorf(Invalid, "persona lists hold at most %d entries", MaxPersonaListItems)
		}
		for _, v := range *l {
			if len(v) > MaxPersonaField {
				return p, Errorf(Invalid, "persona list entries are at most %d bytes", MaxPersonaField)
			}
		}
	}
	if strings.TrimSpace(p.Name) == "" || strings.TrimSpace(p.SystemPrompt) == "" {
		return p, Errorf(Invalid, "name and systemPrompt are required")
	}
	if len(p.SystemPrompt) > MaxPersonaPrompt {
		return p, Errorf(Invalid, "systemPrompt is longer than %d bytes", MaxPersonaPrompt)
	}
	for _, v := range []string{p.Name, p.Description, p.Icon, p.ModelPreference} {
		if len(v) > MaxPersonaField {
			return p, Errorf(Invalid, "persona fields are at most %d bytes", MaxPersonaField)
		}
	}
	return p, nil
}

// PersonasRequest names whose custom personas: Team's shared set when
// Team is set, else User's own (User on a team server; the one local set
// otherwise).
type PersonasRequest struct {
	User string `json:"user,omitempty"`
	// Team is a team id the caller was authorized for (members read,
	// admins write its set).
	Team string `json:"team,omitempty"`
}

// PersonaRequest names one custom persona: in Team's set when Team is
// set; else in User's own set, then — when Workspace is set — in the set
// of the team that workspace belongs to (a turn runs its team's shared
// personas; the workspace was authorized for User).
type PersonaRequest struct {
	User      string `json:"user,omitempty"`
	Team      string `json:"team,omitempty"`
	Workspace string `json:"workspace,omitempty"`
	ID        string `json:"id"`
}

// PersonaWriteRequest creates (ID empty: from the body's id or the name)
// or updates (ID set) a custom persona in Team's set when Team is set,
// else in User's own.
type PersonaWriteRequest struct {
	User  string             `json:"user,omitempty"`
	Team  string             `json:"team,omitempty"`
	ID    string             `json:"id,omitempty"`
	Write CustomPersonaWrite `json:"write"`
}

// CustomPersonaList is a user's custom personas, oldest first.
type CustomPersonaList struct {
	Personas []CustomPersona `json:"personas"`
}

// Identity is who the agent is in one mind (the original's identity
// record): the personal mind's, or a workspace's. Configured is false,
// and the rest null, until one is saved.
type Identity struct {
	Configured   bool    `json:"configured"`
	Name         *string `json:"name"`
	Role         *string `json:"role"`
	Department   *string `json:"department"`
	Personality  *string `json:"personality"`
	Capabilities *string `json:"capabilities"`
	SystemPrompt *string `json:"system_prompt"`
	CreatedAt    *string `json:"created_at"`
	UpdatedAt    *string `json:"updated_at"`
}

// IdentityWrite is the body of POST /api/identity: the record's fields
// (missing ones are saved empty, as the original), and the mind.
type IdentityWrite struct {
	Workspace    *string `json:"workspace,omitempty"`
	WorkspaceID  *string `json:"workspaceId,omitempty"`
	Name         string  `json:"name,omitempty"`
	Role         string  `json:"role,omitempty"`
	Department   string  `json:"department,omitempty"`
	Personality  string  `json:"personality,omitempty"`
	Capabilities string  `json:"capabilities,omitempty"`
	SystemPrompt string  `json:"system_prompt,omitempty"`
}

// MaxIdentityField bounds each identity field.
const MaxIdentityField = 4000

// MindRef names one mind: Workspace's, or (Workspace empty) the personal
// mind of User ("" locally).
type MindRef struct {
	Workspace string `json:"workspace,omitempty"`
	User      string `json:"user,omitempty"`
}

// IdentitySetRequest saves a mind's identity.
type IdentitySetRequest struct {
	MindRef
	Write IdentityWrite `json:"write"`
}

// Awareness categories (the original's).
const (
	AwarenessTask    = "task"
	AwarenessAction  = "action"
	AwarenessPending = "pending"
	AwarenessFlag    = "flag"
)

// AwarenessItem is one thing the agent keeps in mind: a task, a recent
// action, a pending item or a context flag.
type AwarenessItem struct {
	ID        int     `json:"id"`
	Category  string  `json:"category"`
	Content   string  `json:"content"`
	Priority  int     `json:"priority"`
	Metadata  string  `json:"metadata"`
	CreatedAt string  `json:"created_at"`
	ExpiresAt *string `json:"expires_at"`
}

// AwarenessList is a mind's live items, highest priority first (at most
// 10, as the original shows).
type AwarenessList struct {
	Items []AwarenessItem `json:"items"`
}

// AwarenessAddRequest adds an item to a mind's awareness.
type AwarenessAddRequest struct {
	MindRef
	Category string `json:"category"`
	Content  string `json:"content"`
	Priority int    `json:"priority"`
}

// IdentityContext is the identity as the original's toContext lines, ""
// when none is configured.
func (id Identity) IdentityContext() string {
	if !id.Configured {
		return ""
	}
	var lines []string
	for _, kv := range []struct {
		label string
		v     *string
	}{{"Name", id.Name}, {"Role", id.Role}, {"Department", id.Department}, {"Personality", id.Personality}, {"Capabilities", id.Capabilities}, {"System Prompt", id.SystemPrompt}} {
		if kv.v != nil && strings.TrimSpace(*kv.v) != "" {
			lines = append(lines, kv.label+": "+strings.TrimSpace(*kv.v))
		}
	}
	return strings.Join(lines, "\n")
}

// AwarenessContext is the items grouped by category (the original's
// toContext), or "No active awareness items.".
func AwarenessContext(items []AwarenessItem) string {
	labels := []struct{ cat, label string }{{AwarenessTask, "Active Tasks"}, {AwarenessAction, "Recent Actions"}, {AwarenessPending, "Pending Items"}, {AwarenessFlag, "Context Flags"}}
	var sections []string
	for _, l := range labels {
		var lines []string
		for _, it := range items {
			if it.Category == l.cat {
				lines = append(lines, "- "+it.Content)
			}
		}
		if len(lines) > 0 {
			sections = append(sections, l.label+":\n"+strings.Join(lines, "\n"))
		}
	}
	if len(sections) == 0 {
		return "No active awareness items."
	}
	return strings.Join(sections, "\n\n")
}
