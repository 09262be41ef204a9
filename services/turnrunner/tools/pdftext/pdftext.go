// Package pdftext extracts the text of a PDF in a worker process of the
// running binary, so a cancelled turn stops waiting at once and a hostile
// file's endless loop or runaway parse ends with a kill.
//
// The PDF reader (github.com/ledongthuc/pdf) takes no context and has
// loops a crafted file never lets end (a page tree that contains itself),
// so it cannot run on a goroutine of the runner: nothing could stop it.
// Text starts the runner's own executable with workerEnv set, writes the
// request and the file to its stdin and reads the text from its stdout; a
// cancelled context or the time limit kills it. The worker also ends
// itself at the time limit and, on Linux, dies with its parent, so a
// runner that crashed leaves no worker spinning.
//
// A binary becomes able to serve as its own worker by calling Main first
// thing in main (and in TestMain of tests that read PDFs). Where Main was
// not called, Text reads in process on a goroutine it abandons when the
// context ends: the caller stops waiting, but the work is not stopped.
package pdftext

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"sync/atomic"
	"time"
)

// DefaultTimeout bounds one extraction when Config.Timeout is zero.
const DefaultTimeout = time.Minute

// Config bounds one extraction.
type Config struct {
	// Timeout bounds one document's extraction (the worker's start
	// included). Default DefaultTimeout.
	Timeout time.Duration
}

// workerEnv, set to "1", makes Main serve one extraction and exit.
const workerEnv = "WAGGLE_PDFTEXT_WORKER"

// maxOutput bounds what is read of a worker's stdout past the request's
// maxBytes (the JSON quoting of the text, the last page's overshoot).
const maxOutput = 8 << 20

// selfHosted is set by Main in a process that is not a worker: this
// binary can be started as one.
var selfHosted atomic.Bool

// request is the header line a worker reads before the file.
type request struct {
	Pages     []int `json:"pages"` // null: all pages
	MaxBytes  int   `json:"maxBytes"`
	TimeoutMs int64 `json:"timeoutMs"`
}

// reply is what a worker writes to stdout.
type reply struct {
	Text  string `json:"text"`
	Error string `json:"error,omitempty"`
}

// Main serves one extraction and exits when this process was started as a
// worker; otherwise it records that this binary can be one and returns.
// Call it first thing in main, before flags are parsed.
func Main() {
	if os.Getenv(workerEnv) != "1" {
		selfHosted.Store(true)
		return
	}
	os.Exit(serve(os.Stdin, os.Stdout))
}

// serve is a worker's life: read the request and the file, extract, write
// the reply. It exits on its own at the request's time limit, whatever the
// reader is doing.
func serve(in io.Reader, out io.Writer) int {
	limitResources()
	br := bufio.NewReader(in)
	line, err := br.ReadBytes('\n')
	var req request
	if err != nil || json.Unmarshal(line, &req) != nil || req.MaxBytes <= 0 || req.TimeoutMs <= 0 {
		fmt.Fprintln(os.Stderr, "pdftext: bad request")
		return 2
	}
	time.AfterFunc(time.Duration(req.TimeoutMs)*time.Millisecond, func() { os.Exit(3) })
	data, err := io.ReadAll(br)
	if err != nil {
		fmt.Fprintln(os.Stderr, "pdftext: read the file:", err)
		return 2
	}
	var pages map[int]bool
	if req.Pages != nil {
		pages = make(map[int]bool, len(req.Pages))
		for _, p := range req.Pages {
			pages[p] = true
		}
	}
	text, err := extract(data, pages, req.MaxBytes)
	rep := reply{Text: text}
	if err != nil {
		rep.Error = err.Error()
	}
	if err := json.NewEncoder(out).Encode(rep); err != nil {
		return 1
	}
	return 0
}

// Text extracts the text of the pages of data that pages selects (nil:
// all), stopping near maxBytes of it. It returns ctx's error as soon as
// ctx ends, and an error naming the limit once cfg.Timeout passed; in both
// cases the worker is killed. Other errors read well as a tool result.
func Text(ctx context.Context, cfg Config, data []byte, pages map[int]bool, maxBytes int) (string, error) {
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	tctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	exe, err := os.Executable()
	if !selfHosted.Load() || err != nil {
		return inProcess(tctx, ctx, cfg, data, pages, maxBytes)
	}
	req := request{MaxBytes: maxBytes, TimeoutMs: cfg.Timeout.Milliseconds()}
	for p := range pages {
		req.Pages = append(req.Pages, p)
	}
	if pages != nil && req.Pages == nil {
		req.Pages = []int{} // nothing selected is not "all"
	}
	slices.Sort(req.Pages)
	header, _ := json.Marshal(req)

	cmd := exec.CommandContext(tctx, exe)
	// A clean environment: the worker needs nothing of the runner's (and
	// is given none of its secrets); one core, so a hostile file costs at
	// most that.
	cmd.Env = []string{workerEnv + "=1", "GOMAXPROCS=1"}
	cmd.Stdin = io.MultiReader(bytes.NewReader(append(header, '\n')), bytes.NewReader(data))
	var stdout limitedBuffer
	stdout.max = maxBytes + maxOutput
	cmd.Stdout = &stdout
	cmd.WaitDelay = time.Second
	setProcAttr(cmd)
	if err := cmd.Start(); err != nil {
		if ctx.Err() != nil {
			return "", ctx.Err()
		}
		// The executable is gone (replaced by an upgrade) or no process
		// can be started: read here rather than not at all.
		return inProcess(tctx, ctx, cfg, data, pages, maxBytes)
	}
	runErr := cmd.Wait()
	switch {
	case ctx.Err() != nil:
		return "", ctx.Err()
	case tctx.Err() != nil:
		return "", timeoutError(cfg.Timeout)
	}
	var rep reply
	if runErr != nil || stdout.over || json.Unmarshal(stdout.Bytes(), &rep) != nil {
		if ee := (*exec.ExitError)(nil); errors.As(runErr, &ee) && ee.ExitCode() == 3 {
			return "", timeoutError(cfg.Timeout)
		}
		return "", errors.New("the PDF could not be read (its reader failed on this file)")
	}
	if rep.Error != "" {
		return "", errors.New(rep.Error)
	}
	return rep.Text, nil
}

func timeoutError(d time.Duration) error {
	return fmt.Errorf("reading the PDF took longer than %v; read_document stopped it", d)
}

// inProcess extracts on a goroutine and stops waiting when tctx ends. The
// goroutine cannot be stopped: it is left to finish (or not) on its own.
// Only binaries that did not call Main get here.
func inProcess(tctx, ctx context.Context, cfg Config, data []byte, pages map[int]bool, maxBytes int) (string, error) {
	type result struct {
		text string
		err  error
	}
	done := make(chan result, 1) // the abandoned goroutine never blocks
	go func() {
		text, err := extract(data, pages, maxBytes)
		done <- result{text, err}
	}()
	select {
	case r := <-done:
		return r.text, r.err
	case <-tctx.Done():
		if ctx.Err() != nil {
			return "", ctx.Err()
		}
		return "", timeoutError(cfg.Timeout)
	}
}

// limitedBuffer keeps at most max bytes and notes that more came.
type limitedBuffer struct {
	bytes.Buffer
	max  int
	over bool
}

func (b *limitedBuffer) Write(p []byte) (int, error) {
	if room := b.max - b.Len(); len(p) > room {
		b.over = true
		b.Buffer.Write(p[:max(room, 0)])
		return len(p), nil
	}
	return b.Buffer.Write(p)
}
