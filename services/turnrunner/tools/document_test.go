package tools

import (
	"archive/zip"
	"bytes"
	"compress/zlib"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/waggle-os/core/libs/waitfor"
)

// testPDF builds a PDF with one page per text, in Helvetica, the way a
// simple generator writes one (a classic xref table with byte offsets).
func testPDF(pages ...string) []byte {
	var objs []string
	kids := make([]string, len(pages))
	for i := range pages {
		kids[i] = fmt.Sprintf("%d 0 R", 4+2*i)
	}
	objs = append(objs,
		"<< /Type /Catalog /Pages 2 0 R >>",
		fmt.Sprintf("<< /Type /Pages /Kids [%s] /Count %d >>", strings.Join(kids, " "), len(pages)),
		"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>")
	for i, text := range pages {
		var content strings.Builder
		content.WriteString("BT /F1 12 Tf 72 720 Td 14 TL\n")
		for _, line := range strings.Split(text, "\n") {
			esc := strings.NewReplacer(`\`, `\\`, "(", `\(`, ")", `\)`).Replace(line)
			fmt.Fprintf(&content, "(%s) Tj T*\n", esc)
		}
		content.WriteString("ET")
		objs = append(objs,
			fmt.Sprintf("<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 3 0 R >> >> /Contents %d 0 R >>", 5+2*i),
			fmt.Sprintf("<< /Length %d >>\nstream\n%s\nendstream", content.Len(), content.String()))
	}
	return pdfFile(objs)
}

// pdfFile writes objs as objects 1… of a PDF (object 1 the catalog) with a
// classic xref table of byte offsets.
func pdfFile(objs []string) []byte {
	var b bytes.Buffer
	b.WriteString("%PDF-1.4\n")
	offsets := make([]int, len(objs))
	for i, o := range objs {
		offsets[i] = b.Len()
		fmt.Fprintf(&b, "%d 0 obj\n%s\nendobj\n", i+1, o)
	}
	xref := b.Len()
	fmt.Fprintf(&b, "xref\n0 %d\n0000000000 65535 f \n", len(objs)+1)
	for _, off := range offsets {
		fmt.Fprintf(&b, "%010d 00000 n \n", off)
	}
	fmt.Fprintf(&b, "trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n", len(objs)+1, xref)
	return b.Bytes()
}

// testZip builds a zip package from name → content.
func testZip(t *testing.T, parts map[string]string) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for name, body := range parts {
		w, err := zw.Create(name)
		if err != nil {
			t.Fatal(err)
		}
		w.Write([]byte(body))
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func writeBytes(t *testing.T, env Env, name string, data []byte) {
	t.Helper()
	p := filepath.Join(env.FilesDir, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestReadDocumentPDF(t *testing.T) {
	env := newEnv(t)
	writeBytes(t, env, "report.pdf", testPDF("Quarterly report\nRevenue grew (a lot)", "Second page text", "Third page"))
	out := mustCall(t, env, "read_document", map[string]any{"path": "report.pdf"})
	for _, want := range []string{"[PDF, 3 pages]", "## Page 1", "Quarterly report", "Revenue grew (a lot)", "## Page 3", "Third page"} {
		if !strings.Contains(out, want) {
			t.Errorf("PDF text lacks %q:\n%s", want, out)
		}
	}
	out = mustCall(t, env, "read_document", map[string]any{"path": "report.pdf", "pages": "2"})
	if !strings.Contains(out, "Second page text") || strings.Contains(out, "Quarterly") || strings.Contains(out, "Third page") {
		t.Errorf("pages 2 only:\n%s", out)
	}
	out = mustCall(t, env, "read_document", map[string]any{"path": "report.pdf", "maxChars": 30})
	if !strings.Contains(out, "[cut at 30 of") {
		t.Errorf("maxChars 30:\n%s", out)
	}
	writeBytes(t, env, "broken.pdf", []byte("%PDF-1.4\nthis is not a pdf at all"))
	if out, err := call(t, env, "read_document", map[string]any{"path": "broken.pdf"}); err == nil {
		t.Errorf("a broken PDF read as %q", out)
	}
}

func TestGenerateXlsxThenReadDocument(t *testing.T) {
	env := newEnv(t)
	out := mustCall(t, env, "generate_xlsx", map[string]any{"path": "budget", "sheets": []any{
		map[string]any{"name": "Q1", "rows": []any{
			[]any{"Item", "Cost", "Paid"},
			[]any{"Hosting", 120.5, true},
			[]any{"=HYPERLINK(\"http://evil\")", nil, false},
		}},
		map[string]any{"rows": []any{[]any{"tabs\tand <xml> & stuff"}}},
	}})
	if !strings.HasPrefix(out, "Generated budget.xlsx (2 sheets") {
		t.Errorf("generate_xlsx: %s", out)
	}
	z, err := zip.OpenReader(filepath.Join(env.FilesDir, "budget.xlsx"))
	if err != nil {
		t.Fatalf("not a zip: %v", err)
	}
	z.Close()
	got := mustCall(t, env, "read_document", map[string]any{"path": "budget.xlsx"})
	want := "[Workbook, 2 sheets]\n\n## Sheet 1: Q1\n\nItem\tCost\tPaid\nHosting\t120.5\tTRUE\n=HYPERLINK(\"http://evil\")\t\tFALSE\n\n" +
		"## Sheet 2: Sheet2\n\ntabs and <xml> & stuff"
	if got != want {
		t.Errorf("read back:\n%q\nwant\n%q", got, want)
	}
	if got := mustCall(t, env, "read_document", map[string]any{"path": "budget.xlsx", "pages": "2"}); strings.Contains(got, "Hosting") {
		t.Errorf("sheet 2 only: %q", got)
	}
	for _, bad := range []map[string]any{
		{"path": "x", "sheets": []any{}},
		{"path": "x", "sheets": []any{map[string]any{"name": "a/b", "rows": []any{}}}},
		{"path": "x", "sheets": []any{map[string]any{"name": "A", "rows": []any{}}, map[string]any{"name": "a", "rows": []any{}}}},
		{"path": "x", "sheets": []any{map[string]any{"rows": []any{[]any{map[string]any{"f": 1}}}}}},
		{"path": "../x", "sheets": []any{map[string]any{"rows": []any{}}}},
	} {
		if out, err := call(t, env, "generate_xlsx", bad); err == nil {
			t.Errorf("generate_xlsx %v: %s", bad, out)
		}
	}
}

func TestReadDocumentDocxAndPptx(t *testing.T) {
	env := newEnv(t)
	docx, err := buildDocx("Title here", "# Heading\n\nFirst paragraph.\n\n- a bullet", time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	if err != nil {
		t.Fatal(err)
	}
	writeBytes(t, env, "a.docx", docx)
	out := mustCall(t, env, "read_document", map[string]any{"path": "a.docx"})
	for _, want := range []string{"Title here", "Heading", "First paragraph.", "a bullet"} {
		if !strings.Contains(out, want) {
			t.Errorf("docx text lacks %q:\n%s", want, out)
		}
	}
	const nsP = `xmlns:p="http://schemas.openxmlformats.org/presentationml/2006/main" xmlns:a="http://schemas.openxmlformats.org/drawingml/2006/main" xmlns:r="http://schemas.openxmlformats.org/officeDocument/2006/relationships"`
	slide := func(text string) string {
		return `<p:sld ` + nsP + `><p:cSld><p:spTree><p:sp><p:txBody><a:p><a:r><a:t>` + text + `</a:t></a:r></a:p></p:txBody></p:sp></p:spTree></p:cSld></p:sld>`
	}
	writeBytes(t, env, "deck.pptx", testZip(t, map[string]string{
		"ppt/presentation.xml": `<p:presentation ` + nsP + `><p:sldIdLst><p:sldId id="256" r:id="rId7"/><p:sldId id="257" r:id="rId3"/></p:sldIdLst></p:presentation>`,
		"ppt/_rels/presentation.xml.rels": `<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">` +
			`<Relationship Id="rId3" Target="slides/slide2.xml"/><Relationship Id="rId7" Target="slides/slide1.xml"/></Relationships>`,
		"ppt/slides/slide1.xml": slide("Welcome slide"),
		"ppt/slides/slide2.xml": slide("Roadmap &amp; goals"),
	}))
	out = mustCall(t, env, "read_document", map[string]any{"path": "deck.pptx"})
	want := "[Presentation, 2 slides]\n\n## Slide 1\n\nWelcome slide\n\n## Slide 2\n\nRoadmap & goals"
	if out != want {
		t.Errorf("pptx:\n%q\nwant\n%q", out, want)
	}
}

