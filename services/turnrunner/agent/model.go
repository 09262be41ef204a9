package agent

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/waggle-os/core/libs/jsonpos"
	"github.com/waggle-os/core/libs/protocol"
	"github.com/waggle-os/core/services/turnrunner/tools"
)

// DefaultModel is the model used when neither the request, the workspace
// nor config.json names one.
const DefaultModel = "claude-sonnet-4-6"

// DefaultBudgetThreshold is the share of the daily budget at which turns
// switch to the budget model.
const DefaultBudgetThreshold = 0.8

// ModelConfig is the model part of `<dataDir>/config.json`.
type ModelConfig struct {
	// DefaultModel is used when neither the request nor the workspace names
	// a model; empty means DefaultModel.
	DefaultModel string `json:"defaultModel,omitempty"`
	// FallbackModel is tried once when the chosen model keeps failing.
	FallbackModel string `json:"fallbackModel,omitempty"`
	// BudgetModel is the cheap model used past the budget threshold and,
	// through smart routing, for simple messages.
	BudgetModel string `json:"budgetModel,omitempty"`
	// BudgetThreshold is the share of DailyBudget that triggers the budget
	// model; 0 means DefaultBudgetThreshold.
	BudgetThreshold float64 `json:"budgetThreshold,omitempty"`
	// DailyBudget in dollars; 0 disables the budget switch.
	DailyBudget float64 `json:"dailyBudget,omitempty"`
	// Prices override or extend DefaultPrices, per model.
	Prices map[string]Price `json:"prices,omitempty"`
	// APIKeys is the credential pool for the model server, used in order
	// and rotated on 401/429; empty means the single WAGGLE_LLM_API_KEY.
	// Secrets: never log a ModelConfig.
	APIKeys []string `json:"apiKeys,omitempty"`
	// GEPA switches prompt expansion of a vague first message: absent
	// means on exactly when BudgetModel is set (the cheap model answers
	// it); true turns it on (the turn's model answers without a budget
	// model); false turns it off.
	GEPA *bool `json:"gepa,omitempty"`
	// Compression tunes context compression (on when BudgetModel is set).
	Compression Compression `json:"compression,omitempty"`
	// WebSearch is the provider web_search asks; zero: the tool is not
	// offered. Its APIKey is a secret too.
	WebSearch tools.WebSearchConfig `json:"webSearch,omitempty"`
}

// Compression is config.json's `compression` object; zero fields take
// the CompressOptions defaults.
type Compression struct {
	MaxContextTokens int     `json:"maxContextTokens,omitempty"`
	Threshold        float64 `json:"threshold,omitempty"`
	HeadMessages     int     `json:"headMessages,omitempty"`
	TailTokens       int     `json:"tailTokens,omitempty"`
}

// GEPAEnabled reports whether GEPA may run (see ModelConfig.GEPA).
func (mc ModelConfig) GEPAEnabled() bool {
	if mc.GEPA != nil {
		return *mc.GEPA
	}
	return mc.BudgetModel != ""
}

// LoadModelConfig reads `<dataDir>/config.json`. A missing file is the
// zero config; an unreadable or malformed one is reported (with the zero
// config, so a caller may go on with defaults).
func LoadModelConfig(dataDir string) (ModelConfig, error) {
	path := filepath.Join(dataDir, "config.json")
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return ModelConfig{}, nil
	}
	if err != nil {
		return ModelConfig{}, fmt.Errorf("agent: read model config %s: %w", path, err)
	}
	var mc ModelConfig
	if err := json.Unmarshal(b, &mc); err != nil {
		return ModelConfig{}, fmt.Errorf("%s is invalid: %w", path, jsonpos.Annotate(b, err))
	}
	return mc, nil
}

func (mc ModelConfig) threshold() float64 {
	if mc.BudgetThreshold > 0 {
		return mc.BudgetThreshold
	}
	return DefaultBudgetThreshold
}

