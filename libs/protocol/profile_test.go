package protocol

import (
	"strings"
	"testing"
)

func TestProfileUpdateMerges(t *testing.T) {
	name, tone, margins := "Ada", "casual", "wide"
	u := ProfileUpdate{Name: &name, WritingStyle: &WritingStyleUpdate{Tone: &tone}}
	u.Brand = &BrandUpdate{}
	u.Brand.Styles = &struct {
		Docx *DocStyle `json:"docx,omitempty"`
		Pptx *DocStyle `json:"pptx,omitempty"`
		PDF  *DocStyle `json:"pdf,omitempty"`
		Xlsx *DocStyle `json:"xlsx,omitempty"`
	}{Docx: &DocStyle{Margins: margins}}
	p, err := u.Apply(DefaultProfile())
	if err != nil {
		t.Fatal(err)
	}
	if p.Name != "Ada" || p.WritingStyle.Tone != "casual" || p.WritingStyle.Vocabulary != "moderate" ||
		p.Brand.Styles.Docx.Margins != "wide" || p.Brand.Styles.Pptx.Layout != "16:9" || p.Brand.PrimaryColor != DefaultBrandPrimary {
		t.Errorf("merged %+v", p)
	}
	if p.IdentityLine() != "Name: Ada" {
		t.Errorf("identity line %q", p.IdentityLine())
	}
	long := strings.Repeat("x", MaxProfileField+1)
	if _, err := (ProfileUpdate{Bio: &long}).Apply(DefaultProfile()); KindOf(err) != Invalid {
		t.Errorf("over-long bio: %v", err)
	}
	many := make([]string, MaxProfileList+1)
	if _, err := (ProfileUpdate{Interests: &many}).Apply(DefaultProfile()); KindOf(err) != Invalid {
		t.Errorf("too many interests: %v", err)
	}
}

func TestCustomPersonaWrite(t *testing.T) {
	name, prompt := "Critic", "Find flaws."
	p, err := CustomPersonaWrite{Name: &name, SystemPrompt: &prompt}.Apply(CustomPersona{})
	if err != nil || p.Tools == nil || p.WorkspaceAffinity == nil {
		t.Fatalf("%+v %v", p, err)
	}
	if _, err := (CustomPersonaWrite{Name: &name}).Apply(CustomPersona{}); KindOf(err) != Invalid {
		t.Errorf("no prompt: %v", err)
	}
	long := strings.Repeat("p", MaxPersonaPrompt+1)
	if _, err := (CustomPersonaWrite{Name: &name, SystemPrompt: &long}).Apply(CustomPersona{}); KindOf(err) != Invalid {
		t.Errorf("long prompt: %v", err)
	}
}

func TestAwarenessContext(t *testing.T) {
	if got := AwarenessContext(nil); got != "No active awareness items." {
		t.Errorf("empty %q", got)
	}
	got := AwarenessContext([]AwarenessItem{{Category: AwarenessFlag, Content: "f"}, {Category: AwarenessTask, Content: "a"}, {Category: AwarenessTask, Content: "b"}})
	if got != "Active Tasks:\n- a\n- b\n\nContext Flags:\n- f" {
		t.Errorf("grouped %q", got)
	}
	s := func(v string) *string { return &v }
	if got := (Identity{Configured: true, Name: s("Bee"), Role: s(""), Department: s("Ops")}).IdentityContext(); got != "Name: Bee\nDepartment: Ops" {
		t.Errorf("identity %q", got)
	}
}
