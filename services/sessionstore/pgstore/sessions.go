package pgstore

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/waggle-os/core/libs/protocol"
	"github.com/waggle-os/core/services/sessionstore/jsonl"
	"github.com/waggle-os/core/services/sessionstore/sessions"
	"github.com/waggle-os/core/services/sessionstore/transcript"
)

// querier is what reads need of a pool or a transaction.
type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// row is a session's sessions row: what the listing needs.
type row struct {
	id           string
	meta         string
	firstLine    *string
	messageCount int
	lastActive   time.Time
}

// info builds the listing entry exactly as transcript.QuickInfo builds it
// from the file: the meta line and the first message line decide title,
// summary and created; the count is kept in the row.
func (r row) info() protocol.SessionInfo {
	data := []byte(r.meta)
	if r.firstLine != nil {
		data = append(append(data, '\n'), *r.firstLine...)
	}
	info := transcript.QuickInfo(r.id, data, r.lastActive)
	info.MessageCount = r.messageCount
	return info
}

// metaTitle is the meta line's own string title ("" when it has none, or
// a title that is not a string): the one session search matches.
func (r row) metaTitle() string {
	var m struct {
		Title any `json:"title"`
	}
	if json.Unmarshal([]byte(r.meta), &m) != nil {
		return ""
	}
	t, _ := m.Title.(string)
	return t
}

// read returns a session's file bytes as the JSONL store would hold them
// (meta line, then every line in order), read in one statement so one
// snapshot. ok is false when the session does not exist.
func read(ctx context.Context, q querier, ref protocol.SessionRef) (data []byte, lastActive time.Time, ok bool, err error) {
	rows, err := q.Query(ctx, `SELECT s.meta, s.last_active, l.line FROM sessions s
		LEFT JOIN session_lines l ON l.workspace = s.workspace AND l.session = s.id
		WHERE s.workspace = $1 AND s.id = $2 ORDER BY l.seq`, ref.Workspace, ref.Session)
	if err != nil {
		return nil, time.Time{}, false, err
	}
	var buf bytes.Buffer
	var meta string
	var line *string
	_, err = pgx.ForEachRow(rows, []any{&meta, &lastActive, &line}, func() error {
		if !ok {
			ok = true
			buf.WriteString(meta)
			buf.WriteByte('\n')
		}
		if line != nil {
			buf.WriteString(*line)
			buf.WriteByte('\n')
		}
		return nil
	})
	return buf.Bytes(), lastActive, ok, err
}

// readExisting is read with the contract's 404s, for the routes that
// name a workspace.
func (s *Store) readExisting(ctx context.Context, ref protocol.SessionRef) ([]byte, time.Time, error) {
	exists, err := s.WorkspaceExists(ctx, ref.Workspace)
	if err != nil {
		return nil, time.Time{}, err
	}
	if !exists {
		return nil, time.Time{}, sessions.ErrWorkspaceNotFound
	}
	data, mtime, ok, err := read(ctx, s.pool, ref)
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("pgstore: read %s/%s: %w", ref.Workspace, ref.Session, err)
	}
	if !ok {
		return nil, time.Time{}, sessions.ErrSessionNotFound
	}
	return data, mtime, nil
}

// History reads a session's messages (and tool events); a missing session
// is an empty history.
func (s *Store) History(ctx context.Context, req protocol.HistoryRequest) (protocol.HistoryReply, error) {
	data, _, _, err := read(ctx, s.pool, req.SessionRef)
	if err != nil {
		return protocol.HistoryReply{}, fmt.Errorf("pgstore: history %s/%s: %w", req.Workspace, req.Session, err)
	}
	f := transcript.Parse(data)
	rep := protocol.HistoryReply{Messages: f.Messages}
	if rep.Messages == nil {
		rep.Messages = []protocol.Message{}
	}
	if req.Tools {
		rep.Tools = f.Tools
	}
	return rep, nil
}

