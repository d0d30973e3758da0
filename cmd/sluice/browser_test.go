package main

// Browser tests: a person's first session with Sluice, in headless Chromium against
// `sluice serve` on the real Redis. They fail (never skip) when Chromium is missing;
// .ci/run installs it. Screenshots of the main screens are saved under
// test-results/screenshots on every run; -update-screenshots also writes them to
// docs/img, where the README shows them.

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/cdproto/input"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
	"github.com/sluicehq/sluice/flows/nodes/llmtest"
	"github.com/sluicehq/sluice/store/storetest"
)

var updateScreenshots = flag.Bool("update-screenshots", false, "also write the screenshots the README shows to docs/img")

// readmeShots are the screenshots README.md shows, from docs/img.
var readmeShots = map[string]bool{
	"editor-example": true, "editor-problem": true, "editor-checkpoint": true, "run": true,
	"queues": true, "flows": true, "editor-dark": true, "editor-approval": true,
	"editor-chat": true, "editor-api": true, "editor-failed-step": true, "editor-note": true,
	"flows-gallery": true, "editor-keyboard-help": true, "editor-pinned": true,
}

// chromium is the browser the tests drive; SLUICE_CHROMIUM overrides the path.
func chromium(t *testing.T) string {
	t.Helper()
	p := os.Getenv("SLUICE_CHROMIUM")
	if p == "" {
		p = "/usr/bin/chromium"
	}
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("the browser tests need Chromium at %s (set SLUICE_CHROMIUM to use another path; .ci/run installs Debian's chromium): %v", p, err)
	}
	return p
}

// browser is one headless Chromium tab at 1280×800 with helpers that act as a person
// does and wait for what a person would see.
type browser struct {
	t       *testing.T
	ctx     context.Context
	base    string
	noShots bool // take no screenshots but of failures (a second pass over the same screens)
}

func newBrowser(t *testing.T, base string) *browser {
	t.Helper()
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(chromium(t)),
		chromedp.Flag("headless", true),
		chromedp.Flag("no-sandbox", true),
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("no-first-run", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("hide-scrollbars", true),
		chromedp.Flag("force-color-profile", "srgb"),
		chromedp.WindowSize(1280, 800),
		chromedp.UserDataDir(t.TempDir()),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx, chromedp.WithErrorf(t.Logf))
	t.Cleanup(func() { cancel(); cancelAlloc() })
	b := &browser{t: t, ctx: ctx, base: base}
	// The first action starts the browser, which lives as long as the context of that
	// call: it gets ctx itself, with no timeout.
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(1280, 800)); err != nil {
		t.Fatalf("start Chromium: %v", err)
	}
	b.logErrors()
	return b
}

// logErrors writes the page's uncaught exceptions and console errors into the test's
// log, so that a failure says why a page broke.
func (b *browser) logErrors() {
	_ = chromedp.Listen(b.ctx, func(ev any) {
		switch e := ev.(type) {
		case *runtime.EventExceptionThrown:
			if d := e.ExceptionDetails; d != nil {
				msg := d.Text
				if d.Exception != nil {
					msg += " " + d.Exception.Description
				}
				b.t.Logf("page exception: %s", msg)
			}
		case *runtime.EventConsoleAPICalled:
			if e.Type == runtime.ConsoleAPICalledTypeError {
				var parts []string
				for _, a := range e.Args {
					parts = append(parts, string(a.Value)+a.Description)
				}
				b.t.Logf("console.error: %s", strings.Join(parts, " "))
			}
		}
	})
}

// limit bounds one step, so that a hung page fails the test instead of the suite;
// nothing is asserted about how fast anything is.
const limit = 60 * time.Second

func (b *browser) run(what string, actions ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, limit)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		b.shot("failure")
		b.t.Fatalf("%s: %v", what, err)
	}
}

func (b *browser) open(path string) {
	b.t.Helper()
	b.run("open "+path, chromedp.Navigate(b.base+path), chromedp.WaitReady(chromedp.CSS("body")))
}

// evaluate returns a JavaScript expression's value.
func evaluate[T any](b *browser, js string, opts ...chromedp.EvaluateOption) T {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, limit)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](js, opts...))
	if err != nil {
		b.shot("failure")
		b.t.Fatalf("evaluate %s: %v", js, err)
	}
	return v
}

// waitFor checks the JavaScript condition until it holds; what says what the person
// waits to see. A check during a page load (no document yet) counts as not yet.
// holds evaluates a JavaScript condition once (false when it throws).
func (b *browser) holds(cond string) (bool, error) {
	ctx, cancel := context.WithTimeout(b.ctx, 5*time.Second)
	defer cancel()
	ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool](fmt.Sprintf(`(() => { try { return !!(%s); } catch (e) { return false; } })()`, cond)))
	return err == nil && ok, err
}

