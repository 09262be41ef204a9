package tools

import (
	"bytes"
	"net/url"
	"regexp"
	"strings"

	"golang.org/x/net/html"
	"golang.org/x/net/html/atom"
)

// htmlSkipped are elements whose content is no reading matter: code, styling,
// navigation, embedded media and forms' machinery.
var htmlSkipped = map[atom.Atom]bool{
	atom.Script: true, atom.Style: true, atom.Noscript: true, atom.Nav: true, atom.Template: true,
	atom.Svg: true, atom.Iframe: true, atom.Object: true, atom.Canvas: true, atom.Select: true,
	atom.Button: true, atom.Head: true,
}

// htmlBlocks start and end on a line of their own.
var htmlBlocks = map[atom.Atom]bool{
	atom.P: true, atom.Div: true, atom.Section: true, atom.Article: true, atom.Main: true, atom.Header: true,
	atom.Footer: true, atom.Aside: true, atom.Ul: true, atom.Ol: true, atom.Li: true, atom.Table: true,
	atom.Tr: true, atom.Blockquote: true, atom.Pre: true, atom.H1: true, atom.H2: true, atom.H3: true,
	atom.H4: true, atom.H5: true, atom.H6: true, atom.Dl: true, atom.Dt: true, atom.Dd: true, atom.Figure: true,
	atom.Figcaption: true, atom.Form: true, atom.Hr: true, atom.Address: true, atom.Details: true, atom.Summary: true,
}

var htmlHeadingLevel = map[atom.Atom]int{atom.H1: 1, atom.H2: 2, atom.H3: 3, atom.H4: 4, atom.H5: 5, atom.H6: 6}

// htmlText reduces an HTML document to its readable text: the title, then
// the body's text with blocks on their own lines, headings marked "#",
// list items "- ", and links as "text (url)" with the url made absolute
// against base. Scripts, styles, navigation and the like are dropped.
func htmlText(body []byte, base *url.URL) string {
	doc, err := html.Parse(bytes.NewReader(body))
	if err != nil {
		return strings.ToValidUTF8(string(body), "\uFFFD")
	}
	w := &textWriter{base: base}
	if title := findTitle(doc); title != "" {
		w.line("Title: " + title)
		w.blank()
	}
	w.walk(doc)
	return w.String()
}

// findTitle is the document's <title>, whitespace collapsed.
func findTitle(n *html.Node) string {
	if n.Type == html.ElementNode && n.DataAtom == atom.Title {
		return collapse(nodeText(n))
	}
	for c := n.FirstChild; c != nil; c = c.NextSibling {
		if t := findTitle(c); t != "" {
			return t
		}
	}
	return ""
}

func nodeText(n *html.Node) string {
	var b strings.Builder
	var rec func(*html.Node)
	rec = func(n *html.Node) {
		if n.Type == html.TextNode {
			b.WriteString(n.Data)
		}
		if n.Type == html.ElementNode && htmlSkipped[n.DataAtom] && n.DataAtom != atom.Head {
			return
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			rec(c)
		}
	}
	rec(n)
	return b.String()
}

var spaces = regexp.MustCompile(`\s+`)

func collapse(s string) string { return strings.TrimSpace(spaces.ReplaceAllString(s, " ")) }

// textWriter accumulates lines: inline text is collapsed into the current
// line, blocks break it.
type textWriter struct {
	base *url.URL
	out  strings.Builder
	cur  strings.Builder
	pre  int
}

func (w *textWriter) walk(n *html.Node) {
	switch n.Type {
	case html.TextNode:
		if w.pre > 0 {
			w.cur.WriteString(n.Data)
			return
		}
		w.inline(n.Data)
		return
	case html.ElementNode:
		if htmlSkipped[n.DataAtom] {
			return
		}
		switch n.DataAtom {
		case atom.Br:
			w.flush()
			return
		case atom.A:
			w.link(n)
			return
		case atom.Img:
			if alt := collapse(attr(n, "alt")); alt != "" {
				w.inline("[" + alt + "]")
			}
			return
		case atom.Td, atom.Th:
			w.inline(" | ")
		}
	}
	block := n.Type == html.ElementNode && htmlBlocks[n.DataAtom]
	if block {
		w.flush()
		if lvl := htmlHeadingLevel[n.DataAtom]; lvl > 0 {
			w.cur.WriteString(strings.Repeat("#", lvl) + " ")
		}
		if n.DataAtom == atom.Li {
			w.cur.WriteString("- ")
		}
		if n.DataAtom == atom.Pre {
			w.pre++
		}
	}
	for c := n.FirstChild; c != nil; c = c.NextSibling {
		w.walk(c)
	}
	if block {
		w.flush()
		if n.DataAtom == atom.Pre {
			w.pre--
		}
	}
}

// inline adds text to the current line with its whitespace collapsed.
func (w *textWriter) inline(s string) {
	if s == "" {
		return
	}
	lead := strings.TrimLeft(s, " \t\r\n\f") != s
	c := collapse(s)
	if c == "" {
		if lead && w.cur.Len() > 0 && !strings.HasSuffix(w.cur.String(), " ") {
			w.cur.WriteString(" ")
		}
		return
	}
	if lead && w.cur.Len() > 0 && !strings.HasSuffix(w.cur.String(), " ") {
		w.cur.WriteString(" ")
	}
	w.cur.WriteString(c)
	if strings.TrimRight(s, " \t\r\n\f") != s {
		w.cur.WriteString(" ")
	}
}

// link writes a link as "text (url)"; a link to where its text already
// says, to the page itself or to script is just its text.
func (w *textWriter) link(n *html.Node) {
	text := collapse(nodeText(n))
	href := strings.TrimSpace(attr(n, "href"))
	target := ""
	if href != "" && !strings.HasPrefix(href, "#") {
		if u, err := url.Parse(href); err == nil {
			if w.base != nil {
				u = w.base.ResolveReference(u)
			}
			if u.Scheme == "http" || u.Scheme == "https" || u.Scheme == "mailto" {
				target = u.String()
			}
		}
	}
	switch {
	case text == "" && target == "":
		return
	case text == "":
		w.inline(" " + target + " ")
	case target == "" || target == text:
		w.inline(" " + text + " ")
	default:
		w.inline(" " + text + " (" + target + ") ")
	}
}

func attr(n *html.Node, key string) string {
	for _, a := range n.Attr {
		if a.Key == key {
			return a.Val
		}
	}
	return ""
}

// flush ends the current line.
func (w *textWriter) flush() {
	line := w.cur.String()
	w.cur.Reset()
	if w.pre == 0 {
		line = strings.TrimSpace(line)
	} else {
		line = strings.TrimRight(line, "\n")
	}
	if line == "" || line == "-" || strings.Trim(line, "# ") == "" {
		return
	}
	w.line(line)
}

func (w *textWriter) line(s string) {
	w.out.WriteString(s)
	w.out.WriteString("\n")
}

func (w *textWriter) blank() { w.out.WriteString("\n") }

// String is the text written so far.
func (w *textWriter) String() string {
	w.flush()
	return strings.TrimSpace(w.out.String())
}
