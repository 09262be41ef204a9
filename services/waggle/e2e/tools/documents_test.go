package tools

import (
	"archive/zip"
	"bytes"
	"compress/zlib"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/waggle-os/core/libs/protocol"
	"github.com/waggle-os/core/libs/waitfor"
	"github.com/waggle-os/core/services/waggle/waggletest"
)

// buildPDF writes a PDF with one page per text (Helvetica, a classic xref
// table), as a simple generator would.
func buildPDF(pages ...string) []byte {
	kids := make([]string, len(pages))
	for i := range pages {
		kids[i] = fmt.Sprintf("%d 0 R", 4+2*i)
	}
	objs := []string{
		"<< /Type /Catalog /Pages 2 0 R >>",
		fmt.Sprintf("<< /Type /Pages /Kids [%s] /Count %d >>", strings.Join(kids, " "), len(pages)),
		"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>",
	}
	for i, text := range pages {
		content := fmt.Sprintf("BT /F1 12 Tf 72 720 Td (%s) Tj ET", text)
		objs = append(objs,
			fmt.Sprintf("<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 3 0 R >> >> /Contents %d 0 R >>", 5+2*i),
			fmt.Sprintf("<< /Length %d >>\nstream\n%s\nendstream", len(content), content))
	}
	return pdfFile(objs)
}

// pdfFile writes objs as objects 1… of a PDF (object 1 the catalog) with
// a classic xref table of byte offsets.
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

