package pdftext

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
)

// TestMain lets this test binary serve as the worker, as the waggle
// binary does.
func TestMain(m *testing.M) {
	Main()
	os.Exit(m.Run())
}

// onePagePDF is a PDF of one page per text (Helvetica, classic xref).
func onePagePDF(texts ...string) []byte {
	kids := make([]string, len(texts))
	for i := range texts {
		kids[i] = fmt.Sprintf("%d 0 R", 4+2*i)
	}
	objs := []string{
		"<< /Type /Catalog /Pages 2 0 R >>",
		fmt.Sprintf("<< /Type /Pages /Kids [%s] /Count %d >>", strings.Join(kids, " "), len(texts)),
		"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
	}
	for i, text := range texts {
		content := fmt.Sprintf("BT /F1 12 Tf 72 720 Td (%s) Tj ET", text)
		objs = append(objs,
			fmt.Sprintf("<< /Type /Page /Parent 2 0 R /Resources << /Font << /F1 3 0 R >> >> /Contents %d 0 R >>", 5+2*i),
			fmt.Sprintf("<< /Length %d >>\nstream\n%s\nendstream", len(content), content))
	}
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

// TestWorkerAndInProcessAgree: the worker process and the in-process
// fallback (a binary that did not call Main) give the same text for the
// same pages, an empty selection reads no page (it is not "all"), and a
// reader's error reaches the caller as its text.
func TestWorkerAndInProcessAgree(t *testing.T) {
	data := onePagePDF("first page", "second page")
	cases := []struct {
		name  string
		pages map[int]bool
		want  string
	}{
		{"all", nil, "[PDF, 2 pages]\n\n## Page 1\n\nfirst page\n\n## Page 2\n\nsecond page\n"},
		{"second", map[int]bool{2: true}, "[PDF, 2 pages]\n\n## Page 2\n\nsecond page\n"},
		{"none", map[int]bool{}, "[PDF, 2 pages]\n"},
	}
	for _, hosted := range []bool{true, false} {
		selfHosted.Store(hosted)
		for _, tc := range cases {
			got, err := Text(context.Background(), Config{}, data, tc.pages, 1<<20)
			if err != nil || got != tc.want {
				t.Errorf("worker %v, pages %s: %q, %v; want %q", hosted, tc.name, got, err, tc.want)
			}
		}
		if _, err := Text(context.Background(), Config{}, []byte("%PDF-1.4\nnot a pdf"), nil, 1<<20); err == nil || err.Error() != "not a readable PDF" {
			t.Errorf("worker %v: broken PDF: %v", hosted, err)
		}
	}
	selfHosted.Store(true)
}
