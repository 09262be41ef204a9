package tools

import (
	"archive/zip"
	"bytes"
	"context"
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"path"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/ledongthuc/pdf"
)

// read_document limits.
const (
	// DocumentMaxBytes is the largest file read_document opens.
	DocumentMaxBytes = 20 << 20
	// docPartMaxBytes bounds one decompressed XML part of a DOCX, XLSX or
	// PPTX: a small zip may inflate enormously.
	docPartMaxBytes = 32 << 20
	// docMaxParts bounds how many slides or sheets are read.
	docMaxParts = 500
	// defaultDocChars and maxDocChars bound the text returned.
	defaultDocChars = 50_000
	maxDocChars     = 200_000
)

type readDocumentTool struct{}

func (readDocumentTool) Name() string { return "read_document" }

func (readDocumentTool) Description() string {
	return "Extract the text of a PDF, Word (.docx), Excel (.xlsx) or PowerPoint (.pptx) file in the workspace. " +
		"pages selects PDF pages, slides or sheets by number (\"1-3,5\"; default all). Sheets come as tab-separated " +
		"rows. Long text is cut at maxChars characters."
}

func (readDocumentTool) Schema() json.RawMessage {
	return json.RawMessage(`{"type":"object","properties":{` +
		`"path":{"type":"string","description":"File path relative to the workspace root (.pdf, .docx, .xlsx or .pptx)"},` +
		`"pages":{"type":"string","description":"Pages, slides or sheets to read, e.g. \"1-3,5\" (default all)"},` +
		`"maxChars":{"type":"integer","minimum":1,"maximum":200000,"description":"Most characters of text to return (default 50000)"}` +
		`},"required":["path"]}`)
}

type readDocumentInput struct {
	Path     string  `json:"path"`
	Pages    string  `json:"pages,omitempty"`
	MaxChars *intArg `json:"maxChars,omitempty"`
}

func (in *readDocumentInput) validate() error {
	if strings.TrimSpace(in.Path) == "" {
		return errors.New("path is required")
	}
	if _, err := parsePages(in.Pages); err != nil {
		return err
	}
	if in.MaxChars != nil && (*in.MaxChars < 1 || *in.MaxChars > maxDocChars) {
		return fmt.Errorf("maxChars must be between 1 and %d", maxDocChars)
	}
	return nil
}

func (readDocumentTool) Decode(input json.RawMessage) (Call, error) {
	return decodeCall(input, func(_ context.Context, env Env, in *readDocumentInput) (string, error) {
		data, rel, err := readWorkspaceFile(env, in.Path, DocumentMaxBytes)
		if err != nil {
			return "", err
		}
		pages, _ := parsePages(in.Pages)
		var text string
		switch ext := strings.ToLower(path.Ext(rel)); ext {
		case ".pdf":
			text, err = pdfText(data, pages)
		case ".docx":
			text, err = docxText(data)
		case ".xlsx":
			text, err = xlsxText(data, pages)
		case ".pptx":
			text, err = pptxText(data, pages)
		default:
			return "", fmt.Errorf("%s is not a PDF, DOCX, XLSX or PPTX file (use read_file for text files)", quote(rel))
		}
		if err != nil {
			return "", fmt.Errorf("%s: %w", quote(rel), err)
		}
		limit := defaultDocChars
		if in.MaxChars != nil {
			limit = int(*in.MaxChars)
		}
		text = strings.TrimSpace(text)
		if text == "" {
			return fmt.Sprintf("%s has no extractable text (a scanned document has only images).", quote(rel)), nil
		}
		if n := utf8.RuneCountInString(text); n > limit {
			text = string([]rune(text)[:limit]) +
				fmt.Sprintf("\n\n[cut at %d of %d characters; ask for fewer pages or a larger maxChars]", limit, n)
		}
		return text, nil
	})
}

