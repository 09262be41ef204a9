package tools

import (
	"archive/zip"
	"bytes"
	"context"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"strings"
	"time"
)

type generateDocxTool struct {
	now func() time.Time // nil: time.Now
}

func (generateDocxTool) Name() string { return "generate_docx" }

func (generateDocxTool) Description() string {
	return "Create a Word document (.docx) in the workspace from Markdown-style text. Supported: \"# \", \"## \", " +
		"\"### \" headings, \"- \" or \"* \" bullet items (indent by two spaces to nest), **bold** text, ``` code " +
		"blocks, and paragraphs separated by blank lines (single line breaks are kept). path is relative to the " +
		"workspace root; .docx is appended when missing. An optional title is shown at the top and stored as " +
		"the document title."
}

func (generateDocxTool) Schema() json.RawMessage {
	return json.RawMessage(`{"type":"object","properties":{` +
		`"path":{"type":"string","description":"Output path relative to the workspace root, e.g. reports/summary.docx"},` +
		`"title":{"type":"string","description":"Optional document title"},` +
		`"content":{"type":"string","description":"Document body in Markdown-style text"}` +
		`},"required":["path","content"]}`)
}

// generateDocxInput is generate_docx's arguments.
type generateDocxInput struct {
	Path    string  `json:"path"`
	Title   string  `json:"title,omitempty"`
	Content *string `json:"content"`
}

// validate also settles the output name (".docx" added when missing), so
// the canonical input that approval shows names the file that is written.
func (in *generateDocxInput) validate() error {
	if err := requireFileInput(in.Path, in.Content); err != nil {
		return err
	}
	in.Path = strings.TrimSpace(in.Path)
	if !strings.HasSuffix(strings.ToLower(in.Path), ".docx") {
		in.Path += ".docx"
	}
	return nil
}

func (t generateDocxTool) Decode(input json.RawMessage) (Call, error) {
	return decodeCall(input, t.run)
}

func (t generateDocxTool) run(_ context.Context, env Env, in *generateDocxInput) (string, error) {
	rel, size, err := writeGenerated(env, in.Path, t.now, func(created time.Time) ([]byte, error) {
		return buildDocx(strings.TrimSpace(in.Title), *in.Content, created)
	})
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("Generated %s (%d bytes)", rel, size), nil
}

// writeGenerated builds a generated file (build gets the creation time:
// now, or time.Now when nil) and writes it to p in the workspace, 0600;
// it returns the workspace-relative path and the size written.
func writeGenerated(env Env, p string, now func() time.Time, build func(created time.Time) ([]byte, error)) (string, int, error) {
	rel, err := resolve(env.FilesDir, p)
	if err != nil {
		return "", 0, err
	}
	if now == nil {
		now = time.Now
	}
	data, err := build(now().UTC())
	if err != nil {
		return "", 0, err
	}
	ws, err := openWorkspace(env)
	if err != nil {
		return "", 0, err
	}
	defer ws.Close()
	if err := writeFile(ws, rel, data, 0o600); err != nil {
		return "", 0, err
	}
	return rel, len(data), nil
}

// zipPart is one part of a generated OOXML package.
type zipPart struct{ name, body string }

// zipPackage writes parts, in order, as a deflated zip stamped created;
// what names the package in errors ("document", "workbook").
func zipPackage(what string, parts []zipPart, created time.Time) ([]byte, error) {
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, p := range parts {
		w, err := zw.CreateHeader(&zip.FileHeader{Name: p.name, Method: zip.Deflate, Modified: created})
		if err != nil {
			return nil, fmt.Errorf("building the %s: %v", what, err)
		}
		if _, err := w.Write([]byte(p.body)); err != nil {
			return nil, fmt.Errorf("building the %s: %v", what, err)
		}
	}
	if err := zw.Close(); err != nil {
		return nil, fmt.Errorf("building the %s: %v", what, err)
	}
	return buf.Bytes(), nil
}

