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

	"github.com/waggle-os/core/services/turnrunner/tools/pdftext"
)

// read_document limits.
const (
	// DocumentMaxBytes is the largest file read_document opens.
	DocumentMaxBytes = 20 << 20
	// docPartMaxBytes bounds one decompressed XML part of a DOCX, XLSX or
	// PPTX: a small zip may inflate enormously.
	docPartMaxBytes = 32 << 20
	// docInflateMaxBytes bounds what one document may decompress in all:
	// the parts of a DOCX, XLSX or PPTX together, the page content and
	// font maps of a PDF's pages (a stream shared by many pages counts for
	// each). Past it the call is an error, not a runner out of memory.
	docInflateMaxBytes = pdftext.MaxInflateBytes
	// docMaxEntries bounds the files of an Office package.
	docMaxEntries = 10_000
	// docMaxCells bounds the cells of a workbook's selected sheets, the
	// empty ones a cell's column reference skips included.
	docMaxCells = 2_000_000
	// docMaxParts bounds how many slides or sheets are read.
	docMaxParts = 500
	// defaultDocChars and maxDocChars bound the text returned.
	defaultDocChars = 50_000
	maxDocChars     = 200_000
)

// readDocumentTool reads documents; a PDF is read by a pdftext worker
// process under pdf's time limit.
type readDocumentTool struct{ pdf pdftext.Config }

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