// buildXLSX writes a workbook the way spreadsheet programs do: text in
// the shared-strings table, numbers inline, one sheet.
func buildXLSX(t *testing.T) []byte {
	t.Helper()
	const ns = `xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main" xmlns:r="http://schemas.openxmlformats.org/officeDocument/2006/relationships"`
	parts := map[string]string{
		"[Content_Types].xml": `<Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types"><Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml"/><Default Extension="xml" ContentType="application/xml"/><Override PartName="/xl/workbook.xml" ContentType="application/vnd.openxmlformats-officedocument.spreadsheetml.sheet.main+xml"/><Override PartName="/xl/worksheets/sheet1.xml" ContentType="application/vnd.openxmlformats-officedocument.spreadsheetml.worksheet+xml"/><Override PartName="/xl/sharedStrings.xml" ContentType="application/vnd.openxmlformats-officedocument.spreadsheetml.sharedStrings+xml"/></Types>`,
		"_rels/.rels":         `<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships"><Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/officeDocument" Target="xl/workbook.xml"/></Relationships>`,
		"xl/workbook.xml":     `<workbook ` + ns + `><sheets><sheet name="Hives" sheetId="1" r:id="rId1"/></sheets></workbook>`,
		"xl/_rels/workbook.xml.rels": `<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships"><Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/worksheet" Target="worksheets/sheet1.xml"/>` +
			`<Relationship Id="rId2" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/sharedStrings" Target="sharedStrings.xml"/></Relationships>`,
		"xl/sharedStrings.xml": `<sst ` + ns + ` count="4" uniqueCount="4"><si><t>Hive</t></si><si><t>Honey (kg)</t></si><si><t>North meadow</t></si><si><r><t>South </t></r><r><t>orchard</t></r></si></sst>`,
		"xl/worksheets/sheet1.xml": `<worksheet ` + ns + `><sheetData>` +
			`<row r="1"><c r="A1" t="s"><v>0</v></c><c r="B1" t="s"><v>1</v></c></row>` +
			`<row r="2"><c r="A2" t="s"><v>2</v></c><c r="B2"><v>42.5</v></c></row>` +
			`<row r="3"><c r="A3" t="s"><v>3</v></c><c r="C3"><v>7</v></c></row>` +
			`</sheetData></worksheet>`,
	}
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

// TestReadDocumentPDFAndXLSX: the model reads a PDF's second page and a
// spreadsheet the test built, with no approval, and gets their text.
func TestReadDocumentPDFAndXLSX(t *testing.T) {
	llm := callerModel(t)
	p := waggletest.StartProc(t, waggleBin, waggletest.ProcEnv("WAGGLE_LLM_URL="+llm.URL()))
	dir := filepath.Join(p.DataDir, "workspaces", "docs", "files")
	if err := os.MkdirAll(filepath.Join(dir, "in"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "in", "report.pdf"), buildPDF("Cover page", "Colony count rose to 12 hives", "Appendix"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "in", "hives.xlsx"), buildXLSX(t), 0o600); err != nil {
		t.Fatal(err)
	}

	evs := runChat(t, p, "docs", "read_document", map[string]any{"path": "in/report.pdf", "pages": "2"})
	if s := waggletest.Steps(evs); !slices.Contains(s, "Reading document: in/report.pdf...") {
		t.Errorf("steps %q", s)
	}
	runChat(t, p, "docs", "read_document", map[string]any{"path": "in/hives.xlsx"})
	res := toolResults(llm)
	if len(res) != 2 {
		t.Fatalf("tool results %q", res)
	}
	if want := "[PDF, 3 pages]\n\n## Page 2\n\nColony count rose to 12 hives"; res[0] != want {
		t.Errorf("PDF result %q, want %q", res[0], want)
	}
	if want := "[Workbook, 1 sheets]\n\n## Sheet 1: Hives\n\nHive\tHoney (kg)\nNorth meadow\t42.5\nSouth orchard\t\t7"; res[1] != want {
		t.Errorf("XLSX result %q, want %q", res[1], want)
	}
}

// TestGenerateXlsxAfterApproval: generate_xlsx writes nothing before the
// user approves it; afterwards the workbook is in the workspace, announced
// as a created file, and read_document reads back what the model wrote.
func TestGenerateXlsxAfterApproval(t *testing.T) {
	llm := callerModel(t)
	p := waggletest.StartProc(t, waggleBin, waggletest.ProcEnv("WAGGLE_LLM_URL="+llm.URL()))
	out := filepath.Join(p.DataDir, "workspaces", "docs", "files", "out", "honey.xlsx")
	args := map[string]any{"path": "out/honey", "sheets": []any{map[string]any{"name": "2026", "rows": []any{
		[]any{"Month", "Kg"}, []any{"May", 12}, []any{"June", 30.5},
	}}}}
	st := waggletest.NewStream(p.Do(t, "POST", "/api/chat", callChat("docs", "generate_xlsx", args)))
	defer st.Close()
	evs := st.Until(t, "approval_required", "done", "error")
	if evs[len(evs)-1].Name != "approval_required" {
		t.Fatalf("generate_xlsx ran without asking: %v", waggletest.Names(evs))
	}
	if _, err := os.Stat(out); err == nil {
		t.Fatal("the workbook was written before the approval")
	}
	var a approval
	evs[len(evs)-1].Decode(t, &a)
	if a.ToolName != "generate_xlsx" || !strings.Contains(string(a.Input), `"path":"out/honey.xlsx"`) {
		t.Fatalf("approval for %s %s", a.ToolName, a.Input)
	}
	resp := p.Do(t, "POST", "/api/approval/"+a.RequestID, map[string]any{"approved": true})
	resp.Body.Close()
	rest := st.All(t)
	if end := rest[len(rest)-1]; end.Name != "done" {
		t.Fatalf("turn ended with %s", end.Name)
	}
	created := false
	for _, ev := range rest {
		if ev.Name == "file_created" && strings.Contains(string(ev.Data), "out/honey.xlsx") {
			created = true
		}
	}
	if !created {
		t.Errorf("no file_created event for out/honey.xlsx: %v", waggletest.Names(rest))
	}
	if _, err := zip.OpenReader(out); err != nil {
		t.Fatalf("the workbook is not a zip package: %v", err)
	}
	runChat(t, p, "docs", "read_document", map[string]any{"path": "out/honey.xlsx"})
	res := toolResults(llm)
	if want := "[Workbook, 1 sheets]\n\n## Sheet 1: 2026\n\nMonth\tKg\nMay\t12\nJune\t30.5"; res[len(res)-1] != want {
		t.Errorf("read back %q, want %q", res[len(res)-1], want)
	}
}

// TestReadDocumentBombIsAnError: a PDF whose one content stream inflates
// to 65 MiB and a workbook whose sheets inflate to 90 MiB — each a few
// hundred KiB on disk — give the model a clear error naming the limit;
// the runner survives them and reads a sound document next.
func TestReadDocumentBombIsAnError(t *testing.T) {
	llm := callerModel(t)
	p := waggletest.StartProc(t, waggleBin, waggletest.ProcEnv("WAGGLE_LLM_URL="+llm.URL()))
	dir := filepath.Join(p.DataDir, "workspaces", "docs", "files")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	var z bytes.Buffer
	zl, _ := zlib.NewWriterLevel(&z, zlib.BestCompression)
	zl.Write(bytes.Repeat([]byte(" "), 65<<20))
	zl.Close()
	writeFile(t, filepath.Join(dir, "bomb.pdf"), string(pdfFile([]string{
		"<< /Type /Catalog /Pages 2 0 R >>",
		"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
		"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R >>",
		fmt.Sprintf("<< /Length %d /Filter /FlateDecode >>\nstream\n%s\nendstream", z.Len(), z.Bytes()),
	})))
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	rels := `<Relationships>`
	sheets := ``
	for i := 1; i <= 3; i++ {
		w, _ := zw.Create(fmt.Sprintf("xl/worksheets/sheet%d.xml", i))
		w.Write([]byte("<worksheet><sheetData>"))
		w.Write(bytes.Repeat([]byte(" "), 30<<20))
		w.Write([]byte("</sheetData></worksheet>"))
		rels += fmt.Sprintf(`<Relationship Id="rId%d" Target="worksheets/sheet%d.xml"/>`, i, i)
		sheets += fmt.Sprintf(`<sheet name="S%d" sheetId="%d" r:id="rId%d"/>`, i, i, i)
	}
	w, _ := zw.Create("xl/workbook.xml")
	w.Write([]byte(`<workbook xmlns:r="http://schemas.openxmlformats.org/officeDocument/2006/relationships"><sheets>` + sheets + `</sheets></workbook>`))
	w, _ = zw.Create("xl/_rels/workbook.xml.rels")
	w.Write([]byte(rels + `</Relationships>`))
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "bomb.xlsx"), buf.String())
	writeFile(t, filepath.Join(dir, "fine.pdf"), string(buildPDF("still reading")))

	runChat(t, p, "docs", "read_document", map[string]any{"path": "bomb.pdf"})
	runChat(t, p, "docs", "read_document", map[string]any{"path": "bomb.xlsx"})
	runChat(t, p, "docs", "read_document", map[string]any{"path": "fine.pdf"})
	res := toolResults(llm)
	if len(res) != 3 {
		t.Fatalf("tool results: %q", res)
	}
	for i, name := range []string{"bomb.pdf", "bomb.xlsx"} {
		if !strings.HasPrefix(res[i], "Error executing read_document:") || !strings.Contains(res[i], "decompresses to more than 64 MiB") {
			t.Errorf("%s: %q", name, res[i])
		}
	}
	if !strings.Contains(res[2], "still reading") {
		t.Errorf("the sound PDF after the bombs: %q", res[2])
	}
}