func TestReadDocumentRefusals(t *testing.T) {
	env := newEnv(t)
	writeBytes(t, env, "notes.txt", []byte("plain"))
	// A zip bomb: one part inflating past the per-part limit.
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	w, _ := zw.Create("word/document.xml")
	chunk := bytes.Repeat([]byte("a"), 1<<20)
	for i := 0; i < docPartMaxBytes>>20+1; i++ {
		w.Write(chunk)
	}
	zw.Close()
	writeBytes(t, env, "bomb.docx", buf.Bytes())
	for _, c := range []struct {
		in   map[string]any
		want string
	}{
		{map[string]any{"path": "notes.txt"}, "not a PDF, DOCX, XLSX or PPTX"},
		{map[string]any{"path": "../outside.pdf"}, "escapes"},
		{map[string]any{"path": "missing.pdf"}, "not exist"},
		{map[string]any{"path": "bomb.docx"}, "larger than 32 MiB uncompressed"},
		{map[string]any{"path": "a.pdf", "pages": "3-1"}, "must look like"},
		{map[string]any{"path": "a.pdf", "pages": "-5"}, "must look like"},
	} {
		if out, err := call(t, env, "read_document", c.in); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("read_document %v = %q, %v; want an error with %q", c.in, out, err, c.want)
		}
	}
}