func (t readDocumentTool) Decode(input json.RawMessage) (Call, error) {
	return decodeCall(input, func(ctx context.Context, env Env, in *readDocumentInput) (string, error) {
		data, rel, err := readWorkspaceFile(env, in.Path, DocumentMaxBytes)
		if err != nil {
			return "", err
		}
		pages, _ := parsePages(in.Pages)
		var text string
		switch ext := strings.ToLower(path.Ext(rel)); ext {
		case ".pdf":
			// Text past 4× the most characters returned is not
			// extracted.
			text, err = pdftext.Text(ctx, t.pdf, data, pages, 4*maxDocChars)
			if ctx.Err() != nil {
				return "", ctx.Err()
			}
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

// errInflate is the error of a document that decompresses past
// docInflateMaxBytes: a zip or PDF bomb, or just too big to read.
var errInflate = pdftext.ErrInflate

// ooxml is an opened DOCX, XLSX or PPTX package.
type ooxml struct {
	files map[string]*zip.File
	// inflate is how many decompressed bytes the package's parts may
	// still take (docInflateMaxBytes in all).
	inflate int64
}

// openOOXML opens data as an Office package of kind (for errors) and
// reads its main part; a package without it is not of that kind.
func openOOXML(data []byte, main, kind string) (*ooxml, []byte, error) {
	zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		return nil, nil, errors.New("not a readable Office file (not a zip package)")
	}
	if len(zr.File) > docMaxEntries {
		return nil, nil, fmt.Errorf("the package holds %d files; read_document opens at most %d", len(zr.File), docMaxEntries)
	}
	o := &ooxml{files: map[string]*zip.File{}, inflate: docInflateMaxBytes}
	for _, f := range zr.File {
		o.files[f.Name] = f
	}
	b, err := o.part(main)
	if err != nil {
		return nil, nil, err
	}
	if b == nil {
		return nil, nil, fmt.Errorf("not a %s (no %s)", kind, main)
	}
	return o, b, nil
}

// part reads one part, at most docPartMaxBytes decompressed and what is
// left of the document's docInflateMaxBytes; a missing part is nil
// without error.
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
	limit := min(docPartMaxBytes, o.inflate)
	b, err := io.ReadAll(io.LimitReader(rc, limit+1))
	if err != nil {
		return nil, fmt.Errorf("%s cannot be read", name)
	}
	switch {
	case int64(len(b)) > o.inflate:
		return nil, errInflate
	case len(b) > docPartMaxBytes:
		return nil, fmt.Errorf("%s is larger than %d MiB uncompressed", name, docPartMaxBytes>>20)
	}
	o.inflate -= int64(len(b))
	return b, nil
}

// eachPart reads the parts that relationship ids name in rels (slides,
// sheets, in order), those pages selects among the first docMaxParts,
// and hands each to fn with its 1-based number.
func (o *ooxml) eachPart(rels map[string]string, ids []string, pages pageSet, fn func(n int, b []byte) error) error {
	for i, id := range ids[:min(len(ids), docMaxParts)] {
		if !pages.has(i + 1) {
			continue
		}
		b, err := o.part(rels[id])
		if err != nil {
			return err
		}
		if err := fn(i+1, b); err != nil {
			return err
		}
	}
	return nil
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
	_, b, err := openOOXML(data, "word/document.xml", "Word document")
	if err != nil {
		return "", err
	}
	return xmlText(b, "t", "p", "tab", "br")
}

// pptxText is the text of the selected slides, in presentation order.
func pptxText(data []byte, pages pageSet) (string, error) {
	o, b, err := openOOXML(data, "ppt/presentation.xml", "PowerPoint presentation")
	if err != nil {
		return "", err
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
	ids := make([]string, len(pres.Slides))
	for i, s := range pres.Slides {
		ids[i] = s.RID
	}
	var out strings.Builder
	fmt.Fprintf(&out, "[Presentation, %d slides]\n", len(pres.Slides))
	err = o.eachPart(rels, ids, pages, func(n int, sb []byte) error {
		t, err := xmlText(sb, "t", "p", "tab", "br")
		if err != nil {
			return err
		}
		fmt.Fprintf(&out, "\n## Slide %d\n\n%s", n, strings.TrimSpace(t)+"\n")
		return nil
	})
	return out.String(), err
}

// xlsxText is the selected sheets as tab-separated rows, cells placed by
// their column letters (an empty cell stays an empty field), at most
// docMaxCells fields in all.
func xlsxText(data []byte, pages pageSet) (string, error) {
	o, b, err := openOOXML(data, "xl/workbook.xml", "Excel workbook")
	if err != nil {
		return "", err
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
	ids := make([]string, len(wb.Sheets))
	for i, s := range wb.Sheets {
		ids[i] = s.RID
	}
	var out strings.Builder
	fmt.Fprintf(&out, "[Workbook, %d sheets]\n", len(wb.Sheets))
	cells := docMaxCells
	err = o.eachPart(rels, ids, pages, func(n int, sb []byte) error {
		name := wb.Sheets[n-1].Name
		rows, err := sheetRows(sb, shared, &cells)
		if err != nil {
			return fmt.Errorf("sheet %q: %w", name, err)
		}
		fmt.Fprintf(&out, "\n## Sheet %d: %s\n\n", n, name)
		for _, r := range rows {
			out.WriteString(strings.Join(r, "\t"))
			out.WriteByte('\n')
		}
		return nil
	})
	return out.String(), err
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

// sheetRows reads a worksheet's cells into rows of fields, taking them
// from the document's allowance of cells. It reads the XML as a stream:
// a sheet of millions of empty cells costs the cells kept, not a value
// per element.
func sheetRows(b []byte, shared []string, cells *int) ([][]string, error) {
	if b == nil {
		return nil, nil
	}
	dec := xml.NewDecoder(bytes.NewReader(b))
	var (
		rows   [][]string
		fields []string
		inData bool // inside sheetData
		cell   struct {
			ref, typ  string
			index     int // the cell's place in its row
			val, text strings.Builder
			inV, inT  bool
		}
		inCell bool
	)
	damaged := errors.New("the sheet's XML is damaged")
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			return rows, nil
		}
		if err != nil {
			return nil, damaged
		}
		switch t := tok.(type) {
		case xml.StartElement:
			switch name := t.Name.Local; {
			case name == "sheetData":
				inData = true
			case !inData:
			case name == "row":
				fields = []string{}
			case name == "c":
				inCell = true
				cell.ref, cell.typ, cell.index = xmlAttr(t, "r"), xmlAttr(t, "t"), len(fields)
				cell.val.Reset()
				cell.text.Reset()
			case name == "v" && inCell:
				cell.inV = true
			case name == "t" && inCell:
				cell.inT = true
			}
		case xml.EndElement:
			switch t.Name.Local {
			case "sheetData":
				inData = false
			case "row":
				if inData {
					rows = append(rows, fields)
				}
			case "v":
				cell.inV = false
			case "t":
				cell.inT = false
			case "c":
				if !inCell {
					continue
				}
				inCell = false
				col := cell.index
				if n, ok := columnIndex(cell.ref); ok && n >= len(fields) && n < 16384 {
					col = n
				}
				if *cells -= max(col-len(fields), 0) + 1; *cells < 0 {
					return nil, fmt.Errorf("the workbook has more than %d cells (empty ones its references skip included)", docMaxCells)
				}
				for len(fields) < col {
					fields = append(fields, "")
				}
				v := cellValue(cell.typ, cell.val.String(), cell.text.String(), shared)
				if col < len(fields) {
					fields[col] = v
				} else {
					fields = append(fields, v)
				}
			}
		case xml.CharData:
			switch {
			case cell.inV:
				cell.val.Write(t)
			case cell.inT:
				cell.text.Write(t)
			}
		}
	}
}

// cellValue is a cell's text by its type: a shared string's, an inline
// string's, TRUE/FALSE, or the value as written (numbers, dates, errors).
func cellValue(typ, val, inline string, shared []string) string {
	var v string
	switch typ {
	case "s":
		if k, err := strconv.Atoi(val); err == nil && k >= 0 && k < len(shared) {
			v = shared[k]
		}
	case "inlineStr":
		v = inline
	case "b":
		v = map[string]string{"1": "TRUE", "0": "FALSE"}[val]
	default: // n, str, e, d
		v = val
	}
	return strings.NewReplacer("\t", " ", "\r\n", " ", "\n", " ").Replace(v)
}

// xmlAttr is the value of start element t's attribute local ("" when
// absent).
func xmlAttr(t xml.StartElement, local string) string {
	for _, a := range t.Attr {
		if a.Name.Local == local {
			return a.Value
		}
	}
	return ""
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