func (b *browser) waitFor(what, cond string) {
	b.t.Helper()
	deadline := time.Now().Add(limit)
	var last error
	for time.Now().Before(deadline) {
		ok, err := b.holds(cond)
		if ok {
			return
		}
		last = err
		if b.ctx.Err() != nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	b.shot("failure")
	text, _ := chromedp.Run(b.ctx, chromedp.Evaluate[string](`document.body.innerText.slice(0, 3000)`))
	b.t.Fatalf("never saw %s (last error: %v); the page said:\n%s", what, last, text)
}

// waitText waits until the element shows the text (in any letter case: headings are
// styled in capitals).
func (b *browser) waitText(sel, want string) {
	b.t.Helper()
	b.waitFor(fmt.Sprintf("%q in %s", want, sel), fmt.Sprintf(`(document.querySelector(%q)?.innerText ?? "").toLowerCase().includes(%q)`, sel, strings.ToLower(want)))
}

type point struct{ X, Y float64 }

// center is the middle of the first element matching sel, in CSS pixels.
func (b *browser) center(sel string) point {
	b.t.Helper()
	b.waitFor(sel, fmt.Sprintf(`!!document.querySelector(%q)`, sel))
	return evaluate[point](b, fmt.Sprintf(`(() => { const el = document.querySelector(%q); el.scrollIntoView({block: "nearest"}); const r = el.getBoundingClientRect(); return {X: r.x + r.width / 2, Y: r.y + r.height / 2}; })()`, sel))
}

// drag presses the mouse at from, moves it in steps to to, and lets go.
func (b *browser) drag(what string, from, to point) {
	b.t.Helper()
	acts := []chromedp.Action[chromedp.Void]{
		chromedp.MouseEvent(input.DispatchMouseEventTypeMouseMoved, from.X, from.Y),
		chromedp.MouseEvent(input.DispatchMouseEventTypeMousePressed, from.X, from.Y, chromedp.ButtonLeft, chromedp.ClickCount(1)),
	}
	const steps = 12
	for i := 1; i <= steps; i++ {
		f := float64(i) / steps
		acts = append(acts, chromedp.MouseEvent(input.DispatchMouseEventTypeMouseMoved, from.X+(to.X-from.X)*f, from.Y+(to.Y-from.Y)*f, chromedp.ButtonLeft))
	}
	acts = append(acts, chromedp.MouseEvent(input.DispatchMouseEventTypeMouseReleased, to.X, to.Y, chromedp.ButtonLeft, chromedp.ClickCount(1)))
	b.run("drag "+what, acts...)
}

// dragUntil drags the element fromSel to a point until cond holds, at most three times:
// a synthetic drag that starts while the page moves the element under it (a problems
// banner appearing after the previous drop, on a loaded machine) is lost, as a person's
// would be, and a person drags again. Each retry is logged.
func (b *browser) dragUntil(what, fromSel string, to point, cond string) {
	b.t.Helper()
	for attempt := 1; attempt <= 3; attempt++ {
		b.drag(what, b.center(fromSel), to)
		deadline := time.Now().Add(10 * time.Second)
		for time.Now().Before(deadline) {
			if ok, _ := b.holds(cond); ok {
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
		b.t.Logf("drag %s: attempt %d did not give %s; dragging again", what, attempt, cond)
	}
	b.waitFor(what, cond)
}

func (b *browser) click(sel string) {
	b.t.Helper()
	b.run("click "+sel, chromedp.WaitVisible(chromedp.CSS(sel)), chromedp.Click(chromedp.CSS(sel)))
}

// typeInto focuses a field, selects what is in it and types text over it.
func (b *browser) typeInto(sel, text string) {
	b.t.Helper()
	b.run("type into "+sel, chromedp.WaitVisible(chromedp.CSS(sel)), chromedp.Focus(chromedp.CSS(sel)),
		chromedp.KeyEvent("a", chromedp.KeyModifiers(chromedp.ModifierCtrl)), chromedp.KeyEvent("\b"),
		chromedp.SendKeys(chromedp.CSS(sel), text))
}

// shot saves a screenshot of the window as name.png.
func (b *browser) shot(name string) {
	if b.noShots && name != "failure" {
		return
	}
	buf, err := chromedp.Run(b.ctx, chromedp.CaptureScreenshot())
	if err != nil {
		b.t.Logf("screenshot %s: %v", name, err)
		return
	}
	dirs := []string{filepath.Join("..", "..", "test-results", "screenshots")}
	if *updateScreenshots && readmeShots[name] {
		dirs = append(dirs, filepath.Join("..", "..", "docs", "img"))
	}
	for _, dir := range dirs {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			b.t.Logf("screenshot %s: %v", name, err)
			continue
		}
		if err := os.WriteFile(filepath.Join(dir, name+".png"), buf, 0o644); err != nil {
			b.t.Logf("screenshot %s: %v", name, err)
		}
	}
}

// namedFlow is a flow name a person would type and the id the flows page makes of it;
// a random part keeps the id apart from other tests' on the shared Redis.
func namedFlow(t *testing.T, name string) (string, string) {
	id := storetest.FlowID(t)
	name += " " + id[len(id)-8:]
	return name, strings.ReplaceAll(strings.ToLower(name), " ", "-")
}

// acceptDialogs answers every confirm, alert and leave-page dialog with OK and returns
// what they said ("type: message"), for the test to check that the page asked.
func (b *browser) acceptDialogs() func() []string {
	var mu sync.Mutex
	var seen []string
	opened := make(chan struct{}, 16)
	if err := chromedp.Listen(b.ctx, func(ev any) {
		if d, ok := ev.(*page.EventJavascriptDialogOpening); ok {
			mu.Lock()
			seen = append(seen, string(d.Type)+": "+d.Message)
			mu.Unlock()
			select {
			case opened <- struct{}{}:
			default:
			}
		}
	}); err != nil {
		b.t.Fatal(err)
	}
	go func() {
		for {
			select {
			case <-b.ctx.Done():
				return
			case <-opened:
				_, _ = chromedp.Call(b.ctx, page.HandleJavaScriptDialog, page.HandleJavaScriptDialogParams{Accept: true})
			}
		}
	}()
	return func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), seen...)
	}
}

