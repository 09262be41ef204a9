package tools

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"strings"
	"unicode/utf8"
)

// sniffLen is how much of a file is inspected to decide it is binary.
const sniffLen = 8 << 10

// looksBinary treats a NUL byte in the first sniffLen bytes as binary, the
// same heuristic git and grep use.
func looksBinary(head []byte) bool {
	return bytes.IndexByte(head[:min(len(head), sniffLen)], 0) >= 0
}

// truncateUTF8 cuts s to at most n bytes without splitting a rune.
func truncateUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// ---- read_file ----

type readFileTool struct{ cfg Config }

func (readFileTool) Name() string { return "read_file" }

func (t readFileTool) Description() string {
	return fmt.Sprintf("Read a text file from the workspace. path is relative to the workspace root "+
		"(a leading / also means the workspace root). Optional offset (1-based line number to start at) and "+
		"limit (number of lines) read part of a large file. At most %d bytes are returned per call; "+
		"a note at the end says when the output was truncated and which offset continues it.", t.cfg.ReadLimit)
}

func (readFileTool) Schema() json.RawMessage {
	return json.RawMessage(`{"type":"object","properties":{` +
		`"path":{"type":"string","description":"File path relative to the workspace root"},` +
		`"offset":{"type":"integer","minimum":1,"description":"1-based line number to start reading at (default 1)"},` +
		`"limit":{"type":"integer","minimum":1,"description":"Maximum number of lines to return (default: as many as fit the size limit)"}` +
		`},"required":["path"]}`)
}

// readFileInput is read_file's arguments.
type readFileInput struct {
	Path   string  `json:"path"`
	Offset *intArg `json:"offset,omitempty"`
	Limit  *intArg `json:"limit,omitempty"`
}

func (in *readFileInput) validate() error {
	if strings.TrimSpace(in.Path) == "" {
		return errors.New("path is required")
	}
	if in.Limit != nil && *in.Limit < 1 {
		return errors.New("limit must be at least 1")
	}
	return nil
}

func (t readFileTool) Decode(input json.RawMessage) (Call, error) { return decodeCall(input, t.run) }

func (t readFileTool) run(ctx context.Context, env Env, in *readFileInput) (string, error) {
	offset, limit := 1, 0
	if in.Offset != nil && *in.Offset > 1 {
		offset = int(*in.Offset)
	}
	if in.Limit != nil {
		limit = int(*in.Limit)
	}
	ws, rel, err := openPath(env, in.Path)
	if err != nil {
		return "", err
	}
	defer ws.Close()

	f, err := ws.root.Open(rel)
	if err != nil {
		return "", fsError(rel, err)
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return "", fsError(rel, err)
	}
	if info.IsDir() {
		return "", fmt.Errorf("%s is a directory; use list_files to see its contents", quote(rel))
	}
	br := bufio.NewReaderSize(f, sniffLen)
	if head, _ := br.Peek(sniffLen); looksBinary(head) {
		return "", fmt.Errorf("%s is a binary file (%d bytes); read_file returns text only", quote(rel), info.Size())
	}
	if info.Size() == 0 {
		return "(empty file)", nil
	}
	return t.readLines(ctx, br, rel, offset, limit)
}

// readLines returns lines [offset, offset+limit) of r, stopping early at the
// byte budget, and appends a note whenever something was left out.
func (t readFileTool) readLines(ctx context.Context, r *bufio.Reader, rel string, offset, limit int) (string, error) {
	var out strings.Builder
	budget := int(t.cfg.ReadLimit)
	lineNo, first, last := 0, 0, 0
	atEnd := false   // everything after the window was consumed: nothing follows
	cutLine := false // the budget ended inside the first line of the window
	for !atEnd {
		line, err := r.ReadString('\n')
		switch {
		case err == io.EOF:
			atEnd = true
		case err != nil:
			return "", fsError(rel, err)
		}
		if line == "" {
			continue
		}
		lineNo++
		if lineNo%4096 == 0 && ctx.Err() != nil {
			return "", ctx.Err()
		}
		if lineNo < offset {
			continue
		}
		if limit > 0 && lineNo >= offset+limit {
			atEnd = false // a line past the window exists
			break
		}
		if out.Len()+len(line) > budget {
			if first == 0 {
				// A single line larger than the budget: return its start.
				out.WriteString(truncateUTF8(line, budget))
				first, last, cutLine = lineNo, lineNo, true
			}
			atEnd = false
			break
		}
		if first == 0 {
			first = lineNo
		}
		last = lineNo
		out.WriteString(line)
	}
	if first == 0 {
		return fmt.Sprintf("(offset %d is past the end of %s, which has %d lines)", offset, quote(rel), lineNo), nil
	}
	text := strings.ToValidUTF8(out.String(), "\uFFFD")
	switch {
	case cutLine:
		return text + fmt.Sprintf("\n\n[truncated: line %d is longer than the %d-byte read limit; only its start is shown]", first, budget), nil
	case atEnd:
		return text, nil
	default:
		if !strings.HasSuffix(text, "\n") {
			text += "\n"
		}
		return text + fmt.Sprintf("\n[truncated: showing lines %d-%d; more lines follow. Use offset=%d to continue.]", first, last, last+1), nil
	}
}

// ---- write_file ----

type writeFileTool struct{}

func (writeFileTool) Name() string { return "write_file" }

