package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// generate_xlsx limits (Excel's own where it has one).
const (
	maxXlsxSheets    = 50
	maxXlsxCells     = 200_000
	maxXlsxCellChars = 32_767
	maxXlsxColumns   = 16_384
	maxSheetName     = 31
)

type generateXlsxTool struct {
	now func() time.Time // nil: time.Now
}

func (generateXlsxTool) Name() string { return "generate_xlsx" }

func (generateXlsxTool) Description() string {
	return "Create an Excel workbook (.xlsx) in the workspace. sheets is a list of {name, rows}; rows is a list of " +
		"rows, each a list of cells (string, number, boolean or null for empty). Text is stored as text — a cell " +
		"starting with \"=\" is not a formula. path is relative to the workspace root; .xlsx is appended when missing."
}

func (generateXlsxTool) Schema() json.RawMessage {
	return json.RawMessage(`{"type":"object","properties":{` +
		`"path":{"type":"string","description":"Output path relative to the workspace root, e.g. reports/budget.xlsx"},` +
		`"sheets":{"type":"array","minItems":1,"maxItems":50,"items":{"type":"object","properties":{` +
		`"name":{"type":"string","description":"Sheet name (at most 31 characters; default Sheet<N>)"},` +
		`"rows":{"type":"array","items":{"type":"array","items":{"type":["string","number","boolean","null"]}},"description":"Rows of cells"}` +
		`},"required":["rows"]}}` +
		`},"required":["path","sheets"]}`)
}

// xlsxCell is one cell as the model gave it: text, a number (kept as its
// JSON literal), a boolean or empty.
type xlsxCell struct {
	kind byte // 's' text, 'n' number, 'b' boolean, 0 empty
	text string
}

// UnmarshalJSON implements json.Unmarshaler.
func (c *xlsxCell) UnmarshalJSON(b []byte) error {
	s := strings.TrimSpace(string(b))
	switch {
	case s == "null":
		*c = xlsxCell{}
	case s == "true" || s == "false":
		*c = xlsxCell{kind: 'b', text: s}
	case strings.HasPrefix(s, `"`):
		var v string
		if err := json.Unmarshal(b, &v); err != nil {
			return err
		}
		*c = xlsxCell{kind: 's', text: v}
	default:
		f, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return errors.New("a cell must be a string, number, boolean or null")
		}
		*c = xlsxCell{kind: 'n', text: strconv.FormatFloat(f, 'g', -1, 64)}
	}
	return nil
}

// MarshalJSON implements json.Marshaler (the canonical input).
func (c xlsxCell) MarshalJSON() ([]byte, error) {
	switch c.kind {
	case 's':
		return json.Marshal(c.text)
	case 'n', 'b':
		return []byte(c.text), nil
	}
	return []byte("null"), nil
}

type xlsxSheet struct {
	Name string       `json:"name,omitempty"`
	Rows [][]xlsxCell `json:"rows"`
}

type generateXlsxInput struct {
	Path   string      `json:"path"`
	Sheets []xlsxSheet `json:"sheets"`
}