// serveForBrowser starts `sluice serve` on the real Redis with an empty flows directory
// and returns its URL. extra are further flags.
func serveForBrowser(t *testing.T, flowsDir string, extra ...string) string {
	t.Helper()
	return serveForBrowserEnv(t, flowsDir, nil, extra...)
}

func serveForBrowserEnv(t *testing.T, flowsDir string, env []string, extra ...string) string {
	t.Helper()
	args := append([]string{"serve", "--addr", "127.0.0.1:0", "--flows", flowsDir}, extra...)
	p := start(t, append([]string{"REDIS_URL=" + storetest.URL()}, env...), args...)
	return p.waitLine(t, servingLine, 30*time.Second)[1]
}

// The whole first session runs on the real Redis and on the embedded one that `make run`
// starts without REDIS_URL.
func TestBrowserBuildSaveRunAndInspectAFlow(t *testing.T) {
	t.Run("real", func(t *testing.T) {
		rdb := storetest.Real(t)
		name, flowID := namedFlow(t, "Greeting")
		storetest.DeleteFlowKeys(t, rdb, flowID)
		buildSaveRunAndInspect(t, serveForBrowser(t, t.TempDir()), name, flowID, true)
	})
	t.Run("embedded", func(t *testing.T) {
		name, flowID := namedFlow(t, "Greeting")
		buildSaveRunAndInspect(t, serveForBrowserEnv(t, t.TempDir(), []string{"REDIS_URL="}), name, flowID, false)
	})
}

