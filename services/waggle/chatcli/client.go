package chatcli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
)

// client speaks the public HTTP API of one waggle server.
type client struct {
	base  string
	token string
	http  *http.Client
}

// apiError is a 4xx/5xx answer, told the way the server put it.
type apiError struct {
	Status  int
	Message string
	Code    string
}

func (e *apiError) Error() string {
	s := fmt.Sprintf("%d %s", e.Status, e.Message)
	if e.Code != "" {
		s += " (" + e.Code + ")"
	}
	return s
}

func (c *client) do(ctx context.Context, method, path string, body any, header map[string]string) (*http.Response, error) {
	var r io.Reader
	if body != nil {
		data, err := json.Marshal(body)
		if err != nil {
			return nil, fmt.Errorf("chatcli: encode %s %s: %w", method, path, err)
		}
		r = bytes.NewReader(data)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, r)
	if err != nil {
		return nil, fmt.Errorf("chatcli: %s %s: %w", method, path, err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("cannot reach %s: %w", c.base, err)
	}
	if resp.StatusCode >= 400 {
		defer resp.Body.Close()
		return nil, readAPIError(resp)
	}
	return resp, nil
}

// readAPIError reads our error body ({error, code}) or Fastify's
// ({statusCode, error, message}, whose message is the useful part).
func readAPIError(resp *http.Response) error {
	e := &apiError{Status: resp.StatusCode, Message: http.StatusText(resp.StatusCode)}
	var b struct {
		StatusCode int    `json:"statusCode"`
		Error      string `json:"error"`
		Message    string `json:"message"`
		Code       string `json:"code"`
	}
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if json.Unmarshal(data, &b) == nil {
		switch {
		case b.StatusCode != 0 && b.Message != "":
			e.Message = b.Message
		case b.Error != "":
			e.Message = b.Error
		case b.Message != "":
			e.Message = b.Message
		}
		e.Code = b.Code
	}
	return e
}

func (c *client) json(ctx context.Context, method, path string, body, out any) error {
	resp, err := c.do(ctx, method, path, body, nil)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if out == nil {
		return nil
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("chatcli: %s %s: bad answer: %w", method, path, err)
	}
	return nil
}

type health struct {
	Mode    string `json:"mode"`
	WSToken string `json:"wsToken"`
	Offline bool   `json:"offline"`
}

func (c *client) health(ctx context.Context) (health, error) {
	var h health
	return h, c.json(ctx, http.MethodGet, "/health", nil, &h)
}

// newSession creates a session in workspace ws and returns its id.
func (c *client) newSession(ctx context.Context, ws string) (string, error) {
	var s struct {
		ID string `json:"id"`
	}
	if err := c.json(ctx, http.MethodPost, "/api/workspaces/"+url.PathEscape(ws)+"/sessions", struct{}{}, &s); err != nil {
		return "", err
	}
	return s.ID, nil
}

// command is one entry of GET /api/commands.
type command struct {
	Name        string   `json:"name"`
	Aliases     []string `json:"aliases"`
	Usage       string   `json:"usage"`
	Description string   `json:"description"`
}

func (c *client) commands(ctx context.Context) ([]command, error) {
	var out []command
	return out, c.json(ctx, http.MethodGet, "/api/commands", nil, &out)
}

// chat posts one message and returns the turn id and its open stream.
func (c *client) chat(ctx context.Context, message, ws, session string) (string, *events, error) {
	resp, err := c.do(ctx, http.MethodPost, "/api/chat", map[string]string{"message": message, "workspace": ws, "session": session}, nil)
	if err != nil {
		return "", nil, err
	}
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		resp.Body.Close()
		return "", nil, fmt.Errorf("chatcli: the server answered %q, not an event stream", resp.Header.Get("Content-Type"))
	}
	return resp.Header.Get("X-Waggle-Turn-Id"), newEvents(resp.Body), nil
}

// follow opens a turn's events after lastID ("" = from the start).
func (c *client) follow(ctx context.Context, turnID, lastID string) (*events, error) {
	h := map[string]string{}
	if lastID != "" {
		h["Last-Event-ID"] = lastID
	}
	resp, err := c.do(ctx, http.MethodGet, "/api/chat/turns/"+url.PathEscape(turnID)+"/events", nil, h)
	if err != nil {
		return nil, err
	}
	return newEvents(resp.Body), nil
}

func (c *client) cancel(ctx context.Context, turnID string) error {
	return c.json(ctx, http.MethodPost, "/api/chat/turns/"+url.PathEscape(turnID)+"/cancel", nil, nil)
}

func (c *client) decide(ctx context.Context, requestID string, approved, always bool, ws string) error {
	body := map[string]any{"approved": approved, "always": always}
	if ws != "" {
		body["sourceWorkspaceId"] = ws
	}
	return c.json(ctx, http.MethodPost, "/api/approval/"+url.PathEscape(requestID), body, nil)
}

// event is one Server-Sent Event of a turn.
type event struct {
	ID   string
	Name string
	Data json.RawMessage
}

// events reads a text/event-stream body.
type events struct {
	body io.ReadCloser
	r    *bufio.Reader
}

func newEvents(body io.ReadCloser) *events {
	return &events{body: body, r: bufio.NewReaderSize(body, 64<<10)}
}

// Next returns the next event; io.EOF when the stream ended.
func (e *events) Next() (event, error) {
	var ev event
	var data []string
	for {
		line, err := e.r.ReadString('\n')
		if err != nil {
			if errors.Is(err, io.EOF) && line == "" {
				return ev, io.EOF
			}
			if !errors.Is(err, io.EOF) {
				return ev, err
			}
		}
		line = strings.TrimRight(line, "\r\n")
		switch {
		case line == "":
			if data != nil {
				ev.Data = json.RawMessage(strings.Join(data, "\n"))
				return ev, nil
			}
		case strings.HasPrefix(line, ":"):
		default:
			field, value, _ := strings.Cut(line, ":")
			value = strings.TrimPrefix(value, " ")
			switch field {
			case "id":
				ev.ID = value
			case "event":
				ev.Name = value
			case "data":
				data = append(data, value)
			}
		}
		if err != nil {
			return ev, io.EOF
		}
	}
}

// Close ends the stream.
func (e *events) Close() error { return e.body.Close() }
