package command

import (
	"errors"
	"time"
)

// Config configures the command service.
type Config struct {
	// DataDir is the data directory. Required.
	DataDir string
	// Replicas is the replica count of the group-jobs bucket
	// (--nats-replicas). Default 1.
	Replicas int
	// RequestTimeout bounds one request to another service (memory search,
	// group lookup, starting a turn). Default 10s.
	RequestTimeout time.Duration
	// StepTimeout bounds one member turn of a group run; the turn is
	// cancelled when it passes. Default 10m.
	StepTimeout time.Duration
	// JobTTL is how long a finished or unfinished group job stays
	// readable. Default 7 days.
	JobTTL time.Duration
	// MaxHandoff bounds, in bytes, the previous output handed to the next
	// member of a run. Default 16000.
	MaxHandoff int
}

// withDefaults is c with every unset field that has a default filled in.
func (c Config) withDefaults() Config {
	if c.RequestTimeout <= 0 {
		c.RequestTimeout = 10 * time.Second
	}
	if c.StepTimeout <= 0 {
		c.StepTimeout = 10 * time.Minute
	}
	if c.JobTTL <= 0 {
		c.JobTTL = 7 * 24 * time.Hour
	}
	if c.MaxHandoff <= 0 {
		c.MaxHandoff = 16000
	}
	return c
}

// prepare checks c and fills its defaults for Start. The command service
// has no flags (so no RegisterFlags or Validate): every field's zero value
// takes its default.
func (c *Config) prepare() error {
	if c.DataDir == "" {
		return errors.New("command: DataDir is required")
	}
	*c = c.withDefaults()
	return nil
}
