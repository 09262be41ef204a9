// Package turnrunner runs chat turns: it takes a turn over NATS, loads and
// persists history through the session store, chooses echo mode, a slash
// command or the agent loop, and publishes the turn's events to JetStream
// for any gateway to relay.
package turnrunner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/waggle-os/core/libs/bus"
	"github.com/waggle-os/core/libs/llmprobe"
	"github.com/waggle-os/core/libs/protocol"
	"github.com/waggle-os/core/services/turnrunner/agent"
	"github.com/waggle-os/core/services/turnrunner/approvalgate"
	"github.com/waggle-os/core/services/turnrunner/tools"
)

// Config configures the turn runner.
type Config struct {
	// DataDir is the data directory (workspace files, config.json). Required.
	DataDir string
	// LLMURL is the OpenAI-compatible base URL including /v1.
	// Default http://localhost:4000/v1.
	LLMURL string
	// LLMAPIKey is sent as a bearer token to the model server (optional).
	LLMAPIKey string
	// EchoDelay is the pause between echo-mode tokens. Default 15ms, as the
	// original; 0 streams as fast as possible.
	EchoDelay time.Duration
	// EchoDelaySet marks EchoDelay as explicitly configured (so 0 is kept).
	EchoDelaySet bool
	// Probe configures the model-server availability probe (URL and key
	// are taken from LLMURL and LLMAPIKey).
	Probe llmprobe.Config
	// Stream shapes the turn-event stream.
	Stream bus.TurnStreamConfig
	// MaxTurns bounds turns running at once on this runner. Default 256.
	MaxTurns int
	// StoreTimeout bounds one session-store request. Default 10s.
	StoreTimeout time.Duration

	// DisableBash leaves the bash tool out of the agent's tool set (team
	// servers). Default false: local mode offers bash.
	DisableBash bool
	// BashTimeout is a bash command's time limit when the model asks for
	// none. Default 30s (tools.DefaultBashTimeout).
	BashTimeout time.Duration
	// BashMaxTimeout caps the time limit a model may ask for. Default 10m.
	BashMaxTimeout time.Duration
	// BashOutputLimit caps the bash output returned to the model, in bytes.
	// Default 64 KiB.
	BashOutputLimit int
	// ReadFileLimit is the most bytes read_file returns in one call.
	// Default 256 KiB.
	ReadFileLimit int64

	// AgentMaxSteps bounds the model calls of one agent turn. Default 25.
	AgentMaxSteps int
	// ModelRetries is how often a failing model call (429, 5xx, timeout,
	// refused connection) is retried before the fallback model. Default 3.
	ModelRetries int
	// ModelRetryBackoff is the first retry's wait, doubled per retry (a
	// short Retry-After from the server wins). Default 1s.
	ModelRetryBackoff time.Duration
	// ModelHeaderTimeout bounds the wait for a model's response headers.
	// Default 2m.
	ModelHeaderTimeout time.Duration
	// ModelConfigCheck is how often <DataDir>/config.json is checked for
	// changes (it is re-read only when it changed). Default 2s.
	ModelConfigCheck time.Duration

	// Approval configures each turn's tool-approval gate (timeout default 5m).
	Approval approvalgate.Config
}

