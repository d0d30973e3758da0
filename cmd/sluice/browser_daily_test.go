package main

// Browser tests of the editor as a daily tool (issue 17): drafts that save, any run on
// the canvas, failed steps to debug, the chat playground, the API panel, notes, the
// starter gallery, keyboard help, and the bugs a person hits in the first hour.

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"github.com/sluicehq/sluice/flows/examples"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/fetch"
	"github.com/chromedp/cdproto/inspector"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
	"github.com/sluicehq/sluice/flows/nodes/llmtest"
	"github.com/sluicehq/sluice/server"
	"github.com/sluicehq/sluice/store/storetest"
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
	name, flowID := namedFlow(t, "Quiet")
	storetest.DeleteFlowKeys(t, storetest.Real(t), flowID)
	base := serveForBrowser(t, t.TempDir())
	b := newBrowser(t, base)
	bad := b.badResponses()
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
	var errs []string
	for _, r := range bad() {
		if !strings.HasSuffix(r, ".map") { // the source maps this test asked for
			errs = append(errs, r)
		}
	}
	if len(errs) > 0 {
		t.Errorf("the page got error answers:\n%s", strings.Join(errs, "\n"))
	}
}

// failRequests makes every request of this tab whose URL matches pattern (wildcards *)
// fail as if the server could not be reached.
func (b *browser) failRequests(pattern string) {
	b.t.Helper()
	if err := chromedp.Listen(b.ctx, func(ev any) {
		if p, ok := ev.(*fetch.EventRequestPaused); ok {
			go func() {
				_, _ = chromedp.Call(b.ctx, fetch.FailRequest, fetch.FailRequestParams{RequestID: p.RequestID, ErrorReason: network.ErrorReasonConnectionRefused})
			}()
		}
	}); err != nil {
		b.t.Fatal(err)
	}
	if _, err := chromedp.Call(b.ctx, fetch.Enable, fetch.EnableParams{Patterns: []*fetch.RequestPattern{{URLPattern: pattern}}}); err != nil {
		b.t.Fatal(err)
	}
}

// choose picks an option of a select by its value, as a person choosing from the list does.
func (b *browser) choose(sel, value string) {
	b.t.Helper()
	b.waitFor(sel, fmt.Sprintf(`!!document.querySelector(%q)`, sel))
	b.run("choose "+value+" in "+sel, chromedp.Evaluate[chromedp.Void](fmt.Sprintf(`(() => { const s = document.querySelector(%q); s.focus(); s.value = %q; s.dispatchEvent(new Event("change", {bubbles: true})); })()`, sel, value)))
}

// inspect selects a node on the canvas and shows its inspector. A click on a canvas the
// editor is still laying out (fitting the view on a loaded machine) can miss the node, as
// a person's would, and a person clicks again: up to three times, each retry logged.
func (b *browser) inspect(node string) {
	b.t.Helper()
	shown := fmt.Sprintf(`!!document.querySelector('[aria-label="node %s"]')`, node)
	for attempt := 1; attempt <= 3; attempt++ {
		b.click(fmt.Sprintf(`.react-flow__node[data-id=%q]`, node))
		b.click(".side-panel [role=tab]:first-child") // Inspect
		deadline := time.Now().Add(10 * time.Second)
		for time.Now().Before(deadline) {
			if ok, _ := b.holds(shown); ok {
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
		b.t.Logf("inspect %s: attempt %d did not show its inspector; clicking again", node, attempt)
	}
	b.waitFor("the inspector of "+node, shown)
}

// crash crashes the tab's renderer, as a browser does when a page runs out of memory, and
// waits until Chromium says so.
func (b *browser) crash() {
	b.t.Helper()
	crashed := make(chan struct{})
	var once sync.Once
	if err := chromedp.Listen(b.ctx, func(ev any) {
		if _, ok := ev.(*inspector.EventTargetCrashed); ok {
			once.Do(func() { close(crashed) })
		}
	}); err != nil {
		b.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(b.ctx)
	defer cancel()
	go func() { _, _ = chromedp.Call(ctx, page.Crash, cdp.Empty{}) }() // never answers: the renderer is gone
	select {
	case <-crashed:
	case <-time.After(limit):
		b.t.Fatal("the tab did not crash")
	}
}

// newTab opens another tab of the same browser (same profile: storage, clipboard).
func (b *browser) newTab() *browser {
	b.t.Helper()
	ctx, cancel := chromedp.NewContext(b.ctx)
	b.t.Cleanup(cancel)
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(1280, 800)); err != nil {
		b.t.Fatalf("open a tab: %v", err)
	}
	return &browser{t: b.t, ctx: ctx, base: b.base, noShots: b.noShots}
}

// Bug 2: a flow with problems is saved as a draft (never run, published or served
// headless, and saying so), and the working copy autosaves: a reload or a crashed tab
// loses nothing.
func TestBrowserDraftsSaveWithProblemsAndTheWorkingCopyAutosaves(t *testing.T) {
	rdb := storetest.Real(t)
	dir := t.TempDir()
	base := serveForBrowser(t, dir)
	name, flowID := namedFlow(t, "Drafty")
	storetest.DeleteFlowKeys(t, rdb, flowID)
	b := newBrowser(t, base)
	bad := b.badResponses()
	b.open("/flows/new?name=" + strings.ReplaceAll(name, " ", "+"))
	b.waitFor("the palette", `document.querySelectorAll(".palette-item").length > 0`)
	for _, kind := range []string{"transform", "input"} {
		b.run("add "+kind, chromedp.Focus(chromedp.CSS(fmt.Sprintf(`.palette-item[data-type=%q]`, kind))), chromedp.KeyEvent("\r"))
	}
	b.waitFor("two nodes, the input selected", `document.querySelectorAll(".react-flow__node").length === 2 && !!document.querySelector('[aria-label="node input"]')`)
	b.run("connect the input to the transform", chromedp.Focus(chromedp.CSS(`select[data-connect="out"]`)), chromedp.KeyEvent(kb.ArrowDown))
	b.waitFor("the edge", `document.querySelectorAll(".react-flow__edge").length === 1`)
	b.waitText(`[data-node="transform"] .badge-error`, "1 problem")

	// Ctrl+S keeps it, problems and all, as a draft.
	b.click(".react-flow__pane")
	b.run("press Ctrl+S", chromedp.KeyEvent("s", chromedp.KeyModifiers(chromedp.ModifierCtrl)))
	b.waitText("#toast", "Saved as a draft")
	b.waitText("#save-state", "Draft saved")
	b.waitFor("the flow's own address", fmt.Sprintf(`location.pathname === "/flows/%s"`, flowID))
	if _, err := os.Stat(filepath.Join(dir, flowID+".json")); !os.IsNotExist(err) {
		t.Errorf("a draft was written as the flow's file (which sluice worker runs): %v", err)
	}

	// It cannot run, and both the editor and the API say why.
	b.click("#run-tab")
	b.waitText(".run-panel", "cannot run")
	if !evaluate[bool](b, `document.querySelector("#run-button").disabled`) {
		t.Error("the run button is enabled for a flow with errors")
	}
	res, err := http.Post(base+"/api/flows/"+flowID+"/runs", "application/json", strings.NewReader(`{"input": {}}`))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), "draft") {
		t.Errorf("starting a run of the draft through the API: %s %s", res.Status, body)
	}

	// An edit autosaves: a reload shows it.
	b.inspect("transform")
	b.typeInto(`input[aria-label="Label"]`, "Shape it")
	b.waitText("#save-state", "Draft saved")
	b.run("reload", chromedp.Reload(), chromedp.WaitReady(chromedp.CSS("body")))
	b.waitText(`[data-node="transform"]`, "Shape it")
	b.waitText("#save-state", "Draft saved")

	// The server cannot be reached: the edit stays in this browser, leaving asks, and
	// after the tab crashes a new one restores it.
	dialogs := b.acceptDialogs()
	b.failRequests("*/api/flows/" + flowID + "/draft*")
	b.inspect("transform")
	b.typeInto(`input[aria-label="Label"]`, "Crash-proof")
	b.waitText("#save-state", "not saved")
	b.waitFor("the working copy in this browser's storage", `Object.keys(localStorage).some(k => localStorage.getItem(k).includes("Crash-proof"))`)
	b.open("/")
	if got := strings.Join(dialogs(), "\n"); !strings.Contains(got, "beforeunload") {
		t.Errorf("leaving with changes the server does not have did not ask; dialogs: %q", got)
	}
	b.open("/flows/" + flowID)
	b.waitText(`[data-node="transform"]`, "Crash-proof")
	b.crash() // the tab's interception dies with it
	tab := b.newTab()
	tab.open("/flows/" + flowID)
	tab.waitText(`[data-node="transform"]`, "Crash-proof")
	tab.waitText("#toast", "Restored")
	tab.waitText("#save-state", "Draft saved")

	// Fixed and saved: published; now it runs.
	tab.inspect("transform")
	tab.typeInto(`textarea[data-param="expr"]`, `{shaped: true}`)
	tab.waitFor("no errors", `document.querySelector("#problems-count").innerText.includes("0 errors") || document.querySelector("#problems-count").innerText.includes("Valid")`)
	tab.click("#save-button")
	tab.waitFor("saved and published", `document.querySelector("#save-state").innerText === "Saved"`)
	if _, err := os.Stat(filepath.Join(dir, flowID+".json")); err != nil {
		t.Errorf("the valid flow's file: %v", err)
	}
	tab.click("#run-tab")
	tab.waitFor("the run button enabled", `!document.querySelector("#run-button").disabled`)
	if r := bad(); len(r) > 0 {
		t.Logf("error answers (the refused run is expected): %v", r)
	}
}