func buildSaveRunAndInspect(t *testing.T, base, name, flowID string, shots bool) {
	b := newBrowser(t, base)
	if !shots {
		b.noShots = true
	}

	// The flows page: nothing yet; a new flow by name.
	b.open("/")
	b.waitText("main", "No flows yet")
	b.shot("flows-empty")
	b.typeInto("#new-name", name)
	b.click("#new-flow-form button[type=submit]")
	b.waitFor("the editor's canvas and palette", `!!document.querySelector(".react-flow") && document.querySelectorAll(".palette-item").length > 0`)
	b.waitText("#save-state", "Not saved yet")

	// Drag an input, a transform and an output from the palette onto the canvas.
	canvas := evaluate[struct{ X, Y, W, H float64 }](b, `(() => { const r = document.querySelector(".react-flow").getBoundingClientRect(); return {X: r.x, Y: r.y, W: r.width, H: r.height}; })()`)
	drops := []struct {
		kind string
		x    float64
	}{{"input", 0.17}, {"transform", 0.5}, {"output", 0.83}}
	for i, d := range drops {
		b.dragUntil(d.kind+" onto the canvas", fmt.Sprintf(`.palette-item[data-type=%q]`, d.kind),
			point{canvas.X + canvas.W*d.x, canvas.Y + canvas.H*0.35},
			fmt.Sprintf(`document.querySelectorAll(".react-flow__node").length === %d`, i+1))
	}
	b.waitText(`.react-flow__node[data-id="transform"]`, "Transform")

	// Connect the ports: input.out -> transform.in -> output.in.
	connect := func(from, fromPort, to, toPort string) {
		a := b.center(fmt.Sprintf(`.react-flow__node[data-id=%q] .react-flow__handle.source[data-handleid=%q]`, from, fromPort))
		z := b.center(fmt.Sprintf(`.react-flow__node[data-id=%q] .react-flow__handle.target[data-handleid=%q]`, to, toPort))
		b.drag(fmt.Sprintf("%s.%s to %s.%s", from, fromPort, to, toPort), a, z)
	}
	connect("input", "out", "transform", "in")
	b.waitFor("the first edge", `document.querySelectorAll(".react-flow__edge").length === 1`)
	connect("transform", "out", "output", "in")
	b.waitFor("the second edge", `document.querySelectorAll(".react-flow__edge").length === 2`)

	// The transform has no expression yet: a problem shows on it and in the panel.
	b.waitText(`[data-node="transform"] .badge-error`, "1 problem")
	b.waitText("#problems-count", "1 error")
	b.click("#problems-tab")
	b.waitText(".problems-panel", "node transform")
	b.shot("editor-problem")

	// Fixing it in the inspector makes the problem go away.
	b.click(`.react-flow__node[data-id="transform"]`)
	b.waitFor("the transform's inspector", `!!document.querySelector('[aria-label="node transform"] textarea[data-param="expr"]')`)
	b.typeInto(`textarea[data-param="expr"]`, `{greeting: ("Hello, " + .name + "!")}`)
	b.waitFor("the problem to go away", `!document.querySelector('[data-node="transform"] .badge-error') && document.querySelector("#problems-count").innerText.includes("Valid")`)

	// Save with Ctrl+S.
	b.click(".react-flow__pane")
	b.run("press Ctrl+S", chromedp.KeyEvent("s", chromedp.KeyModifiers(chromedp.ModifierCtrl)))
	b.waitText("#save-state", "Saved")
	b.run("auto-layout", chromedp.Click(chromedp.Search(`//button[text()="Auto-layout"]`)))
	b.run("save again", chromedp.Click("#save-button"))
	b.waitText("#save-state", "Saved")
	b.waitText("#problems-count", "Valid")
	b.shot("editor")

	// Reload: the flow is there, and the flows page lists it.
	b.run("reload", chromedp.Reload(), chromedp.WaitReady(chromedp.CSS("body")))
	b.waitFor("the saved flow after a reload", `document.querySelectorAll(".react-flow__node").length === 3 && document.querySelectorAll(".react-flow__edge").length === 2`)
	b.waitText(`[data-node="transform"]`, "Hello, ")
	b.open("/")
	b.waitText("#flow-list", flowID)
	b.waitText(fmt.Sprintf(`#flow-list tr[data-flow=%q]`, flowID), "valid")
	b.waitText(fmt.Sprintf(`#flow-list tr[data-flow=%q]`, flowID), "never run")
	b.click(fmt.Sprintf(`#flow-list tr[data-flow=%q] a.flow-link`, flowID))
	b.waitFor("the editor", `document.querySelectorAll(".react-flow__node").length === 3`)

	// Run it with an input: every node turns done and the output shows.
	b.click("#run-tab")
	b.typeInto("#run-input", `{"name": "Ada"}`)
	b.click("#run-button")
	b.waitText("#run-status", "succeeded")
	b.waitFor("every node done", `[...document.querySelectorAll(".flow-node")].every(n => n.dataset.status === "done" && n.innerText.includes("done"))`)
	b.waitText("#run-output", `"greeting": "Hello, Ada!"`)
	b.shot("editor-run")

	// A node's checkpoint for this run: its update and the state after it.
	b.click(`.react-flow__node[data-id="transform"]`)
	b.waitText(`[aria-label="checkpoints of transform"]`, "State after this step")
	b.waitText(`[aria-label="checkpoints of transform"]`, `"greeting": "Hello, Ada!"`)
	b.waitText(`[aria-label="checkpoints of transform"] .diff`, "greeting")
	b.shot("editor-checkpoint")

	// The runs page lists it; its page shows the steps and the state at each.
	b.open("/runs?flow=" + flowID)
	b.waitText("#run-list", "succeeded")
	b.shot("runs")
	b.run("filter the failed runs", chromedp.Focus(chromedp.CSS("#runs-status")), chromedp.KeyEvent("f"))
	b.waitText("#no-runs", "No failed runs")
	b.run("filter the succeeded runs", chromedp.Focus(chromedp.CSS("#runs-status")), chromedp.KeyEvent("s"))
	b.waitText("#run-list", "succeeded")
	b.click("#run-list a.mono")
	b.waitText("#run-status", "succeeded")
	b.waitFor("three steps in the timeline", `document.querySelectorAll("#timeline li").length >= 3`)
	b.click(`#timeline li[data-node="transform"] a`)
	b.waitText("#checkpoint", "Changes to the state")
	b.waitText("#checkpoint .diff", "greeting")
	b.shot("run")

	// Fork from the transform's step with an edited state: a new run that continues from there.
	b.typeInto("#fork-state", `{"name": "Grace", "greeting": "Hi, Grace!"}`)
	b.click("#fork-button")
	b.waitText(".page-head", "forked from")
	b.waitText("#run-status", "succeeded")
	b.waitText("#run-output", "Hi, Grace!")

	// The flows page shows the last run.
	b.open("/")
	b.waitText(fmt.Sprintf(`#flow-list tr[data-flow=%q]`, flowID), "succeeded")
	b.shot("flows")
}