// Append adds one message or tool event, creating the session (with a
// fresh meta line) when it does not exist. The upsert of the sessions row
// locks it, so concurrent appends get consecutive positions. A request
// with a key the session holds a line of already (the unique index on
// append_key) is rolled back, counters and all, and answers that line.
func (s *Store) Append(ctx context.Context, req protocol.AppendRequest) (protocol.AppendReply, error) {
	line, err := jsonl.EncodeLine(jsonl.LineOf(req))
	if err != nil {
		return protocol.AppendReply{}, fmt.Errorf("pgstore: encode line for %s/%s: %w", req.Workspace, req.Session, err)
	}
	isMsg := req.Message != nil
	ts := ""
	if isMsg {
		ts = req.Message.Timestamp
	} else {
		ts = req.Tool.Timestamp
	}
	now := s.now()
	meta, err := jsonl.EncodeMeta(now)
	if err != nil {
		return protocol.AppendReply{}, fmt.Errorf("pgstore: encode meta: %w", err)
	}
	var msgInc int
	var first, lcontent, key *string
	if isMsg {
		msgInc = 1
		l, c := string(line), strings.ToLower(req.Message.Content)
		first, lcontent = &l, &c
	}
	if req.Key != "" {
		key = &req.Key
	}
	err = s.inTx(ctx, func(tx pgx.Tx) error {
		var seq, mcount int
		err := tx.QueryRow(ctx, `INSERT INTO sessions AS s (workspace, id, meta, first_line, message_count, line_count, last_active)
			VALUES ($1, $2, $3, $4, $5, 1, $6)
			ON CONFLICT (workspace, id) DO UPDATE SET
				line_count = s.line_count + 1,
				message_count = s.message_count + EXCLUDED.message_count,
				first_line = COALESCE(s.first_line, EXCLUDED.first_line),
				last_active = GREATEST(s.last_active, EXCLUDED.last_active)
			RETURNING line_count, message_count`,
			req.Workspace, req.Session, string(meta), first, msgInc, now).Scan(&seq, &mcount)
		if err != nil {
			return err
		}
		var mline *int
		if isMsg {
			mline = &mcount
		}
		tag, err := tx.Exec(ctx, `INSERT INTO session_lines (workspace, session, seq, mline, lcontent, line, append_key) VALUES ($1, $2, $3, $4, $5, $6, $7)
			ON CONFLICT (workspace, session, append_key) WHERE append_key IS NOT NULL DO NOTHING`,
			req.Workspace, req.Session, seq, mline, lcontent, string(line), key)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return errDuplicateKey // undoes the counters
		}
		return nil
	})
	if errors.Is(err, errDuplicateKey) {
		stored, err := s.keyedTimestamp(ctx, req)
		if err != nil {
			return protocol.AppendReply{}, fmt.Errorf("pgstore: append %s/%s: %w", req.Workspace, req.Session, err)
		}
		return protocol.AppendReply{Timestamp: stored, Duplicate: true}, nil
	}
	if err != nil {
		return protocol.AppendReply{}, fmt.Errorf("pgstore: append %s/%s: %w", req.Workspace, req.Session, err)
	}
	return protocol.AppendReply{Timestamp: ts}, nil
}

// errDuplicateKey rolls back an append whose key is stored already.
var errDuplicateKey = errors.New("pgstore: append key stored already")

// keyedTimestamp is the timestamp of the line a session holds under
// req.Key.
func (s *Store) keyedTimestamp(ctx context.Context, req protocol.AppendRequest) (string, error) {
	var line string
	err := s.pool.QueryRow(ctx, `SELECT line FROM session_lines WHERE workspace = $1 AND session = $2 AND append_key = $3`,
		req.Workspace, req.Session, req.Key).Scan(&line)
	if err != nil {
		return "", err
	}
	var l struct {
		Timestamp string `json:"timestamp"`
	}
	if err := json.Unmarshal([]byte(line), &l); err != nil {
		return "", err
	}
	return l.Timestamp, nil
}

// RecentSessions is ListSessions: the database is the only writer, so
// its listing is never stale.
func (s *Store) RecentSessions(ctx context.Context, req protocol.SessionListRequest) ([]protocol.SessionInfo, error) {
	return s.ListSessions(ctx, req)
}