// Bug 1: renaming a route while typing loses nothing; the name commits on Enter (or
// leaving the field), a name another route has is refused with a message.
func TestBrowserRenameARouteWithoutLosingAnother(t *testing.T) {
	base := serveForBrowser(t, t.TempDir())
	b := newBrowser(t, base)
	b.open("/flows/new?name=Routes&from=triage")
	b.waitFor("the example's seven nodes", `document.querySelectorAll(".react-flow__node").length === 7`)
	b.inspect("route")
	routes := `[...document.querySelectorAll('[data-param="routes"] .route-row')].map(r => r.querySelector("input").value + " = " + r.querySelector("textarea").value).join("; ")`
	want := `code = .intent == "code"; database = .intent == "database"`
	if got := evaluate[string](b, routes); got != want {
		t.Fatalf("routes before: %s", got)
	}
	second := `input[aria-label="route 2 name"]`
	b.run("type over route 2's name", chromedp.Click(chromedp.CSS(second)), chromedp.KeyEvent("a", chromedp.KeyModifiers(chromedp.ModifierCtrl)), chromedp.SendKeys(chromedp.CSS(second), "code"))
	b.waitText(`[data-param="routes"]`, `a route "code" exists`)
	if got := evaluate[string](b, routes); got != `code = .intent == "code"; code = .intent == "database"` {
		t.Errorf("while typing a name another route has, the routes read %s", got)
	}
	b.run("go on typing and press Enter", chromedp.SendKeys(chromedp.CSS(second), "_review"), chromedp.KeyEvent("\r"))
	b.waitFor("the routes renamed", fmt.Sprintf(`(%s) === 'code = .intent == "code"; code_review = .intent == "database"'`, routes))
	b.waitText(`[aria-label="node route"] .connections`, "route.code_review → database.in")
	b.waitText(`[aria-label="node route"] .connections`, "route.code → coding.in")

	// A name another route has is refused when committed: the old name comes back.
	b.run("rename route 2 to code", chromedp.Click(chromedp.CSS(second)), chromedp.KeyEvent("a", chromedp.KeyModifiers(chromedp.ModifierCtrl)), chromedp.SendKeys(chromedp.CSS(second), "code"), chromedp.KeyEvent("\r"))
	b.waitText(`[data-param="routes"]`, `not renamed: a route "code" exists`)
	b.waitFor("the name back", `document.querySelector('input[aria-label="route 2 name"]').value === "code_review"`)
	if got := evaluate[int](b, `document.querySelectorAll('[data-param="routes"] .route-row').length`); got != 2 {
		t.Errorf("%d routes after a refused rename, want 2", got)
	}

	// Leaving the field commits the name too: type a new one and click route 1's condition.
	b.run("rename route 2 to db and leave the field", chromedp.Click(chromedp.CSS(second)), chromedp.KeyEvent("a", chromedp.KeyModifiers(chromedp.ModifierCtrl)), chromedp.SendKeys(chromedp.CSS(second), "db"),
		chromedp.Click(chromedp.CSS(`[data-param="routes"] .route-row textarea`)))
	b.waitFor("the route renamed on leaving its name", fmt.Sprintf(`(%s) === 'code = .intent == "code"; db = .intent == "database"'`, routes))
	b.waitText(`[aria-label="node route"] .connections`, "route.db → database.in")
}

