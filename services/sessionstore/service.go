// Package sessionstore is the session-store service: the system of record
// for sessions (JSONL files under the data dir), their history and tool
// events, answered over NATS. No other service reads the files.
package sessionstore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/waggle-os/core/libs/bus"
	"github.com/waggle-os/core/libs/pgerr"
	"github.com/waggle-os/core/libs/protocol"
	"github.com/waggle-os/core/services/sessionstore/acceptedturns"
	"github.com/waggle-os/core/services/sessionstore/frames"
	"github.com/waggle-os/core/services/sessionstore/graph"
	"github.com/waggle-os/core/services/sessionstore/groups"
	"github.com/waggle-os/core/services/sessionstore/knowledge"
	"github.com/waggle-os/core/services/sessionstore/ledger"
	"github.com/waggle-os/core/services/sessionstore/lifecycle"
	"github.com/waggle-os/core/services/sessionstore/pgstore"
	"github.com/waggle-os/core/services/sessionstore/settings"
	"github.com/waggle-os/core/services/sessionstore/teams"
	"github.com/waggle-os/core/services/sessionstore/userdocs"
	"github.com/waggle-os/core/services/sessionstore/vault"
	"github.com/waggle-os/core/services/sessionstore/workflows"
)

// Service is the session-store service.
type Service struct {
	cfg   Config
	dial  bus.Dialer
	log   *slog.Logger
	store Store
	pg    *pgstore.Store // nil without PostgresURL
	minds *frames.Minds
	// knowledge is the minds' knowledge graph (its extraction worker).
	knowledge *knowledge.Knowledge
	// lifecycle ages and strengthens frames (one leader on a cluster).
	lifecycle *lifecycle.Worker
	// frames is the minds' backend (the lifecycle worker's too).
	frames frames.Backend
	// settings is the one reader and writer of config.json: the bus
	// endpoints, knowledge extraction and the embedding model read it.
	settings *settings.Store
	// vault keeps the API keys saved from the app (each team's on a team
	// server).
	vault *vault.Vault
	// docs keeps profiles, custom personas, identities and awareness
	// (set by registerContext).
	docs userdocs.Store
	// startsCache keeps the starts of long conversations for Workspace
	// Now's progress (progress.go).
	startsCache transcriptCache
	// nows keeps Workspace Now's briefings until what they were built
	// from changes (nowcache.go).
	nows nowCache
	// ledger is the usage ledger (set by register).
	ledger *ledger.Ledger
	// teams authorizes users on team workspaces (nil without PostgreSQL).
	teams *teams.Teams
	// turns is the journal of accepted turns not yet answered
	// (acceptedturns.go), open while the service serves.
	turns *acceptedturns.Journal

	nc     *nats.Conn
	svc    *bus.Service
	single *bus.Singleton // held while JSONL files are served
	// storage watches the data dir's disk: a write that fails for lack of
	// space (or a disk nearly full) is reported on the bus until space is
	// freed. Nil with --store=postgres.
	storage *bus.StorageGuard
}

// New returns an unstarted service.
func New(cfg Config, dial bus.Dialer, log *slog.Logger) *Service {
	if log == nil {
		log = slog.Default()
	}
	return &Service{cfg: cfg, dial: dial, log: log.With("service", "session-store")}
}

