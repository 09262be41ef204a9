package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/waggle-os/core/libs/protocol"
	"github.com/waggle-os/core/services/turnrunner/agent"
)

// ToolSet is the MCP tools of one turn, fixed when the turn binds them.
type ToolSet struct {
	tools   []*Tool
	trusted map[string]bool
}

// Bind returns the tools a workspace's turn may call. It waits (at most
// StartWait, and never past ctx) for servers still making their first
// connection, so the first turn after a start or a config edit sees their
// tools. step, when set, is how a tool reports a server that stopped
// during a call (a step event of the turn).
func (m *Manager) Bind(ctx context.Context, workspace string, step func(text string)) *ToolSet {
	if m == nil {
		return &ToolSet{}
	}
	servers := m.active(ctx, workspace)
	wctx, cancel := context.WithTimeout(ctx, m.cfg.StartWait)
	for _, s := range servers {
		s.awaitFirst(wctx)
	}
	cancel()
	set := &ToolSet{trusted: map[string]bool{}}
	for _, s := range servers {
		snap := s.snapshot()
		if snap.state == protocol.MCPStateError && step != nil {
			// Say why tools the user may expect are missing (refused
			// servers are a config matter, listed by GET /api/mcp/servers).
			step(fmt.Sprintf("MCP server %s is unavailable (%s) — retrying; its tools are left out of this turn", s.key.name, snap.err))
		}
		if snap.state != protocol.MCPStateConnected {
			continue
		}
		s.touch()
		timeout := s.cfg.callTimeout(m.cfg.CallTimeout)
		for _, d := range snap.tools {
			set.tools = append(set.tools, &Tool{srv: s, def: d, timeout: timeout, limit: m.cfg.OutputLimit, step: step})
			if s.cfg.Trust.trusts(d.tool, d.readOnly) {
				set.trusted[d.name] = true
			}
		}
	}
	return set
}

// Tools are the set's tools in server then server-listing order.
func (ts *ToolSet) Tools() []*Tool {
	if ts == nil {
		return nil
	}
	return ts.tools
}

// Gate wraps a turn's approval gate: a tool its server's trust setting
// covers runs without asking; every other call is inner's to decide.
func (ts *ToolSet) Gate(inner agent.Gate) agent.Gate {
	if ts == nil || len(ts.trusted) == 0 {
		return inner
	}
	return trustGate{inner: inner, trusted: ts.trusted}
}

type trustGate struct {
	inner   agent.Gate
	trusted map[string]bool
}

// Check implements agent.Gate.
func (g trustGate) Check(ctx context.Context, call agent.ToolCall) (agent.Verdict, error) {
	if g.trusted[call.Name] {
		return agent.Verdict{Allow: true}, nil
	}
	if g.inner == nil {
		return agent.Verdict{Allow: true}, nil
	}
	return g.inner.Check(ctx, call)
}

// Tool is one MCP tool bound to a turn. It implements agent.Tool.
type Tool struct {
	srv     *server
	def     toolDef
	timeout time.Duration
	limit   int
	step    func(string)
}

// Name is mcp__<server>__<tool>.
func (t *Tool) Name() string { return t.def.name }

// Description is the server's description of the tool.
func (t *Tool) Description() string { return t.def.description }

// Schema is the tool's input schema as the server sent it.
func (t *Tool) Schema() json.RawMessage { return t.def.schema }

