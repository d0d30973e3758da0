package nodes

import (
	"archive/zip"
	"bytes"
	"encoding/csv"
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/url"
	"path"
	"strings"
	"unicode/utf8"

	readability "codeberg.org/readeck/go-readability/v2"
	"github.com/ledongthuc/pdf"
	"github.com/sluicehq/sluice/flows"
	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/ast"
	"github.com/yuin/goldmark/text"
	"golang.org/x/net/html"
)

// The text extraction the file and url components share: a document's bytes, by their
// type, to text. PDF with github.com/ledongthuc/pdf (rsc.io/pdf's maintained fork), HTML
// with Readability (codeberg.org/readeck/go-readability, the port of Firefox's reader
// view), Markdown read with goldmark (its title), CSV and JSON with the standard library.
// DOCX is a zip of WordprocessingML: its text is the w:t runs of word/document.xml,
// which archive/zip and encoding/xml read in a few lines with no library to trust.

// document is a file or page as text.
type document struct {
	Name        string `json:"name,omitempty"`
	URL         string `json:"url,omitempty"`
	Format      string `json:"format"`
	ContentType string `json:"content_type,omitempty"`
	Title       string `json:"title,omitempty"`
	Text        string `json:"text"`
	Pages       int    `json:"pages,omitempty"`
	// Rows are a CSV's records by header; Data is a JSON document parsed.
	Rows []map[string]any `json:"rows,omitempty"`
	Data any              `json:"data,omitempty"`
}

// Document formats.
const (
	formatPDF      = "pdf"
	formatDOCX     = "docx"
	formatHTML     = "html"
	formatMarkdown = "markdown"
	formatCSV      = "csv"
	formatJSON     = "json"
	formatText     = "text"
)

// formatOf decides a document's format from its content type, then its name's
// extension, then its first bytes.
func formatOf(name, ctype string, data []byte) string {
	mt, _, _ := mime.ParseMediaType(ctype)
	switch {
	case mt == "application/pdf":
		return formatPDF
	case mt == "application/vnd.openxmlformats-officedocument.wordprocessingml.document":
		return formatDOCX
	case mt == "text/html" || mt == "application/xhtml+xml":
		return formatHTML
	case mt == "text/markdown" || mt == "text/x-markdown":
		return formatMarkdown
	case mt == "text/csv":
		return formatCSV
	case mt == "application/json" || strings.HasSuffix(mt, "+json"):
		return formatJSON
	}
	switch strings.ToLower(path.Ext(name)) {
	case ".pdf":
		return formatPDF
	case ".docx":
		return formatDOCX
	case ".html", ".htm", ".xhtml":
		return formatHTML
	case ".md", ".markdown", ".mdx":
		return formatMarkdown
	case ".csv":
		return formatCSV
	case ".json":
		return formatJSON
	}
	switch {
	case bytes.HasPrefix(data, []byte("%PDF-")):
		return formatPDF
	case bytes.HasPrefix(data, []byte("PK\x03\x04")):
		return formatDOCX
	}
	head := strings.ToLower(string(data[:min(len(data), 512)]))
	if strings.Contains(head, "<html") || strings.Contains(head, "<!doctype html") {
		return formatHTML
	}
	return formatText
}

// errNotText says a document has no text Sluice can read.
var errNotText = errors.New("not a document Sluice reads text from (PDF, DOCX, HTML, Markdown, CSV, JSON or UTF-8 text)")