// Start checks the data dir is writable, connects and serves.
func (s *Service) Start(ctx context.Context) error {
	if err := s.cfg.prepare(); err != nil {
		return err
	}
	if err := checkWritable(filepath.Join(s.cfg.DataDir, "workspaces")); err != nil {
		return err
	}
	// A config.json that cannot be read stops the start with its line and
	// column; later bad edits keep the last good one (settings.Store).
	if err := settings.CheckFile(s.cfg.DataDir); err != nil {
		return fmt.Errorf("sessionstore: %w", err)
	}
	st, err := settings.New(settings.Config{DataDir: s.cfg.DataDir, Log: s.log,
		Changed: func() { s.publishSettingsChange(false) }})
	if err != nil {
		return fmt.Errorf("sessionstore: %w", err)
	}
	s.settings = st
	files := NewFiles(s.cfg.DataDir, s.cfg.Location, s.log)
	var team Store
	if s.cfg.PostgresURL != "" {
		s.pg = pgstore.New(pgstore.Config{URL: s.cfg.PostgresURL, Location: s.cfg.Location, Logger: s.log})
		if err := s.pg.Open(ctx); err != nil {
			s.pg = nil
			return err
		}
		team = s.pg
	}
	s.store = NewRouter(files, team, s.cfg.Store == StorePostgres)
	if err := s.openMinds(ctx); err != nil {
		s.closePG()
		return err
	}
	if err := s.store.EnsureDefault(ctx); err != nil {
		s.closePG()
		return fmt.Errorf("sessionstore: default workspace: %w", err)
	}
	nc, err := s.dial(protocol.ServiceSessionStore)
	if err != nil {
		s.closePG()
		return err
	}
	if s.cfg.Store != StorePostgres {
		// JSONL files have one writer: a second store on this bus would
		// split the sessions between two data dirs (or race on one).
		js, err := jetstream.New(nc)
		if err == nil {
			s.single, err = bus.AcquireSingleton(ctx, js, "session-store-jsonl", bus.Holder("session-store"), s.cfg.Replicas, s.log)
		}
		if err != nil {
			nc.Close()
			s.closePG()
			return fmt.Errorf("sessionstore: %w", err)
		}
	}
	if s.cfg.Store != StorePostgres {
		s.storage = bus.NewStorageGuard(nc, bus.StorageGuardConfig{Source: "session-store", Dir: s.cfg.DataDir, Logger: s.log})
		s.storage.Start()
	}
	// The journal is opened by the one store that serves this data dir
	// (the JSONL singleton is held by now).
	s.turns = acceptedturns.New(s.cfg.DataDir)
	if err := s.turns.OpenFile(); err != nil {
		s.storage.Stop()
		s.single.Release(ctx)
		nc.Close()
		s.closePG()
		return fmt.Errorf("sessionstore: %w", err)
	}
	svc, err := bus.NewService(nc, bus.ServiceConfig{Name: protocol.ServiceSessionStore, Concurrency: s.cfg.Concurrency, Logger: s.log, Storage: s.storage,
		// A PostgreSQL outage answers 503 STORE_UNAVAILABLE, not 500; the
		// pool reconnects by itself when the server is back.
		MapError: pgerr.Classify})
	if err != nil {
		_ = s.turns.CloseFile()
		s.storage.Stop()
		s.single.Release(ctx)
		nc.Close()
		s.closePG()
		return err
	}
	s.nc, s.svc = nc, svc
	if err := s.register(ctx); err != nil {
		s.Stop(ctx)
		return err
	}
	if s.pg != nil {
		// Teams, roles, tokens and policies live next to the team
		// workspaces; a workspace's team is read from its doc.
		tm, err := teams.New(teams.Config{Pool: s.pg.Pool(), Conn: s.nc,
			Workspaces:       teams.WorkspaceTeamsFunc(s.workspaceTeam),
			DefaultWorkspace: s.createTeamWorkspace,
			// A deleted team's shared personas and vault go with it: a
			// team created later under the same id starts without them.
			Deleted: func(ctx context.Context, team string) error {
				return errors.Join(s.docs.Delete(ctx, personasKey("", team)), s.vault.DeleteTeam(ctx, team))
			}}, s.log)
		if err == nil {
			err = teams.Migrate(ctx, s.pg.Pool(), s.log)
		}
		if err == nil {
			err = tm.Register(s.svc)
		}
		if err != nil {
			s.Stop(ctx)
			return fmt.Errorf("sessionstore: teams: %w", err)
		}
		s.teams = tm
	}
	if err := s.openBacklog(ctx); err != nil {
		s.Stop(ctx)
		return err
	}
	s.startLifecycle(ctx)
	// bus.Handle flushed each subscription: the store is reachable
	// when Start returns.
	return nil
}

