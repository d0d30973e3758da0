package nodes_test

import (
	"archive/zip"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/flows"
	"github.com/sluicehq/sluice/flows/nodes"
	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/storetest"
)

// pdfWith writes a one-page PDF per text, each in Helvetica, with a correct xref table.
func pdfWith(pages ...string) []byte {
	var objs []string
	kids := ""
	n := len(pages)
	for i := range pages {
		kids += fmt.Sprintf("%d 0 R ", 4+2*i)
	}
	objs = append(objs, "<< /Type /Catalog /Pages 2 0 R >>",
		fmt.Sprintf("<< /Type /Pages /Kids [%s] /Count %d >>", kids, n),
		"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>")
	for i, text := range pages {
		stream := fmt.Sprintf("BT /F1 18 Tf 72 720 Td (%s) Tj ET", text)
		objs = append(objs,
			fmt.Sprintf("<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 3 0 R >> >> /Contents %d 0 R >>", 5+2*i),
			fmt.Sprintf("<< /Length %d >>\nstream\n%s\nendstream", len(stream), stream))
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

// docxWith writes a DOCX whose body has these paragraphs.
func docxWith(paras ...string) []byte {
	var b bytes.Buffer
	zw := zip.NewWriter(&b)
	w, _ := zw.Create("[Content_Types].xml")
	w.Write([]byte(`<?xml version="1.0"?><Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types"/>`))
	w, _ = zw.Create("word/document.xml")
	var body strings.Builder
	for _, p := range paras {
		first, rest, _ := strings.Cut(p, " ")
		fmt.Fprintf(&body, `<w:p><w:r><w:t>%s</w:t></w:r><w:r><w:tab/><w:t xml:space="preserve">%s</w:t></w:r></w:p>`, first, rest)
	}
	fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?><w:document xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"><w:body>%s</w:body></w:document>`, body.String())
	zw.Close()
	return b.Bytes()
}

const articleHTML = `<!doctype html><html><head><title>Tides explained</title><script>var tracking = 1;</script><style>p{}</style></head>
<body><nav><a href="/">Home</a> | <a href="/shop">Shop our sale</a></nav>
<article><h1>Tides explained</h1>
<p>Tides are the rise and fall of sea levels caused by the gravity of the Moon and the Sun acting on the oceans of the Earth.</p>
<p>Most coasts see two high tides and two low tides every lunar day, a little more than twenty-four hours, because the Earth turns under two bulges of water.</p>
<p>Spring tides, with the largest range, come when the Sun, the Moon and the Earth line up, at new moon and at full moon.</p>
</article><footer>Copyright and cookie notice</footer></body></html>`

// The file component reads the text of every format it knows from files kept in
// Redis and in the object store.
func TestFileReadsTheTextOfEveryFormat(t *testing.T) {
	storetest.Each(t, func(t *testing.T, r *store.Redis) {
		ctx := context.Background()
		s3 := storetest.StartS3(t)
		files, err := store.NewFiles(r, store.FilesOptions{InlineMax: 2000, TTL: time.Hour, ObjectStore: s3.ObjectStore("")})
		if err != nil {
			t.Fatal(err)
		}
		flow := storetest.FlowID(t)
		storetest.DeleteFlowKeys(t, r, flow)
		env := &nodes.Env{Files: files}
		cases := []struct {
			name, ctype string
			data        []byte
			want        []string
			not         []string
			format      string
		}{
			{"report.pdf", "application/pdf", pdfWith("Quarterly revenue grew", "Costs fell by a third"), []string{"Quarterly revenue grew", "Costs fell by a third"}, nil, "pdf"},
			{"memo.docx", "", docxWith("Dear team, the launch moves to May.", "Regards, Ada"), []string{"Dear\tteam, the launch moves to May.", "Regards,\tAda"}, nil, "docx"},
			{"tides.html", "text/html; charset=utf-8", []byte(articleHTML), []string{"gravity of the Moon", "Spring tides"}, []string{"Shop our sale", "tracking", "cookie"}, "html"},
			{"guide.md", "", []byte("# Install guide\n\nRun `make`.\n"), []string{"# Install guide", "Run `make`."}, nil, "markdown"},
			{"people.csv", "text/csv", []byte("name,city\nAda,London\nGrace,Arlington\n"), []string{"name: Ada; city: London\nname: Grace; city: Arlington"}, nil, "csv"},
			{"order.json", "application/json", []byte(`{"id": 7, "items": ["tea"]}`), []string{`"id": 7`}, nil, "json"},
			{"big.txt", "text/plain", []byte(strings.Repeat("plain text. ", 300)), []string{"plain text."}, nil, "text"},
		}
		var refs []any
		for _, c := range cases {
			info, err := files.Put(ctx, flow, c.name, c.ctype, c.data)
			if err != nil {
				t.Fatal(err)
			}
			refs = append(refs, info.Ref())
		}
		f := buildIn(t, env, "file", `{"file": ".files"}`)
		s := memoryStep(t, flow, `{}`)
		s.Input = map[string]any{"files": refs}
		docs := runStep(t, f, s).Update["documents"].([]any)
		if len(docs) != len(cases) {
			t.Fatalf("%d documents for %d files", len(docs), len(cases))
		}
		for i, c := range cases {
			d := docs[i].(map[string]any)
			text, _ := d["text"].(string)
			if d["format"] != c.format || d["name"] != c.name {
				t.Errorf("%s: format %v, name %v", c.name, d["format"], d["name"])
			}
			for _, w := range c.want {
				if !strings.Contains(text, w) {
					t.Errorf("%s: text %q lacks %q", c.name, text, w)
				}
			}
			for _, n := range c.not {
				if strings.Contains(text, n) {
					t.Errorf("%s: text %q has %q, which a reader view leaves out", c.name, text, n)
				}
			}
		}
		if d := docs[0].(map[string]any); asJSON(d["pages"]) != "2" {
			t.Errorf("the PDF has %v pages, want 2", d["pages"])
		}
		if d := docs[2].(map[string]any); d["title"] != "Tides explained" {
			t.Errorf("the HTML title %v", d["title"])
		}
		if d := docs[3].(map[string]any); d["title"] != "Install guide" {
			t.Errorf("the Markdown title %v", d["title"])
		}
		if d := docs[4].(map[string]any); asJSON(d["rows"]) != `[{"city":"London","name":"Ada"},{"city":"Arlington","name":"Grace"}]` {
			t.Errorf("the CSV rows %s", asJSON(d["rows"]))
		}
		if d := docs[5].(map[string]any); asJSON(d["data"]) != `{"id":7,"items":["tea"]}` {
			t.Errorf("the JSON data %s", asJSON(d["data"]))
		}
	})
}

func TestFileRefusesWhatItCannotRead(t *testing.T) {
	ctx := context.Background()
	files, _ := store.NewFiles(storetest.Embedded(t), store.FilesOptions{})
	env := &nodes.Env{Files: files}
	flow := storetest.FlowID(t)
	bin, _ := files.Put(ctx, flow, "photo.bin", "application/octet-stream", []byte{0xff, 0xfe, 0x00, 0x81})
	broken, _ := files.Put(ctx, flow, "broken.pdf", "application/pdf", []byte("%PDF-1.4 nothing else"))
	f := buildIn(t, env, "file", `{}`)
	for _, c := range []struct {
		file any
		want string
		code flows.Code
	}{
		{bin.Ref(), "not a document", flows.Invalid},
		{broken.Ref(), "PDF", flows.Invalid},
		{map[string]any{"$file": "0123456789abcdef0123456789abcdef"}, "no such file", flows.NotFound},
		{"report.pdf", "not a file reference", flows.Invalid},
	} {
		s := memoryStep(t, flow, `{}`)
		s.Input = map[string]any{"file": c.file}
		_, err := f.Run(ctx, s)
		var fe *flows.Error
		if !errors.As(err, &fe) || fe.Code != c.code || !flows.IsPermanent(err) || !strings.Contains(err.Error(), c.want) || fe.Path != "params.file" {
			t.Errorf("file %v: %v, want a permanent %s error at params.file saying %q", c.file, err, c.code, c.want)
		}
	}
	small := buildIn(t, env, "file", `{"max_chars": 10}`)
	long, _ := files.Put(ctx, flow, "long.txt", "text/plain", []byte(strings.Repeat("x", 11)))
	s := memoryStep(t, flow, `{}`)
	s.Input = map[string]any{"file": long.Ref()}
	if _, err := small.Run(ctx, s); err == nil || !strings.Contains(err.Error(), "max_chars") {
		t.Errorf("11 characters with max_chars 10: %v", err)
	}
}

// The url component keeps a page's readable text, refuses internal addresses unless
// allowed, and is a tool a model calls with a URL.
func TestURLFetchesAPageAsTextUnderTheHTTPPolicy(t *testing.T) {
	site, hits := countingServer(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/tides":
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			w.Write([]byte(articleHTML))
		case "/moved":
			http.Redirect(w, r, "/tides", http.StatusFound)
		case "/notes.md":
			w.Header().Set("Content-Type", "text/markdown")
			w.Write([]byte("# Notes\n\nBring water."))
		default:
			http.NotFound(w, r)
		}
	})
	refused := buildIn(t, &nodes.Env{}, "url", `{"url": "{{.link}}"}`)
	_, err := refused.Run(context.Background(), memoryStep(t, "f", `{"link": "`+site.URL+`/tides"}`))
	if flows.ErrorCode(err) != flows.Forbidden || !flows.IsPermanent(err) || hits.Load() != 0 {
		t.Fatalf("a loopback page without an allow-list: %v after %d requests, want a permanent refusal before any request", err, hits.Load())
	}

	env := &nodes.Env{HTTP: loopbackOK()}
	u := buildIn(t, env, "url", `{"url": "{{.link}}"}`)
	page := runStep(t, u, memoryStep(t, "f", `{"link": "`+site.URL+`/moved"}`)).Update["page"].(map[string]any)
	text, _ := page["text"].(string)
	if !strings.Contains(text, "gravity of the Moon") || strings.Contains(text, "Shop our sale") || page["title"] != "Tides explained" || page["url"] != site.URL+"/tides" {
		t.Errorf("page %v", page)
	}
	md := runStep(t, u, memoryStep(t, "f", `{"link": "`+site.URL+`/notes.md"}`)).Output.(map[string]any)
	if md["format"] != "markdown" || md["text"] != "# Notes\n\nBring water." {
		t.Errorf("a Markdown page: %v", md)
	}
	_, err = u.Run(context.Background(), memoryStep(t, "f", `{"link": "`+site.URL+`/gone"}`))
	if !flows.IsPermanent(err) || !strings.Contains(err.Error(), "404") {
		t.Errorf("a 404: %v, want a permanent error naming it", err)
	}

	tool := buildIn(t, env, "url", `{"tool_name": "fetch_page", "max_chars": 40}`).(flows.Tool)
	if d := tool.ToolDef(); d.Name != "fetch_page" || !strings.Contains(string(d.Parameters), `"url"`) {
		t.Errorf("tool %+v", d)
	}
	got, err := tool.Call(context.Background(), memoryStep(t, "f", `{}`), []byte(`{"url": "`+site.URL+`/tides"}`))
	if err != nil {
		t.Fatal(err)
	}
	if p := got.(map[string]any); len([]rune(p["text"].(string))) != 40 || p["truncated"] != true {
		t.Errorf("the tool's page %v, want 40 characters, truncated", p)
	}
}