func (writeFileTool) Description() string {
	return "Create or overwrite a file in the workspace with the given content. path is relative to the " +
		"workspace root (a leading / also means the workspace root); missing parent directories are created."
}

func (writeFileTool) Schema() json.RawMessage {
	return json.RawMessage(`{"type":"object","properties":{` +
		`"path":{"type":"string","description":"File path relative to the workspace root"},` +
		`"content":{"type":"string","description":"The complete new content of the file"}` +
		`},"required":["path","content"]}`)
}

// writeFileInput is write_file's arguments.
type writeFileInput struct {
	Path    string  `json:"path"`
	Content *string `json:"content"`
}

func (in *writeFileInput) validate() error { return requireFileInput(in.Path, in.Content) }

func (t writeFileTool) Decode(input json.RawMessage) (Call, error) { return decodeCall(input, t.run) }

func (writeFileTool) run(_ context.Context, env Env, in *writeFileInput) (string, error) {
	rel, err := resolve(env.FilesDir, in.Path)
	if err != nil {
		return "", err
	}
	if rel == "." {
		return "", errors.New("path must name a file, not the workspace root")
	}
	ws, err := openWorkspace(env)
	if err != nil {
		return "", err
	}
	defer ws.Close()
	if err := writeFile(ws, rel, []byte(*in.Content), 0o600); err != nil {
		return "", err
	}
	return fmt.Sprintf("Wrote %d bytes to %s", len(*in.Content), rel), nil
}

// requireFileInput is the input rule of the tools that write a file
// (write_file, generate_docx): a path and a content, which may be empty.
func requireFileInput(p string, content *string) error {
	if strings.TrimSpace(p) == "" {
		return errors.New("path is required")
	}
	if content == nil {
		return errors.New("content is required")
	}
	return nil
}

// writeFile creates rel's parent directories and writes data, refusing to
// replace a directory.
func writeFile(ws *workspace, rel string, data []byte, perm fs.FileMode) error {
	if info, err := ws.root.Stat(rel); err == nil && info.IsDir() {
		return fmt.Errorf("%s is a directory", quote(rel))
	}
	if dir := path.Dir(rel); dir != "." {
		if err := ws.root.MkdirAll(dir, 0o700); err != nil {
			return fsError(dir, err)
		}
	}
	if err := ws.root.WriteFile(rel, data, perm); err != nil {
		return fsError(rel, err)
	}
	return nil
}

// ---- edit_file ----

type editFileTool struct{}

func (editFileTool) Name() string { return "edit_file" }

func (editFileTool) Description() string {
	return "Edit a file in the workspace by replacing an exact string. old_string must match the file's text " +
		"exactly (including whitespace and indentation) and, unless replace_all is true, exactly once; include " +
		"enough surrounding context to make it unique. Fails when old_string is not found or is ambiguous."
}

func (editFileTool) Schema() json.RawMessage {
	return json.RawMessage(`{"type":"object","properties":{` +
		`"path":{"type":"string","description":"File path relative to the workspace root"},` +
		`"old_string":{"type":"string","description":"Exact text to replace"},` +
		`"new_string":{"type":"string","description":"Replacement text"},` +
		`"replace_all":{"type":"boolean","description":"Replace every occurrence instead of requiring exactly one (default false)"}` +
		`},"required":["path","old_string","new_string"]}`)
}

// editFileInput is edit_file's arguments.
type editFileInput struct {
	Path       string  `json:"path"`
	OldString  string  `json:"old_string"`
	NewString  *string `json:"new_string"`
	ReplaceAll boolArg `json:"replace_all,omitempty"`
}

func (in *editFileInput) validate() error {
	switch {
	case strings.TrimSpace(in.Path) == "":
		return errors.New("path is required")
	case in.OldString == "":
		return errors.New("old_string is required and must not be empty")
	case in.NewString == nil:
		return errors.New("new_string is required")
	case *in.NewString == in.OldString:
		return errors.New("old_string and new_string are identical; nothing to change")
	}
	return nil
}

func (t editFileTool) Decode(input json.RawMessage) (Call, error) { return decodeCall(input, t.run) }

func (editFileTool) run(_ context.Context, env Env, in *editFileInput) (string, error) {
	ws, rel, err := openPath(env, in.Path)
	if err != nil {
		return "", err
	}
	defer ws.Close()
	info, err := ws.root.Stat(rel)
	if err != nil {
		return "", fsError(rel, err)
	}
	if info.IsDir() {
		return "", fmt.Errorf("%s is a directory", quote(rel))
	}
	data, err := ws.root.ReadFile(rel)
	if err != nil {
		return "", fsError(rel, err)
	}
	text := string(data)
	n := strings.Count(text, in.OldString)
	switch {
	case n == 0:
		return "", fmt.Errorf("old_string was not found in %s", quote(rel))
	case n > 1 && !bool(in.ReplaceAll):
		return "", fmt.Errorf("old_string matches %d times in %s; add surrounding context to make it unique, or set replace_all to true", n, quote(rel))
	}
	text = strings.ReplaceAll(text, in.OldString, *in.NewString)
	if err := ws.root.WriteFile(rel, []byte(text), info.Mode().Perm()); err != nil {
		return "", fsError(rel, err)
	}
	if n == 1 {
		return fmt.Sprintf("Edited %s: replaced 1 occurrence", rel), nil
	}
	return fmt.Sprintf("Edited %s: replaced %d occurrences", rel, n), nil
}