func (in *generateXlsxInput) validate() error {
	in.Path = strings.TrimSpace(in.Path)
	if in.Path == "" {
		return errors.New("path is required")
	}
	if !strings.HasSuffix(strings.ToLower(in.Path), ".xlsx") {
		in.Path += ".xlsx"
	}
	if len(in.Sheets) == 0 {
		return errors.New("sheets must list at least one sheet")
	}
	if len(in.Sheets) > maxXlsxSheets {
		return fmt.Errorf("at most %d sheets", maxXlsxSheets)
	}
	seen := map[string]bool{}
	cells := 0
	for i := range in.Sheets {
		s := &in.Sheets[i]
		s.Name = strings.TrimSpace(s.Name)
		if s.Name == "" {
			s.Name = fmt.Sprintf("Sheet%d", i+1)
		}
		if utf8.RuneCountInString(s.Name) > maxSheetName || strings.ContainsAny(s.Name, `[]:*?/\`) ||
			strings.HasPrefix(s.Name, "'") || strings.HasSuffix(s.Name, "'") {
			return fmt.Errorf("sheet name %q: at most %d characters, none of []:*?/\\ and no quote at either end",
				truncateUTF8(s.Name, maxKeyShown), maxSheetName)
		}
		if key := strings.ToLower(s.Name); seen[key] {
			return fmt.Errorf("sheet name %q is used twice", s.Name)
		} else {
			seen[key] = true
		}
		for _, r := range s.Rows {
			if len(r) > maxXlsxColumns {
				return fmt.Errorf("sheet %q: a row has more than %d cells", s.Name, maxXlsxColumns)
			}
			cells += len(r)
			for _, c := range r {
				if utf8.RuneCountInString(c.text) > maxXlsxCellChars {
					return fmt.Errorf("sheet %q: a cell has more than %d characters", s.Name, maxXlsxCellChars)
				}
			}
		}
	}
	if cells > maxXlsxCells {
		return fmt.Errorf("at most %d cells in all", maxXlsxCells)
	}
	return nil
}

func (t generateXlsxTool) Decode(input json.RawMessage) (Call, error) {
	return decodeCall(input, t.run)
}

func (t generateXlsxTool) run(_ context.Context, env Env, in *generateXlsxInput) (string, error) {
	rel, size, err := writeGenerated(env, in.Path, t.now, func(created time.Time) ([]byte, error) {
		return buildXlsx(in.Sheets, created)
	})
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("Generated %s (%d sheets, %d bytes)", rel, len(in.Sheets), size), nil
}

// columnName is a 0-based column's letters (0 → A, 26 → AA).
func columnName(i int) string {
	var b []byte
	for i++; i > 0; i = (i - 1) / 26 {
		b = append([]byte{byte('A' + (i-1)%26)}, b...)
	}
	return string(b)
}

// buildXlsx renders the sheets as a SpreadsheetML package: content types,
// package and workbook relationships, the workbook, a minimal style sheet
// and one worksheet per sheet with inline strings.
func buildXlsx(sheets []xlsxSheet, created time.Time) ([]byte, error) {
	const (
		nsMain = "http://schemas.openxmlformats.org/spreadsheetml/2006/main"
		relWS  = "http://schemas.openxmlformats.org/officeDocument/2006/relationships/worksheet"
		ctBase = "application/vnd.openxmlformats-officedocument.spreadsheetml."
	)
	var types, wbSheets, wbRels strings.Builder
	types.WriteString(xmlHeader + `<Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types">` +
		`<Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml"/>` +
		`<Default Extension="xml" ContentType="application/xml"/>` +
		`<Override PartName="/xl/workbook.xml" ContentType="` + ctBase + `sheet.main+xml"/>` +
		`<Override PartName="/xl/styles.xml" ContentType="` + ctBase + `styles+xml"/>`)
	wbRels.WriteString(xmlHeader + `<Relationships xmlns="` + nsPkgRels + `">`)
	parts := []zipPart{}
	for i, s := range sheets {
		n := i + 1
		fmt.Fprintf(&types, `<Override PartName="/xl/worksheets/sheet%d.xml" ContentType="%sworksheet+xml"/>`, n, ctBase)
		fmt.Fprintf(&wbSheets, `<sheet name="%s" sheetId="%d" r:id="rId%d"/>`, esc(s.Name), n, n)
		fmt.Fprintf(&wbRels, `<Relationship Id="rId%d" Type="%s" Target="worksheets/sheet%d.xml"/>`, n, relWS, n)
		parts = append(parts, zipPart{fmt.Sprintf("xl/worksheets/sheet%d.xml", n), sheetXML(nsMain, s)})
	}
	types.WriteString(`</Types>`)
	fmt.Fprintf(&wbRels, `<Relationship Id="rId%d" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/styles" Target="styles.xml"/>`, len(sheets)+1)
	wbRels.WriteString(`</Relationships>`)
	all := append([]zipPart{
		{"[Content_Types].xml", types.String()},
		{"_rels/.rels", xmlHeader + `<Relationships xmlns="` + nsPkgRels + `">` +
			`<Relationship Id="rId1" Type="` + relOffice + `" Target="xl/workbook.xml"/></Relationships>`},
		{"xl/workbook.xml", xmlHeader + `<workbook xmlns="` + nsMain + `" xmlns:r="` + nsR + `"><sheets>` +
			wbSheets.String() + `</sheets></workbook>`},
		{"xl/_rels/workbook.xml.rels", wbRels.String()},
		{"xl/styles.xml", xmlHeader + `<styleSheet xmlns="` + nsMain + `">` +
			`<fonts count="1"><font><sz val="11"/><name val="Calibri"/></font></fonts>` +
			`<fills count="2"><fill><patternFill patternType="none"/></fill><fill><patternFill patternType="gray125"/></fill></fills>` +
			`<borders count="1"><border><left/><right/><top/><bottom/><diagonal/></border></borders>` +
			`<cellStyleXfs count="1"><xf numFmtId="0" fontId="0" fillId="0" borderId="0"/></cellStyleXfs>` +
			`<cellXfs count="1"><xf numFmtId="0" fontId="0" fillId="0" borderId="0" xfId="0"/></cellXfs>` +
			`<cellStyles count="1"><cellStyle name="Normal" xfId="0" builtinId="0"/></cellStyles>` +
			`</styleSheet>`},
	}, parts...)
	return zipPackage("workbook", all, created)
}

// sheetXML is one worksheet: every non-empty cell with its reference.
func sheetXML(ns string, s xlsxSheet) string {
	var b strings.Builder
	b.WriteString(xmlHeader + `<worksheet xmlns="` + ns + `"><sheetData>`)
	for r, row := range s.Rows {
		fmt.Fprintf(&b, `<row r="%d">`, r+1)
		for c, cell := range row {
			ref := columnName(c) + strconv.Itoa(r+1)
			switch cell.kind {
			case 's':
				fmt.Fprintf(&b, `<c r="%s" t="inlineStr"><is><t xml:space="preserve">%s</t></is></c>`, ref, esc(cell.text))
			case 'n':
				fmt.Fprintf(&b, `<c r="%s"><v>%s</v></c>`, ref, cell.text)
			case 'b':
				v := "0"
				if cell.text == "true" {
					v = "1"
				}
				fmt.Fprintf(&b, `<c r="%s" t="b"><v>%s</v></c>`, ref, v)
			}
		}
		b.WriteString(`</row>`)
	}
	b.WriteString(`</sheetData></worksheet>`)
	return b.String()
}
