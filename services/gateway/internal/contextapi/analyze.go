package contextapi

import (
	"context"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/waggle-os/core/libs/bus"
	"github.com/waggle-os/core/libs/protocol"
	"github.com/waggle-os/core/services/gateway/internal/forward"
	"github.com/waggle-os/core/services/gateway/internal/respond"
)

// The profile's analyses (the original's analyze-style, analyze-brand and
// research): a turn runner's model reads what the caller gives, the
// runner keeps only values of the allowed shapes, and the result is
// merged into the caller's own profile. Who: as PUT /api/profile (the
// local client; on a team server the signed-in user, for their own
// profile). Reach: the configured model server only, with text the
// caller sent or their own profile.

// analysisWait is how long a route waits for the model's answer (the
// runner gives up at 90 s).
const analysisWait = 100 * time.Second

// analyze asks a runner for req's analysis; on failure it answers the
// request and reports false.
func (a api) analyze(w http.ResponseWriter, r *http.Request, req protocol.ProfileAnalysisRequest) (protocol.ProfileAnalysis, bool) {
	ctx, cancel := context.WithTimeout(r.Context(), analysisWait)
	defer cancel()
	rep, err := bus.Call(ctx, a.d.NC, protocol.AnalyzeProfile, req)
	if err != nil {
		respond.Error(w, a.d.Log, err)
		return rep, false
	}
	return rep, true
}

// save merges update (and a writing sample) into the caller's profile.
func (a api) save(w http.ResponseWriter, r *http.Request, update protocol.ProfileUpdate, sample string) (protocol.Profile, bool) {
	return forward.Call(a.d, w, r, protocol.UpdateProfile, protocol.ProfileUpdateRequest{User: user(r), Update: update, AddSample: sample})
}

// POST /api/profile/analyze-style {text} → {writingStyle}
func (a api) analyzeStyle(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Text string `json:"text"`
	}
	if err := a.strict(w, r, "request", &body); err != nil {
		respond.Error(w, a.d.Log, err)
		return
	}
	if utf8.RuneCountInString(body.Text) < protocol.MinStyleSample {
		respond.Error(w, a.d.Log, &respond.RequestError{Kind: protocol.Invalid, Message: "Provide at least 50 characters of sample text"})
		return
	}
	rep, ok := a.analyze(w, r, protocol.ProfileAnalysisRequest{Kind: protocol.AnalyzeStyle, Text: body.Text})
	if !ok {
		return
	}
	p, ok := a.save(w, r, protocol.ProfileUpdate{WritingStyle: rep.WritingStyle}, keptSample(body.Text))
	if ok {
		respond.JSON(w, http.StatusOK, struct {
			WritingStyle protocol.WritingStyle `json:"writingStyle"`
		}{p.WritingStyle})
	}
}

// keptSample is the part of a sample the profile keeps: the original's
// first 2,000 characters, within the profile's field limit.
func keptSample(s string) string {
	if utf8.RuneCountInString(s) > protocol.KeptSampleChars {
		s = string([]rune(s)[:protocol.KeptSampleChars])
	}
	for len(s) > protocol.MaxProfileField {
		_, size := utf8.DecodeLastRuneInString(s)
		s = s[:len(s)-size]
	}
	return s
}

// POST /api/profile/analyze-brand {description} → {brand}
func (a api) analyzeBrand(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Description string `json:"description"`
	}
	if err := a.strict(w, r, "request", &body); err != nil {
		respond.Error(w, a.d.Log, err)
		return
	}
	if strings.TrimSpace(body.Description) == "" {
		respond.Error(w, a.d.Log, &respond.RequestError{Kind: protocol.Invalid, Message: "Provide a brand description or paste brand guide text"})
		return
	}
	rep, ok := a.analyze(w, r, protocol.ProfileAnalysisRequest{Kind: protocol.AnalyzeBrand, Text: body.Description})
	if !ok {
		return
	}
	p, ok := a.save(w, r, protocol.ProfileUpdate{Brand: rep.Brand}, "")
	if ok {
		respond.JSON(w, http.StatusOK, struct {
			Brand protocol.Brand `json:"brand"`
		}{p.Brand})
	}
}

// POST /api/profile/research → {bio, researched}: a short bio written from
// the profile's name, role, company and industry.
func (a api) research(w http.ResponseWriter, r *http.Request) {
	var body struct{}
	if err := a.strict(w, r, "request", &body); err != nil {
		respond.Error(w, a.d.Log, err)
		return
	}
	p, ok := forward.Call(a.d, w, r, protocol.GetProfile, protocol.ProfileRequest{User: user(r)})
	if !ok {
		return
	}
	if p.Name == "" && p.Company == "" {
		respond.Error(w, a.d.Log, &respond.RequestError{Kind: protocol.Invalid, Message: "Set name or company first before researching"})
		return
	}
	rep, ok := a.analyze(w, r, protocol.ProfileAnalysisRequest{Kind: protocol.AnalyzeBio, Profile: &p})
	if !ok {
		return
	}
	if p, ok = a.save(w, r, protocol.ProfileUpdate{Bio: &rep.Bio}, ""); ok {
		respond.JSON(w, http.StatusOK, struct {
			Bio        string `json:"bio"`
			Researched bool   `json:"researched"`
		}{p.Bio, true})
	}
}