// Bug 3: nodes copied in one flow paste into another, in another tab too, with fresh
// ids; a clipboard without nodes says so.
func TestBrowserCopyNodesFromOneFlowIntoAnother(t *testing.T) {
	base := serveForBrowser(t, t.TempDir())
	b := newBrowser(t, base)
	b.open("/flows/new?name=Source&from=linear")
	b.waitFor("the example's nodes", `document.querySelectorAll(".react-flow__node").length === 4`)
	b.click(`.react-flow__node[data-id="greet"]`)
	b.run("copy", chromedp.KeyEvent("c", chromedp.KeyModifiers(chromedp.ModifierCtrl)))
	b.waitText("#toast", "Copied 1 node")

	// Another flow, in the same tab: the node pastes with an id of its own.
	b.open("/flows/new?name=Target&from=linear")
	b.waitFor("the other flow", `document.querySelectorAll(".react-flow__node").length === 4`)
	b.click(".react-flow__pane")
	b.run("paste", chromedp.KeyEvent("v", chromedp.KeyModifiers(chromedp.ModifierCtrl)))
	b.waitFor("the pasted node with a fresh id", `document.querySelectorAll(".react-flow__node").length === 5 && !!document.querySelector('.react-flow__node[data-id="greet-2"]')`)
	b.waitText(`[data-node="greet-2"]`, "Hello")

	// And in another tab, into a blank flow.
	tab := b.newTab()
	tab.open("/flows/new?name=Blank")
	tab.waitFor("the palette", `document.querySelectorAll(".palette-item").length > 0`)
	tab.click(".react-flow__pane")
	tab.run("paste", chromedp.KeyEvent("v", chromedp.KeyModifiers(chromedp.ModifierCtrl)))
	tab.waitFor("the pasted node", `!!document.querySelector('.react-flow__node[data-id="greet"]')`)

	// Text that is not nodes: pasting says so and adds nothing.
	tab.run("copy some text", chromedp.Evaluate[chromedp.Void](`(() => { const t = document.createElement("textarea"); t.id = "scratch"; t.value = "just words"; document.body.append(t); })()`),
		chromedp.Focus(chromedp.CSS("#scratch")), chromedp.KeyEvent("a", chromedp.KeyModifiers(chromedp.ModifierCtrl)), chromedp.KeyEvent("c", chromedp.KeyModifiers(chromedp.ModifierCtrl)))
	tab.click(".react-flow__pane")
	tab.run("paste", chromedp.KeyEvent("v", chromedp.KeyModifiers(chromedp.ModifierCtrl)))
	tab.waitText("#toast", "no nodes")
	if n := evaluate[int](tab, `document.querySelectorAll(".react-flow__node").length`); n != 1 {
		t.Errorf("%d nodes after pasting text, want 1", n)
	}
}

// stockService is an HTTP service that answers 503 until healthy is set.
func stockService(t *testing.T, healthy *atomic.Bool) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if !healthy.Load() {
			http.Error(w, "down for maintenance", http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"stock": 7}`))
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().String()
}

// writeDoc writes a flow document into the flows directory.
func writeDoc(t *testing.T, dir string, doc map[string]any) {
	t.Helper()
	raw, _ := json.MarshalIndent(doc, "", "  ")
	writeFlow(t, dir, doc["id"].(string)+".json", string(raw))
}

// Bug 6: a failed step shows the state it received, each attempt with its time and
// error, its dead letter, and a retry button that brings the run home.
func TestBrowserDebugAFailedStepAndRetryIt(t *testing.T) {
	rdb := storetest.Real(t)
	flowID := storetest.FlowID(t)
	storetest.DeleteFlowKeys(t, rdb, flowID)
	var healthy atomic.Bool
	addr := stockService(t, &healthy)
	dir := t.TempDir()
	writeDoc(t, dir, map[string]any{
		"sluice": 1, "id": flowID, "name": "Stock check",
		"settings": map[string]any{"max_attempts": 2},
		"nodes": []any{
			map[string]any{"id": "in", "type": "input", "position": map[string]any{"x": 0, "y": 0}, "params": map[string]any{"example": map[string]any{"sku": "A-42"}}},
			map[string]any{"id": "stock", "type": "http", "position": map[string]any{"x": 260, "y": 0}, "params": map[string]any{"url": "http://" + addr + "/stock"}},
			map[string]any{"id": "out", "type": "output", "position": map[string]any{"x": 520, "y": 0}, "params": map[string]any{"value": ".response.body"}},
		},
		"edges": []any{map[string]any{"from": "in", "to": "stock"}, map[string]any{"from": "stock", "to": "out"}},
	})
	base := serveForBrowser(t, dir, "--http-allow", addr)
	b := newBrowser(t, base)
	b.open("/flows/" + flowID)
	b.waitFor("the editor", `document.querySelectorAll(".react-flow__node").length === 3`)
	b.click("#run-tab")
	b.click("#run-button")
	b.waitText("#run-status", "failed")

	// The failed node: what it received, both attempts with their errors, the dead letter.
	b.click(`.react-flow__node[data-id="stock"]`)
	panel := `[aria-label="checkpoints of stock"]`
	b.waitText(panel, "State it received")
	b.waitText(panel+" .received", `"sku": "A-42"`)
	b.waitFor("two attempts, each with its error", fmt.Sprintf(`[...document.querySelectorAll('%s .attempt')].map(a => a.innerText).filter(t => t.includes("503")).length === 2`, panel))
	b.waitText(panel+" .attempt:first-of-type", "attempt 1")
	b.waitText(panel+" .dead-letter", "dead letter after 2 attempts")
	// The picture shows the failed step whole: its attempts, its dead letter with Retry and
	// the state it received.
	evaluate[bool](b, `(() => {
		const top = document.querySelector('[aria-label="nodes in this run"]');
		let box = top.parentElement;
		while (box && box.scrollHeight <= box.clientHeight) box = box.parentElement;
		box.scrollTop += top.getBoundingClientRect().top - box.getBoundingClientRect().top - 12;
		return true;
	})()`)
	b.shot("editor-failed-step")

	// Fixed service, retry from the panel: the run succeeds on the canvas.
	healthy.Store(true)
	b.click(panel + " .dead-letter button.retry")
	b.waitText("#run-status", "succeeded")
	b.waitFor("stock done", `document.querySelector('[data-node="stock"]').dataset.status === "done"`)
	b.waitText("#run-output", `"stock": 7`)
	// Bug 7 (issue 27): the run succeeded, so its summary shows no error, not even the
	// one it had before the retry; and not after a reload either.
	if got := evaluate[string](b, `[...document.querySelectorAll("#run-summary .error")].map(e => e.innerText).join(" | ")`); got != "" {
		t.Errorf("the summary of the run that succeeded after its retry shows the error %q", got)
	}
	runID := evaluate[string](b, `document.querySelector("#run-summary-id").innerText`)
	b.open("/flows/" + flowID + "?run=" + runID)
	b.waitText("#run-status", "succeeded")
	if got := evaluate[string](b, `[...document.querySelectorAll("#run-summary .error")].map(e => e.innerText).join(" | ")`); got != "" {
		t.Errorf("reopened, the summary of the run that succeeded after its retry shows the error %q", got)
	}

	// Bug 11 (issue 27): a step that succeeded shows the state it received too, in the
	// editor and on the run page.
	b.click(`.react-flow__node[data-id="out"]`)
	outPanel := `[aria-label="checkpoints of out"]`
	b.waitText(outPanel, "State it received")
	b.waitText(outPanel+" .received", `"stock": 7`)
	b.open("/flows/" + flowID + "/runs/" + runID)
	b.click(`#timeline li[data-node="out"] a`)
	b.waitText("#checkpoint", "The state it received")
	b.click("#checkpoint a.received")
	b.waitFor("the state stock left", `document.querySelector("#timeline li.selected")?.dataset.node === "stock"`)
	b.waitText("#checkpoint", `"stock": 7`)
}

