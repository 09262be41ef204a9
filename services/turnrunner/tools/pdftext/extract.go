package pdftext

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"

	"github.com/ledongthuc/pdf"
)

// Limits of one extraction.
const (
	// MaxInflateBytes bounds what a PDF's page contents and font maps may
	// decompress to in all (a stream shown on many pages counts each
	// time). Past it the extraction is an error, not a process out of
	// memory.
	MaxInflateBytes = 64 << 20
	// maxObjects bounds a PDF's objects (its cross-reference sizes and
	// object streams' counts, read before the PDF is parsed: the reader
	// allocates by them).
	maxObjects = 500_000
	// maxPages bounds the pages read.
	maxPages = 5_000
	// maxEntries bounds the content streams and fonts of one page.
	maxEntries = 10_000
)

// ErrInflate is the error of a PDF that decompresses past MaxInflateBytes.
var ErrInflate = fmt.Errorf("the document decompresses to more than %d MiB; read_document stops there", MaxInflateBytes>>20)

// extract returns the text of the pages of data that pages selects (nil:
// all), at most about maxBytes of it. The PDF reader panics on malformed
// files; that is an error here, not a crash. Before parsing, the object
// counts the reader would allocate by are checked; each page's content
// and font maps are decompressed once into a count against
// MaxInflateBytes before the reader interprets them. What it cannot bound
// (the reader loops forever on a page tree that contains itself) is
// bounded by running it in a worker process (Text).
func extract(data []byte, pages map[int]bool, maxBytes int) (text string, err error) {
	defer func() {
		if p := recover(); p != nil {
			text, err = "", errors.New("the PDF is damaged or uses features that cannot be read")
		}
	}()
	if err := checkObjects(data); err != nil {
		return "", err
	}
	r, err := pdf.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		if strings.Contains(err.Error(), "encrypt") {
			return "", errors.New("the PDF is encrypted")
		}
		return "", errors.New("not a readable PDF")
	}
	var b strings.Builder
	total := r.NumPage()
	fmt.Fprintf(&b, "[PDF, %d pages]\n", total)
	budget := int64(MaxInflateBytes)
	for i := 1; i <= min(total, maxPages) && b.Len() <= maxBytes; i++ {
		if pages != nil && !pages[i] {
			continue
		}
		p := r.Page(i)
		if p.V.IsNull() {
			continue
		}
		if budget -= pageInflation(p, budget); budget < 0 {
			return "", ErrInflate
		}
		t, err := p.GetPlainText(nil)
		if err != nil {
			return "", fmt.Errorf("page %d cannot be read", i)
		}
		fmt.Fprintf(&b, "\n## Page %d\n\n%s\n", i, strings.TrimSpace(t))
	}
	if total > maxPages {
		fmt.Fprintf(&b, "\n[read_document reads the first %d pages]\n", maxPages)
	}
	return b.String(), nil
}

// counts finds the counts a PDF declares: /Size of its cross-reference
// tables and streams, /N of its object streams.
var counts = regexp.MustCompile(`/(?:Size|N)\s+(\d+)`)

// checkObjects refuses a PDF declaring more than maxObjects objects
// anywhere (the dictionaries holding the counts are never compressed).
func checkObjects(data []byte) error {
	for _, m := range counts.FindAllSubmatch(data, -1) {
		if n, err := strconv.Atoi(string(m[1])); err != nil || n > maxObjects {
			return fmt.Errorf("the PDF declares more than %d objects; read_document does not open it", maxObjects)
		}
	}
	return nil
}

// pageInflation is how many bytes page p's content streams and its fonts'
// ToUnicode maps decompress to (what the text extraction reads), counted
// up to limit+1.
func pageInflation(p pdf.Page, limit int64) int64 {
	var n int64
	count := func(v pdf.Value) {
		if v.Kind() != pdf.Stream || n > limit {
			return
		}
		rc := v.Reader()
		defer rc.Close()
		c, _ := io.Copy(io.Discard, io.LimitReader(rc, limit-n+1))
		n += c
	}
	contents := p.V.Key("Contents")
	if contents.Kind() == pdf.Array {
		for i := 0; i < contents.Len() && i < maxEntries; i++ {
			count(contents.Index(i))
		}
	} else {
		count(contents)
	}
	fonts := p.Resources().Key("Font")
	for i, name := range fonts.Keys() {
		if i >= maxEntries {
			break
		}
		count(fonts.Key(name).Key("ToUnicode"))
	}
	return n
}
