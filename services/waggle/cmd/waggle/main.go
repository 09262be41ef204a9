// Command waggle runs Waggle core: `waggle serve` starts every service in
// one process on an embedded NATS server (the desktop), or the services
// named by --targets on an external NATS cluster (a team server).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/waggle-os/core/libs/embednats"
	"github.com/waggle-os/core/services/gateway"
	"github.com/waggle-os/core/services/turnrunner/tools/pdftext"
	"github.com/waggle-os/core/services/waggle/app"
	"github.com/waggle-os/core/services/waggle/chatcli"
)

const usage = `Usage: waggle <command> [flags]

Commands:
  serve     run Waggle core (see waggle serve --help)
  chat      chat with a running server in the terminal; echo hi | waggle chat for scripts
            (see waggle chat --help)
  nats      run a standalone NATS server with JetStream (for a cluster without Docker;
            see waggle nats --help)
  team      manage teams, members, roles and tool policies (team server; see waggle team --help)
  token     create, list and revoke user API tokens (team server)
  healthcheck  exit 0 when this host's waggle answers /health with 200 (container health checks)
  version   print the version
`

func main() {
	// Started as read_document's PDF worker, the process reads one PDF and
	// exits here, before any flag or service (see pdftext).
	pdftext.Main()
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	switch args[0] {
	case "serve":
		return serve(args[1:], stdout, stderr)
	case "chat":
		ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
		defer stop()
		return chatcli.Main(ctx, args[1:], os.Stdin, stdout, stderr)
	case "nats":
		return natsServer(args[1:], stdout, stderr)
	case "team":
		return teamCmd(args[1:], stdout, stderr)
	case "token":
		return tokenCmd(args[1:], stdout, stderr)
	case "healthcheck":
		return healthcheck(args[1:], stderr)
	case "version", "--version", "-v":
		fmt.Fprintln(stdout, "waggle", versionString())
		return 0
	case "help", "--help", "-h":
		fmt.Fprint(stdout, usage)
		return 0
	default:
		fmt.Fprintf(stderr, "waggle: unknown command %q\n\n%s", args[0], usage)
		return 2
	}
}

func serve(args []string, stdout, stderr io.Writer) int {
	cfg, err := app.ParseServe(args, os.LookupEnv, stdout)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "waggle serve: %v\n", err)
		return 2
	}
	log := newLogger(cfg, stderr)
	slog.SetDefault(log)
	privateUmask()
	if n, err := raiseOpenFiles(); err != nil {
		log.Warn("could not raise the open-files limit", "limit", n, "err", err)
	} else if n > 0 && n < 4096 {
		log.Warn("the open-files limit is low: each streaming turn needs about two descriptors", "limit", n)
	}

	// The binary owns signals: the first SIGINT/SIGTERM starts a graceful
	// shutdown, a second one exits at once.
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sigs)

	a := app.New(cfg, log)
	startCtx, cancelStart := context.WithCancel(context.Background())
	go func() {
		select {
		case <-sigs:
			cancelStart()
		case <-startCtx.Done():
		}
	}()
	if err := a.Start(startCtx); err != nil {
		cancelStart()
		log.Error("startup failed", "err", err)
		fmt.Fprintf(stderr, "waggle serve: %v\n", err)
		return 1
	}
	cancelStart()
	log.Info("waggle is running", "addr", a.Addr(), "data_dir", cfg.DataDir, "modules", a.Running())

	sig := <-sigs
	log.Info("shutting down", "signal", sig.String(), "timeout", cfg.ShutdownTimeout.String())
	ctx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownTimeout)
	defer cancel()
	go func() {
		<-sigs
		log.Warn("second signal: exiting now")
		os.Exit(1)
	}()
	began := time.Now()
	if err := a.Stop(ctx); err != nil {
		log.Error("shutdown finished with errors", "err", err, "took", time.Since(began).String())
		return 1
	}
	log.Info("shutdown complete", "took", time.Since(began).String())
	return 0
}