// exampleDoc reads an example flow under another id, as a document to edit.
func exampleDoc(t *testing.T, example, id string) map[string]any {
	t.Helper()
	var doc map[string]any
	if err := json.Unmarshal([]byte(mustRead(t, filepath.Join("..", "..", "flows", "examples", example+".json"))), &doc); err != nil {
		t.Fatal(err)
	}
	doc["id"] = id
	return doc
}

// post sends a JSON request to the API and decodes the answer into out (when not nil).
func post(t *testing.T, url, body string, want int, out any) {
	t.Helper()
	res, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	if res.StatusCode != want {
		t.Fatalf("POST %s: %s %s, want %d", url, res.Status, b, want)
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("POST %s: %v in %s", url, err, b)
		}
	}
}

// Bug 4: a run started through the API and served by a headless `sluice worker` shows
// on the canvas, from the run picker and from the run page, and the canvas follows it.
func TestBrowserFollowARunStartedElsewhereOnTheCanvas(t *testing.T) {
	rdb := storetest.Real(t)
	flowID := storetest.FlowID(t)
	storetest.DeleteFlowKeys(t, rdb, flowID)
	dir := t.TempDir()
	writeDoc(t, dir, exampleDoc(t, "approval", flowID))
	base := serveForBrowser(t, dir, "--workers", "0")
	worker := start(t, []string{"REDIS_URL=" + storetest.URL()}, "worker", filepath.Join(dir, flowID+".json"))
	worker.waitLine(t, regexp.MustCompile(`msg="serving flow"`), 30*time.Second)

	var started struct{ Run string }
	post(t, base+"/api/flows/"+flowID+"/runs", `{"input": {"customer": "Grace"}}`, http.StatusAccepted, &started)
	b := newBrowser(t, base)
	b.open("/flows/" + flowID)
	b.waitFor("the editor", `document.querySelectorAll(".react-flow__node").length === 6`)
	b.click("#run-tab")
	b.waitFor("the run in the picker", fmt.Sprintf(`[...document.querySelectorAll("#run-picker option")].some(o => o.value === %q)`, started.Run))
	b.choose("#run-picker", started.Run)
	b.waitText("#run-status", "waiting")
	b.waitFor("draft done and review waiting", `document.querySelector('[data-node="draft"]').dataset.status === "done" && document.querySelector('[data-node="review"]').dataset.status === "waiting"`)

	// Approved through the API: the canvas follows, live.
	post(t, base+"/api/flows/"+flowID+"/runs/"+started.Run+"/resume", `{"decision": "approve"}`, http.StatusOK, nil)
	b.waitText("#run-status", "succeeded")
	b.waitFor("send done, drop not run", `document.querySelector('[data-node="send"]').dataset.status === "done" && document.querySelector('[data-node="drop"]').dataset.status === ""`)
	b.waitText("#run-output", "Dear Grace")

	// From the run page of another run, still going: "Open on the canvas".
	var second struct{ Run string }
	post(t, base+"/api/flows/"+flowID+"/runs", `{"input": {"customer": "Linus"}}`, http.StatusAccepted, &second)
	b.open("/flows/" + flowID + "/runs/" + second.Run)
	b.waitText("#run-status", "waiting")
	b.click("#open-on-canvas")
	b.waitFor("the editor on that run", fmt.Sprintf(`document.querySelector("#run-summary-id")?.innerText === %q`, second.Run))
	b.waitFor("review waiting", `document.querySelector('[data-node="review"]').dataset.status === "waiting"`)
	post(t, base+"/api/flows/"+flowID+"/runs/"+second.Run+"/resume", `{"decision": "reject"}`, http.StatusOK, nil)
	b.waitText("#run-status", "succeeded")
	b.waitFor("drop done", `document.querySelector('[data-node="drop"]').dataset.status === "done"`)
}

// Bug 5: a run nobody serves says so — in the editor, on the run page and in the API —
// and goes on as soon as a worker starts.
func TestBrowserARunNobodyServesSaysSo(t *testing.T) {
	rdb := storetest.Real(t)
	flowID := storetest.FlowID(t)
	storetest.DeleteFlowKeys(t, rdb, flowID)
	dir := t.TempDir()
	writeDoc(t, dir, exampleDoc(t, "linear", flowID))
	base := serveForBrowser(t, dir, "--workers", "0")
	b := newBrowser(t, base)
	b.open("/flows/" + flowID)
	b.waitFor("the editor", `document.querySelectorAll(".react-flow__node").length === 4`)
	b.click("#run-tab")
	b.click("#run-button")
	b.waitText(".canvas-running", "queued — no worker serves this flow")
	b.waitText("#run-summary", "no worker")
	runID := evaluate[string](b, `document.querySelector("#run-summary-id").innerText`)

	var run struct {
		Status           string   `json:"status"`
		NoWorker         bool     `json:"no_worker"`
		WaitingForWorker []string `json:"waiting_for_worker"`
	}
	res, err := http.Get(base + "/api/flows/" + flowID + "/runs/" + runID)
	if err != nil {
		t.Fatal(err)
	}
	json.NewDecoder(res.Body).Decode(&run)
	res.Body.Close()
	if run.Status != "queued" || !run.NoWorker || strings.Join(run.WaitingForWorker, ",") != "in" {
		t.Errorf("the API says %+v, want queued, no_worker, waiting for a worker at in", run)
	}
	b.open("/flows/" + flowID + "/runs/" + runID)
	b.waitText("#no-worker", "no worker serves this flow")

	// A headless worker starts: the run goes on, and the page follows it.
	worker := start(t, []string{"REDIS_URL=" + storetest.URL()}, "worker", filepath.Join(dir, flowID+".json"))
	worker.waitLine(t, regexp.MustCompile(`msg="serving flow"`), 30*time.Second)
	b.waitText("#run-status", "succeeded")
	if evaluate[bool](b, `!!document.querySelector("#no-worker")`) {
		t.Error("the finished run still says no worker serves it")
	}
}

