package chatcli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"
)

// approval is the data of an approval_required event.
type approval struct {
	RequestID         string          `json:"requestId"`
	ToolName          string          `json:"toolName"`
	Input             json.RawMessage `json:"input"`
	SourceWorkspaceID *string         `json:"sourceWorkspaceId"`
}

type decision int

const (
	decideOnce decision = iota
	decideAlways
	decideDeny
	// decideInterrupt: the user pressed Ctrl-C at the prompt; the turn is
	// cancelled (which cancels its approval too).
	decideInterrupt
)

// keyCtrlC is Ctrl-C as a byte: in raw mode the terminal sends it as input
// instead of raising SIGINT.
const keyCtrlC = 3

// maxReconnects bounds how often a cut stream is resumed.
const maxReconnects = 5

// stream shows a turn until its terminal event: from evs when given, then
// (after a cut connection) from the turn's event route after the last
// event seen. keys, when not nil, carries the terminal's keys: Ctrl-C
// cancels the turn, any other key is kept in s.typeahead for the next
// prompt. It reports whether the turn ended with done.
func (s *chat) stream(ctx context.Context, turnID string, evs *events, p *printer, keys <-chan byte, ask func(context.Context, approval) decision) (bool, error) {
	var lastID string
	cancelled := false
	for attempt := 0; ; attempt++ {
		if evs == nil {
			var err error
			if evs, err = s.c.follow(ctx, turnID, lastID); err != nil {
				if ctx.Err() != nil {
					s.cancelTurn(turnID)
				}
				return false, err
			}
		}
		before := lastID
		ok, ended, err := s.consume(ctx, turnID, evs, p, keys, ask, &lastID, &cancelled)
		evs.Close()
		evs = nil
		if ended || err != nil {
			return ok, err
		}
		if lastID != before {
			attempt = 0 // the connection made progress: count cuts afresh
		}
		if attempt >= maxReconnects {
			return false, errors.New("lost the connection to the turn")
		}
		// A cut stream is resumed at once: the server keeps every event.
	}
}

type nextEvent struct {
	ev  event
	err error
}

// consume reads one connection's events. ended is true at the terminal
// event; ended false with no error means the stream was cut.
func (s *chat) consume(ctx context.Context, turnID string, evs *events, p *printer, keys <-chan byte,
	ask func(context.Context, approval) decision, lastID *string, cancelled *bool) (ok, ended bool, err error) {
	stop := make(chan struct{})
	defer close(stop)
	ch := make(chan nextEvent)
	// The reader ends when the stream does: stream() closes evs after
	// consume returns, which fails its pending read.
	go func() {
		for {
			ev, err := evs.Next()
			select {
			case ch <- nextEvent{ev, err}:
			case <-stop:
				return
			}
			if err != nil {
				return
			}
		}
	}()
	interrupt := func() {
		if *cancelled {
			return
		}
		*cancelled = true
		p.notice("cancelling the turn…")
		if err := s.c.cancel(context.WithoutCancel(ctx), turnID); err != nil {
			p.notice("could not cancel: " + err.Error())
		}
	}
	for {
		select {
		case n := <-ch:
			if n.err != nil {
				return false, false, nil
			}
			if n.ev.ID != "" {
				*lastID = n.ev.ID
			}
			switch n.ev.Name {
			case "done":
				p.done(n.ev.Data)
				return true, true, nil
			case "error":
				p.failed(n.ev.Data)
				return false, true, nil
			case "approval_required":
				var a approval
				_ = json.Unmarshal(n.ev.Data, &a)
				p.approval(a)
				d := ask(ctx, a)
				if d == decideInterrupt {
					interrupt()
					continue
				}
				ws := s.opts.Workspace
				if a.SourceWorkspaceID != nil {
					ws = *a.SourceWorkspaceID
				}
				if err := s.c.decide(ctx, a.RequestID, d != decideDeny, d == decideAlways, ws); err != nil {
					p.notice("approval: " + err.Error())
				}
			default:
				p.event(n.ev)
			}
		case k, open := <-keys:
			if !open {
				keys = nil
				continue
			}
			if k == keyCtrlC {
				interrupt()
				continue
			}
			// Type-ahead: the key is kept for the next prompt, where the
			// line editor gets it as if typed there.
			s.typeahead = append(s.typeahead, k)
		case <-ctx.Done():
			s.cancelTurn(turnID)
			return false, false, ctx.Err()
		}
	}
}