// flatePDF is a PDF of pages pages that all show one content stream:
// content, FlateDecode-compressed (a few KiB for megabytes of spaces).
func flatePDF(t *testing.T, content []byte, pages int) []byte {
	t.Helper()
	var z bytes.Buffer
	zw, _ := zlib.NewWriterLevel(&z, zlib.BestCompression)
	zw.Write(content)
	zw.Close()
	kids := make([]string, pages)
	for i := range kids {
		kids[i] = fmt.Sprintf("%d 0 R", 5+i)
	}
	objs := []string{
		"<< /Type /Catalog /Pages 2 0 R >>",
		fmt.Sprintf("<< /Type /Pages /Kids [%s] /Count %d >>", strings.Join(kids, " "), pages),
		"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
		fmt.Sprintf("<< /Length %d /Filter /FlateDecode >>\nstream\n%s\nendstream", z.Len(), z.Bytes()),
	}
	for range pages {
		objs = append(objs, "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 3 0 R >> >> /Contents 4 0 R >>")
	}
	return pdfFile(objs)
}

// rawSheet is a worksheet whose sheetData holds body.
func rawSheet(body string) string {
	return `<worksheet xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main"><sheetData>` + body + `</sheetData></worksheet>`
}

// workbookParts is an XLSX package of sheets (bodies of sheetData).
func workbookParts(sheets ...string) map[string]string {
	var list, rels strings.Builder
	parts := map[string]string{}
	for i, body := range sheets {
		fmt.Fprintf(&list, `<sheet name="S%d" sheetId="%d" r:id="rId%d"/>`, i+1, i+1, i+1)
		fmt.Fprintf(&rels, `<Relationship Id="rId%d" Target="worksheets/sheet%d.xml"/>`, i+1, i+1)
		parts[fmt.Sprintf("xl/worksheets/sheet%d.xml", i+1)] = rawSheet(body)
	}
	parts["xl/workbook.xml"] = `<workbook xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main" xmlns:r="http://schemas.openxmlformats.org/officeDocument/2006/relationships"><sheets>` + list.String() + `</sheets></workbook>`
	parts["xl/_rels/workbook.xml.rels"] = `<Relationships>` + rels.String() + `</Relationships>`
	return parts
}