// Bug 7: the queues page says where steps that run inline (fused into the step before
// them) run, instead of "none". Bug 8: dead-letter times keep their format when the
// list is updated live.
func TestBrowserQueuesSayWhereInlineStepsRunAndTimesKeepTheirFormat(t *testing.T) {
	rdb := storetest.Real(t)
	flowID := storetest.FlowID(t)
	storetest.DeleteFlowKeys(t, rdb, flowID)
	var healthy atomic.Bool
	addr := stockService(t, &healthy)
	dir := t.TempDir()
	writeDoc(t, dir, map[string]any{
		"sluice": 1, "id": flowID, "name": "Stock check",
		"settings": map[string]any{"max_attempts": 1},
		"nodes": []any{
			map[string]any{"id": "in", "type": "input", "position": map[string]any{"x": 0, "y": 0}},
			map[string]any{"id": "prep", "type": "transform", "position": map[string]any{"x": 240, "y": 0}, "params": map[string]any{"expr": `{sku: "A-42"}`}},
			map[string]any{"id": "stock", "type": "http", "position": map[string]any{"x": 480, "y": 0}, "params": map[string]any{"url": "http://" + addr + "/stock"}},
			map[string]any{"id": "out", "type": "output", "position": map[string]any{"x": 720, "y": 0}, "params": map[string]any{"value": ".response.body"}},
		},
		"edges": []any{map[string]any{"from": "in", "to": "prep"}, map[string]any{"from": "prep", "to": "stock"}, map[string]any{"from": "stock", "to": "out"}},
	})
	base := serveForBrowser(t, dir, "--http-allow", addr)
	var started struct{ Run string }
	post(t, base+"/api/flows/"+flowID+"/runs?wait=30s", `{"input": {}}`, http.StatusOK, &started)

	b := newBrowser(t, base)
	b.open("/queues?flow=" + flowID)
	b.waitText("#live-status", "live")
	row := func(node string) string { return fmt.Sprintf(`#queue-rows tr[data-node=%q]`, node) }
	first := evaluate[string](b, `document.querySelector("#dead-letters tbody tr td").innerText`)
	if !regexp.MustCompile(`^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d$`).MatchString(strings.TrimSpace(first)) {
		t.Errorf("a dead letter's time reads %q, want YYYY-MM-DD hh:mm:ss", first)
	}

	// A second dead letter arrives live: the first one's time reads as before.
	post(t, base+"/api/flows/"+flowID+"/runs", `{"input": {}}`, http.StatusAccepted, nil)
	b.waitFor("two dead letters", `document.querySelectorAll("#dead-letters tbody tr").length === 2`)
	if again := evaluate[string](b, `document.querySelector("#dead-letters tbody tr td").innerText`); again != first {
		t.Errorf("after a live update the first dead letter's time reads %q, before %q", again, first)
	}
	b.waitText(row("prep"), "runs inline")
	b.waitText(row("prep"), "after in")
	if got := evaluate[string](b, `document.querySelector('#queue-rows tr[data-node="prep"]').innerText`); strings.Contains(got, "none") {
		t.Errorf("the inline node's row reads %q", got)
	}
}

// Bug 9: the support example shows what it claims — a ticket no route takes is answered
// as [general], and the models' replies stream onto the canvas. Bug 8: the agent's turns
// read "turn 1 · model reply …", and its data tool reads "called 1×", not "not run".
func TestBrowserTheSupportExampleShowsWhatItClaims(t *testing.T) {
	rdb := storetest.Real(t)
	name, flowID := namedFlow(t, "Support")
	storetest.DeleteFlowKeys(t, rdb, flowID)
	model, _ := fakeModel(t)
	base := serveForBrowserEnv(t, t.TempDir(), []string{"OPENAI_BASE_URL=" + model.URL, "OPENAI_API_KEY=test-key", "SLUICE_PROVIDERS="})
	b := newBrowser(t, base)
	b.open("/flows/new?from=support&name=" + strings.ReplaceAll(name, " ", "+"))
	b.waitFor("the example's nodes", `document.querySelectorAll(".react-flow__node").length === 8`)
	b.click("#run-tab")
	b.typeInto("#run-input", `{"ticket": "Where is my invoice?"}`)
	b.click("#run-button")
	b.waitText("#run-status", "succeeded")
	b.waitText("#run-output", `"reply": "[general] Billing questions go to billing@example.com."`)
	b.waitText(`[data-node="general"] .flow-node-stream`, "Billing questions")

	firstRun := evaluate[string](b, `document.querySelector("#run-summary-id").innerText`)
	b.typeInto("#run-input", `{"ticket": "The report query on orders is slow", "context": {"tables": {"orders": {"rows": 120000000, "indexes": ["id"]}}}}`)
	b.click("#run-button")
	b.waitFor("a second run", fmt.Sprintf(`!!document.querySelector("#run-summary-id") && document.querySelector("#run-summary-id").innerText !== %q`, firstRun))
	b.waitText("#run-status", "succeeded")
	b.waitText("#run-output", `"reply": "[database] Add an index`)
	b.waitFor("the data tool called once", `[...document.querySelectorAll('[aria-label="nodes in this run"] li')].some(li => li.innerText.includes("context") && li.innerText.includes("called 1×"))`)
	b.click(`.react-flow__node[data-id="database"]`)
	panel := `[aria-label="checkpoints of database"]`
	b.waitText(panel, "turn 1 · model reply, calls query_ticket")
	b.waitText(panel, "turn 2 · tool result: query_ticket")
	b.waitText(panel, "turn 3 · model reply")
	if got := evaluate[string](b, fmt.Sprintf(`document.querySelector(%q).innerText`, panel)); strings.Contains(got, "step 0 · turn") {
		t.Errorf("the agent's turns still read \"step 0 · turn\":\n%s", got)
	}
	b.shot("editor-agent-turns")
}

// The starter gallery: every example is a card with a picture of its graph and one line
// of description; a card opens the example as a new flow named as typed (or after it).
func TestBrowserStartFromTheGallery(t *testing.T) {
	base := serveForBrowser(t, t.TempDir())
	b := newBrowser(t, base)
	b.open("/")
	b.waitFor("the gallery", fmt.Sprintf(`document.querySelectorAll(".gallery-card").length === %d`, len(examples.IDs())))
	type card struct {
		ID, Text, Summary string
		Boxes             int
	}
	cards := evaluate[[]card](b, `[...document.querySelectorAll(".gallery-card")].map(c => ({ID: c.dataset.example, Text: c.innerText, Summary: c.querySelector(".gallery-summary").innerText, Boxes: c.querySelectorAll("svg.graph-picture rect").length}))`)
	for _, c := range cards {
		var doc struct {
			Name  string
			Nodes []any
		}
		if err := json.Unmarshal([]byte(mustRead(t, filepath.Join("..", "..", "flows", "examples", c.ID+".json"))), &doc); err != nil {
			t.Fatal(err)
		}
		if c.Boxes != len(doc.Nodes) || !strings.Contains(c.Text, doc.Name) {
			t.Errorf("card %s: %d boxes and %q, want a box per node (%d) and its name", c.ID, c.Boxes, c.Text, len(doc.Nodes))
		}
		if c.Summary == "" || strings.Contains(c.Summary, "\n") || len(c.Summary) > 100 {
			t.Errorf("card %s does not describe itself in one line: %q", c.ID, c.Summary)
		}
	}
	b.shot("flows-gallery")

	// Without a name the flow is named after the example.
	b.click(`.gallery-card[data-example="fanout"] a`)
	b.waitFor("the example in the editor", `document.querySelectorAll(".react-flow__node").length === 5`)
	b.waitText(".flow-title", "Fan-out")
}

// validatedVersion is the version the server gives a flow document.
func validatedVersion(t *testing.T, base string, doc []byte) string {
	t.Helper()
	var v struct {
		Valid   bool
		Version string
	}
	post(t, base+"/api/flows/validate", string(doc), http.StatusOK, &v)
	if !v.Valid {
		t.Fatalf("the document does not validate: %s", doc)
	}
	return v.Version
}