// Validate checks c and fills defaults.
func (c *Config) Validate() error {
	if c.DataDir == "" {
		return errors.New("turnrunner: DataDir is required")
	}
	if c.LLMURL == "" {
		c.LLMURL = "http://localhost:4000/v1"
	}
	u, err := url.Parse(c.LLMURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("turnrunner: LLM URL %q must be an http(s) URL such as http://localhost:4000/v1", c.LLMURL)
	}
	c.LLMURL = strings.TrimRight(c.LLMURL, "/")
	if !c.EchoDelaySet && c.EchoDelay == 0 {
		c.EchoDelay = 15 * time.Millisecond
	}
	if c.EchoDelay < 0 {
		return errors.New("turnrunner: echo delay must not be negative")
	}
	c.Probe.URL, c.Probe.APIKey = c.LLMURL, c.LLMAPIKey
	if err := c.Probe.Validate(); err != nil {
		return err
	}
	if c.MaxTurns <= 0 {
		c.MaxTurns = 256
	}
	if c.StoreTimeout <= 0 {
		c.StoreTimeout = 10 * time.Second
	}
	if c.BashTimeout <= 0 {
		c.BashTimeout = tools.DefaultBashTimeout
	}
	if c.BashMaxTimeout <= 0 {
		c.BashMaxTimeout = max(tools.DefaultBashMaxTimeout, c.BashTimeout)
	}
	if c.BashOutputLimit <= 0 {
		c.BashOutputLimit = tools.DefaultBashOutputLimit
	}
	if c.ReadFileLimit <= 0 {
		c.ReadFileLimit = tools.DefaultReadLimit
	}
	if c.AgentMaxSteps <= 0 {
		c.AgentMaxSteps = agent.DefaultMaxSteps
	}
	if c.ModelRetries <= 0 {
		c.ModelRetries = agent.DefaultMaxRetries
	}
	if c.ModelRetryBackoff <= 0 {
		c.ModelRetryBackoff = agent.DefaultRetryBackoff
	}
	if c.ModelHeaderTimeout <= 0 {
		c.ModelHeaderTimeout = agent.DefaultResponseHeaderTimeout
	}
	if c.ModelConfigCheck <= 0 {
		c.ModelConfigCheck = 2 * time.Second
	}
	if err := c.toolsConfig().Validate(); err != nil {
		return fmt.Errorf("turnrunner: %w", err)
	}
	return c.agentConfig().Validate()
}

// toolsConfig is the built-in tools' configuration: local-mode defaults
// with the limits of c.
func (c *Config) toolsConfig() tools.Config {
	tc := tools.DefaultConfig()
	tc.EnableBash = !c.DisableBash
	tc.BashTimeout, tc.BashMaxTimeout, tc.BashOutputLimit = c.BashTimeout, c.BashMaxTimeout, c.BashOutputLimit
	tc.ReadLimit = c.ReadFileLimit
	return tc
}

func (c *Config) agentConfig() agent.Config {
	return agent.Config{
		BaseURL: c.LLMURL, APIKey: c.LLMAPIKey, MaxSteps: c.AgentMaxSteps, MaxRetries: c.ModelRetries,
		RetryBackoff: c.ModelRetryBackoff, ResponseHeaderTimeout: c.ModelHeaderTimeout,
	}
}

// Service is the turn-runner service.
type Service struct {
	cfg  Config
	dial bus.Dialer
	log  *slog.Logger

	nc     *nats.Conn
	js     jetstream.JetStream
	svc    *bus.Service
	ctlSub *nats.Subscription
	probe  *llmprobe.Prober
	agent  *agent.Agent
	tools  *tools.Registry
	models *modelConfigCache

	mu    sync.Mutex
	turns map[string]*turn
	wg    sync.WaitGroup // running turns
	slots chan struct{}
}

// New returns an unstarted runner.
func New(cfg Config, dial bus.Dialer, log *slog.Logger) *Service {
	if log == nil {
		log = slog.Default()
	}
	return &Service{cfg: cfg, dial: dial, log: log.With("service", "turn-runner"), turns: map[string]*turn{}}
}

// Start connects, makes sure the turn stream exists and starts taking turns.
func (s *Service) Start(ctx context.Context) error {
	if err := s.cfg.Validate(); err != nil {
		return err
	}
	s.probe = llmprobe.New(s.cfg.Probe)
	ag, err := agent.New(s.cfg.agentConfig())
	if err != nil {
		return fmt.Errorf("turnrunner: %w", err)
	}
	s.agent = ag
	s.tools = tools.NewRegistry(s.cfg.toolsConfig())
	s.models = newModelConfigCache(s.cfg.DataDir, s.cfg.ModelConfigCheck, s.log)
	s.slots = make(chan struct{}, s.cfg.MaxTurns)
	nc, err := s.dial(protocol.ServiceTurnRunner)
	if err != nil {
		return err
	}
	s.nc = nc
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(4096))
	if err != nil {
		s.Stop(ctx)
		return fmt.Errorf("turnrunner: jetstream: %w", err)
	}
	s.js = js
	if _, err := bus.EnsureTurnStream(ctx, js, s.cfg.Stream); err != nil {
		s.Stop(ctx)
		return err
	}
	// Control messages reach whichever runner owns the turn; one wildcard
	// subscription per runner instead of one per turn.
	s.ctlSub, err = nc.Subscribe(protocol.SubjTurnControlAll, s.onControl)
	if err != nil {
		s.Stop(ctx)
		return fmt.Errorf("turnrunner: subscribe control: %w", err)
	}
	svc, err := bus.NewService(nc, bus.ServiceConfig{Name: protocol.ServiceTurnRunner, Logger: s.log})
	if err != nil {
		s.Stop(ctx)
		return err
	}
	s.svc = svc
	if err := bus.AddEndpoint(svc, "start", protocol.SubjTurnStart, s.startTurn); err != nil {
		s.Stop(ctx)
		return err
	}
	// bus.AddEndpoint flushed the subscription: the first chat after
	// start-up finds this runner.
	return nil
}