// readWorkspaceFile reads a regular file of the workspace, at most limit
// bytes, through the workspace's os.Root.
func readWorkspaceFile(env Env, p string, limit int64) ([]byte, string, error) {
	ws, rel, err := openPath(env, p)
	if err != nil {
		return nil, "", err
	}
	defer ws.Close()
	f, err := ws.root.Open(rel)
	if err != nil {
		return nil, "", fsError(rel, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, "", fsError(rel, err)
	}
	if !fi.Mode().IsRegular() {
		return nil, "", fmt.Errorf("%s is not a regular file", quote(rel))
	}
	if fi.Size() > limit {
		return nil, "", fmt.Errorf("%s is %d bytes; read_document opens files up to %d MiB", quote(rel), fi.Size(), limit>>20)
	}
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, "", fsError(rel, err)
	}
	if int64(len(data)) > limit {
		return nil, "", fmt.Errorf("%s grew past %d MiB while being read", quote(rel), limit>>20)
	}
	return data, rel, nil
}

// pageSet is a set of 1-based page numbers; nil means every page.
type pageSet map[int]bool

// has reports whether page n is selected.
func (s pageSet) has(n int) bool { return s == nil || s[n] }

// parsePages reads "1-3,5" (empty: all pages).
func parsePages(spec string) (pageSet, error) {
	spec = strings.TrimSpace(spec)
	if spec == "" {
		return nil, nil
	}
	bad := fmt.Errorf("pages %q must look like \"1-3,5\" (numbers from 1)", truncateUTF8(spec, maxKeyShown))
	if len(spec) > 200 {
		return nil, bad
	}
	set := pageSet{}
	for _, part := range strings.Split(spec, ",") {
		lo, hi, isRange := strings.Cut(strings.TrimSpace(part), "-")
		a, err := strconv.Atoi(strings.TrimSpace(lo))
		if err != nil || a < 1 {
			return nil, bad
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(strings.TrimSpace(hi)); err != nil || b < a {
				return nil, bad
			}
		}
		if b-a >= 10_000 {
			return nil, bad
		}
		for n := a; n <= b; n++ {
			set[n] = true
		}
	}
	return set, nil
}

// pdfText extracts the selected pages' text. The PDF reader panics on
// malformed files; that is an error here, not a crash.
func pdfText(data []byte, pages pageSet) (text string, err error) {
	defer func() {
		if p := recover(); p != nil {
			text, err = "", errors.New("the PDF is damaged or uses features that cannot be read")
		}
	}()
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
	for i := 1; i <= total; i++ {
		if !pages.has(i) {
			continue
		}
		p := r.Page(i)
		if p.V.IsNull() {
			continue
		}
		t, err := p.GetPlainText(nil)
		if err != nil {
			return "", fmt.Errorf("page %d cannot be read", i)
		}
		fmt.Fprintf(&b, "\n## Page %d\n\n%s\n", i, strings.TrimSpace(t))
	}
	return b.String(), nil
}

// ooxml is an opened DOCX, XLSX or PPTX package.
type ooxml struct{ files map[string]*zip.File }

func openOOXML(data []byte) (*ooxml, error) {
	zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		return nil, errors.New("not a readable Office file (not a zip package)")
	}
	o := &ooxml{files: map[string]*zip.File{}}
	for _, f := range zr.File {
		o.files[f.Name] = f
	}
	return o, nil
}

// part reads one part, at most docPartMaxBytes decompressed; a missing
// part is nil without error.
func (o *ooxml) part(name string) ([]byte, error) {
	f, ok := o.files[name]
	if !ok {
		return nil, nil
	}
	rc, err := f.Open()
	if err != nil {
		return nil, fmt.Errorf("%s cannot be read", name)
	}
	defer rc.Close()
	b, err := io.ReadAll(io.LimitReader(rc, docPartMaxBytes+1))
	if err != nil {
		return nil, fmt.Errorf("%s cannot be read", name)
	}
	if len(b) > docPartMaxBytes {
		return nil, fmt.Errorf("%s is larger than %d MiB uncompressed", name, docPartMaxBytes>>20)
	}
	return b, nil
}

// rels maps relationship ids of a part's .rels file to targets resolved
// against dir.
func (o *ooxml) rels(relsName, dir string) (map[string]string, error) {
	b, err := o.part(relsName)
	if err != nil || b == nil {
		return map[string]string{}, err
	}
	var r struct {
		Rel []struct {
			ID     string `xml:"Id,attr"`
			Target string `xml:"Target,attr"`
		} `xml:"Relationship"`
	}
	if err := xml.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("%s is not valid XML", relsName)
	}
	out := map[string]string{}
	for _, x := range r.Rel {
		t := x.Target
		if strings.HasPrefix(t, "/") {
			t = strings.TrimPrefix(t, "/")
		} else {
			t = path.Join(dir, t)
		}
		out[x.ID] = t
	}
	return out, nil
}