func newLogger(cfg app.Config, w io.Writer) *slog.Logger {
	opts := &slog.HandlerOptions{Level: cfg.LogLevel}
	format := cfg.LogFormat
	if format == app.LogAuto {
		format = app.LogJSON
		if f, ok := w.(*os.File); ok {
			if st, err := f.Stat(); err == nil && st.Mode()&os.ModeCharDevice != 0 {
				format = app.LogText
			}
		}
	}
	if format == app.LogText {
		return slog.New(slog.NewTextHandler(w, opts))
	}
	return slog.New(slog.NewJSONHandler(w, opts))
}

// natsServer runs the embedded nats-server on its own: the NATS nodes of a
// team server or of `make cluster`, from the same binary.
func natsServer(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("waggle nats", flag.ContinueOnError)
	fs.SetOutput(stdout)
	config := fs.String("config", "", "nats-server configuration file (cluster routes, accounts, store_dir)")
	listen := fs.String("listen", "", "client listen address host:port (overrides the file)")
	storeDir := fs.String("store-dir", "", "JetStream store directory (overrides the file)")
	name := fs.String("name", "waggle-nats", "server name (without --config)")
	nkey := fs.String("nkey-file", "", "without --config: the nkey seed file clients must prove, made (mode 0600) at the first start (default <store-dir>/"+embednats.CredentialsFileName+")")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if *config == "" && (*listen == "" || *storeDir == "") {
		fmt.Fprintln(stderr, "waggle nats: give --config, or both --listen and --store-dir")
		return 2
	}
	if *config != "" && *nkey != "" {
		fmt.Fprintln(stderr, "waggle nats: --nkey-file only applies without --config (the config's users apply)")
		return 2
	}
	// Without a config the server has no users of its own: it admits only
	// clients with the key of --nkey-file, never anonymous ones.
	if *config == "" && *nkey == "" {
		*nkey = filepath.Join(*storeDir, embednats.CredentialsFileName)
	}
	if *config == "" {
		if err := os.MkdirAll(filepath.Dir(*nkey), 0o700); err != nil {
			fmt.Fprintf(stderr, "waggle nats: %v\n", err)
			return 1
		}
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	srv := embednats.New(embednats.Config{ConfigFile: *config, Listen: *listen, StoreDir: *storeDir, ServerName: *name, Logger: log, ReadyTimeout: 30 * time.Second,
		CredentialsFile: *nkey})
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sigs)
	if err := srv.Start(context.Background()); err != nil {
		fmt.Fprintf(stderr, "waggle nats: %v\n", err)
		return 1
	}
	log.Info("nats server ready", "url", srv.ClientURL(), "nkey_file", *nkey)
	<-sigs
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if err := srv.Stop(ctx); err != nil {
		fmt.Fprintf(stderr, "waggle nats: %v\n", err)
		return 1
	}
	return 0
}

// healthcheck probes the local process: --url, else /health on
// WAGGLE_METRICS_ADDR (processes without a gateway serve it there), else
// on WAGGLE_ADDR. Distroless images have no curl, hence this command.
func healthcheck(args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("waggle healthcheck", flag.ContinueOnError)
	fs.SetOutput(stderr)
	url := fs.String("url", "", "URL to probe (default: /health of this host's waggle)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *url == "" {
		addr := os.Getenv("WAGGLE_METRICS_ADDR")
		if addr == "" {
			addr = os.Getenv("WAGGLE_ADDR")
		}
		if addr == "" {
			addr = gateway.DefaultAddr
		}
		host, port, err := net.SplitHostPort(addr)
		if err != nil {
			fmt.Fprintf(stderr, "healthcheck: bad address %q\n", addr)
			return 2
		}
		if host == "" || host == "0.0.0.0" || host == "::" {
			host = "127.0.0.1"
		}
		*url = "http://" + net.JoinHostPort(host, port) + "/health"
	}
	client := &http.Client{Timeout: 3 * time.Second}
	resp, err := client.Get(*url)
	if err != nil {
		fmt.Fprintf(stderr, "healthcheck: %v\n", err)
		return 1
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		fmt.Fprintf(stderr, "healthcheck: %s answered %d\n", *url, resp.StatusCode)
		return 1
	}
	return 0
}
