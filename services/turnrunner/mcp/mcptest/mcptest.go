// Package mcptest is a scripted MCP server for tests, written with the
// go-sdk's server side: the same tools over stdio (a test binary that
// re-executes itself, see MaybeServeStdio) and over Streamable HTTP on
// loopback (NewHTTP).
//
// Tools:
//   - echo {text}: returns "echo: <text>" (annotated read-only)
//   - add {a, b}: returns the sum as text
//   - fail {message}: an error result (isError) with message
//   - slow {}: blocks until the call is cancelled, then records
//     "cancelled" (how a test sees that a cancel reached the server)
//   - crash {}: the process exits at once (stdio only)
//   - picture {}: an image and a text part
//   - pid {}: the server process's id
//   - ls {path}: the names in a directory, one a line (what a sandboxed
//     server can see)
package mcptest

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// Environment of a stdio test server started by MaybeServeStdio.
const (
	// EnvServe makes MaybeServeStdio serve (any non-empty value).
	EnvServe = "MCPTEST_SERVE"
	// EnvRecord is a file each recorded event is appended to, one a line.
	EnvRecord = "MCPTEST_RECORD"
)

// Recorder receives the server's events ("started <tool>", "cancelled <tool>").
type Recorder func(event string)

type textIn struct {
	Text string `json:"text" jsonschema:"the text to echo"`
}

type addIn struct {
	A float64 `json:"a"`
	B float64 `json:"b"`
}

type failIn struct {
	Message string `json:"message"`
}

type noIn struct{}

type pathIn struct {
	Path string `json:"path"`
}

// NewServer returns the scripted server; rec (may be nil) gets its events.
func NewServer(rec Recorder) *sdk.Server {
	if rec == nil {
		rec = func(string) {}
	}
	s := sdk.NewServer(&sdk.Implementation{Name: "mcptest", Version: "1.0.0"}, nil)
	sdk.AddTool(s, &sdk.Tool{Name: "echo", Description: "Echo the text back.", Annotations: &sdk.ToolAnnotations{ReadOnlyHint: true}},
		func(_ context.Context, _ *sdk.CallToolRequest, in textIn) (*sdk.CallToolResult, any, error) {
			return text("echo: " + in.Text), nil, nil
		})
	sdk.AddTool(s, &sdk.Tool{Name: "add", Description: "Add two numbers."},
		func(_ context.Context, _ *sdk.CallToolRequest, in addIn) (*sdk.CallToolResult, any, error) {
			return text(strconv.FormatFloat(in.A+in.B, 'f', -1, 64)), nil, nil
		})
	sdk.AddTool(s, &sdk.Tool{Name: "fail", Description: "Always fails."},
		func(_ context.Context, _ *sdk.CallToolRequest, in failIn) (*sdk.CallToolResult, any, error) {
			return &sdk.CallToolResult{IsError: true, Content: []sdk.Content{&sdk.TextContent{Text: in.Message}}}, nil, nil
		})
	sdk.AddTool(s, &sdk.Tool{Name: "slow", Description: "Runs until cancelled."},
		func(ctx context.Context, _ *sdk.CallToolRequest, _ noIn) (*sdk.CallToolResult, any, error) {
			rec("started slow")
			<-ctx.Done()
			rec("cancelled slow")
			return text("cancelled"), nil, nil
		})
	sdk.AddTool(s, &sdk.Tool{Name: "crash", Description: "Exits the server process."},
		func(context.Context, *sdk.CallToolRequest, noIn) (*sdk.CallToolResult, any, error) {
			rec("crash")
			os.Exit(3)
			return nil, nil, nil
		})
	sdk.AddTool(s, &sdk.Tool{Name: "picture", Description: "Returns an image."},
		func(context.Context, *sdk.CallToolRequest, noIn) (*sdk.CallToolResult, any, error) {
			png, _ := base64.StdEncoding.DecodeString("iVBORw0KGgo=")
			return &sdk.CallToolResult{Content: []sdk.Content{
				&sdk.TextContent{Text: "here it is"},
				&sdk.ImageContent{MIMEType: "image/png", Data: png},
			}}, nil, nil
		})
	sdk.AddTool(s, &sdk.Tool{Name: "pid", Description: "The server's process id."},
		func(context.Context, *sdk.CallToolRequest, noIn) (*sdk.CallToolResult, any, error) {
			return text(strconv.Itoa(os.Getpid())), nil, nil
		})
	sdk.AddTool(s, &sdk.Tool{Name: "ls", Description: "List a directory."},
		func(_ context.Context, _ *sdk.CallToolRequest, in pathIn) (*sdk.CallToolResult, any, error) {
			ents, err := os.ReadDir(in.Path)
			if err != nil {
				return nil, nil, err
			}
			var names []string
			for _, e := range ents {
				names = append(names, e.Name())
			}
			return text(strings.Join(names, "\n")), nil, nil
		})
	return s
}

func text(s string) *sdk.CallToolResult {
	return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: s}}}
}

// MaybeServeStdio serves the scripted server on stdin/stdout and exits
// when EnvServe is set; otherwise it returns at once. Call it first in
// TestMain, and configure os.Args[0] with EnvServe as a stdio server.
func MaybeServeStdio() {
	if os.Getenv(EnvServe) == "" {
		return
	}
	var rec Recorder
	if path := os.Getenv(EnvRecord); path != "" {
		var mu sync.Mutex
		rec = func(event string) {
			mu.Lock()
			defer mu.Unlock()
			f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
			if err != nil {
				return
			}
			fmt.Fprintln(f, event)
			f.Sync()
			f.Close()
		}
	}
	if err := NewServer(rec).Run(context.Background(), &sdk.StdioTransport{}); err != nil {
		fmt.Fprintln(os.Stderr, "mcptest:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// HTTP is the scripted server over Streamable HTTP on a loopback port.
type HTTP struct {
	*httptest.Server
	mu     sync.Mutex
	events []string
	// changed is closed and replaced on every event.
	changed chan struct{}
}

// NewHTTP starts the server; it is closed when the test ends (via
// t.Cleanup by the caller, or Close).
func NewHTTP() *HTTP {
	h := &HTTP{changed: make(chan struct{})}
	srv := NewServer(h.record)
	handler := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return srv }, nil)
	h.Server = httptest.NewServer(handler)
	return h
}

// URL is the MCP endpoint.
func (h *HTTP) URL() string { return h.Server.URL }

func (h *HTTP) record(event string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.events = append(h.events, event)
	close(h.changed)
	h.changed = make(chan struct{})
}

// Events are the events recorded so far.
func (h *HTTP) Events() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.events...)
}

// WaitFor waits until event has been recorded or ctx ends.
func (h *HTTP) WaitFor(ctx context.Context, event string) bool {
	for {
		h.mu.Lock()
		changed := h.changed
		for _, e := range h.events {
			if e == event {
				h.mu.Unlock()
				return true
			}
		}
		h.mu.Unlock()
		select {
		case <-ctx.Done():
			return false
		case <-changed:
		}
	}
}