// openBacklog gives the knowledge worker its JetStream backlog: texts a
// stopped store had not extracted are extracted now, and this store's go
// there when it stops.
func (s *Service) openBacklog(ctx context.Context) error {
	js, err := jetstream.New(s.nc)
	if err != nil {
		return fmt.Errorf("sessionstore: %w", err)
	}
	b, err := knowledge.OpenBacklog(ctx, js, s.cfg.Replicas)
	if err != nil {
		return fmt.Errorf("sessionstore: %w", err)
	}
	s.knowledge.UseBacklog(b)
	return nil
}

// startLifecycle runs the memory lifecycle worker. With JSONL files this
// process is already the only store; with PostgreSQL the store processes
// elect one by a bus lease.
func (s *Service) startLifecycle(ctx context.Context) {
	cfg := lifecycle.Config{Backend: s.frames, DataDir: s.cfg.DataDir, Logger: s.log, Sessions: s.sessionDigests}
	if s.cfg.Store == StorePostgres {
		nc, replicas, log := s.nc, s.cfg.Replicas, s.log
		cfg.Lead = func(ctx context.Context) (func(), error) {
			js, err := jetstream.New(nc)
			if err != nil {
				return nil, err
			}
			l, err := bus.AcquireSingleton(ctx, js, "memory-lifecycle", bus.Holder("session-store"), replicas, log)
			if err != nil {
				return nil, err
			}
			return func() { l.Release(context.WithoutCancel(ctx)) }, nil
		}
	}
	s.lifecycle = lifecycle.New(cfg)
	s.lifecycle.Start(ctx)
}

// sessionDigests is the lifecycle's session source: every workspace's
// sessions active since, read without writing (each workspace's from the
// store holding it, so a session is distilled into its own workspace's
// mind only).
func (s *Service) sessionDigests(ctx context.Context, since time.Time) ([]lifecycle.Session, error) {
	wss, err := s.store.ListWorkspaces(ctx)
	if err != nil {
		return nil, err
	}
	var out []lifecycle.Session
	for _, d := range wss {
		ws := d.Workspace().ID
		infos, err := s.store.SessionDigests(ctx, ws, since)
		if err != nil {
			return out, err
		}
		for _, info := range infos {
			out = append(out, lifecycle.Session{Workspace: ws, Info: info})
		}
	}
	return out, nil
}

