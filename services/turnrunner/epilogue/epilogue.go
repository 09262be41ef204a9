// Package epilogue is what a finished agent reply gets appended before it
// is stored and sent (reference §1.9 (8)–(9)): a regulated persona's
// disclaimer, then the hint to schedule recurring work.
package epilogue

import (
	"strings"

	"github.com/waggle-os/core/services/turnrunner/prefilter"
)

// Regulated personas get a disclaimer under replies that are about their
// domain (reference §1.9 (9); keyword lists from the original).
var (
	regulatedKeywords = map[string][]string{
		"hr-manager":         {"policy", "employment", "termination", "onboarding", "compliance", "leave", "compensation", "benefits", "grievance", "disciplinary"},
		"legal-professional": {"contract", "clause", "liability", "jurisdiction", "compliance", "regulation", "statute", "litigation", "agreement", "indemnity"},
		"finance-owner":      {"budget", "revenue", "forecast", "invoice", "tax", "profit", "loss", "roi", "valuation", "investment", "cash flow"},
	}
	regulatedDisclaimers = map[string]string{
		"hr-manager":         "\n\n---\n*This is general HR guidance, not legal advice. Consult your legal team for binding decisions.*",
		"legal-professional": "\n\n---\n*This is AI-assisted legal analysis, not legal advice. This does not create an attorney-client relationship. Consult a licensed attorney for binding legal guidance.*",
		"finance-owner":      "\n\n---\n*Financial figures are estimates based on available data. Verify with your accountant or financial advisor before making decisions.*",
	}
	disclaimerPhrases = []string{"not legal advice", "attorney-client", "verify with your accountant", "financial advisor", "legal team"}
	// recurringWork reads the whole reply: the prefilter skips replies
	// without its words (the regexp alone cost a long reply milliseconds).
	recurringWork = prefilter.MustCompile(`(?i)\b(every\s+day|daily|weekly|every\s+week|each\s+morning|every\s+morning|regularly|recurring|scheduled?|every\s+month|monthly)\b`)
)

// scheduleHint is appended to replies about recurring work.
const scheduleHint = "\n\n💡 *Want this to run automatically? Use /schedule or ask me to set up a recurring task.*"

// Disclaimer is the text appended to content for persona: its disclaimer
// when at least two of its domain keywords occur (case-insensitive
// substrings) and the content carries no disclaimer already; else "".
func Disclaimer(persona, content string) string {
	keywords, ok := regulatedKeywords[persona]
	if !ok || content == "" {
		return ""
	}
	lower := strings.ToLower(content)
	hits := 0
	for _, k := range keywords {
		if strings.Contains(lower, k) {
			hits++
		}
	}
	if hits < 2 {
		return ""
	}
	for _, p := range disclaimerPhrases {
		if strings.Contains(lower, p) {
			return ""
		}
	}
	return regulatedDisclaimers[persona]
}

// ScheduleHint is the text appended to content that talks about recurring
// work when no scheduling tool was used this turn; else "".
func ScheduleHint(content string, toolsUsed []string) string {
	if content == "" {
		return ""
	}
	for _, t := range toolsUsed {
		if strings.Contains(t, "schedule") || strings.Contains(t, "cron") {
			return ""
		}
	}
	if recurringWork.MatchString(content) {
		return scheduleHint
	}
	return ""
}

// Final is the reply as stored and sent in done: content (what the model
// streamed), then persona's disclaimer, then the schedule hint unless
// toolsUsed scheduled something. They are not streamed as tokens (as in
// the original).
func Final(persona, content string, toolsUsed []string) string {
	c := content
	c += Disclaimer(persona, c)
	return c + ScheduleHint(c, toolsUsed)
}