// Stop takes no new turns, lets running turns finish until ctx is done,
// then cancels the rest (each persists what it produced) and waits for
// them.
func (s *Service) Stop(ctx context.Context) error {
	var errs []error
	if s.svc != nil {
		errs = append(errs, s.svc.Stop(ctx))
	}
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		s.mu.Lock()
		for _, t := range s.turns {
			t.cancel(errShutdown)
		}
		s.mu.Unlock()
		<-done
	}
	if s.ctlSub != nil {
		_ = s.ctlSub.Unsubscribe()
	}
	if s.nc != nil {
		errs = append(errs, s.nc.Drain())
	}
	return errors.Join(errs...)
}

var (
	errShutdown   = errors.New("runner shutting down")
	errClientGone = errors.New("client disconnected")
	errCancelled  = errors.New("cancelled")
)

func (s *Service) startTurn(_ context.Context, req protocol.TurnRequest) (protocol.TurnStarted, error) {
	if req.TurnID == "" {
		req.TurnID = protocol.NewUUID()
	}
	if !protocol.ValidID(req.TurnID) || !protocol.ValidID(req.Workspace) || !protocol.ValidID(req.Session) {
		return protocol.TurnStarted{}, protocol.Errorf(400, "invalid turn, workspace or session id")
	}
	if req.Message == "" {
		return protocol.TurnStarted{}, protocol.Errorf(400, "message is required")
	}
	select {
	case s.slots <- struct{}{}:
	default:
		return protocol.TurnStarted{}, (&protocol.Error{Status: 503, Message: "The server is busy. Try again in a moment."}).WithCode("RUNNER_BUSY")
	}
	ctx, cancel := context.WithCancelCause(context.Background())
	t := &turn{svc: s, req: req, ctx: ctx, cancel: cancel, pub: newPublisher(s.js, req.TurnID)}
	s.mu.Lock()
	s.turns[req.TurnID] = t
	s.wg.Add(1)
	s.mu.Unlock()
	go func() {
		defer func() {
			s.mu.Lock()
			delete(s.turns, req.TurnID)
			s.mu.Unlock()
			cancel(nil)
			<-s.slots
			s.wg.Done()
		}()
		t.run()
	}()
	return protocol.TurnStarted{TurnID: req.TurnID}, nil
}

func (s *Service) onControl(m *nats.Msg) {
	id := m.Subject[strings.LastIndexByte(m.Subject, '.')+1:]
	var ctl protocol.TurnControlMsg
	if err := json.Unmarshal(m.Data, &ctl); err != nil {
		return
	}
	s.mu.Lock()
	t := s.turns[id]
	s.mu.Unlock()
	if t == nil {
		return
	}
	switch ctl.Action {
	case protocol.ControlCancel:
		t.cancel(errCancelled)
	case protocol.ControlDetach:
		// The last follower left: with no resume grace, the turn stops at
		// once (the original's behaviour).
		t.cancel(errClientGone)
	}
}

// storeRequest is a session-store request bounded by StoreTimeout. It uses
// a context detached from the turn's cancellation: persisting what a
// cancelled turn produced must still happen.
func storeRequest[Rep any](s *Service, subject string, req any) (Rep, error) {
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.StoreTimeout)
	defer cancel()
	return bus.Request[Rep](ctx, s.nc, subject, req)
}