// OOXML namespaces and content types.
const (
	nsW        = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"
	nsR        = "http://schemas.openxmlformats.org/officeDocument/2006/relationships"
	nsPkgRels  = "http://schemas.openxmlformats.org/package/2006/relationships"
	relOffice  = "http://schemas.openxmlformats.org/officeDocument/2006/relationships/officeDocument"
	relCore    = "http://schemas.openxmlformats.org/package/2006/relationships/metadata/core-properties"
	relApp     = "http://schemas.openxmlformats.org/officeDocument/2006/relationships/extended-properties"
	relStyles  = "http://schemas.openxmlformats.org/officeDocument/2006/relationships/styles"
	relNumber  = "http://schemas.openxmlformats.org/officeDocument/2006/relationships/numbering"
	ctDocument = "application/vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml"
	xmlHeader  = `<?xml version="1.0" encoding="UTF-8" standalone="yes"?>` + "\n"
)

// buildDocx renders the document as an OOXML package: the parts Word needs
// (content types, package rels, document, styles, numbering for bullets)
// plus core/app properties.
func buildDocx(title, content string, created time.Time) ([]byte, error) {
	return zipPackage("document", []zipPart{
		// [Content_Types].xml comes first: some readers sniff it there.
		{"[Content_Types].xml", contentTypesXML},
		{"_rels/.rels", packageRelsXML},
		{"docProps/core.xml", coreXML(title, created)},
		{"docProps/app.xml", appXML},
		{"word/_rels/document.xml.rels", documentRelsXML},
		{"word/document.xml", documentXML(title, content)},
		{"word/styles.xml", stylesXML},
		{"word/numbering.xml", numberingXML},
	}, created)
}

// esc escapes text for XML content and attributes; characters XML 1.0
// cannot carry become U+FFFD rather than producing a file Word rejects.
func esc(s string) string {
	var b strings.Builder
	_ = xml.EscapeText(&b, []byte(s)) // writes to a strings.Builder cannot fail
	return b.String()
}

const contentTypesXML = xmlHeader +
	`<Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types">` +
	`<Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml"/>` +
	`<Default Extension="xml" ContentType="application/xml"/>` +
	`<Override PartName="/word/document.xml" ContentType="` + ctDocument + `"/>` +
	`<Override PartName="/word/styles.xml" ContentType="application/vnd.openxmlformats-officedocument.wordprocessingml.styles+xml"/>` +
	`<Override PartName="/word/numbering.xml" ContentType="application/vnd.openxmlformats-officedocument.wordprocessingml.numbering+xml"/>` +
	`<Override PartName="/docProps/core.xml" ContentType="application/vnd.openxmlformats-package.core-properties+xml"/>` +
	`<Override PartName="/docProps/app.xml" ContentType="application/vnd.openxmlformats-officedocument.extended-properties+xml"/>` +
	`</Types>`

const packageRelsXML = xmlHeader +
	`<Relationships xmlns="` + nsPkgRels + `">` +
	`<Relationship Id="rId1" Type="` + relOffice + `" Target="word/document.xml"/>` +
	`<Relationship Id="rId2" Type="` + relCore + `" Target="docProps/core.xml"/>` +
	`<Relationship Id="rId3" Type="` + relApp + `" Target="docProps/app.xml"/>` +
	`</Relationships>`

const documentRelsXML = xmlHeader +
	`<Relationships xmlns="` + nsPkgRels + `">` +
	`<Relationship Id="rId1" Type="` + relStyles + `" Target="styles.xml"/>` +
	`<Relationship Id="rId2" Type="` + relNumber + `" Target="numbering.xml"/>` +
	`</Relationships>`

const appXML = xmlHeader +
	`<Properties xmlns="http://schemas.openxmlformats.org/officeDocument/2006/extended-properties" ` +
	`xmlns:vt="http://schemas.openxmlformats.org/officeDocument/2006/docPropsVTypes">` +
	`<Application>Waggle</Application><DocSecurity>0</DocSecurity></Properties>`