func (s *Service) register(ctx context.Context) error {
	// With PostgreSQL the usage ledger and agent groups live there too, so
	// every store process of a team server shares them; with personal
	// workspaces in the data dir, their personal part stays there.
	var pool *pgxpool.Pool
	if s.pg != nil {
		pool = s.pg.Pool()
	}
	v, err := vault.New(vault.Config{DataDir: s.cfg.DataDir, Pool: pool, AllInPool: s.cfg.Store == StorePostgres,
		WorkspaceTeam: s.workspaceTeam, Changed: func() { s.publishSettingsChange(true) }})
	if err != nil {
		return err
	}
	s.vault = v
	s.ledger, err = ledger.Open(s.ledgerConfig(pool), s.log)
	if err != nil {
		return err
	}
	return errors.Join(
		bus.Handle(s.svc, protocol.ReadHistory, s.history),
		bus.Handle(s.svc, protocol.AppendToSession, s.append),
		bus.Handle(s.svc, protocol.EvictSession, s.clear),
		bus.Handle(s.svc, protocol.RecordTurn, s.recordTurn),
		bus.Handle(s.svc, protocol.CloseTurn, s.closeTurnRequest),
		bus.Handle(s.svc, protocol.OpenTurns, s.openTurns),
		s.minds.Register(s.svc),
		s.knowledge.Register(s.svc),
		bus.Handle(s.svc, protocol.GetWorkspace, s.workspaceGet),
		bus.Handle(s.svc, protocol.ListWorkspaces, s.workspaceList),
		bus.Handle(s.svc, protocol.GetWorkspaceDoc, s.workspaceDoc),
		bus.Handle(s.svc, protocol.CreateWorkspace, s.workspaceCreate),
		bus.Handle(s.svc, protocol.UpdateWorkspace, s.workspaceUpdate),
		bus.Handle(s.svc, protocol.DeleteWorkspace, s.workspaceDelete),
		bus.Handle(s.svc, protocol.SetWorkspaceMCPServers, s.workspaceMCPSet),
		bus.Handle(s.svc, protocol.ListSessions, s.sessionList),
		bus.Handle(s.svc, protocol.SearchSessions, s.sessionSearch),
		bus.Handle(s.svc, protocol.ExportSession, s.sessionExport),
		bus.Handle(s.svc, protocol.GetTimeline, s.sessionTimeline),
		bus.Handle(s.svc, protocol.CreateSession, s.sessionCreate),
		bus.Handle(s.svc, protocol.BranchSession, s.sessionBranch),
		bus.Handle(s.svc, protocol.RenameSession, s.sessionRename),
		bus.Handle(s.svc, protocol.DeleteSession, s.sessionDelete),
		bus.Handle(s.svc, protocol.SummarizeSession, s.sessionSummary),
		s.ledger.Register(s.svc),
		// A team's agent groups in PostgreSQL, a group of no team (the
		// local owner's or the operator's) in the data dir.
		groups.Register(s.svc, groups.Config{DataDir: s.cfg.DataDir, Pool: pool, Split: pool != nil && s.cfg.Store != StorePostgres}, s.log),
		workflows.Register(s.svc, s.workflowsConfig(pool), s.log),
		s.registerContext(pool),
		settings.Register(s.svc, s.settings),
		vault.Register(ctx, s.svc, s.vault, s.log),
	)
}

// workflowsConfig places the captured workflows as the workspaces: with
// PostgreSQL for team workspaces only, a personal workspace's stay in its
// directory (docroute.go's rule).
func (s *Service) workflowsConfig(pool *pgxpool.Pool) workflows.Config {
	cfg := workflows.Config{DataDir: s.cfg.DataDir, Pool: pool}
	if pool != nil && s.cfg.Store != StorePostgres {
		cfg.IsTeam, cfg.Personal = s.pg.WorkspaceExists, s.personalWorkspace
	}
	return cfg
}

// ledgerConfig splits the usage ledger as the workspaces are: with
// PostgreSQL for team workspaces only, a personal workspace's usage lines
// stay in the data dir (docroute.go's rule).
func (s *Service) ledgerConfig(pool *pgxpool.Pool) ledger.Config {
	cfg := ledger.Config{DataDir: s.cfg.DataDir, Pool: pool}
	if pool != nil && s.cfg.Store != StorePostgres {
		cfg.IsTeam, cfg.Personal = s.pg.WorkspaceExists, s.personalWorkspace
	}
	return cfg
}

// workspaceTeam is the team of workspace id ("" for none).
func (s *Service) workspaceTeam(ctx context.Context, id string) (string, error) {
	d, err := s.store.GetWorkspace(ctx, id)
	if err != nil {
		return "", err
	}
	return d.Workspace().TeamID, nil
}

// publishSettingsChange tells the runners that config.json or the vault
// changed, so the next turn uses the new model settings or key. A lost
// message costs at most the runners' cache interval.
func (s *Service) publishSettingsChange(vaultChanged bool) {
	if err := bus.Publish(s.nc, protocol.SettingsChanges, protocol.SettingsChanged{Vault: vaultChanged}); err != nil {
		s.log.Warn("publish settings change", "err", err)
	}
}

