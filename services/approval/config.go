package approval

import (
	"errors"
	"flag"
	"time"

	"github.com/waggle-os/core/libs/flagext"
	"github.com/waggle-os/core/libs/protocol"
)

// Config configures the approval service.
type Config struct {
	// DataDir is the data directory; grants live in
	// <DataDir>/approval-grants.json unless PostgresURL is set. Required.
	DataDir string
	// PostgresURL, when set, keeps the grants in that PostgreSQL database
	// instead of the file; the composition root gives it the session
	// store's --postgres-url. Default "": the file.
	PostgresURL string
	// Timeout (--approval-timeout) is how long an approval waits for a
	// human before it is denied as timed out; the composition root gives
	// the runner's gate the same. Default protocol.DefaultApprovalTimeout.
	Timeout time.Duration
	// SweepInterval is how often stale approvals are timed out and old
	// decisions removed. Default Timeout/4, between 50ms and 1s.
	SweepInterval time.Duration
	// Retention is how long a decided entry stays in the bucket, so a runner
	// that was reconnecting still reads its decision. Default 10m.
	Retention time.Duration
	// Bucket shapes the pending-approval KV bucket.
	Bucket BucketConfig
	// Now is the clock. Default time.Now.
	Now func() time.Time
}

// BucketConfig shapes protocol.BucketApprovals.
type BucketConfig struct {
	// Replicas is the bucket's replica count on a cluster. Default 1.
	Replicas int
	// Memory keeps the bucket in memory. Default false: approvals are state
	// that must survive a NATS restart, so they are on disk.
	Memory bool
}

// RegisterFlags registers the approval service's flags on fs, with their
// defaults.
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	flagext.DurationVar(fs, &c.Timeout, "approval-timeout", protocol.DefaultApprovalTimeout, "how long a tool approval waits for a human before it is denied as timed out")
}

// Validate reports settings that cannot work; no defaults are filled.
func (c Config) Validate() error {
	if c.Timeout < 0 {
		return errors.New("approval: the approval timeout must not be negative (--approval-timeout)")
	}
	if c.SweepInterval < 0 || c.Retention < 0 {
		return errors.New("approval: durations must not be negative")
	}
	return nil
}

// withDefaults is c with every unset field that has a default filled in.
func (c Config) withDefaults() Config {
	if c.Timeout == 0 {
		c.Timeout = protocol.DefaultApprovalTimeout
	}
	if c.SweepInterval == 0 {
		c.SweepInterval = min(max(c.Timeout/4, 50*time.Millisecond), time.Second)
	}
	if c.Retention == 0 {
		c.Retention = 10 * time.Minute
	}
	if c.Bucket.Replicas <= 0 {
		c.Bucket.Replicas = 1
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}

// prepare checks c and fills its defaults for Start.
func (c *Config) prepare() error {
	if c.DataDir == "" {
		return errors.New("approval: DataDir is required")
	}
	if err := c.Validate(); err != nil {
		return err
	}
	*c = c.withDefaults()
	return nil
}