// ModelChoice is the outcome of model resolution for one turn.
type ModelChoice struct {
	// Model is the model to call.
	Model string
	// Primary is the model the turn asked for before any switch.
	Primary string
	// SwitchReason is set when the budget switched Model away from Primary;
	// the turn announces it with a model_switch event.
	SwitchReason string
	// Fallback is tried once when Model keeps failing; empty disables it.
	Fallback string
}

// ResolveModel picks a turn's model: the request's model, else the
// workspace's, else config.json's default, else DefaultModel. Past the
// daily budget threshold (spentToday is the dollars spent today) it
// switches to the budget model and says why; otherwise a configured budget
// model silently takes simple messages (smart routing).
func ResolveModel(mc ModelConfig, requestModel, workspaceModel, message string, spentToday float64) ModelChoice {
	primary := firstNonEmpty(requestModel, workspaceModel, mc.DefaultModel, DefaultModel)
	c := ModelChoice{Model: primary, Primary: primary, Fallback: mc.FallbackModel}
	switch {
	case mc.DailyBudget > 0 && mc.BudgetModel != "" && spentToday/mc.DailyBudget >= mc.threshold():
		c.Model = mc.BudgetModel
		c.SwitchReason = fmt.Sprintf("Budget %d%% reached ($%.2f/$%.2f)",
			int(jsRound(mc.threshold()*100)), spentToday, mc.DailyBudget)
	case mc.BudgetModel != "" && IsSimpleMessage(message):
		c.Model = mc.BudgetModel
	}
	return c
}

var (
	complexWords = regexp.MustCompile(`(?i)\b(debug|error|fix|refactor|implement|architect|design|analyze|review|migrate|deploy|build|test|create|generate|write|develop|configure|setup|install)\b`)
	urlPattern   = regexp.MustCompile(`https?://`)
)

// IsSimpleMessage reports whether smart routing may send message to the
// budget model: at most 500 characters and 80 words, no backtick, no URL,
// fewer than 3 newlines and none of the words that signal real work.
func IsSimpleMessage(message string) bool {
	return protocol.UTF16Len(message) <= 500 &&
		len(strings.Fields(message)) <= 80 &&
		!strings.Contains(message, "`") &&
		!urlPattern.MatchString(message) &&
		strings.Count(message, "\n") < 3 &&
		!complexWords.MatchString(message)
}

// Price is a model's price in dollars per 1K tokens.
type Price struct {
	Input  float64 `json:"input"`
	Output float64 `json:"output"`
}

// DefaultPrices are the per-1K-token prices of the original; a model not
// listed is priced like claude-sonnet-4-6.
var DefaultPrices = map[string]Price{
	"claude-sonnet-4-6":          {Input: 0.003, Output: 0.015},
	"claude-sonnet-4-20250514":   {Input: 0.003, Output: 0.015},
	"claude-haiku-3-5":           {Input: 0.00025, Output: 0.00125},
	"claude-3-5-haiku-20241022":  {Input: 0.00025, Output: 0.00125},
	"claude-opus-4-6":            {Input: 0.015, Output: 0.075},
	"claude-3-5-sonnet-20241022": {Input: 0.003, Output: 0.015},
}

// Cost is the dollar cost of a turn's tokens on model, rounded to 1e-6.
// overrides (config.json prices) win over DefaultPrices.
func Cost(model string, inputTokens, outputTokens int, overrides map[string]Price) float64 {
	p, ok := overrides[model]
	if !ok {
		p, ok = DefaultPrices[model]
	}
	if !ok {
		p = DefaultPrices[DefaultModel]
	}
	c := float64(inputTokens)/1000*p.Input + float64(outputTokens)/1000*p.Output
	return jsRound(c*1e6) / 1e6
}

// jsRound is JavaScript's Math.round (halves round up).
func jsRound(x float64) float64 { return math.Floor(x + 0.5) }

func firstNonEmpty(ss ...string) string {
	for _, s := range ss {
		if s != "" {
			return s
		}
	}
	return ""
}