func coreXML(title string, created time.Time) string {
	ts := created.Format("2006-01-02T15:04:05Z")
	var b strings.Builder
	b.WriteString(xmlHeader)
	b.WriteString(`<cp:coreProperties xmlns:cp="http://schemas.openxmlformats.org/package/2006/metadata/core-properties" ` +
		`xmlns:dc="http://purl.org/dc/elements/1.1/" xmlns:dcterms="http://purl.org/dc/terms/" ` +
		`xmlns:dcmitype="http://purl.org/dc/dcmitype/" xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance">`)
	if title != "" {
		b.WriteString(`<dc:title>` + esc(title) + `</dc:title>`)
	}
	b.WriteString(`<dc:creator>Waggle</dc:creator><cp:lastModifiedBy>Waggle</cp:lastModifiedBy>`)
	b.WriteString(`<dcterms:created xsi:type="dcterms:W3CDTF">` + ts + `</dcterms:created>`)
	b.WriteString(`<dcterms:modified xsi:type="dcterms:W3CDTF">` + ts + `</dcterms:modified>`)
	b.WriteString(`</cp:coreProperties>`)
	return b.String()
}

// documentXML converts the Markdown-ish content into WordprocessingML body
// paragraphs.
func documentXML(title, content string) string {
	var b strings.Builder
	b.WriteString(xmlHeader)
	b.WriteString(`<w:document xmlns:w="` + nsW + `" xmlns:r="` + nsR + `"><w:body>`)
	if title != "" {
		writeParagraph(&b, "Title", -1, []string{title})
	}
	for _, blk := range parseBlocks(content) {
		writeParagraph(&b, blk.style, blk.level, blk.lines)
	}
	// US Letter with 1" margins; Word and LibreOffice both want a sectPr.
	b.WriteString(`<w:sectPr><w:pgSz w:w="12240" w:h="15840"/>` +
		`<w:pgMar w:top="1440" w:right="1440" w:bottom="1440" w:left="1440" w:header="720" w:footer="720" w:gutter="0"/>` +
		`</w:sectPr></w:body></w:document>`)
	return b.String()
}

// block is one output paragraph: a style, a bullet level (-1 when not a
// list item) and its lines, joined by line breaks.
type block struct {
	style string
	level int
	lines []string
}

// parseBlocks splits Markdown-ish text into paragraphs. Headings and bullet
// items are single-line blocks; other consecutive lines form one paragraph;
// blank lines separate paragraphs; ``` fences make a Code block whose lines
// are kept verbatim.
func parseBlocks(content string) []block {
	var out []block
	var para []string
	flush := func() {
		if len(para) > 0 {
			out = append(out, block{style: "", level: -1, lines: para})
			para = nil
		}
	}
	lines := strings.Split(strings.ReplaceAll(content, "\r\n", "\n"), "\n")
	for i := 0; i < len(lines); i++ {
		line := strings.TrimRight(lines[i], " \t\r")
		trimmed := strings.TrimLeft(line, " \t")
		switch {
		case strings.HasPrefix(trimmed, "```"):
			flush()
			var code []string
			for i++; i < len(lines) && !strings.HasPrefix(strings.TrimSpace(lines[i]), "```"); i++ {
				code = append(code, strings.TrimRight(lines[i], "\r"))
			}
			if len(code) == 0 {
				code = []string{""}
			}
			out = append(out, block{style: "Code", level: -1, lines: code})
		case trimmed == "":
			flush()
		case isRule(trimmed):
			flush()
		case headingLevel(trimmed) > 0:
			flush()
			n := headingLevel(trimmed)
			text := strings.TrimSpace(strings.TrimRight(strings.TrimSpace(trimmed[n:]), "#"))
			out = append(out, block{style: fmt.Sprintf("Heading%d", min(n, 3)), level: -1, lines: []string{text}})
		case strings.HasPrefix(trimmed, "- ") || strings.HasPrefix(trimmed, "* ") || trimmed == "-" || trimmed == "*":
			flush()
			indent := len(line) - len(trimmed)
			level := min(strings.Count(line[:indent], "\t")+strings.Count(line[:indent], " ")/2, 2)
			out = append(out, block{style: "ListBullet", level: level, lines: []string{strings.TrimSpace(trimmed[1:])}})
		default:
			para = append(para, trimmed)
		}
	}
	flush()
	return out
}

