package filesapi

import (
	"bytes"
	"errors"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"path"

	"github.com/waggle-os/core/libs/protocol"
	"github.com/waggle-os/core/services/gateway/internal/respond"
)

// Bounds of a multipart upload. The body may carry MaxFileTransfer bytes
// of files plus the form's own bytes (boundaries, part headers, the path);
// it is read part by part into memory, never spilled to temporary files
// (mime/multipart's ReadForm would), so one request holds at most
// formBodyLimit bytes however it is shaped.
const (
	formOverhead  = 64 << 10
	formBodyLimit = protocol.MaxFileTransfer + formOverhead
	// maxFormFiles bounds the file parts of one upload.
	maxFormFiles = 32
	// maxFormPath bounds the path field.
	maxFormPath = 4 << 10
)

// formFile is one file part, read.
type formFile struct {
	name string
	data []byte
}

// uploadForm writes the file parts of a multipart/form-data body to the
// directory its "path" field names ("/" without one): the original app's
// FormData of "file" and "path". Strict: every part is form-data; a part
// with a filename is a file, whose name must be one path segment (not cut
// down to one, as browsers' and Go's helpers do); the only other field is
// a single "path"; at least one file, at most maxFormFiles, no name twice.
// The files together are at most MaxFileTransfer bytes (413 otherwise).
// Everything is checked before the first file is written; one file answers
// its entry (the original's shape), several an array of entries.
func (h handlers) uploadForm(w http.ResponseWriter, r *http.Request, boundary string) {
	if boundary == "" {
		respond.Error(w, h.d.Log, protocol.Errorf(protocol.Invalid, "Missing multipart boundary"))
		return
	}
	if r.ContentLength > formBodyLimit {
		respond.Error(w, h.d.Log, errTooLarge)
		return
	}
	dir, files, err := readForm(http.MaxBytesReader(w, r.Body, formBodyLimit), boundary)
	if err != nil {
		respond.Error(w, h.d.Log, err)
		return
	}
	entries := make([]protocol.FileEntry, 0, len(files))
	for _, f := range files {
		rep, ok := h.call(w, r, protocol.FilesRequest{Op: protocol.FilesWrite, Path: path.Join(dir, f.name), Data: f.data})
		if !ok {
			return
		}
		if rep.Entry != nil {
			entries = append(entries, *rep.Entry)
		}
	}
	if len(files) == 1 && len(entries) == 1 {
		respond.JSON(w, http.StatusCreated, entries[0])
		return
	}
	respond.JSON(w, http.StatusCreated, entries)
}

// readForm reads the form's parts from body (already bounded by the
// caller): the target directory and the files.
func readForm(body io.Reader, boundary string) (string, []formFile, error) {
	mr := multipart.NewReader(body, boundary)
	var (
		dir     string
		hasDir  bool
		files   []formFile
		names   = map[string]bool{}
		total   int
		invalid = func(format string, args ...any) error { return protocol.Errorf(protocol.Invalid, format, args...) }
	)
	for {
		p, err := mr.NextPart()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return "", nil, formReadError(err)
		}
		disp, params, err := mime.ParseMediaType(p.Header.Get("Content-Disposition"))
		if err != nil || disp != "form-data" || params["name"] == "" {
			return "", nil, invalid("every part of the form must be form-data with a name")
		}
		filename, isFile := params["filename"]
		switch {
		case isFile:
			if len(files) == maxFormFiles {
				return "", nil, invalid("at most %d files per upload", maxFormFiles)
			}
			if err := checkFileName(filename); err != nil {
				return "", nil, err
			}
			if names[filename] {
				return "", nil, invalid("the file %s is in the upload twice", filename)
			}
			names[filename] = true
			// One byte more than the room left tells a file over the limit.
			var buf bytes.Buffer
			n, err := buf.ReadFrom(io.LimitReader(p, int64(protocol.MaxFileTransfer-total)+1))
			if err != nil {
				return "", nil, formReadError(err)
			}
			total += int(n)
			if total > protocol.MaxFileTransfer {
				return "", nil, errTooLarge
			}
			files = append(files, formFile{name: filename, data: buf.Bytes()})
		case params["name"] == "path":
			if hasDir {
				return "", nil, invalid("path is in the form twice")
			}
			b, err := io.ReadAll(io.LimitReader(p, maxFormPath+1))
			if err != nil {
				return "", nil, formReadError(err)
			}
			if len(b) > maxFormPath {
				return "", nil, invalid("path is longer than %d bytes", maxFormPath)
			}
			dir, hasDir = string(bytes.TrimSpace(b)), true
		default:
			return "", nil, invalid("unknown form field %.64q: send file parts and path", params["name"])
		}
	}
	if len(files) == 0 {
		return "", nil, invalid("Missing file in upload")
	}
	if dir == "" {
		dir = "/"
	}
	return dir, files, nil
}

// formReadError is the answer to a form that could not be read: 413 when
// the body passed its limit, else a 400 that does not echo the parser.
func formReadError(err error) error {
	var tooBig *http.MaxBytesError
	if errors.As(err, &tooBig) {
		return errTooLarge
	}
	return &respond.RequestError{Kind: protocol.Invalid, Message: "The upload is not a readable multipart form"}
}
