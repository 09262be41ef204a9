package tools

import (
	"archive/zip"
	"bytes"
	"encoding/xml"
	"io"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestGenerateDocx(t *testing.T) {
	env := newEnv(t)
	content := "# Q3 <Report> & \"Plan\"\n\nIntro with **bold** text\nand a second line.\n\n## Details\n- first item\n  - nested\n* second **key** item\n\n### Small\n```\nx := a < b\n\treturn\n```\nTrailing ** alone"
	out := mustCall(t, env, "generate_docx", map[string]any{"path": "reports/q3", "title": "Q3 & Co", "content": content})
	if !strings.HasPrefix(out, "Generated reports/q3.docx (") {
		t.Errorf("generate_docx = %q", out)
	}
	parts := readZip(t, filepath.Join(env.FilesDir, "reports", "q3.docx"))

	for _, name := range []string{"[Content_Types].xml", "_rels/.rels", "word/document.xml", "word/styles.xml",
		"word/_rels/document.xml.rels", "word/numbering.xml", "docProps/core.xml", "docProps/app.xml"} {
		body, ok := parts[name]
		if !ok {
			t.Errorf("part %s missing", name)
			continue
		}
		assertWellFormed(t, name, body)
	}
	if !strings.Contains(parts["[Content_Types].xml"], `PartName="/word/document.xml" ContentType="application/vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml"`) {
		t.Error("[Content_Types].xml does not declare the main document part")
	}
	if !strings.Contains(parts["_rels/.rels"], `Target="word/document.xml"`) {
		t.Error("package rels do not point at the document")
	}
	if !strings.Contains(parts["docProps/core.xml"], "<dc:title>Q3 &amp; Co</dc:title>") {
		t.Errorf("core.xml title: %s", parts["docProps/core.xml"])
	}

	doc := parts["word/document.xml"]
	for _, want := range []string{
		`<w:pStyle w:val="Title"/></w:pPr><w:r><w:t xml:space="preserve">Q3 &amp; Co</w:t>`,
		`<w:pStyle w:val="Heading1"/></w:pPr><w:r><w:t xml:space="preserve">Q3 &lt;Report&gt; &amp; &#34;Plan&#34;</w:t>`,
		`<w:pStyle w:val="Heading2"/>`,
		`<w:pStyle w:val="Heading3"/>`,
		`<w:r><w:rPr><w:b/><w:bCs/></w:rPr><w:t xml:space="preserve">bold</w:t></w:r>`,
		`text</w:t></w:r><w:r><w:br/></w:r><w:r><w:t xml:space="preserve">and a second line.`,
		`<w:numPr><w:ilvl w:val="0"/><w:numId w:val="1"/></w:numPr></w:pPr><w:r><w:t xml:space="preserve">first item`,
		`<w:ilvl w:val="1"/><w:numId w:val="1"/></w:numPr></w:pPr><w:r><w:t xml:space="preserve">nested`,
		`<w:t xml:space="preserve">key</w:t>`,
		`<w:pStyle w:val="Code"/></w:pPr><w:r><w:t xml:space="preserve">x := a &lt; b</w:t>`,
		`<w:r><w:tab/><w:t xml:space="preserve">return</w:t></w:r>`,
		`Trailing ** alone`,
	} {
		if !strings.Contains(doc, want) {
			t.Errorf("document.xml lacks %s", want)
		}
	}
	if strings.Contains(doc, "# Q3") || strings.Contains(doc, "**bold**") || strings.Contains(doc, "```") {
		t.Error("Markdown markers leaked into the document text")
	}
	for _, id := range []string{"Heading1", "Heading2", "Heading3", "Title", "ListBullet", "Code"} {
		if !strings.Contains(parts["word/styles.xml"], `w:styleId="`+id+`"`) {
			t.Errorf("styles.xml lacks style %s", id)
		}
	}

	// An explicit .docx suffix is kept as is.
	if out := mustCall(t, env, "generate_docx", map[string]any{"path": "Memo.DOCX", "content": "hi"}); !strings.HasPrefix(out, "Generated Memo.DOCX") {
		t.Errorf("explicit suffix = %q", out)
	}
	if _, err := call(t, env, "generate_docx", map[string]any{"path": "x.docx"}); err == nil {
		t.Error("generate_docx without content succeeded")
	}
}

func TestDocxInvalidXMLCharacters(t *testing.T) {
	data, err := buildDocx("", "bell \a and nul \x00 here", time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	if err != nil {
		t.Fatal(err)
	}
	zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range zr.File {
		if f.Name == "word/document.xml" {
			rc, _ := f.Open()
			body, _ := io.ReadAll(rc)
			rc.Close()
			assertWellFormed(t, f.Name, string(body))
			if !strings.Contains(string(body), "bell \uFFFD and nul \uFFFD here") {
				t.Errorf("control characters not replaced: %s", body)
			}
		}
	}
	if zr.File[0].Name != "[Content_Types].xml" {
		t.Errorf("first zip entry = %s, want [Content_Types].xml", zr.File[0].Name)
	}
}

func TestParseBlocks(t *testing.T) {
	tests := []struct {
		in   string
		want []block
	}{
		{"#NoSpace", []block{{"", -1, []string{"#NoSpace"}}}},
		{"#### deep ##", []block{{"Heading3", -1, []string{"deep"}}}},
		{"a\nb\n\nc", []block{{"", -1, []string{"a", "b"}}, {"", -1, []string{"c"}}}},
		{"---\n- item", []block{{"ListBullet", 0, []string{"item"}}}},
		{"**not a bullet**", []block{{"", -1, []string{"**not a bullet**"}}}},
	}
	for _, tt := range tests {
		got := parseBlocks(tt.in)
		if len(got) != len(tt.want) {
			t.Errorf("parseBlocks(%q) = %+v, want %+v", tt.in, got, tt.want)
			continue
		}
		for i := range got {
			if got[i].style != tt.want[i].style || got[i].level != tt.want[i].level || strings.Join(got[i].lines, "|") != strings.Join(tt.want[i].lines, "|") {
				t.Errorf("parseBlocks(%q)[%d] = %+v, want %+v", tt.in, i, got[i], tt.want[i])
			}
		}
	}
}

func readZip(t *testing.T, p string) map[string]string {
	t.Helper()
	zr, err := zip.OpenReader(p)
	if err != nil {
		t.Fatalf("not a zip: %v", err)
	}
	defer zr.Close()
	parts := map[string]string{}
	for _, f := range zr.File {
		rc, err := f.Open()
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(rc)
		rc.Close()
		if err != nil {
			t.Fatal(err)
		}
		parts[f.Name] = string(b)
	}
	return parts
}

func assertWellFormed(t *testing.T, name, body string) {
	t.Helper()
	d := xml.NewDecoder(strings.NewReader(body))
	for {
		_, err := d.Token()
		if err == io.EOF {
			return
		}
		if err != nil {
			t.Errorf("%s is not well-formed XML: %v", name, err)
			return
		}
	}
}