// Stop stops serving, finishes running requests (their writes are
// fsynced before they answer) and closes the connection.
func (s *Service) Stop(ctx context.Context) error {
	var errs []error
	s.lifecycle.Stop()
	if s.svc != nil {
		errs = append(errs, s.svc.Stop(ctx))
	}
	// No request observes a text any more: the extraction under way and
	// those queued go to the backlog while the bus is still connected.
	s.knowledge.Stop(ctx)
	if s.turns != nil {
		// No handler runs any more: the journal's last closes are written
		// out.
		errs = append(errs, s.turns.CloseFile())
	}
	s.storage.Stop()
	s.single.Release(ctx)
	if s.nc != nil {
		errs = append(errs, bus.Drain(ctx, s.nc))
	}
	s.closePG()
	return errors.Join(errs...)
}

// openMinds opens the minds: in PostgreSQL when every workspace lives
// there; else the personal minds and personal workspaces' in JSONL files
// next to the sessions and, with PostgreSQL for team workspaces, each team
// workspace's in PostgreSQL (mindroute.go). Their embedding and
// extraction workers start at once.
func (s *Service) openMinds(ctx context.Context) error {
	files := frames.NewJSONL(s.cfg.DataDir)
	var backend frames.Backend = files
	var kg graph.Backend = graph.NewJSONL(s.cfg.DataDir)
	if s.pg != nil {
		pgFrames, err := frames.OpenPostgres(ctx, s.pg.Pool())
		if err != nil {
			return fmt.Errorf("sessionstore: minds: %w", err)
		}
		pgGraph, err := graph.OpenPostgres(ctx, s.pg.Pool())
		if err != nil {
			return fmt.Errorf("sessionstore: knowledge graph: %w", err)
		}
		if s.cfg.Store == StorePostgres {
			backend, kg = pgFrames, pgGraph
		} else {
			place := placement{isTeam: s.pg.WorkspaceExists}
			if err := moveTeamMinds(ctx, files, pgFrames, place, s.log); err != nil {
				return fmt.Errorf("sessionstore: move team minds to PostgreSQL: %w", err)
			}
			backend = &framesRouter{placement: place, files: files, team: pgFrames}
			kg = &graphRouter{placement: place, files: kg, team: pgGraph}
		}
	}
	var emb frames.Embedder
	if s.cfg.LLMURL != "" {
		emb = frames.NewOpenAIEmbedder(s.cfg.LLMURL, s.cfg.LLMAPIKey)
	}
	var model knowledge.Extractor
	if s.cfg.LLMURL != "" {
		// The budget model (the settings) adds typed relations when set.
		model = knowledge.NewModelExtractor(s.cfg.LLMURL, s.cfg.LLMAPIKey, s.settings.Value)
	}
	s.knowledge = knowledge.New(knowledge.Config{Backend: kg, Model: model, Logger: s.log})
	s.knowledge.Start(ctx)
	s.frames = backend
	s.minds = frames.New(frames.Config{Setting: s.settings.Value, Backend: backend, Embedder: emb,
		RetryInterval: s.cfg.EmbedRetry, Logger: s.log, Knowledge: s.knowledge})
	s.minds.Start(ctx)
	return nil
}

func (s *Service) closePG() {
	// The minds' workers may write to PostgreSQL: they stop first.
	s.minds.Stop()
	s.knowledge.Stop(context.Background())
	if s.pg != nil {
		s.pg.Close()
		s.pg = nil
	}
}

func checkWritable(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("sessionstore: data dir not writable: %w", err)
	}
	f, err := os.CreateTemp(dir, ".write-check-*")
	if err != nil {
		return fmt.Errorf("sessionstore: data dir not writable: %w", err)
	}
	name := f.Name()
	f.Close()
	return os.Remove(name)
}

func validRef(ref protocol.SessionRef) error {
	if !protocol.ValidID(ref.Workspace) || !protocol.ValidID(ref.Session) {
		return protocol.Errorf(protocol.Invalid, "invalid workspace or session id")
	}
	return nil
}