// extract reads a document's text. page is the URL a web page came from (for
// Readability's relative links); nil for files.
func extract(name, ctype string, data []byte, page *url.URL) (doc *document, err error) {
	doc = &document{Name: name, ContentType: ctype, Format: formatOf(name, ctype, data)}
	// The parsers read bytes from anyone; a malformed file must fail its step, not the worker.
	defer func() {
		if r := recover(); r != nil {
			doc, err = nil, fmt.Errorf("the %s cannot be read: %v", doc.Format, r)
		}
	}()
	switch doc.Format {
	case formatPDF:
		err = extractPDF(doc, data)
	case formatDOCX:
		err = extractDOCX(doc, data)
	case formatHTML:
		err = extractHTML(doc, data, page)
	case formatCSV:
		err = extractCSV(doc, data)
	case formatJSON:
		var v any
		if v, err = flows.DecodeJSON(data); err == nil {
			doc.Data = v
			b, _ := json.MarshalIndent(v, "", "  ")
			doc.Text = string(b)
		}
	default:
		if !utf8.Valid(data) {
			return nil, errNotText
		}
		doc.Text = strings.TrimPrefix(string(data), "\uFEFF")
		if doc.Format == formatMarkdown {
			doc.Title = markdownTitle([]byte(doc.Text))
		}
	}
	if err != nil {
		return nil, err
	}
	doc.Text = strings.ToValidUTF8(doc.Text, "")
	return doc, nil
}

func extractPDF(doc *document, data []byte) error {
	r, err := pdf.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		return fmt.Errorf("the PDF cannot be read: %v", err)
	}
	doc.Pages = r.NumPage()
	var b strings.Builder
	for i := 1; i <= doc.Pages; i++ {
		p := r.Page(i)
		if p.V.IsNull() {
			continue
		}
		t, err := p.GetPlainText(nil)
		if err != nil {
			return fmt.Errorf("the PDF's page %d cannot be read: %v", i, err)
		}
		if t = strings.TrimSpace(t); t != "" {
			if b.Len() > 0 {
				b.WriteString("\n\n")
			}
			b.WriteString(t)
		}
	}
	doc.Text = b.String()
	return nil
}

// extractDOCX reads the paragraphs of word/document.xml: the text of its w:t elements,
// a tab for w:tab, a line break for w:br and w:cr, a blank line between paragraphs.
func extractDOCX(doc *document, data []byte) error {
	zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		return fmt.Errorf("the DOCX is not a zip archive: %v", err)
	}
	var body *zip.File
	for _, f := range zr.File {
		if f.Name == "word/document.xml" {
			body = f
		}
	}
	if body == nil {
		return errors.New("the DOCX has no word/document.xml")
	}
	rc, err := body.Open()
	if err != nil {
		return err
	}
	defer rc.Close()
	// A document.xml is a few MB at most; the cap keeps a zip bomb from filling memory.
	dec := xml.NewDecoder(io.LimitReader(rc, 256<<20))
	var b, para strings.Builder
	inText := false
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			return fmt.Errorf("the DOCX's document.xml cannot be read: %v", err)
		}
		switch t := tok.(type) {
		case xml.StartElement:
			switch t.Name.Local {
			case "t":
				inText = true
			case "tab":
				para.WriteByte('\t')
			case "br", "cr":
				para.WriteByte('\n')
			}
		case xml.EndElement:
			switch t.Name.Local {
			case "t":
				inText = false
			case "p":
				if s := strings.TrimSpace(para.String()); s != "" {
					if b.Len() > 0 {
						b.WriteString("\n\n")
					}
					b.WriteString(s)
				}
				para.Reset()
			}
		case xml.CharData:
			if inText {
				para.Write(t)
			}
		}
	}
	doc.Text = b.String()
	return nil
}

// extractHTML keeps what a reader view keeps: the main content's text, without
// navigation, scripts and styles. A page Readability finds no article in gives the text
// of its body.
func extractHTML(doc *document, data []byte, page *url.URL) error {
	root, err := html.Parse(bytes.NewReader(data))
	if err != nil {
		return fmt.Errorf("the HTML cannot be read: %v", err)
	}
	if page == nil {
		page = &url.URL{Scheme: "file", Path: "/" + doc.Name}
	}
	if art, err := readability.FromDocument(root, page); err == nil && art.Node != nil {
		var b strings.Builder
		if art.RenderText(&b) == nil && strings.TrimSpace(b.String()) != "" {
			doc.Title, doc.Text = strings.TrimSpace(art.Title()), tidyText(b.String())
			return nil
		}
	}
	root, _ = html.Parse(bytes.NewReader(data)) // Readability changes the tree it reads
	doc.Text = tidyText(htmlText(root))
	return nil
}