// xmlText walks an XML part and writes the text of elements named textEl
// (local name), a newline after each paragEl, a tab for tabEl and a
// newline for brEl.
func xmlText(b []byte, textEl, paragEl, tabEl, brEl string) (string, error) {
	dec := xml.NewDecoder(bytes.NewReader(b))
	var out strings.Builder
	inText := 0
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			return out.String(), nil
		}
		if err != nil {
			return "", errors.New("the document's XML is damaged")
		}
		switch t := tok.(type) {
		case xml.StartElement:
			switch t.Name.Local {
			case textEl:
				inText++
			case tabEl:
				out.WriteByte('\t')
			case brEl:
				out.WriteByte('\n')
			}
		case xml.EndElement:
			switch t.Name.Local {
			case textEl:
				inText--
			case paragEl:
				out.WriteByte('\n')
			}
		case xml.CharData:
			if inText > 0 {
				out.Write(t)
			}
		}
	}
}

// docxText is the text of word/document.xml, a line per paragraph.
func docxText(data []byte) (string, error) {
	o, err := openOOXML(data)
	if err != nil {
		return "", err
	}
	b, err := o.part("word/document.xml")
	if err != nil {
		return "", err
	}
	if b == nil {
		return "", errors.New("not a Word document (no word/document.xml)")
	}
	return xmlText(b, "t", "p", "tab", "br")
}

// pptxText is the text of the selected slides, in presentation order.
func pptxText(data []byte, pages pageSet) (string, error) {
	o, err := openOOXML(data)
	if err != nil {
		return "", err
	}
	b, err := o.part("ppt/presentation.xml")
	if err != nil {
		return "", err
	}
	if b == nil {
		return "", errors.New("not a PowerPoint presentation (no ppt/presentation.xml)")
	}
	var pres struct {
		Slides []struct {
			RID string `xml:"http://schemas.openxmlformats.org/officeDocument/2006/relationships id,attr"`
		} `xml:"sldIdLst>sldId"`
	}
	if err := xml.Unmarshal(b, &pres); err != nil {
		return "", errors.New("ppt/presentation.xml is not valid XML")
	}
	rels, err := o.rels("ppt/_rels/presentation.xml.rels", "ppt")
	if err != nil {
		return "", err
	}
	var out strings.Builder
	fmt.Fprintf(&out, "[Presentation, %d slides]\n", len(pres.Slides))
	for i, s := range pres.Slides {
		n := i + 1
		if n > docMaxParts {
			break
		}
		if !pages.has(n) {
			continue
		}
		sb, err := o.part(rels[s.RID])
		if err != nil {
			return "", err
		}
		t, err := xmlText(sb, "t", "p", "tab", "br")
		if err != nil {
			return "", err
		}
		fmt.Fprintf(&out, "\n## Slide %d\n\n%s", n, strings.TrimSpace(t)+"\n")
	}
	return out.String(), nil
}

// xlsxText is the selected sheets as tab-separated rows, cells placed by
// their column letters (an empty cell stays an empty field).
func xlsxText(data []byte, pages pageSet) (string, error) {
	o, err := openOOXML(data)
	if err != nil {
		return "", err
	}
	b, err := o.part("xl/workbook.xml")
	if err != nil {
		return "", err
	}
	if b == nil {
		return "", errors.New("not an Excel workbook (no xl/workbook.xml)")
	}
	var wb struct {
		Sheets []struct {
			Name string `xml:"name,attr"`
			RID  string `xml:"http://schemas.openxmlformats.org/officeDocument/2006/relationships id,attr"`
		} `xml:"sheets>sheet"`
	}
	if err := xml.Unmarshal(b, &wb); err != nil {
		return "", errors.New("xl/workbook.xml is not valid XML")
	}
	rels, err := o.rels("xl/_rels/workbook.xml.rels", "xl")
	if err != nil {
		return "", err
	}
	shared, err := sharedStrings(o)
	if err != nil {
		return "", err
	}
	var out strings.Builder
	fmt.Fprintf(&out, "[Workbook, %d sheets]\n", len(wb.Sheets))
	for i, s := range wb.Sheets {
		n := i + 1
		if n > docMaxParts {
			break
		}
		if !pages.has(n) {
			continue
		}
		sb, err := o.part(rels[s.RID])
		if err != nil {
			return "", err
		}
		rows, err := sheetRows(sb, shared)
		if err != nil {
			return "", fmt.Errorf("sheet %q: %w", s.Name, err)
		}
		fmt.Fprintf(&out, "\n## Sheet %d: %s\n\n", n, s.Name)
		for _, r := range rows {
			out.WriteString(strings.Join(r, "\t"))
			out.WriteByte('\n')
		}
	}
	return out.String(), nil
}