// TestReadDocumentBombs: files built to decompress or allocate without
// bound — a workbook whose sheets together inflate past 64 MiB, one of
// cells skipping to the last column row after row, a package of 10,001
// files, a PDF whose content stream inflates past the limit, a small
// stream shown on many pages, a PDF declaring ten million objects — each
// answer a clear error, quickly, and the same call on a sound file still
// works.
func TestReadDocumentBombs(t *testing.T) {
	env := newEnv(t)
	spaces := strings.Repeat(" ", 30<<20)
	writeBytes(t, env, "inflate.xlsx", testZip(t, workbookParts(spaces, spaces, spaces)))
	writeBytes(t, env, "cells.xlsx", testZip(t, workbookParts(strings.Repeat(`<row><c r="XFD1" t="b"><v>1</v></c></row>`, 200))))
	many := map[string]string{"word/document.xml": `<w:document xmlns:w="w"><w:body><w:p><w:r><w:t>hi</w:t></w:r></w:p></w:body></w:document>`}
	for i := range docMaxEntries {
		many[fmt.Sprintf("x/%d", i)] = ""
	}
	writeBytes(t, env, "many.docx", testZip(t, many))
	writeBytes(t, env, "inflate.pdf", flatePDF(t, bytes.Repeat([]byte(" "), docInflateMaxBytes+1), 1))
	writeBytes(t, env, "shared.pdf", flatePDF(t, bytes.Repeat([]byte(" "), 1<<20), 100))
	objects := bytes.Replace(testPDF("hello"), []byte("/Size 6"), []byte("/Size 10000000"), 1)
	writeBytes(t, env, "objects.pdf", objects)

	for _, c := range []struct{ path, want string }{
		{"inflate.xlsx", "decompresses to more than 64 MiB"},
		{"cells.xlsx", "more than 2000000 cells"},
		{"many.docx", "holds 10001 files"},
		{"inflate.pdf", "decompresses to more than 64 MiB"},
		{"shared.pdf", "decompresses to more than 64 MiB"},
		{"objects.pdf", "declares more than 500000 objects"},
	} {
		if out, err := call(t, env, "read_document", map[string]any{"path": c.path}); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("read_document %s = %.80q, %v; want an error with %q", c.path, out, err, c.want)
		}
	}
	// Below the limits the same shapes read.
	writeBytes(t, env, "ok.pdf", flatePDF(t, []byte("BT /F1 12 Tf 72 720 Td (shared text) Tj ET"), 3))
	if out, err := call(t, env, "read_document", map[string]any{"path": "ok.pdf"}); err != nil || strings.Count(out, "shared text") != 3 {
		t.Errorf("read_document ok.pdf = %q, %v", out, err)
	}
	writeBytes(t, env, "ok.xlsx", testZip(t, workbookParts(`<row><c r="C1" t="b"><v>1</v></c></row>`)))
	if out, err := call(t, env, "read_document", map[string]any{"path": "ok.xlsx"}); err != nil || !strings.Contains(out, "\t\tTRUE") {
		t.Errorf("read_document ok.xlsx = %q, %v", out, err)
	}
}

// loopingPDF is a hostile PDF whose page tree contains itself: the PDF
// reader looking for page 1 descends into the same node forever, using
// no memory and never returning.
func loopingPDF() []byte {
	return pdfFile([]string{
		"<< /Type /Catalog /Pages 2 0 R >>",
		"<< /Type /Pages /Kids [2 0 R] /Count 1 >>",
	})
}