// Notes on the canvas: written, moved and saved with the flow, and never a new version.
func TestBrowserNotesOnTheCanvasKeepTheVersion(t *testing.T) {
	rdb := storetest.Real(t)
	flowID := storetest.FlowID(t)
	storetest.DeleteFlowKeys(t, rdb, flowID)
	dir := t.TempDir()
	writeDoc(t, dir, exampleDoc(t, "linear", flowID))
	base := serveForBrowser(t, dir)
	file := filepath.Join(dir, flowID+".json")
	before := validatedVersion(t, base, []byte(mustRead(t, file)))

	b := newBrowser(t, base)
	b.open("/flows/" + flowID)
	b.waitFor("the editor", `document.querySelectorAll(".react-flow__node").length === 4`)
	b.click("#add-note")
	b.waitFor("a note", `!!document.querySelector(".canvas-note textarea")`)
	b.run("write on it", chromedp.SendKeys(chromedp.CSS(".canvas-note textarea"), "Greets, then shouts."))
	at := b.center(".canvas-note .note-handle")
	b.drag("the note", at, point{at.X - 200, at.Y + 220})
	b.waitFor("the note moved", fmt.Sprintf(`document.querySelector(".canvas-note .note-handle").getBoundingClientRect().x < %f`, at.X-100))
	b.click(".react-flow__pane")
	b.run("save", chromedp.KeyEvent("s", chromedp.KeyModifiers(chromedp.ModifierCtrl)))
	b.waitFor("saved", `document.querySelector("#save-state").innerText === "Saved"`)

	saved := mustRead(t, file)
	if !strings.Contains(saved, `"notes"`) || !strings.Contains(saved, "Greets, then shouts.") {
		t.Fatalf("the saved file has no note:\n%s", saved)
	}
	if after := validatedVersion(t, base, []byte(saved)); after != before {
		t.Errorf("a note changed the flow's version: %s, before %s", after, before)
	}
	b.run("reload", chromedp.Reload(), chromedp.WaitReady(chromedp.CSS("body")))
	b.waitFor("the note after a reload", `document.querySelector(".canvas-note textarea")?.value === "Greets, then shouts."`)
	b.shot("editor-note")
}

// Keyboard help on "?", plain-key shortcuts, and an auto-layout that keeps text readable.
func TestBrowserKeyboardHelpAndAReadableAutoLayout(t *testing.T) {
	base := serveForBrowser(t, t.TempDir())
	b := newBrowser(t, base)
	b.open("/flows/new?name=Layout&from=support")
	b.waitFor("the example's nodes", `document.querySelectorAll(".react-flow__node").length === 8`)
	b.click(".react-flow__pane")
	b.run("press ?", chromedp.KeyEvent("?"))
	b.waitText("#keyboard-help", "Keyboard shortcuts")
	for _, want := range []string{"Ctrl/⌘ S", "Ctrl/⌘ Z", "Add a note", "Auto-layout", "Delete"} {
		b.waitText("#keyboard-help", want)
	}
	b.shot("editor-keyboard-help")
	b.run("press Escape", chromedp.KeyEvent(kb.Escape))
	b.waitFor("the help closed", `!document.querySelector("#keyboard-help")`)

	// Letters are shortcuts only outside text fields.
	b.inspect("route")
	b.run("type an n into a field", chromedp.Focus(chromedp.CSS(`input[aria-label="Label"]`)), chromedp.KeyEvent("n"))
	if n := evaluate[int](b, `document.querySelectorAll(".canvas-note").length`); n != 0 {
		t.Errorf("typing n in a field added %d notes", n)
	}
	b.click(".react-flow__pane")
	b.run("press n", chromedp.KeyEvent("n"))
	b.waitFor("a note", `document.querySelectorAll(".canvas-note").length === 1`)
	b.run("leave the note", chromedp.KeyEvent(kb.Escape))
	b.click(".react-flow__pane")

	// L lays the flow out: nothing overlaps, the tool hangs under an agent, text stays readable.
	b.run("press l", chromedp.KeyEvent("l"))
	type box struct {
		ID                string
		X, Y, W, H, Title float64
	}
	// The view zooms to at least the readable zoom (0.8); the nodes' places are final at once.
	b.waitFor("a readable zoom", `parseFloat(document.querySelector(".react-flow__viewport").style.transform.match(/scale\(([\d.]+)\)/)?.[1] ?? "0") >= 0.8`)
	boxes := evaluate[[]box](b, `[...document.querySelectorAll(".react-flow__node-flow")].map(n => { const r = n.getBoundingClientRect(); return {ID: n.dataset.id, X: r.x, Y: r.y, W: r.width, H: r.height, Title: n.querySelector(".flow-node-title").getBoundingClientRect().height}; })`)
	byID := map[string]box{}
	for i, a := range boxes {
		byID[a.ID] = a
		if a.Title < 12 {
			t.Errorf("node %s's title is %.1f px tall after auto-layout: too small to read", a.ID, a.Title)
		}
		for _, c := range boxes[i+1:] {
			if a.X < c.X+c.W && c.X < a.X+a.W && a.Y < c.Y+c.H && c.Y < a.Y+a.H {
				t.Errorf("nodes %s and %s overlap after auto-layout", a.ID, c.ID)
			}
		}
	}
	if ctx, ag := byID["context"], byID["coding"]; ctx.Y < ag.Y+ag.H || ctx.X != ag.X {
		if ag2 := byID["database"]; ctx.Y < ag2.Y+ag2.H || ctx.X != ag2.X {
			t.Errorf("the data tool is not under an agent: context %+v, coding %+v, database %+v", ctx, ag, ag2)
		}
	}
	b.shot("editor-auto-layout")
}

// snippet returns the code the API panel shows for a language and a snippet kind.
func (b *browser) snippet(lang, kind string) string {
	b.t.Helper()
	b.click(fmt.Sprintf(`.lang-tabs button[data-lang=%q]`, lang))
	b.waitFor(lang+" chosen", fmt.Sprintf(`document.querySelector('.lang-tabs button[data-lang=%q]').getAttribute("aria-selected") === "true"`, lang))
	return evaluate[string](b, fmt.Sprintf(`document.querySelector('[data-snippet=%q] pre').innerText`, kind))
}

// runSnippet runs a snippet with a command (sh -c, python3 -c, …) and returns its output.
func runSnippet(t *testing.T, env []string, name string, args ...string) string {
	t.Helper()
	if _, err := exec.LookPath(name); err != nil {
		t.Fatalf("%s is needed to run the snippet: %v", name, err)
	}
	cmd := exec.Command(name, args...)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %v: %v\n%s", name, args, err, out)
	}
	return string(out)
}

// program is a snippet running in the background (a webhook receiver, an event stream):
// its output, stdout and stderr alike, line by line.
type program struct {
	mu    sync.Mutex
	out   []string
	added chan struct{}
	ended chan struct{}
}

