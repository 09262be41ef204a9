// Command wagglebench runs the benchmark suite (issues 6, 11 and 12)
// against real waggle processes on loopback and prints every measurement
// with its same-run baseline and its target. With -write-docs it also
// writes the table into docs/benchmarks.md and the latency plot into
// docs/bench-latency.svg.
//
//	wagglebench [-waggle bin/waggle] [-quick] [-big=false] [-only a,b] [-write-docs] [-profile DIR]
//	wagglebench profile-serve -dir DIR [waggle serve flags]   (used by -profile)
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/waggle-os/core/services/waggle/benchsuite"
)

const (
	beginMarker = "<!-- wagglebench:begin -->"
	endMarker   = "<!-- wagglebench:end -->"
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "profile-serve" {
		return benchsuite.ProfileServe(args[1:], stderr)
	}
	fs := flag.NewFlagSet("wagglebench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	bin := fs.String("waggle", "bin/waggle", "waggle binary under test")
	quick := fs.Bool("quick", false, "small counts: a smoke run of every scenario")
	big := fs.Bool("big", true, "include the 10,000-stream capacity level (-big=false leaves it out)")
	only := fs.String("only", "", "comma list of scenarios to run: "+strings.Join(benchsuite.Scenarios, ", ")+" (default all)")
	writeDocs := fs.Bool("write-docs", false, "write the results into -docs and the plot into -svg")
	docs := fs.String("docs", "docs/benchmarks.md", "benchmarks document to update with -write-docs")
	svg := fs.String("svg", "docs/bench-latency.svg", "plot file written with -write-docs")
	profile := fs.String("profile", "", "directory for CPU and allocation profiles of the single-process server")
	workDir := fs.String("workdir", "", "directory for data dirs and server logs (default: a temp dir, removed after)")
	timeout := fs.Duration("timeout", 20*time.Minute, "the whole run stops after this long")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	binary, err := filepath.Abs(*bin)
	if err != nil {
		fmt.Fprintf(stderr, "wagglebench: %v\n", err)
		return 2
	}
	if _, err := os.Stat(binary); err != nil {
		fmt.Fprintf(stderr, "wagglebench: waggle binary: %v (run make build)\n", err)
		return 2
	}
	self, err := os.Executable()
	if err != nil {
		fmt.Fprintf(stderr, "wagglebench: %v\n", err)
		return 1
	}
	dir := *workDir
	if dir == "" {
		if dir, err = os.MkdirTemp("", "wagglebench-"); err != nil {
			fmt.Fprintf(stderr, "wagglebench: %v\n", err)
			return 1
		}
		defer os.RemoveAll(dir)
	}
	if *profile != "" {
		if *profile, err = filepath.Abs(*profile); err != nil {
			fmt.Fprintf(stderr, "wagglebench: %v\n", err)
			return 2
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
	defer stop()

	rep, err := benchsuite.Run(ctx, benchsuite.Config{
		Binary: binary, WorkDir: dir, Quick: *quick, SkipBig: !*big, Only: splitList(*only),
		ProfileDir: *profile, ProfileBinary: self, Progress: stderr,
	})
	if err != nil {
		fmt.Fprintf(stderr, "wagglebench: %v\n", err)
		if rep == nil || len(rep.Rows) == 0 {
			return 1
		}
	}
	command := "make bench"
	if *quick || !*big || *only != "" {
		command = "wagglebench " + strings.Join(args, " ")
	}
	fmt.Fprintf(stdout, "\n%s\n", rep.Markdown(command, ""))
	for _, p := range rep.Profiles {
		fmt.Fprintf(stdout, "profile summary: %s\n", p)
	}
	if *writeDocs {
		if werr := writeDocsFiles(rep, command, *docs, *svg); werr != nil {
			fmt.Fprintf(stderr, "wagglebench: %v\n", werr)
			return 1
		}
		fmt.Fprintf(stdout, "wrote %s and %s\n", *docs, *svg)
	}
	if err != nil {
		return 1
	}
	return 0
}

// writeDocsFiles replaces the suite's section of the benchmarks document
// (between the markers, appended when absent) and writes the plot.
func writeDocsFiles(rep *benchsuite.Report, command, docsPath, svgPath string) error {
	plot := rep.SVG()
	svgName := ""
	if plot != "" {
		if err := os.WriteFile(svgPath, []byte(plot), 0o644); err != nil {
			return fmt.Errorf("write plot: %w", err)
		}
		rel, err := filepath.Rel(filepath.Dir(docsPath), svgPath)
		if err != nil {
			rel = svgPath
		}
		svgName = rel
	}
	old, err := os.ReadFile(docsPath)
	if err != nil {
		return fmt.Errorf("read %s: %w", docsPath, err)
	}
	section := beginMarker + "\n## Benchmark suite (`make bench`, wagglebench)\n\n" + rep.Markdown(command, svgName) + endMarker + "\n"
	return os.WriteFile(docsPath, []byte(spliceSection(string(old), section)), 0o644)
}

// spliceSection replaces the marked section of doc with section, or
// appends section when doc has none.
func spliceSection(doc, section string) string {
	i := strings.Index(doc, beginMarker)
	j := strings.Index(doc, endMarker)
	if i < 0 || j < i {
		return strings.TrimRight(doc, "\n") + "\n\n" + section
	}
	rest := doc[j+len(endMarker):]
	rest = strings.TrimPrefix(rest, "\n")
	return doc[:i] + section + rest
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}