// ListSessions lists a workspace's sessions, most recently active first
// (ties by id); an unknown workspace lists as empty. Sessions with at
// least 4 messages and no summary get one generated and written back.
func (s *Store) ListSessions(ctx context.Context, req protocol.SessionListRequest) ([]protocol.SessionInfo, error) {
	exists, err := s.WorkspaceExists(ctx, req.Workspace)
	if err != nil || !exists {
		return []protocol.SessionInfo{}, err
	}
	q := `SELECT id, meta, first_line, message_count, last_active FROM sessions WHERE workspace = $1`
	if req.HideEmpty {
		q += ` AND message_count > 0`
	}
	rs, err := s.rows(ctx, q, req.Workspace)
	if err != nil {
		return nil, fmt.Errorf("pgstore: list %s: %w", req.Workspace, err)
	}
	out := make([]protocol.SessionInfo, 0, len(rs))
	for _, r := range rs {
		info := r.info()
		if info.Summary == nil && info.MessageCount >= 4 {
			info = s.lazySummary(ctx, protocol.SessionRef{Workspace: req.Workspace, Session: r.id}, info)
		}
		out = append(out, info)
	}
	slices.SortFunc(out, func(a, b protocol.SessionInfo) int {
		if c := strings.Compare(b.LastActive, a.LastActive); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	return out, nil
}

// rows runs a query selecting id, meta, first_line, message_count and
// last_active of sessions.
func (s *Store) rows(ctx context.Context, q string, args ...any) ([]row, error) {
	rows, err := s.pool.Query(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	var rs []row
	var r row
	_, err = pgx.ForEachRow(rows, []any{&r.id, &r.meta, &r.firstLine, &r.messageCount, &r.lastActive}, func() error {
		rs = append(rs, r)
		return nil
	})
	return rs, err
}

// SessionDigests lists a workspace's sessions last active at or after
// since, with the summary a listing would show; a due summary is generated
// from the session's lines but not written back (the memory lifecycle
// reads sessions without touching them).
func (s *Store) SessionDigests(ctx context.Context, ws string, since time.Time) ([]protocol.SessionInfo, error) {
	rs, err := s.rows(ctx, `SELECT id, meta, first_line, message_count, last_active FROM sessions WHERE workspace = $1 AND last_active >= $2`, ws, since)
	if err != nil {
		return nil, fmt.Errorf("pgstore: digests %s: %w", ws, err)
	}
	out := make([]protocol.SessionInfo, 0, len(rs))
	for _, r := range rs {
		info := r.info()
		if info.Summary == nil && info.MessageCount >= 4 {
			data, mtime, ok, err := read(ctx, s.pool, protocol.SessionRef{Workspace: ws, Session: r.id})
			if err != nil {
				return nil, fmt.Errorf("pgstore: digest %s/%s: %w", ws, r.id, err)
			}
			if !ok {
				continue // deleted meanwhile
			}
			info = transcript.Digest(r.id, data, mtime)
			info.MessageCount = r.messageCount
		}
		out = append(out, info)
	}
	return out, nil
}

// lazySummary writes a generated summary into a session's meta line and
// returns the updated entry; on failure it logs and returns info with the
// summary it would have written.
func (s *Store) lazySummary(ctx context.Context, ref protocol.SessionRef, info protocol.SessionInfo) protocol.SessionInfo {
	out, err := s.writeSummary(ctx, ref)
	if err != nil {
		s.cfg.Logger.Warn("lazy summary write-back failed", "workspace", ref.Workspace, "session", ref.Session, "err", err)
		return info
	}
	return out
}

// writeSummary generates and stores the summary of a session that has
// none, under the session's row lock, from the lines as they are then; a
// summary is not activity, so last_active stays.
func (s *Store) writeSummary(ctx context.Context, ref protocol.SessionRef) (protocol.SessionInfo, error) {
	var info protocol.SessionInfo
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		var one int
		err := tx.QueryRow(ctx, `SELECT 1 FROM sessions WHERE workspace = $1 AND id = $2 FOR UPDATE`, ref.Workspace, ref.Session).Scan(&one)
		if errors.Is(err, pgx.ErrNoRows) {
			return sessions.ErrSessionNotFound
		}
		if err != nil {
			return err
		}
		data, mtime, _, err := read(ctx, tx, ref)
		if err != nil {
			return err
		}
		f := transcript.Parse(data)
		info = transcript.SessionInfo(ref.Session, f, mtime)
		if f.Meta != nil && f.Meta.Summary != nil {
			return nil // written meanwhile
		}
		summary, ok := transcript.GenerateSummary(f)
		if !ok {
			return nil
		}
		out := transcript.WithSummary(data, summary, mtime)
		meta, _, _ := bytes.Cut(out, []byte{'\n'})
		info = transcript.SessionInfo(ref.Session, transcript.Parse(out), mtime)
		_, err = tx.Exec(ctx, `UPDATE sessions SET meta = $3, summary = $4, lsummary = $5 WHERE workspace = $1 AND id = $2`,
			ref.Workspace, ref.Session, string(meta), summary, strings.ToLower(summary))
		return err
	})
	return info, err
}

// SearchSessions finds the query (case-insensitively, as a substring) in
// the summaries and the first 50 message lines of a workspace's sessions.
// Counting, ordering and the limit run in PostgreSQL over the trigram
// indexes; snippets are built from the first three hits of each result.
func (s *Store) SearchSessions(ctx context.Context, req protocol.SessionSearchRequest) ([]protocol.SessionSearchResult, error) {
	exists, err := s.WorkspaceExists(ctx, req.Workspace)
	if err != nil {
		return nil, err
	}
	if !exists {
		return nil, sessions.ErrWorkspaceNotFound
	}
	if err := sessions.CheckQuery(req.Query); err != nil {
		return nil, err
	}
	limit := sessions.SearchLimit(req.Limit)
	lq := strings.ToLower(req.Query)
	pattern := "%" + likeEscape(lq) + "%"
	rows, err := s.pool.Query(ctx, `
		WITH hits AS (
			SELECT session, count(*) AS n FROM session_lines
			WHERE workspace = $1 AND mline <= `+searchedLines+` AND lcontent LIKE $2
			GROUP BY session
			UNION ALL
			SELECT id, 1 FROM sessions WHERE workspace = $1 AND lsummary LIKE $2
			UNION ALL
			SELECT id, 1 FROM sessions WHERE workspace = $1 AND jsonb_typeof(meta::jsonb->'title') = 'string'
				AND lower(meta::jsonb->>'title') LIKE $2
		), totals AS (
			SELECT session, sum(n)::int AS n FROM hits GROUP BY session
		)
		SELECT s.id, s.meta, s.first_line, s.message_count, s.last_active, t.n, s.summary
		FROM totals t JOIN sessions s ON s.workspace = $1 AND s.id = t.session
		ORDER BY t.n DESC, date_trunc('milliseconds', s.last_active) DESC, s.id COLLATE "C"
		LIMIT $3`, req.Workspace, pattern, limit)
	if err != nil {
		return nil, fmt.Errorf("pgstore: search %s: %w", req.Workspace, err)
	}
	type result struct {
		row
		count   int
		summary *string
	}
	var found []result
	var r result
	_, err = pgx.ForEachRow(rows, []any{&r.id, &r.meta, &r.firstLine, &r.messageCount, &r.lastActive, &r.count, &r.summary}, func() error {
		found = append(found, r)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("pgstore: search %s: %w", req.Workspace, err)
	}
	out := make([]protocol.SessionSearchResult, len(found))
	ids := make([]string, len(found))
	index := make(map[string]int, len(found))
	for i, f := range found {
		info := f.info()
		out[i] = protocol.SessionSearchResult{
			SessionID: f.id, Title: info.Title, Summary: info.Summary, MatchCount: f.count,
			Snippets: []protocol.SearchSnippet{}, LastActive: info.LastActive,
		}
		if t := f.metaTitle(); t != "" && strings.Contains(strings.ToLower(t), lq) {
			out[i].Snippets = append(out[i].Snippets, protocol.SearchSnippet{Text: transcript.SnippetText(t, req.Query), Role: "title"})
		}
		if f.summary != nil && strings.Contains(strings.ToLower(*f.summary), lq) {
			out[i].Snippets = append(out[i].Snippets, protocol.SearchSnippet{Text: transcript.SnippetText(*f.summary, req.Query), Role: "summary"})
		}
		ids[i] = f.id
		index[f.id] = i
	}
	if len(ids) == 0 {
		return out, nil
	}
	rows, err = s.pool.Query(ctx, `SELECT session, line FROM (
			SELECT session, line, row_number() OVER (PARTITION BY session ORDER BY seq) AS rn
			FROM session_lines
			WHERE workspace = $1 AND session = ANY($2) AND mline <= `+searchedLines+` AND lcontent LIKE $3
		) x WHERE rn <= $4 ORDER BY session, rn`, req.Workspace, ids, pattern, transcript.MaxSnippets)
	if err != nil {
		return nil, fmt.Errorf("pgstore: search snippets %s: %w", req.Workspace, err)
	}
	var id, line string
	_, err = pgx.ForEachRow(rows, []any{&id, &line}, func() error {
		res := &out[index[id]]
		if len(res.Snippets) >= transcript.MaxSnippets {
			return nil
		}
		var m protocol.Message
		if json.Unmarshal([]byte(line), &m) == nil {
			res.Snippets = append(res.Snippets, protocol.SearchSnippet{Text: transcript.SnippetText(m.Content, req.Query), Role: m.Role})
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("pgstore: search snippets %s: %w", req.Workspace, err)
	}
	return out, nil
}

// searchedLines is transcript.SearchedLines as SQL text. It must be a literal
// in the query, not a parameter: only then can the planner (generic plans
// included) prove the partial index's predicate mline <= 50.
var searchedLines = strconv.Itoa(transcript.SearchedLines)

// likeEscape quotes LIKE's metacharacters (backslash is the escape).
func likeEscape(s string) string {
	return strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`).Replace(s)
}

// ExportSession renders a session as Markdown.
func (s *Store) ExportSession(ctx context.Context, ref protocol.SessionRef) (string, error) {
	data, _, err := s.readExisting(ctx, ref)
	if err != nil {
		return "", err
	}
	return transcript.ExportMarkdown(ref.Session, transcript.Parse(data), s.cfg.Location), nil
}

// SessionTimeline returns a session's tool timeline as a JSON array.
func (s *Store) SessionTimeline(ctx context.Context, ref protocol.SessionRef) (json.RawMessage, error) {
	data, _, err := s.readExisting(ctx, ref)
	if err != nil {
		return nil, err
	}
	b, err := transcript.TimelineJSON(data)
	if err != nil {
		return nil, fmt.Errorf("pgstore: encode timeline of %s/%s: %w", ref.Workspace, ref.Session, err)
	}
	return b, nil
}

// CreateSession creates an empty session in an existing workspace.
func (s *Store) CreateSession(ctx context.Context, req protocol.SessionCreateRequest) (protocol.SessionInfo, error) {
	exists, err := s.WorkspaceExists(ctx, req.Workspace)
	if err != nil {
		return protocol.SessionInfo{}, err
	}
	if !exists {
		return protocol.SessionInfo{}, sessions.ErrWorkspaceNotFound
	}
	now := s.now()
	info, meta, err := sessions.NewSession(req.Title, req.BranchOf, now)
	if err != nil {
		return protocol.SessionInfo{}, err
	}
	_, err = s.pool.Exec(ctx, `INSERT INTO sessions (workspace, id, meta, last_active) VALUES ($1, $2, $3, $4)`,
		req.Workspace, info.ID, string(meta), now)
	if err != nil {
		return protocol.SessionInfo{}, fmt.Errorf("pgstore: create session in %s: %w", req.Workspace, err)
	}
	return info, nil
}

// LocateSession finds a session: in loc.Workspace when set, else in the
// first workspace (by name, bytewise) holding one with that id.
func (s *Store) LocateSession(ctx context.Context, loc protocol.SessionLocator) (protocol.SessionRef, error) {
	var ws string
	var err error
	if loc.Workspace != "" {
		err = s.pool.QueryRow(ctx, `SELECT workspace FROM sessions WHERE workspace = $1 AND id = $2`, loc.Workspace, loc.Session).Scan(&ws)
	} else {
		err = s.pool.QueryRow(ctx, `SELECT workspace FROM sessions WHERE id = $1 ORDER BY workspace COLLATE "C" LIMIT 1`, loc.Session).Scan(&ws)
	}
	if errors.Is(err, pgx.ErrNoRows) {
		return protocol.SessionRef{}, sessions.ErrSessionNotFound
	}
	if err != nil {
		return protocol.SessionRef{}, fmt.Errorf("pgstore: locate %s: %w", loc.Session, err)
	}
	return protocol.SessionRef{Workspace: ws, Session: loc.Session}, nil
}

// RenameSession sets a session's title in its meta line; it is activity.
func (s *Store) RenameSession(ctx context.Context, ref protocol.SessionRef, title string) error {
	if title == "" {
		return sessions.ErrTitleRequired
	}
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		var meta string
		err := tx.QueryRow(ctx, `SELECT meta FROM sessions WHERE workspace = $1 AND id = $2 FOR UPDATE`, ref.Workspace, ref.Session).Scan(&meta)
		if errors.Is(err, pgx.ErrNoRows) {
			return sessions.ErrSessionNotFound
		}
		if err != nil {
			return err
		}
		now := s.now()
		out, _, _ := bytes.Cut(transcript.WithTitle([]byte(meta), title, now), []byte{'\n'})
		_, err = tx.Exec(ctx, `UPDATE sessions SET meta = $3, last_active = GREATEST(last_active, $4) WHERE workspace = $1 AND id = $2`,
			ref.Workspace, ref.Session, string(out), now)
		return err
	})
	return wrap(err, "rename %s/%s", ref.Workspace, ref.Session)
}

// DeleteSession removes a session with its lines.
func (s *Store) DeleteSession(ctx context.Context, ref protocol.SessionRef) error {
	tag, err := s.pool.Exec(ctx, `DELETE FROM sessions WHERE workspace = $1 AND id = $2`, ref.Workspace, ref.Session)
	if err != nil {
		return fmt.Errorf("pgstore: delete %s/%s: %w", ref.Workspace, ref.Session, err)
	}
	if tag.RowsAffected() == 0 {
		return sessions.ErrSessionNotFound
	}
	return nil
}

// SessionSummary builds a session's post-session summary, writing a lazy
// summary back first like the listing does.
func (s *Store) SessionSummary(ctx context.Context, ref protocol.SessionRef) (protocol.SessionSummary, error) {
	data, mtime, ok, err := read(ctx, s.pool, ref)
	if err != nil {
		return protocol.SessionSummary{}, fmt.Errorf("pgstore: summary %s/%s: %w", ref.Workspace, ref.Session, err)
	}
	if !ok {
		return protocol.SessionSummary{}, sessions.ErrSessionNotFound
	}
	f := transcript.Parse(data)
	info := transcript.SessionInfo(ref.Session, f, mtime)
	if info.Summary == nil && info.MessageCount >= 4 {
		info = s.lazySummary(ctx, ref, info)
		// The summary was computed from the lines under the lock; read
		// them again so the counts match it.
		if data, _, ok, err = read(ctx, s.pool, ref); err != nil || !ok {
			return protocol.SessionSummary{}, wrap(cmpErr(err, ok), "summary %s/%s", ref.Workspace, ref.Session)
		}
		f = transcript.Parse(data)
	}
	return transcript.SessionSummary(ref.Session, f, info), nil
}

func cmpErr(err error, ok bool) error {
	if err == nil && !ok {
		return sessions.ErrSessionNotFound
	}
	return err
}