// cancelTurn stops a turn when the program itself is interrupted.
func (s *chat) cancelTurn(turnID string) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	_ = s.c.cancel(ctx, turnID)
}

// printer renders turn events. reply gets the reply text, info everything
// else; on a terminal both are the terminal.
type printer struct {
	reply, info io.Writer
	shared      bool // reply and info are one stream: keep lines apart
	color       bool
	midLine     bool // the reply text so far does not end with a newline
}

func (p *printer) dim(s string) string {
	if p.color {
		return "\x1b[2m" + s + "\x1b[0m"
	}
	return s
}

// line writes one info line, starting on a fresh line.
func (p *printer) line(s string) {
	if p.shared && p.midLine {
		fmt.Fprint(p.info, "\n")
		p.midLine = false
	}
	fmt.Fprint(p.info, s+"\n")
}

func (p *printer) notice(s string) { p.line(p.dim("· " + s)) }

func (p *printer) event(ev event) {
	var d struct {
		Content    string          `json:"content"`
		Name       string          `json:"name"`
		Input      json.RawMessage `json:"input"`
		Result     any             `json:"result"`
		IsError    bool            `json:"isError"`
		FilePath   string          `json:"filePath"`
		FileAction string          `json:"fileAction"`
		Model      string          `json:"model"`
		Reason     string          `json:"reason"`
	}
	_ = json.Unmarshal(ev.Data, &d)
	switch ev.Name {
	case "token":
		if d.Content == "" {
			return
		}
		fmt.Fprint(p.reply, d.Content)
		p.midLine = !strings.HasSuffix(d.Content, "\n")
	case "step":
		p.line(p.dim("· " + d.Content))
	case "tool":
		p.line(p.dim("⚙ " + d.Name + " " + clip(compact(d.Input), 120)))
	case "tool_result":
		mark := "  ↳ "
		if d.IsError {
			mark = "  ✖ "
		}
		r, _ := d.Result.(string)
		if r == "" && d.Result != nil {
			b, _ := json.Marshal(d.Result)
			r = string(b)
		}
		p.line(p.dim(mark + clip(firstLine(r), 160)))
	case "file_created":
		action := "created"
		if d.FileAction == "edit" {
			action = "edited"
		}
		p.line("▸ " + action + " " + d.FilePath)
	case "model_switch":
		p.line("⇄ switched to " + d.Model + " — " + d.Reason)
	}
}

func (p *printer) approval(a approval) {
	p.line(fmt.Sprintf("? %s wants to run: %s", a.ToolName, clip(compact(a.Input), 200)))
}

func (p *printer) done(data json.RawMessage) {
	if p.midLine {
		fmt.Fprint(p.reply, "\n")
		p.midLine = false
	}
	if !p.color {
		return
	}
	var d struct {
		Model string `json:"model"`
	}
	if json.Unmarshal(data, &d) == nil && d.Model != "" {
		p.line(p.dim("  — " + d.Model))
	}
}

func (p *printer) failed(data json.RawMessage) {
	var d struct {
		Message string `json:"message"`
	}
	_ = json.Unmarshal(data, &d)
	if d.Message == "" {
		d.Message = "the turn failed"
	}
	if p.midLine && !p.shared {
		fmt.Fprint(p.reply, "\n")
		p.midLine = false
	}
	p.line("✖ " + d.Message)
}

func compact(raw json.RawMessage) string {
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return string(raw)
	}
	b, _ := json.Marshal(v)
	return string(b)
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i] + " …"
	}
	return s
}

func clip(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}
