package main

// Browser tests of the editor as a daily tool (issue 17): drafts that save, any run on
// the canvas, failed steps to debug, the chat playground, the API panel, notes, the
// starter gallery, keyboard help, and the bugs a person hits in the first hour.

import (
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
)

// badResponses records every answer of 400 or more the page gets (what the console shows
// as "Failed to load resource"), as "status URL".
func (b *browser) badResponses() func() []string {
	var mu sync.Mutex
	var seen []string
	if err := chromedp.Listen(b.ctx, func(ev any) {
		if r, ok := ev.(*network.EventResponseReceived); ok && r.Response != nil && r.Response.Status >= 400 {
			mu.Lock()
			seen = append(seen, fmt.Sprintf("%d %s", r.Response.Status, r.Response.URL))
			mu.Unlock()
		}
	}); err != nil {
		b.t.Fatal(err)
	}
	return func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), seen...)
	}
}

// Bug 10: the editor's bundle under a hashed name, gzipped and cached for good, with no
// source map beside it. Bug 8: the page has an icon, and saving a new flow answers no 404.
func TestBrowserAssetsAreHashedCompressedCachedAndQuiet(t *testing.T) {
	base := serveForBrowser(t, t.TempDir())
	b := newBrowser(t, base)
	bad := b.badResponses()
	name, flowID := namedFlow(t, "Quiet")
	b.open("/flows/new?name=" + strings.ReplaceAll(name, " ", "+"))
	b.waitFor("the palette", `document.querySelectorAll(".palette-item").length > 0`)

	src := evaluate[string](b, `[...document.scripts].map(s => s.src).find(s => s.includes("/static/dist/editor")) ?? ""`)
	if !strings.Contains(src, "/static/dist/editor.") || strings.HasSuffix(src, "/editor.js") {
		t.Errorf("the editor's script is %q, want a name with a content hash", src)
	}
	type answer struct {
		Status                      int
		Encoding, Cache, Text, Vary string
	}
	got := evaluate[answer](b, fmt.Sprintf(`fetch(%q).then(async r => ({Status: r.status, Encoding: r.headers.get("Content-Encoding") ?? "", Cache: r.headers.get("Cache-Control") ?? "", Vary: r.headers.get("Vary") ?? "", Text: (await r.text()).slice(-300)}))`, src), chromedp.EvalAwaitPromise)
	if got.Status != 200 || got.Encoding != "gzip" || !strings.Contains(got.Cache, "immutable") {
		t.Errorf("the script answered %d, Content-Encoding %q, Cache-Control %q; want 200, gzip, immutable", got.Status, got.Encoding, got.Cache)
	}
	if strings.Contains(got.Text, "sourceMappingURL") {
		t.Errorf("the script names a source map: %q", got.Text)
	}
	mapStatus := evaluate[int](b, fmt.Sprintf(`fetch(%q + ".map").then(r => r.status)`, strings.TrimSuffix(src, ".js")+".js"), chromedp.EvalAwaitPromise)
	plainMap := evaluate[int](b, `fetch("/static/dist/editor.js.map").then(r => r.status)`, chromedp.EvalAwaitPromise)
	if mapStatus != 404 || plainMap != 404 {
		t.Errorf("source maps answered %d and %d, want 404: none is embedded", mapStatus, plainMap)
	}

	icon := evaluate[string](b, `document.querySelector('link[rel="icon"]')?.href ?? ""`)
	if icon == "" {
		t.Error("the page names no icon (the browser asks for /favicon.ico and gets 404)")
		icon = base + "/favicon.ico"
	}
	if st := evaluate[int](b, fmt.Sprintf(`fetch(%q).then(r => r.status)`, icon), chromedp.EvalAwaitPromise); st != 200 {
		t.Errorf("the icon answered %d", st)
	}

	// Saving a new flow checks whether its id is taken without a 404 in the console.
	b.click(".palette-item[data-type=input]")
	b.waitFor("the input on the canvas", `document.querySelectorAll(".react-flow__node").length === 1`)
	b.click(".react-flow__pane")
	b.run("press Ctrl+S", chromedp.KeyEvent("s", chromedp.KeyModifiers(chromedp.ModifierCtrl)))
	b.waitFor("the flow saved", fmt.Sprintf(`location.pathname === "/flows/%s" && document.querySelector("#save-state").innerText.includes("Saved")`, flowID))
	if r := bad(); len(r) > 0 {
		t.Errorf("the page got error answers:\n%s", strings.Join(r, "\n"))
	}
}