// readInBackground runs read_document on path and returns the channel its
// outcome arrives on.
func readInBackground(t *testing.T, ctx context.Context, cfg Config, env Env, path string) <-chan error {
	t.Helper()
	done := make(chan error, 1)
	go func() {
		_, err := callCtx(t, ctx, cfg, env, "read_document", map[string]any{"path": path})
		done <- err
	}()
	return done
}

// ended waits for a read to end. The bound is not a speed requirement: a
// read that never ends (the old in-process reader on a looping PDF) fails
// here rather than hanging the test binary.
func ended(t *testing.T, done <-chan error, what string) error {
	t.Helper()
	select {
	case err := <-done:
		return err
	case <-time.After(2 * time.Minute):
		t.Fatalf("%s: read_document still reading after 2 minutes", what)
		return nil
	}
}

// workers are the PDF workers this test binary started that still run
// (/proc: Linux).
func workers(t *testing.T) []string {
	t.Helper()
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	var out []string
	for _, s := range stats {
		b, err := os.ReadFile(s)
		if err != nil {
			continue // ended while listed
		}
		// pid (comm) state ppid ...: comm may hold spaces, so split after ')'.
		_, rest, _ := bytes.Cut(b, []byte(") "))
		if f := strings.Fields(string(rest)); len(f) > 1 && f[1] == fmt.Sprint(os.Getpid()) && isPDFWorker(filepath.Dir(s)) {
			out = append(out, s)
		}
	}
	return out
}

// TestReadDocumentHostilePDFIsStopped: a PDF whose page tree loops
// forever costs a turn at most read_document's time limit, after which
// the call is an error naming it; a turn cancelled while such a PDF is
// read stops waiting at once, and no worker is left running either way.
func TestReadDocumentHostilePDFIsStopped(t *testing.T) {
	env := newEnv(t)
	writeBytes(t, env, "loop.pdf", loopingPDF())

	t.Run("time limit", func(t *testing.T) {
		cfg := DefaultConfig()
		cfg.DocumentTimeout = 2 * time.Second
		err := ended(t, readInBackground(t, context.Background(), cfg, env, "loop.pdf"), "time limit")
		if err == nil || !strings.Contains(err.Error(), "took longer than 2s") {
			t.Fatalf("read_document loop.pdf: %v, want the time limit's error", err)
		}
		if w := workers(t); len(w) != 0 {
			t.Errorf("workers left running: %v", w)
		}
	})

	t.Run("cancelled", func(t *testing.T) {
		if _, err := os.Stat("/proc/self/stat"); err != nil {
			t.Skip("needs /proc to see the worker")
		}
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		// The default limit (a minute): only the cancel can end this read.
		done := readInBackground(t, ctx, DefaultConfig(), env, "loop.pdf")
		waitfor.True(t, "the PDF worker runs", func() bool { return len(workers(t)) == 1 })
		cancel()
		if err := ended(t, done, "cancelled"); !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled read_document: %v, want context.Canceled", err)
		}
		if w := workers(t); len(w) != 0 {
			t.Errorf("the cancelled read left its worker running: %v", w)
		}
	})

	// A sound PDF still reads, through the worker.
	writeBytes(t, env, "ok.pdf", testPDF("still readable"))
	if out := mustCall(t, env, "read_document", map[string]any{"path": "ok.pdf"}); !strings.Contains(out, "still readable") {
		t.Errorf("read_document ok.pdf = %q", out)
	}
}

// isPDFWorker reports whether the process of /proc directory dir is a
// read_document PDF worker (its environment marks it).
func isPDFWorker(dir string) bool {
	env, err := os.ReadFile(filepath.Join(dir, "environ"))
	return err == nil && bytes.Contains(env, []byte("WAGGLE_PDFTEXT_WORKER=1"))
}