// Call runs the tool on its server. A cancelled ctx cancels the call on
// the server too (the SDK sends notifications/cancelled) and returns ctx's
// error at once; the call timeout, a server error result or a server that
// stopped are errors, which the model reads as an error result.
func (t *Tool) Call(ctx context.Context, input json.RawMessage) (string, error) {
	s := t.srv
	s.touch()
	cctx, cancel := context.WithTimeout(ctx, t.timeout)
	defer cancel()
	// A config edit that removes the server cancels the call (the server
	// is told, as for a cancelled turn) rather than waiting for it.
	defer context.AfterFunc(s.life, cancel)()
	cs, err := s.await(cctx)
	if err != nil {
		if ctx.Err() != nil {
			return "", ctx.Err()
		}
		return "", fmt.Errorf("MCP server %q is not available: %v", s.key.name, trimCtx(err))
	}
	if len(input) == 0 {
		input = json.RawMessage("{}")
	}
	res, err := cs.CallTool(cctx, &sdk.CallToolParams{Name: t.def.tool, Arguments: input})
	switch {
	case ctx.Err() != nil:
		return "", ctx.Err()
	case err != nil && s.life.Err() != nil:
		// The call raced a config edit that removed the server: it is not
		// being restarted, whatever the broken connection suggests.
		return "", fmt.Errorf("MCP server %q is not available: %s", s.key.name, stoppedReason)
	case cctx.Err() != nil:
		return "", fmt.Errorf("MCP server %q did not answer within %s (the call was cancelled)", s.key.name, t.timeout)
	case err != nil && !isProtocolError(err):
		// Not an answer from the server: the connection broke (a stdio
		// server that exited reads as EOF).
		s.broken(cs)
		if t.step != nil {
			t.step(fmt.Sprintf("MCP server %s stopped — restarting it", s.key.name))
		}
		return "", fmt.Errorf("MCP server %q stopped during the call; it is being restarted and the call may or may not have taken effect", s.key.name)
	case err != nil:
		return "", fmt.Errorf("MCP server %q: %v", s.key.name, err)
	}
	text := resultText(res, t.limit)
	if res.IsError {
		if text == "" {
			text = "the tool reported an error"
		}
		return "", errors.New(text)
	}
	return text, nil
}

// isProtocolError reports an error the server answered with (a JSON-RPC
// error response), as opposed to a broken connection.
func isProtocolError(err error) bool {
	var werr *jsonrpc.Error
	return errors.As(err, &werr)
}

func trimCtx(err error) string {
	msg := err.Error()
	if errors.Is(err, context.DeadlineExceeded) {
		msg = strings.Replace(msg, context.DeadlineExceeded.Error(), "timed out waiting for it to connect", 1)
	}
	return msg
}

// resultText is what the model reads of a result: text content as is,
// a placeholder for anything else, the structured content when there is
// no content at all; capped at limit bytes.
func resultText(res *sdk.CallToolResult, limit int) string {
	var parts []string
	for _, c := range res.Content {
		switch c := c.(type) {
		case *sdk.TextContent:
			parts = append(parts, c.Text)
		case *sdk.ImageContent:
			parts = append(parts, fmt.Sprintf("[image content (%s, %d bytes) not shown]", orUnknown(c.MIMEType), len(c.Data)))
		case *sdk.AudioContent:
			parts = append(parts, fmt.Sprintf("[audio content (%s, %d bytes) not shown]", orUnknown(c.MIMEType), len(c.Data)))
		case *sdk.ResourceLink:
			parts = append(parts, fmt.Sprintf("[resource link: %s %s]", c.Name, c.URI))
		case *sdk.EmbeddedResource:
			switch r := c.Resource; {
			case r == nil:
				parts = append(parts, "[empty embedded resource]")
			case r.Text != "":
				parts = append(parts, r.Text)
			default:
				parts = append(parts, fmt.Sprintf("[embedded resource %s (%s, %d bytes) not shown]", r.URI, orUnknown(r.MIMEType), len(r.Blob)))
			}
		default:
			parts = append(parts, "[unsupported content not shown]")
		}
	}
	if len(parts) == 0 && res.StructuredContent != nil {
		if b, err := json.Marshal(res.StructuredContent); err == nil {
			parts = append(parts, string(b))
		}
	}
	text := strings.Join(parts, "\n")
	if limit > 0 && len(text) > limit {
		cut := limit
		for cut > 0 && !utf8Start(text[cut]) {
			cut--
		}
		text = fmt.Sprintf("%s\n\n[output truncated: %d of %d bytes omitted]", text[:cut], len(text)-cut, len(text))
	}
	return text
}

func utf8Start(b byte) bool { return b&0xC0 != 0x80 }

func orUnknown(s string) string {
	if s == "" {
		return "unknown type"
	}
	return s
}