// startProgram starts a snippet in a process group of its own, killed when the test ends.
func startProgram(t *testing.T, env []string, name string, args ...string) *program {
	t.Helper()
	if _, err := exec.LookPath(name); err != nil {
		t.Fatalf("%s is needed to run the snippet: %v", name, err)
	}
	cmd := exec.Command(name, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = w, w
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w.Close()
	p := &program{added: make(chan struct{}, 1), ended: make(chan struct{})}
	go func() {
		defer close(p.ended)
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			p.mu.Lock()
			p.out = append(p.out, sc.Text())
			p.mu.Unlock()
			select {
			case p.added <- struct{}{}:
			default:
			}
		}
		cmd.Wait()
	}()
	t.Cleanup(func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-p.ended
	})
	return p
}

// output is what the program has printed so far.
func (p *program) output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return strings.Join(p.out, "\n")
}

// waitOutput waits until the program has printed something that matches re.
func (p *program) waitOutput(t *testing.T, what string, re *regexp.Regexp) {
	t.Helper()
	deadline := time.After(60 * time.Second)
	for {
		all := p.output()
		if re.MatchString(all) {
			return
		}
		select {
		case <-p.added:
		case <-p.ended:
			if all = p.output(); re.MatchString(all) {
				return
			}
			t.Fatalf("%s ended without printing %s:\n%s", what, re, all)
		case <-deadline:
			t.Fatalf("%s never printed %s:\n%s", what, re, all)
		}
	}
}

// waitListening waits until something accepts connections at addr.
func waitListening(t *testing.T, what, addr string, p *program) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			return
		}
		select {
		case <-p.ended:
			t.Fatalf("%s ended before it listened on %s:\n%s", what, addr, p.output())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s does not listen on %s: %v", what, addr, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// freePort is a TCP port nothing listens on at the moment.
func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	_, port, _ := net.SplitHostPort(l.Addr().String())
	return port
}

// goBuild builds a Go snippet into a binary.
func goBuild(t *testing.T, code string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte(code), 0o644); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "snippet")
	cmd := exec.Command("go", "build", "-o", bin, filepath.Join(dir, "main.go"))
	cmd.Env = append(os.Environ(), "GOFLAGS=", "GO111MODULE=on")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("the Go snippet does not build: %v\n%s\n%s", err, out, code)
	}
	return bin
}

// The API panel: copyable snippets in curl, Python, JavaScript and Go with this server
// and its token variable filled in; run as they are, they start the flow and get its
// result, follow its events, receive its result webhook (its signature checked), and
// start runs through the flow's webhook ingress.
func TestBrowserTheAPIPanelsSnippetsRunAsTheyAre(t *testing.T) {
	rdb := storetest.Real(t)
	flowID := storetest.FlowID(t)
	storetest.DeleteFlowKeys(t, rdb, flowID)
	dir := t.TempDir()
	writeDoc(t, dir, exampleDoc(t, "linear", flowID))
	const token = "snippet-token-8f3a1c"
	hookEnv := server.HookSecretEnv(flowID)
	const hookSecret = "hook-secret-51c9e0"
	// The receivers listen on this machine: the server may deliver there.
	base := serveForBrowserEnv(t, dir, []string{hookEnv + "=" + hookSecret}, "--token", token, "--http-allow", "127.0.0.1")
	b := newBrowser(t, base)
	b.open("/flows/" + flowID + "?token=" + token)
	b.waitFor("the editor", `document.querySelectorAll(".react-flow__node").length === 4`)
	b.click("#api-tab")
	b.waitText(".api-panel", "SLUICE_TOKEN")
	if evaluate[bool](b, fmt.Sprintf(`document.documentElement.outerHTML.includes(%q)`, token)) {
		t.Error("the page holds the server's token")
	}
	env := []string{"SLUICE_TOKEN=" + token}

	curl := b.snippet("curl", "start")
	if !strings.Contains(curl, base) || !strings.Contains(curl, `$SLUICE_TOKEN`) {
		t.Errorf("the curl snippet lacks the server or the token variable:\n%s", curl)
	}
	if out := runSnippet(t, env, "sh", "-c", curl); !strings.Contains(out, `"status":"succeeded"`) || !strings.Contains(out, "HELLO, ADA!") {
		t.Errorf("the curl snippet answered:\n%s", out)
	}
	if out := runSnippet(t, env, "python3", "-c", b.snippet("python", "start")); !strings.HasPrefix(out, "succeeded ") || !strings.Contains(out, "HELLO, ADA!") {
		t.Errorf("the Python snippet printed:\n%s", out)
	}
	if out := runSnippet(t, env, "python3", "-c", b.snippet("python", "events")); !strings.Contains(out, "step greet") || !strings.Contains(out, `run  {"status": "succeeded"}`) {
		t.Errorf("the Python events snippet printed:\n%s", out)
	}
	goFile := filepath.Join(t.TempDir(), "main.go")
	if err := os.WriteFile(goFile, []byte(b.snippet("go", "start")), 0o644); err != nil {
		t.Fatal(err)
	}
	if out := runSnippet(t, append(env, "GOFLAGS=", "GO111MODULE=on"), "go", "run", goFile); !strings.HasPrefix(out, "succeeded ") || !strings.Contains(out, "HELLO, ADA!") {
		t.Errorf("the Go snippet printed:\n%s", out)
	}

	// JavaScript runs where it is shown: in this page (with SLUICE_TOKEN as Node has it).
	js := b.snippet("javascript", "events")
	logs := evaluate[string](b, fmt.Sprintf(`(async () => { const lines = []; const console = {log: (...a) => lines.push(a.join(" "))}; const process = {env: {SLUICE_TOKEN: %q}}; %s; return lines.join("\n"); })()`, token, js), chromedp.EvalAwaitPromise)
	if !strings.Contains(logs, "step greet") || !strings.Contains(logs, `run  {"status":"succeeded"}`) {
		t.Errorf("the JavaScript events snippet logged:\n%s", logs)
	}
	if out := evaluate[string](b, fmt.Sprintf(`(async () => { const lines = []; const console = {log: (...a) => lines.push(a.join(" "))}; const process = {env: {SLUICE_TOKEN: %q}}; %s; return lines.join("\n"); })()`, token, b.snippet("javascript", "start")), chromedp.EvalAwaitPromise); !strings.HasPrefix(out, "succeeded ") || !strings.Contains(out, "HELLO, ADA!") {
		t.Errorf("the JavaScript snippet logged:\n%s", out)
	}
	eventsBin := goBuild(t, b.snippet("go", "events"))
	if out := runSnippet(t, env, eventsBin); !strings.Contains(out, "step greet") || !strings.Contains(out, `run  {"status":"succeeded"}`) {
		t.Errorf("the Go events snippet printed:\n%s", out)
	}
	// curl follows the stream until it is stopped: here, once the run has succeeded.
	curlEvents := startProgram(t, env, "sh", "-c", b.snippet("curl", "events"))
	curlEvents.waitOutput(t, "the curl events snippet", regexp.MustCompile(`"type":"step".*"node":"greet"(.|\n)*"status":"succeeded"`))

	// The result webhook: each receiver, on a port of its own instead of 9000, gets the
	// result of a run the curl webhook snippet starts, and checks its signature.
	curlWebhook := b.snippet("curl", "webhook")
	hookEnvs := append(env, hookEnv+"="+hookSecret, "PYTHONUNBUFFERED=1")
	runWithWebhook := func(port string) string {
		t.Helper()
		code := strings.ReplaceAll(curlWebhook, "https://your.service/sluice-result", "http://127.0.0.1:"+port+"/sluice-result")
		m := regexp.MustCompile(`"run":"([^"]+)"`).FindStringSubmatch(runSnippet(t, env, "sh", "-c", code))
		if m == nil {
			t.Fatalf("the curl webhook snippet started no run")
		}
		return m[1]
	}
	receivers := []struct {
		lang string
		run  func(code string) *program
	}{
		{"python", func(code string) *program { return startProgram(t, hookEnvs, "python3", "-c", code) }},
		{"javascript", func(code string) *program {
			return startProgram(t, hookEnvs, "node", "--input-type=module", "-e", code)
		}},
		{"go", func(code string) *program { return startProgram(t, hookEnvs, goBuild(t, code)) }},
	}
	for _, rc := range receivers {
		code := b.snippet(rc.lang, "webhook")
		if !strings.Contains(code, "X-Sluice-Signature") && !strings.Contains(code, "x-sluice-signature") {
			t.Errorf("the %s receiver does not check the signature:\n%s", rc.lang, code)
		}
		port := freePort(t)
		p := rc.run(strings.ReplaceAll(code, "9000", port))
		waitListening(t, "the "+rc.lang+" receiver", "127.0.0.1:"+port, p)
		run := runWithWebhook(port)
		p.waitOutput(t, "the "+rc.lang+" receiver", regexp.MustCompile(regexp.QuoteMeta(run)+` succeeded`))
	}

	// The webhook ingress: each snippet starts a run with the flow's secret.
	if out := runSnippet(t, hookEnvs, "sh", "-c", b.snippet("curl", "ingress")); strings.Count(out, `"run":"`) != 2 {
		t.Errorf("the curl ingress snippet (a bearer secret, then a signed body) answered:\n%s", out)
	}
	if out := strings.TrimSpace(runSnippet(t, hookEnvs, "python3", "-c", b.snippet("python", "ingress"))); !regexp.MustCompile(`^\w+$`).MatchString(out) {
		t.Errorf("the Python ingress snippet printed %q, want a run id", out)
	}
	if out := runSnippet(t, hookEnvs, goBuild(t, b.snippet("go", "ingress"))); !strings.Contains(out, "202 Accepted") {
		t.Errorf("the Go ingress snippet printed:\n%s", out)
	}
	if out := evaluate[string](b, fmt.Sprintf(`(async () => { const lines = []; const console = {log: (...a) => lines.push(a.join(" "))}; const process = {env: {%s: %q}}; %s; return lines.join("\n"); })()`, hookEnv, hookSecret, b.snippet("javascript", "ingress")), chromedp.EvalAwaitPromise); !regexp.MustCompile(`^\w+$`).MatchString(out) {
		t.Errorf("the JavaScript ingress snippet logged %q, want a run id", out)
	}

	b.click(`[data-snippet="start"] button.copy`)
	b.waitText("#toast", "Copied")
	b.shot("editor-api")
}

