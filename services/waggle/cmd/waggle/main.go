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
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/waggle-os/core/services/waggle/app"
)

const usage = `Usage: waggle <command> [flags]

Commands:
  serve     run Waggle core (see waggle serve --help)
  version   print the version
`

var version = "dev"

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	switch args[0] {
	case "serve":
		return serve(args[1:], stdout, stderr)
	case "version", "--version", "-v":
		fmt.Fprintln(stdout, "waggle", version)
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
	if format == "auto" {
		format = "json"
		if f, ok := w.(*os.File); ok {
			if st, err := f.Stat(); err == nil && st.Mode()&os.ModeCharDevice != 0 {
				format = "text"
			}
		}
	}
	if format == "text" {
		return slog.New(slog.NewTextHandler(w, opts))
	}
	return slog.New(slog.NewJSONHandler(w, opts))
}