// headingLevel counts the leading #s of an ATX heading ("## Title"), or 0.
func headingLevel(s string) int {
	n := 0
	for n < len(s) && s[n] == '#' {
		n++
	}
	if n == 0 || n > 6 || n == len(s) || (s[n] != ' ' && s[n] != '\t') {
		return 0
	}
	return n
}

// isRule recognises a thematic break (---, ***, ___), which is dropped.
func isRule(s string) bool {
	s = strings.ReplaceAll(s, " ", "")
	if len(s) < 3 {
		return false
	}
	return strings.Trim(s, "-") == "" || strings.Trim(s, "*") == "" || strings.Trim(s, "_") == ""
}

func writeParagraph(b *strings.Builder, style string, level int, lines []string) {
	b.WriteString(`<w:p>`)
	if style != "" {
		b.WriteString(`<w:pPr><w:pStyle w:val="` + style + `"/>`)
		if level >= 0 {
			fmt.Fprintf(b, `<w:numPr><w:ilvl w:val="%d"/><w:numId w:val="1"/></w:numPr>`, level)
		}
		b.WriteString(`</w:pPr>`)
	}
	for i, line := range lines {
		if i > 0 {
			b.WriteString(`<w:r><w:br/></w:r>`)
		}
		if style == "Code" || style == "Title" {
			writeRun(b, line, false)
			continue
		}
		for _, r := range boldRuns(line) {
			writeRun(b, r.text, r.bold)
		}
	}
	b.WriteString(`</w:p>`)
}

func writeRun(b *strings.Builder, text string, bold bool) {
	if text == "" {
		return
	}
	b.WriteString(`<w:r>`)
	if bold {
		b.WriteString(`<w:rPr><w:b/><w:bCs/></w:rPr>`)
	}
	// A tab inside w:t is not a tab to Word; it has its own element.
	for i, part := range strings.Split(text, "\t") {
		if i > 0 {
			b.WriteString(`<w:tab/>`)
		}
		if part != "" {
			b.WriteString(`<w:t xml:space="preserve">` + esc(part) + `</w:t>`)
		}
	}
	b.WriteString(`</w:r>`)
}

type run struct {
	text string
	bold bool
}

// boldRuns splits "a **b** c" into plain and bold runs. An unpaired ** is
// kept as literal text.
func boldRuns(s string) []run {
	var out []run
	for {
		start := strings.Index(s, "**")
		if start < 0 {
			break
		}
		end := strings.Index(s[start+2:], "**")
		if end < 0 {
			break
		}
		if start > 0 {
			out = append(out, run{text: s[:start]})
		}
		out = append(out, run{text: s[start+2 : start+2+end], bold: true})
		s = s[start+2+end+2:]
	}
	if s != "" {
		out = append(out, run{text: s})
	}
	return out
}