// sharedStrings reads xl/sharedStrings.xml: each <si>'s text, rich runs
// joined.
func sharedStrings(o *ooxml) ([]string, error) {
	b, err := o.part("xl/sharedStrings.xml")
	if err != nil || b == nil {
		return nil, err
	}
	dec := xml.NewDecoder(bytes.NewReader(b))
	var (
		out    []string
		cur    strings.Builder
		inT    int
		inRPh  int // phonetic runs are not part of the text
		inItem bool
	)
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, errors.New("xl/sharedStrings.xml is damaged")
		}
		switch t := tok.(type) {
		case xml.StartElement:
			switch t.Name.Local {
			case "si":
				inItem = true
				cur.Reset()
			case "t":
				inT++
			case "rPh":
				inRPh++
			}
		case xml.EndElement:
			switch t.Name.Local {
			case "si":
				inItem = false
				out = append(out, cur.String())
			case "t":
				inT--
			case "rPh":
				inRPh--
			}
		case xml.CharData:
			if inItem && inT > 0 && inRPh == 0 {
				cur.Write(t)
			}
		}
	}
}

// sheetRows reads a worksheet's cells into rows of fields.
func sheetRows(b []byte, shared []string) ([][]string, error) {
	if b == nil {
		return nil, nil
	}
	var ws struct {
		Rows []struct {
			Cells []struct {
				Ref    string `xml:"r,attr"`
				Type   string `xml:"t,attr"`
				Value  string `xml:"v"`
				Inline struct {
					Text string   `xml:"t"`
					Runs []string `xml:"r>t"`
				} `xml:"is"`
			} `xml:"c"`
		} `xml:"sheetData>row"`
	}
	if err := xml.Unmarshal(b, &ws); err != nil {
		return nil, errors.New("the sheet's XML is damaged")
	}
	var rows [][]string
	for _, r := range ws.Rows {
		var fields []string
		for i, c := range r.Cells {
			col := i
			if n, ok := columnIndex(c.Ref); ok && n >= len(fields) && n < 16384 {
				col = n
			}
			for len(fields) < col {
				fields = append(fields, "")
			}
			var v string
			switch c.Type {
			case "s":
				if k, err := strconv.Atoi(c.Value); err == nil && k >= 0 && k < len(shared) {
					v = shared[k]
				}
			case "inlineStr":
				v = c.Inline.Text + strings.Join(c.Inline.Runs, "")
			case "b":
				v = map[string]string{"1": "TRUE", "0": "FALSE"}[c.Value]
			default: // n, str, e, d
				v = c.Value
			}
			v = strings.NewReplacer("\t", " ", "\r\n", " ", "\n", " ").Replace(v)
			if col < len(fields) {
				fields[col] = v
			} else {
				fields = append(fields, v)
			}
		}
		rows = append(rows, fields)
	}
	return rows, nil
}

// columnIndex turns a cell reference's letters ("C7") into a 0-based
// column.
func columnIndex(ref string) (int, bool) {
	n, letters := 0, 0
	for _, r := range ref {
		if r < 'A' || r > 'Z' {
			break
		}
		n = n*26 + int(r-'A'+1)
		letters++
		if letters > 3 {
			return 0, false
		}
	}
	if letters == 0 {
		return 0, false
	}
	return n - 1, true
}