// pdfWorkers are the running PDF workers whose parent is pid (/proc).
func pdfWorkers(pid int) []string {
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	var out []string
	for _, s := range stats {
		b, err := os.ReadFile(s)
		if err != nil {
			continue // ended while listed
		}
		// pid (comm) state ppid ...: comm may hold spaces, so split after ')'.
		_, rest, _ := bytes.Cut(b, []byte(") "))
		if f := strings.Fields(string(rest)); len(f) > 1 && f[1] == strconv.Itoa(pid) && isPDFWorker(filepath.Dir(s)) {
			out = append(out, s)
		}
	}
	return out
}

// TestCancelledTurnStopsHostilePDF: the model reads a PDF whose page tree
// contains itself (the PDF reader loops forever on it). The user stops the
// turn: it ends without waiting for read_document's one-minute limit, no
// result reaches the model, and the process that was reading is gone.
func TestCancelledTurnStopsHostilePDF(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("needs /proc to see the reader's process")
	}
	llm := callerModel(t)
	p := waggletest.StartProc(t, waggleBin, waggletest.ProcEnv("WAGGLE_LLM_URL="+llm.URL()))
	dir := filepath.Join(p.DataDir, "workspaces", "docs", "files")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	loop := pdfFile([]string{"<< /Type /Catalog /Pages 2 0 R >>", "<< /Type /Pages /Kids [2 0 R] /Count 1 >>"})
	if err := os.WriteFile(filepath.Join(dir, "loop.pdf"), loop, 0o600); err != nil {
		t.Fatal(err)
	}

	resp := p.Do(t, "POST", "/api/chat", callChat("docs", "read_document", map[string]any{"path": "loop.pdf"}))
	turnID := resp.Header.Get("X-Waggle-Turn-Id")
	st := waggletest.NewStream(resp)
	defer st.Close()
	evs := st.Until(t, protocol.EventTool, protocol.EventDone, protocol.EventError)
	if last := evs[len(evs)-1]; last.Name != protocol.EventTool {
		t.Fatalf("read_document did not start: %v", waggletest.Names(evs))
	}
	waitfor.True(t, "the PDF is read by a worker process", func() bool { return len(pdfWorkers(p.Pid())) == 1 })

	cancel := p.Do(t, "POST", "/api/chat/turns/"+turnID+"/cancel", nil)
	cancel.Body.Close()
	if cancel.StatusCode != http.StatusOK && cancel.StatusCode != http.StatusAccepted {
		t.Fatalf("cancel: %d", cancel.StatusCode)
	}
	rest := st.All(t)
	if end := rest[len(rest)-1]; end.Name == protocol.EventDone {
		t.Fatalf("cancelled turn ended with done: %s", end.Data)
	}
	if w := pdfWorkers(p.Pid()); len(w) != 0 {
		t.Errorf("the cancelled turn's PDF worker still runs: %v", w)
	}
	if res := toolResults(llm); len(res) != 0 {
		t.Errorf("the model got a result of the cancelled read: %q", res)
	}
}

// isPDFWorker reports whether the process of /proc directory dir is a
// read_document PDF worker (its environment marks it).
func isPDFWorker(dir string) bool {
	env, err := os.ReadFile(filepath.Join(dir, "environ"))
	return err == nil && bytes.Contains(env, []byte("WAGGLE_PDFTEXT_WORKER=1"))
}