// styles.xml: child elements follow the schema's sequence order, which
// Word enforces. Built-in style names ("heading 1") so Word's navigation pane
// and LibreOffice's outline recognise the headings.
var stylesXML = xmlHeader +
	`<w:styles xmlns:w="` + nsW + `">` +
	`<w:docDefaults><w:rPrDefault><w:rPr><w:rFonts w:ascii="Calibri" w:hAnsi="Calibri" w:eastAsia="Calibri" w:cs="Calibri"/>` +
	`<w:sz w:val="22"/><w:szCs w:val="22"/><w:lang w:val="en-US"/></w:rPr></w:rPrDefault>` +
	`<w:pPrDefault><w:pPr><w:spacing w:after="160" w:line="259" w:lineRule="auto"/></w:pPr></w:pPrDefault></w:docDefaults>` +
	`<w:style w:type="paragraph" w:default="1" w:styleId="Normal"><w:name w:val="Normal"/><w:qFormat/></w:style>` +
	`<w:style w:type="character" w:default="1" w:styleId="DefaultParagraphFont"><w:name w:val="Default Paragraph Font"/><w:uiPriority w:val="1"/><w:semiHidden/></w:style>` +
	`<w:style w:type="paragraph" w:styleId="Title"><w:name w:val="Title"/><w:basedOn w:val="Normal"/><w:next w:val="Normal"/><w:qFormat/>` +
	`<w:pPr><w:spacing w:after="240"/><w:contextualSpacing/></w:pPr><w:rPr><w:sz w:val="56"/><w:szCs w:val="56"/></w:rPr></w:style>` +
	headingStyle(1, 32, "240") + headingStyle(2, 26, "160") + headingStyle(3, 24, "120") +
	`<w:style w:type="paragraph" w:styleId="ListBullet"><w:name w:val="List Bullet"/><w:basedOn w:val="Normal"/><w:qFormat/>` +
	`<w:pPr><w:numPr><w:numId w:val="1"/></w:numPr><w:spacing w:after="60"/><w:contextualSpacing/></w:pPr></w:style>` +
	`<w:style w:type="paragraph" w:styleId="Code"><w:name w:val="Code"/><w:basedOn w:val="Normal"/><w:qFormat/>` +
	`<w:pPr><w:shd w:val="clear" w:color="auto" w:fill="F2F2F2"/><w:spacing w:after="120" w:line="240" w:lineRule="auto"/></w:pPr>` +
	`<w:rPr><w:rFonts w:ascii="Consolas" w:hAnsi="Consolas" w:cs="Consolas"/><w:sz w:val="20"/><w:szCs w:val="20"/></w:rPr></w:style>` +
	`</w:styles>`

func headingStyle(level, size int, before string) string {
	return fmt.Sprintf(`<w:style w:type="paragraph" w:styleId="Heading%[1]d"><w:name w:val="heading %[1]d"/>`+
		`<w:basedOn w:val="Normal"/><w:next w:val="Normal"/><w:uiPriority w:val="9"/><w:qFormat/>`+
		`<w:pPr><w:keepNext/><w:keepLines/><w:spacing w:before="%[3]s" w:after="80"/><w:outlineLvl w:val="%[4]d"/></w:pPr>`+
		`<w:rPr><w:b/><w:bCs/><w:sz w:val="%[2]d"/><w:szCs w:val="%[2]d"/></w:rPr></w:style>`, level, size, before, level-1)
}

// numbering.xml: one bullet list definition with three levels.
var numberingXML = xmlHeader +
	`<w:numbering xmlns:w="` + nsW + `">` +
	`<w:abstractNum w:abstractNumId="0"><w:multiLevelType w:val="hybridMultilevel"/>` +
	bulletLevel(0, "\u2022", 720) + bulletLevel(1, "\u25E6", 1440) + bulletLevel(2, "\u25AA", 2160) +
	`</w:abstractNum><w:num w:numId="1"><w:abstractNumId w:val="0"/></w:num></w:numbering>`

func bulletLevel(ilvl int, glyph string, left int) string {
	return fmt.Sprintf(`<w:lvl w:ilvl="%d"><w:start w:val="1"/><w:numFmt w:val="bullet"/><w:lvlText w:val="%s"/>`+
		`<w:lvlJc w:val="left"/><w:pPr><w:ind w:left="%d" w:hanging="360"/></w:pPr></w:lvl>`, ilvl, glyph, left)
}
