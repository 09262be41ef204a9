package sessionstore

import (
	"errors"
	"flag"
	"fmt"
	"time"
)

// Store names for Config.Store.
const (
	// StoreJSONL keeps personal workspaces in JSONL files (the default);
	// team workspaces go to PostgreSQL when PostgresURL is set.
	StoreJSONL = "jsonl"
	// StorePostgres keeps every workspace in PostgreSQL.
	StorePostgres = "postgres"
)

// Config configures the session store.
type Config struct {
	// DataDir is the root of all stored data (sessions under
	// <DataDir>/workspaces/<ws>/sessions). Required.
	DataDir string
	// Concurrency bounds requests served at once. Default 64.
	Concurrency int
	// Location renders dates in session exports. Default: time.Local.
	Location *time.Location
	// PostgresURL (--postgres-url) is the PostgreSQL holding team
	// workspaces (those created with a teamId); the composition root gives
	// the approval service the same. Empty (default): no PostgreSQL, every
	// workspace is JSONL. Migrations are applied at start.
	PostgresURL string
	// Replicas is the replica count of the store's JetStream buckets.
	// Default 1.
	Replicas int
	// Store (--store) is StoreJSONL (default, also "": personal
	// workspaces in JSONL files) or StorePostgres (every workspace in
	// PostgreSQL; needs PostgresURL).
	Store string
	// LLMURL is the OpenAI-compatible base URL whose POST /embeddings
	// gives the minds their vectors (the composition root gives it the
	// runner's --llm-url); empty: keyword search only. LLMAPIKey is its
	// bearer key.
	LLMURL    string
	LLMAPIKey string
	// EmbedRetry is how long embedding rests after the provider failed
	// (default 30s); tests shorten it.
	EmbedRetry time.Duration
}

// RegisterFlags registers the session store's flags on fs, with their
// defaults.
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	fs.StringVar(&c.PostgresURL, "postgres-url", "", "PostgreSQL URL for team workspaces")
	fs.StringVar(&c.Store, "store", StoreJSONL, "jsonl (personal workspaces in JSONL files, team workspaces in PostgreSQL when --postgres-url is set) or postgres (everything in PostgreSQL)")
}

// Validate reports settings that cannot work; no defaults are filled.
func (c Config) Validate() error {
	switch c.Store {
	case "", StoreJSONL:
	case StorePostgres:
		if c.PostgresURL == "" {
			return errors.New("sessionstore: --store=postgres needs --postgres-url (WAGGLE_POSTGRES_URL)")
		}
	default:
		return fmt.Errorf("sessionstore: --store must be %q or %q, not %q", StoreJSONL, StorePostgres, c.Store)
	}
	return nil
}

// withDefaults is c with every unset field that has a default filled in.
func (c Config) withDefaults() Config {
	if c.Concurrency <= 0 {
		c.Concurrency = 64
	}
	if c.Store == "" {
		c.Store = StoreJSONL
	}
	return c
}

// prepare checks c and fills its defaults for Start.
func (c *Config) prepare() error {
	if c.DataDir == "" {
		return errors.New("sessionstore: DataDir is required")
	}
	if err := c.Validate(); err != nil {
		return err
	}
	*c = c.withDefaults()
	return nil
}