// The chat playground: a flow whose input takes messages gets a conversation; each
// message is a run with the conversation so far, its reply streams in, each turn links
// its run, and the conversation is kept across a reload.
func TestBrowserChatWithAFlowInThePlayground(t *testing.T) {
	rdb := storetest.Real(t)
	name, flowID := namedFlow(t, "Chat")
	storetest.DeleteFlowKeys(t, rdb, flowID)
	model := llmtest.New(t)
	hold := make(chan struct{})
	var turns atomic.Int32
	model.Respond(func(r llmtest.Request) llmtest.Reply {
		if turns.Add(1) == 1 {
			// Streamed a few characters a chunk; held after "A stream is " until hold closes.
			return llmtest.Reply{Content: "A stream is an append-only log.", Hold: hold, HoldAfter: 3}
		}
		return llmtest.Text("Consumer groups share its entries among workers.")
	})
	base := serveForBrowserEnv(t, t.TempDir(), []string{"OPENAI_BASE_URL=" + model.URL, "OPENAI_API_KEY=test-key", "SLUICE_PROVIDERS="})
	b := newBrowser(t, base)
	b.open("/")
	b.typeInto("#new-name", name)
	b.click(`.gallery-card[data-example="chat"] a`)
	b.waitFor("the chat example", `document.querySelectorAll(".react-flow__node").length === 3`)
	b.click("#chat-tab")
	b.typeInto("#chat-text", "What is a Redis stream?")
	b.run("send", chromedp.KeyEvent("\r"))

	// While the model answers, the turn's run shows on the canvas and the reply streams
	// into the chat: its first tokens show before the model has sent the rest.
	b.waitFor("the turn running on the canvas", `document.querySelector('[data-node="reply"]')?.dataset.status === "running"`)
	b.waitText(".chat-pending", "running")
	b.waitText(".chat-pending .chat-text", "A stream is")
	if got := evaluate[string](b, `document.querySelector(".chat-pending .chat-text").innerText`); strings.Contains(got, "log") {
		t.Errorf("while the model holds its reply, the chat shows %q, want only what it sent so far", got)
	}
	close(hold)
	b.waitText(".chat-log .chat-assistant:not(.chat-pending)", "A stream is an append-only log.")
	firstRun := evaluate[string](b, `document.querySelector(".chat-assistant .chat-meta button").innerText.replace("run ", "")`)

	// The second turn sends the conversation so far.
	b.typeInto("#chat-text", "And consumer groups?")
	b.click("#chat-send")
	b.waitFor("two replies", `document.querySelectorAll(".chat-log .chat-assistant:not(.chat-pending)").length === 2`)
	b.waitFor("the second reply", `[...document.querySelectorAll(".chat-log .chat-assistant")].pop().innerText.includes("Consumer groups share its entries")`)
	reqs := model.Requests()
	last := reqs[len(reqs)-1].Last().Text()
	for _, want := range []string{"user: What is a Redis stream?", "assistant: A stream is an append-only log.", "user: And consumer groups?"} {
		if !strings.Contains(last, want) {
			t.Errorf("the second turn's prompt lacks %q:\n%s", want, last)
		}
	}
	b.shot("editor-chat")

	// The conversation is kept; a turn's run opens on the canvas.
	b.run("reload", chromedp.Reload(), chromedp.WaitReady(chromedp.CSS("body")))
	b.click("#chat-tab")
	b.waitFor("the conversation kept", `document.querySelectorAll(".chat-log .chat-msg").length === 4`)
	b.click(".chat-assistant .chat-meta button")
	b.waitFor("the first turn's run on the canvas", fmt.Sprintf(`location.search.includes(%q) && document.querySelector('[data-node="reply"]')?.dataset.status === "done"`, firstRun))
	b.click("#run-tab")
	b.waitFor("its summary", fmt.Sprintf(`document.querySelector("#run-summary-id")?.innerText === %q`, firstRun))
}