// htmlText is the text of a parsed page's elements but script, style, head and the like.
func htmlText(n *html.Node) string {
	var b strings.Builder
	var walk func(*html.Node)
	walk = func(n *html.Node) {
		if n.Type == html.ElementNode {
			switch n.Data {
			case "script", "style", "head", "noscript", "template", "svg":
				return
			case "p", "div", "br", "li", "h1", "h2", "h3", "h4", "h5", "h6", "tr", "section", "article":
				b.WriteByte('\n')
			}
		}
		if n.Type == html.TextNode {
			b.WriteString(n.Data)
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(n)
	return b.String()
}

// tidyText trims every line and keeps at most one blank line in a row.
func tidyText(s string) string {
	var out []string
	blank := false
	for _, l := range strings.Split(s, "\n") {
		l = strings.Join(strings.Fields(l), " ")
		if l == "" {
			if !blank && len(out) > 0 {
				out = append(out, "")
			}
			blank = true
			continue
		}
		blank = false
		out = append(out, l)
	}
	return strings.TrimSpace(strings.Join(out, "\n"))
}

// extractCSV reads the records by the first row's headers; the text is one line per
// record, "header: value; header: value", which reads well to a model and to an
// embedding.
func extractCSV(doc *document, data []byte) error {
	r := csv.NewReader(bytes.NewReader(bytes.TrimPrefix(data, []byte("\uFEFF"))))
	r.FieldsPerRecord = -1
	recs, err := r.ReadAll()
	if err != nil {
		return fmt.Errorf("the CSV cannot be read: %v", err)
	}
	if len(recs) == 0 {
		return nil
	}
	head := recs[0]
	var b strings.Builder
	for _, rec := range recs[1:] {
		row := map[string]any{}
		var parts []string
		for i, v := range rec {
			h := fmt.Sprintf("column %d", i+1)
			if i < len(head) && strings.TrimSpace(head[i]) != "" {
				h = strings.TrimSpace(head[i])
			}
			row[h] = v
			parts = append(parts, h+": "+v)
		}
		doc.Rows = append(doc.Rows, row)
		b.WriteString(strings.Join(parts, "; "))
		b.WriteByte('\n')
	}
	doc.Text = strings.TrimSuffix(b.String(), "\n")
	return nil
}

// markdownTitle is the text of a Markdown document's first level-1 heading.
func markdownTitle(src []byte) string {
	for _, h := range markdownHeadings(src) {
		if h.level == 1 {
			return h.text
		}
	}
	return ""
}

// heading is a Markdown heading: its level, its text, and where its line starts in the
// source.
type heading struct {
	level int
	text  string
	start int
}

// markdownHeadings finds the ATX and Setext headings of a Markdown document with
// goldmark's parser, so that a "#" in a code block is not one.
func markdownHeadings(src []byte) []heading {
	doc := goldmark.New().Parser().Parse(text.NewReader(src))
	var out []heading
	_ = ast.Walk(doc, func(n ast.Node, entering bool) (ast.WalkStatus, error) {
		h, ok := n.(*ast.Heading)
		if !ok || !entering {
			return ast.WalkContinue, nil
		}
		lines := h.Lines()
		if lines.Len() == 0 {
			return ast.WalkSkipChildren, nil
		}
		var t strings.Builder
		for i := 0; i < lines.Len(); i++ {
			seg := lines.At(i)
			t.Write(seg.Value(src))
		}
		start := bytes.LastIndexByte(src[:lines.At(0).Start], '\n') + 1
		out = append(out, heading{level: h.Level, text: strings.TrimSpace(t.String()), start: start})
		return ast.WalkSkipChildren, nil
	})
	return out
}
