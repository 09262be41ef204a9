package command

import (
	"encoding/json"
	"os"
	"path/filepath"
)

// webSearchConfigured reports whether config.json in dataDir names a web
// search provider the turn runner would offer web_search for: searxng
// with a url, brave or tavily with an apiKey (the runner's rule,
// tools.WebSearchConfig.Check, read again here because services share no
// code). A missing or unreadable file reads as not configured.
func webSearchConfigured(dataDir string) bool {
	b, err := os.ReadFile(filepath.Join(dataDir, "config.json"))
	if err != nil {
		return false
	}
	var cfg struct {
		WebSearch struct {
			Provider string `json:"provider"`
			URL      string `json:"url"`
			APIKey   string `json:"apiKey"`
		} `json:"webSearch"`
	}
	if json.Unmarshal(b, &cfg) != nil {
		return false
	}
	ws := cfg.WebSearch
	switch ws.Provider {
	case "searxng":
		return ws.URL != ""
	case "brave", "tavily":
		return ws.APIKey != ""
	}
	return false
}