func TestBrowserStartFromAnExampleAndRunIt(t *testing.T) {
	rdb := storetest.Real(t)
	name, flowID := namedFlow(t, "Ticket triage")
	storetest.DeleteFlowKeys(t, rdb, flowID)
	base := serveForBrowser(t, t.TempDir())
	b := newBrowser(t, base)

	// New flow from the triage example: its nodes are there, it is valid, and it runs.
	b.open("/")
	b.typeInto("#new-name", name)
	b.click(`.gallery-card[data-example="triage"] a`)
	b.waitFor("the example's seven nodes", `document.querySelectorAll(".react-flow__node").length === 7`)
	b.waitText("#problems-count", "Valid")
	b.click("#run-tab")
	b.waitFor("the example's input prefilled", `document.querySelector("#run-input").value.includes('"intent": "code"')`)
	b.waitText("#run-button", "Save and run")
	b.click("#run-button")
	b.waitText("#run-status", "succeeded")
	b.waitText("#save-state", "Saved")
	for _, node := range []string{"in", "route", "coding", "aggregate", "out"} {
		b.waitFor(node+" done", fmt.Sprintf(`document.querySelector('[data-node=%q]')?.dataset.status === "done"`, node))
	}
	for _, node := range []string{"database", "fallback"} {
		if status := evaluate[string](b, fmt.Sprintf(`document.querySelector('[data-node=%q]').dataset.status`, node)); status != "" {
			t.Errorf("node %s, on a route not taken, shows status %q", node, status)
		}
	}
	b.waitText("#run-output", "Ticket for coding")
	b.click(`.react-flow__node[data-id="route"]`)
	b.waitText(`[aria-label="checkpoints of route"]`, "step")
	b.shot("editor-example")

	// The same in the dark theme.
	b.click("#theme-toggle")
	b.waitFor("the dark theme", `document.documentElement.dataset.theme === "dark"`)
	b.shot("editor-dark")
}

func TestBrowserAnswerAnApprovalFromTheEditor(t *testing.T) {
	rdb := storetest.Real(t)
	name, flowID := namedFlow(t, "Reply with approval")
	storetest.DeleteFlowKeys(t, rdb, flowID)
	base := serveForBrowser(t, t.TempDir())
	b := newBrowser(t, base)

	b.open("/")
	b.typeInto("#new-name", name)
	b.click(`.gallery-card[data-example="approval"] a`)
	b.waitFor("the example's six nodes", `document.querySelectorAll(".react-flow__node").length === 6`)
	b.click("#run-tab")
	b.click("#run-button")

	// The run stops at the approval and asks.
	b.waitText("#run-status", "waiting")
	b.waitText(`[data-node="review"]`, "waiting")
	b.waitText(`[aria-label="approval at review"]`, "Send this reply to Ada?")
	b.waitFor("the data to review", `document.querySelector('[aria-label="approval at review"] textarea').value.includes("your ticket is solved")`)
	b.shot("editor-approval")

	// Approve with an edited reply: the run goes on down the approved port.
	b.typeInto(`[aria-label="approval at review"] textarea`, `{"reply": "Dear Ada, fixed in 1.2."}`)
	b.run("approve", chromedp.Click(chromedp.Search(`//button[text()="Approve"]`)))
	b.waitText("#run-status", "succeeded")
	b.waitText("#run-output", `"sent": "Dear Ada, fixed in 1.2."`)
	b.waitText("#run-output", `"decision": "approve"`)
	b.waitFor("send done and drop not run", `document.querySelector('[data-node="send"]').dataset.status === "done" && document.querySelector('[data-node="drop"]').dataset.status === ""`)
	b.waitFor("drop listed as not run", `[...document.querySelectorAll('[aria-label="nodes in this run"] li')].some(li => li.innerText.includes("drop") && li.innerText.includes("not run"))`)

	// Another run waits at the approval; its page cancels it.
	dialogs := b.acceptDialogs()
	b.click("#run-button")
	b.waitText("#run-status", "waiting")
	b.click(".run-summary a.mono")
	b.waitText("#run-status", "waiting")
	b.waitText(".approval", "Send this reply to Ada?")
	b.click("#cancel-run")
	b.waitText("#run-status", "cancelled")
	if got := strings.Join(dialogs(), "\n"); !strings.Contains(got, "Cancel this run?") {
		t.Errorf("cancel did not ask first; dialogs: %q", got)
	}
}

func TestBrowserImportDuplicateExportDeleteAndTheUnsavedChangesGuard(t *testing.T) {
	rdb := storetest.Real(t)
	flowID := storetest.FlowID(t)
	storetest.DeleteFlowKeys(t, rdb, flowID)
	storetest.DeleteFlowKeys(t, rdb, flowID+"-copy")
	doc := strings.Replace(mustRead(t, filepath.Join("..", "..", "flows", "examples", "linear.json")), `"id": "linear"`, `"id": "`+flowID+`"`, 1)
	file := filepath.Join(t.TempDir(), "linear.json")
	if err := os.WriteFile(file, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	base := serveForBrowser(t, t.TempDir())
	b := newBrowser(t, base)
	dialogs := b.acceptDialogs()

	// Import a flow file: the editor opens on it.
	b.open("/")
	b.run("choose the file to import", chromedp.SetUploadFiles(chromedp.CSS("#import-file"), []string{file}))
	b.waitFor("the imported flow in the editor", `location.pathname.endsWith("/`+flowID+`") && document.querySelectorAll(".react-flow__node").length === 4`)

	// An edit autosaves as a draft; leaving then loses nothing and does not ask. (Leaving
	// before the server has an edit asks: TestBrowserDraftsSaveWithProblemsAndTheWorkingCopyAutosaves.)
	b.click(`.react-flow__node[data-id="greet"]`)
	b.typeInto(`input[aria-label="Label"]`, "Say hello")
	b.waitText("#save-state", "Draft saved")
	b.open("/")
	if got := strings.Join(dialogs(), "\n"); strings.Contains(got, "beforeunload") {
		t.Errorf("leaving with every edit autosaved asked; dialogs: %q", got)
	}
	row := fmt.Sprintf(`#flow-list tr[data-flow=%q]`, flowID)
	b.waitText(row, "Linear pipeline")
	b.waitText(row, "+ draft")

	// Export answers the file as a download.
	exported := evaluate[string](b, fmt.Sprintf(`fetch(document.querySelector('%s a[download]').href).then(r => r.headers.get("Content-Disposition") + " " + r.status)`, row), chromedp.EvalAwaitPromise)
	if !strings.Contains(exported, "attachment") || !strings.HasSuffix(exported, " 200") {
		t.Errorf("export answered %q", exported)
	}

	// Duplicate opens the copy; delete asks, then removes it from the list.
	b.click(row + ` button[type=submit]:not(.danger)`)
	b.waitFor("the copy in the editor", `location.pathname.endsWith("/`+flowID+`-copy") && document.querySelectorAll(".react-flow__node").length === 4`)
	b.open("/")
	copyRow := fmt.Sprintf(`#flow-list tr[data-flow=%q]`, flowID+"-copy")
	b.waitText(copyRow, "Linear pipeline (copy)")
	b.click(copyRow + ` button.danger`)
	b.waitFor("the copy gone and the original there", fmt.Sprintf(`!document.querySelector(%q) && !!document.querySelector(%q)`, copyRow, row))
	if got := strings.Join(dialogs(), "\n"); !strings.Contains(got, "Delete the flow "+flowID+"-copy?") {
		t.Errorf("delete did not ask first; dialogs: %q", got)
	}
}

func mustRead(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestBrowserWatchAModelStreamItsReply(t *testing.T) {
	rdb := storetest.Real(t)
	flowID := storetest.FlowID(t)
	storetest.DeleteFlowKeys(t, rdb, flowID)
	model := llmtest.New(t)
	hold := make(chan struct{})
	model.Reply(llmtest.Reply{Content: "Streams are append-only logs.", PromptTokens: 12, CompletionTokens: 7, Wait: hold})

	dir := t.TempDir()
	doc := map[string]any{
		"sluice": 1, "id": flowID, "name": "Explain",
		"nodes": []any{
			map[string]any{"id": "in", "type": "input", "position": map[string]any{"x": 0, "y": 0}, "params": map[string]any{"example": map[string]any{"topic": "Redis streams"}}},
			map[string]any{"id": "ask", "type": "llm", "position": map[string]any{"x": 260, "y": 0}, "params": map[string]any{"model": "test-model", "user": "Explain {{.topic}} in one line.", "stream": true}},
			map[string]any{"id": "out", "type": "output", "position": map[string]any{"x": 520, "y": 0}, "params": map[string]any{"value": "{answer}"}},
		},
		"edges": []any{map[string]any{"from": "in", "to": "ask"}, map[string]any{"from": "ask", "to": "out"}},
	}
	raw, _ := json.MarshalIndent(doc, "", "  ")
	if err := os.WriteFile(filepath.Join(dir, flowID+".json"), raw, 0o644); err != nil {
		t.Fatal(err)
	}
	base := serveForBrowserEnv(t, dir, []string{"OPENAI_BASE_URL=" + model.URL, "OPENAI_API_KEY=test-key", "SLUICE_PROVIDERS="})
	b := newBrowser(t, base)
	b.open("/flows/" + flowID)
	b.waitFor("the editor", `document.querySelectorAll(".react-flow__node").length === 3`)
	b.click("#run-tab")
	b.click("#run-button")

	// While the model has not answered, the node is running and the input is done.
	b.waitFor("ask running", `document.querySelector('[data-node="ask"]').dataset.status === "running"`)
	b.waitText(`[data-node="in"]`, "done")
	close(hold)

	// The reply streams into the node; it ends done with its tokens.
	b.waitText(`[data-node="ask"] .flow-node-stream`, "Streams are append-only logs.")
	b.waitText("#run-status", "succeeded")
	b.waitText(`[data-node="ask"]`, "12/7 tok")
	b.waitText("#run-output", `"answer": "Streams are append-only logs."`)
}

func TestBrowserRefusesAToolPortOnAStatePortAndSaysWhy(t *testing.T) {
	base := serveForBrowser(t, t.TempDir())
	b := newBrowser(t, base)
	b.open("/flows/new?name=Ports")
	b.waitFor("the palette", `document.querySelectorAll(".palette-item").length > 0`)

	// The palette's search narrows it down to what matches.
	b.typeInto(".palette-search", "fan-out")
	b.waitFor("only the fan-out", `[...document.querySelectorAll(".palette-item")].map(e => e.dataset.type).join() === "fanout"`)
	b.typeInto(".palette-search", "no such thing")
	b.waitText(".palette", "No component matches")
	b.run("clear the search", chromedp.Focus(chromedp.CSS(".palette-search")), chromedp.KeyEvent("a", chromedp.KeyModifiers(chromedp.ModifierCtrl)), chromedp.KeyEvent(kb.Backspace))
	b.waitFor("the whole palette again", `document.querySelectorAll(".palette-item").length > 5`)

	// A component can be added from the keyboard: focus it in the palette and press Enter.
	b.run("focus the transform in the palette", chromedp.Focus(chromedp.CSS(`.palette-item[data-type="transform"]`)))
	b.run("press Enter", chromedp.KeyEvent("\r"))
	b.waitFor("the transform on the canvas", `document.querySelectorAll(".react-flow__node").length === 1`)

	// An HTTP request dropped above it offers a tool port; a tool does not go into a state port.
	canvas := evaluate[point](b, `(() => { const r = document.querySelector(".react-flow").getBoundingClientRect(); return {X: r.x + r.width / 2, Y: r.y + r.height / 4}; })()`)
	b.dragUntil("an HTTP request onto the canvas", `.palette-item[data-type="http"]`, canvas, `document.querySelectorAll(".react-flow__node").length === 2`)
	b.drag("the HTTP request's tool port to the transform's input",
		b.center(`.react-flow__node[data-id="http"] .react-flow__handle.source[data-handleid="tool"]`),
		b.center(`.react-flow__node[data-id="transform"] .react-flow__handle.target[data-handleid="in"]`))
	b.waitText("#toast", "Not connected: a tool port cannot connect to a state port")
	if n := evaluate[int](b, `document.querySelectorAll(".react-flow__edge").length`); n != 0 {
		t.Errorf("%d edges after a refused connection, want 0", n)
	}

	// From the keyboard: the transform's inspector offers the input ports its output may
	// connect to; the tool's port is not among them.
	b.click(`.react-flow__node[data-id="transform"]`)
	b.waitFor("the transform's ports in the inspector", `!!document.querySelector('select[data-connect="out"]')`)
	options := evaluate[[]string](b, `[...document.querySelectorAll('select[data-connect="out"] option')].slice(1).map(o => o.textContent)`)
	if strings.Join(options, ",") != "http.in" {
		t.Errorf("the transform's output may connect to %q, want only http.in", options)
	}
	b.run("choose http.in", chromedp.Focus(chromedp.CSS(`select[data-connect="out"]`)), chromedp.KeyEvent(kb.ArrowDown))
	b.waitFor("an edge made from the keyboard", `document.querySelectorAll(".react-flow__edge").length === 1`)

	// Undo and redo, delete, copy and paste.
	b.click(".react-flow__pane")
	b.run("undo", chromedp.KeyEvent("z", chromedp.KeyModifiers(chromedp.ModifierCtrl)))
	b.waitFor("the edge undone", `document.querySelectorAll(".react-flow__edge").length === 0`)
	b.run("redo", chromedp.KeyEvent("z", chromedp.KeyModifiers(chromedp.ModifierCtrl, chromedp.ModifierShift)))
	b.waitFor("the edge back", `document.querySelectorAll(".react-flow__edge").length === 1`)
	b.click(`.react-flow__node[data-id="http"]`)
	b.run("delete", chromedp.KeyEvent(kb.Delete))
	b.waitFor("the HTTP request and its edge gone", `document.querySelectorAll(".react-flow__node").length === 1 && document.querySelectorAll(".react-flow__edge").length === 0`)
	b.click(`.react-flow__node[data-id="transform"]`)
	b.run("copy and paste", chromedp.KeyEvent("c", chromedp.KeyModifiers(chromedp.ModifierCtrl)), chromedp.KeyEvent("v", chromedp.KeyModifiers(chromedp.ModifierCtrl)))
	b.waitFor("a pasted copy", `!!document.querySelector('.react-flow__node[data-id="transform-2"]')`)
}

func TestBrowserRetryADeadLetterFromTheQueuesPage(t *testing.T) {
	rdb := storetest.Real(t)
	flowID := storetest.FlowID(t)
	storetest.DeleteFlowKeys(t, rdb, flowID)

	// A service that is down until the test fixes it.
	var healthy atomic.Bool
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

	dir := t.TempDir()
	doc := map[string]any{
		"sluice": 1, "id": flowID, "name": "Stock check",
		"settings": map[string]any{"max_attempts": 1},
		"nodes": []any{
			map[string]any{"id": "in", "type": "input", "position": map[string]any{"x": 0, "y": 0}},
			map[string]any{"id": "stock", "type": "http", "position": map[string]any{"x": 260, "y": 0}, "params": map[string]any{"url": "http://" + ln.Addr().String() + "/stock"}},
			map[string]any{"id": "out", "type": "output", "position": map[string]any{"x": 520, "y": 0}, "params": map[string]any{"value": ".response.body"}},
		},
		"edges": []any{map[string]any{"from": "in", "to": "stock"}, map[string]any{"from": "stock", "to": "out"}},
	}
	raw, _ := json.MarshalIndent(doc, "", "  ")
	if err := os.WriteFile(filepath.Join(dir, flowID+".json"), raw, 0o644); err != nil {
		t.Fatal(err)
	}
	base := serveForBrowser(t, dir, "--http-allow", ln.Addr().String())
	b := newBrowser(t, base)

	// Run it from the editor while the service is down: the run fails, the step is a dead letter.
	b.open("/flows/" + flowID)
	b.waitFor("the editor", `document.querySelectorAll(".react-flow__node").length === 3`)
	b.click("#run-tab")
	b.click("#run-button")
	b.waitText("#run-status", "failed")
	b.waitText(`[data-node="stock"]`, "failed")
	b.waitText(`[data-node="stock"] .flow-node-badges`, "1 dead")
	b.shot("editor-dead-letter")

	// The queues page shows the dead letter with its error and attempts.
	b.open("/queues?flow=" + flowID)
	b.waitText("#live-status", "live")
	b.waitText("#dead-letters tbody", "503")
	b.waitFor("one dead letter on the stock stream", `document.querySelector('#queue-rows tr[data-node="stock"] td:last-child')?.innerText.trim() === "1"`)
	attempts := evaluate[string](b, `document.querySelector("#dead-letters tbody tr td.num").innerText`)
	if strings.TrimSpace(attempts) != "1" {
		t.Errorf("the dead letter shows %q attempts, want 1", attempts)
	}
	b.shot("queues")

	// Fix the service and retry: the dead letter goes away and the run succeeds.
	healthy.Store(true)
	b.click(`#dead-letters button[data-post$="/retry"]`)
	b.waitFor("the dead letter to go", `document.querySelectorAll("#dead-letters tbody tr").length === 0 && !document.querySelector("#dead-letters .dead-empty").hidden`)
	b.waitFor("no dead letters on the stock stream", `document.querySelector('#queue-rows tr[data-node="stock"] td:last-child')?.innerText.trim() === "0"`)
	b.open("/runs?flow=" + flowID)
	b.waitText("#run-list", "succeeded")
	runLink := evaluate[string](b, `document.querySelector("#run-list a.mono").getAttribute("href")`)
	b.open(runLink)
	b.waitText("#run-status", "succeeded")
	b.waitText("#run-output", `"stock": 7`)

	// The service fails again while the queues page is open: a new dead letter shows up
	// without a reload; discarding it (after a confirmation) removes it.
	healthy.Store(false)
	b.open("/queues?flow=" + flowID)
	b.waitText("#live-status", "live")
	dialogs := b.acceptDialogs()
	res, err := http.Post(base+"/api/flows/"+flowID+"/runs", "application/json", strings.NewReader(`{"input": {}}`))
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusAccepted {
		t.Fatalf("start a run: %s", res.Status)
	}
	b.waitText("#dead-letters tbody", "503")
	b.click(`#dead-letters button.danger`)
	b.waitFor("the discarded dead letter to go", `document.querySelectorAll("#dead-letters tbody tr").length === 0`)
	if got := strings.Join(dialogs(), "\n"); !strings.Contains(got, "Discard this dead letter?") {
		t.Errorf("discard did not ask first; dialogs: %q", got)
	}
}
