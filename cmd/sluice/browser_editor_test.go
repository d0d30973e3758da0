package main

// Browser tests of the editor's rough edges a new user hits (issue 27): the side panel's
// tabs at every width, the runs and run pages on a phone, keyboard shortcuts and undo in
// text fields, the run a reload shows, and nodes that keep clear of one another.

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
	"github.com/sluicehq/sluice/flows/nodes/llmtest"
	"github.com/sluicehq/sluice/store/storetest"
)

// resize makes the window w × h CSS pixels; phone makes it a phone's: a touch screen at
// three device pixels per CSS pixel, laid out by the page's viewport meta tag.
func (b *browser) resize(w, h int64, phone bool) {
	b.t.Helper()
	opts := []chromedp.EmulateViewportOption{}
	if phone {
		opts = append(opts, chromedp.EmulateScale(3), chromedp.EmulateMobile, chromedp.EmulateTouch)
	}
	b.run(fmt.Sprintf("resize the window to %d×%d", w, h), chromedp.EmulateViewport(w, h, opts...))
}

// noSidewaysScroll fails the test when the page, or anything in it, is wider than the
// window (a person then has to scroll sideways to see it) or has been scrolled sideways.
func (b *browser) noSidewaysScroll(where string) {
	b.t.Helper()
	// A page that is loading or reloading (a live run page reloads as its run moves on)
	// has no document to measure yet: that counts as not yet, as in waitFor.
	var got *string
	for deadline := time.Now().Add(limit); got == nil; {
		if got = evaluate[*string](b, `(() => {
		const out = [];
		const root = document.scrollingElement;
		if (!root || !document.documentElement) return null;
		// On a phone a page wider than the screen widens the window (innerWidth) and is
		// shown zoomed out: the screen is the layout viewport, the root's client width.
		const screen = document.documentElement.clientWidth;
		if (root.scrollWidth > screen + 1) out.push("the page is " + root.scrollWidth + " px wide on a screen of " + screen);
		if (innerWidth > screen + 1) out.push("the page is zoomed out to a window of " + innerWidth + " px on a screen of " + screen);
		if (scrollX !== 0) out.push("the page is scrolled " + scrollX + " px sideways");
		for (const el of document.querySelectorAll("body *")) {
			if (el.scrollLeft !== 0 && !el.closest(".react-flow") && getComputedStyle(el).overflowX !== "auto") out.push((el.id || el.className || el.tagName) + " is scrolled " + el.scrollLeft + " px sideways");
		}
		return out.join("; ");
	})()`); got == nil {
			if time.Now().After(deadline) {
				b.t.Fatalf("%s: the page never finished loading", where)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	if *got != "" {
		b.shot("failure")
		b.t.Errorf("%s: %s", where, *got)
	}
}

// seen returns why the element a person would look for is not wholly in the window and
// on top where it is drawn ("" when it is): clipped by a scrolling parent, covered, off
// the screen.
func (b *browser) seen(sel string) string {
	b.t.Helper()
	b.waitFor(sel, fmt.Sprintf(`!!document.querySelector(%q)`, sel))
	return evaluate[string](b, fmt.Sprintf(`(() => {
		const el = document.querySelector(%q);
		const r = el.getBoundingClientRect();
		if (r.width < 1 || r.height < 1) return "it has no size";
		const w = document.documentElement.clientWidth;
		if (r.left < 0 || r.top < 0 || r.right > w + 0.5 || r.bottom > innerHeight + 0.5) return "it is at " + JSON.stringify(r) + ", outside the " + w + "×" + innerHeight + " window";
		for (let p = el.parentElement; p; p = p.parentElement) {
			const s = getComputedStyle(p);
			if (s.overflowX === "visible" && s.overflowY === "visible") continue;
			const q = p.getBoundingClientRect();
			if (r.left < q.left - 0.5 || r.right > q.right + 0.5 || r.top < q.top - 0.5 || r.bottom > q.bottom + 0.5) return "it is clipped by " + (p.id || p.className || p.tagName);
		}
		const at = document.elementFromPoint(r.left + r.width / 2, r.top + r.height / 2);
		if (!at || !(at === el || el.contains(at))) return "it is covered by " + (at ? at.id || at.className || at.tagName : "nothing");
		return "";
	})()`, sel))
}

// tap clicks the middle of what sel shows with the mouse (or a finger, on a phone), where
// a person sees it; it does not scroll it into view first.
func (b *browser) tap(sel string) {
	b.t.Helper()
	if why := b.seen(sel); why != "" {
		b.shot("failure")
		b.t.Fatalf("cannot tap %s: %s", sel, why)
	}
	c := evaluate[point](b, fmt.Sprintf(`(() => { const r = document.querySelector(%q).getBoundingClientRect(); return {X: r.x + r.width / 2, Y: r.y + r.height / 2}; })()`, sel))
	b.run("tap "+sel, chromedp.MouseClickXY(c.X, c.Y))
}

var sidePanelTabs = []string{"#inspect-tab", "#problems-tab", "#run-tab", "#history-tab", "#schedules-tab", "#chat-tab", "#api-tab"}

// everyTabShowsAndOpens checks that each tab of the side panel is in view, whole and
// on top, and that clicking it where it shows opens it without moving anything sideways.
func (b *browser) everyTabShowsAndOpens(where string) {
	b.t.Helper()
	for _, tab := range sidePanelTabs {
		if why := b.seen(tab); why != "" {
			b.shot("failure")
			b.t.Errorf("%s: the tab %s cannot be seen: %s", where, tab, why)
			continue
		}
		b.tap(tab)
		b.waitFor(tab+" open", fmt.Sprintf(`document.querySelector(%q).getAttribute("aria-selected") === "true"`, tab))
		b.noSidewaysScroll(fmt.Sprintf("%s, after clicking %s", where, tab))
	}
}

// Bug 4: the side panel's seven tabs all show and open, at 1280×720 and narrower, with a
// badge on a tab too.
func TestBrowserEveryTabOfTheSidePanelShowsAndOpens(t *testing.T) {
	rdb := storetest.Real(t)
	flowID := storetest.FlowID(t)
	storetest.DeleteFlowKeys(t, rdb, flowID)
	dir := t.TempDir()
	writeDoc(t, dir, exampleDoc(t, "linear", flowID))
	base := serveForBrowser(t, dir)
	b := newBrowser(t, base)
	b.resize(1280, 720, false)
	b.open("/flows/" + flowID)
	b.waitFor("the editor", `document.querySelectorAll(".react-flow__node").length === 4`)
	b.everyTabShowsAndOpens("at 1280×720")
	b.shot("editor-tabs")

	// A run puts its status on the Test run tab: the tabs still all show.
	b.tap("#run-tab")
	b.click("#run-button")
	b.waitText("#run-status", "succeeded")
	b.waitText("#run-tab", "succeeded")
	b.everyTabShowsAndOpens("at 1280×720 with a run's badge")

	b.resize(1024, 768, false)
	b.everyTabShowsAndOpens("at 1024×768")
}

// Bug 10: on a 390×844 phone the runs list and a run's page fit the screen (nothing to
// scroll sideways), their links and buttons can be tapped, and the editor's tabs show.
func TestBrowserTheRunsAndRunPagesWorkOnAPhone(t *testing.T) {
	rdb := storetest.Real(t)
	flowID := storetest.FlowID(t)
	storetest.DeleteFlowKeys(t, rdb, flowID)
	dir := t.TempDir()
	writeDoc(t, dir, exampleDoc(t, "linear", flowID))
	base := serveForBrowser(t, dir)
	var started struct {
		Run string `json:"run"`
	}
	post(t, base+"/api/flows/"+flowID+"/runs", `{"input": {"name": "Ada"}}`, http.StatusAccepted, &started)
	res, err := http.Get(base + "/api/flows/" + flowID + "/runs/" + started.Run + "?wait=30s")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()

	b := newBrowser(t, base)
	b.resize(390, 844, true)
	b.open("/runs?flow=" + flowID)
	b.waitText("#run-list", "succeeded")
	b.noSidewaysScroll("the runs page")
	b.shot("phone-runs")
	link := fmt.Sprintf(`#run-list tr[data-run=%q] a.mono`, started.Run)
	b.tap(link)

	// The run page: its steps, the step's detail and the fork form fit the screen.
	b.waitText("#run-status", "succeeded")
	b.waitFor("the steps", `document.querySelectorAll("#timeline li").length >= 4`)
	b.noSidewaysScroll("the run page")
	for _, sel := range []string{"#run-status", "#open-on-canvas", `#timeline li[data-node="greet"] .tl-dur`} {
		b.run("scroll "+sel+" into view", chromedp.Evaluate[chromedp.Void](fmt.Sprintf(`document.querySelector(%q).scrollIntoView({block: "center"})`, sel)))
		if why := b.seen(sel); why != "" {
			t.Errorf("on the run page %s cannot be seen: %s", sel, why)
		}
	}
	b.shot("phone-run")
	b.tap(`#timeline li[data-node="greet"] .tl-node`)
	b.waitText("#checkpoint", "Changes to the state")
	b.noSidewaysScroll("the run page with a step open")
	b.run("scroll to the fork form", chromedp.Evaluate[chromedp.Void](`document.querySelector("#fork-button").scrollIntoView({block: "center"})`))
	for _, sel := range []string{"#fork-state", "#fork-button"} {
		if why := b.seen(sel); why != "" {
			t.Errorf("on the run page %s cannot be seen: %s", sel, why)
		}
	}
	b.shot("phone-run-step")

	// The run on the canvas: the editor fits the phone, with every tab of its panel.
	b.run("scroll to the top", chromedp.Evaluate[chromedp.Void](`scrollTo(0, 0)`))
	b.tap("#open-on-canvas")
	b.waitFor("the editor", `document.querySelectorAll(".react-flow__node").length === 4`)
	b.waitText("#run-status", "succeeded")
	b.noSidewaysScroll("the editor")
	if c := evaluate[struct{ W, H float64 }](b, `(() => { const r = document.querySelector(".react-flow").getBoundingClientRect(); return {W: r.width, H: r.height}; })()`); c.W < 300 || c.H < 250 {
		t.Errorf("on a phone the canvas is %.0f×%.0f px: too small to work on", c.W, c.H)
	}
	b.shot("phone-editor")
	for _, tab := range sidePanelTabs {
		b.run("scroll "+tab+" into view", chromedp.Evaluate[chromedp.Void](fmt.Sprintf(`document.querySelector(%q).scrollIntoView({block: "center"})`, tab)))
		if why := b.seen(tab); why != "" {
			t.Errorf("on a phone the tab %s cannot be seen: %s", tab, why)
			continue
		}
		b.tap(tab)
		b.waitFor(tab+" open", fmt.Sprintf(`document.querySelector(%q).getAttribute("aria-selected") === "true"`, tab))
		b.noSidewaysScroll("the editor on a phone, after tapping " + tab)
	}
}

// Bug 10: Ctrl+A selects every node and note, Esc lets go of them, Ctrl+Enter runs the
// flow (from the canvas and from the input field), and Ctrl+Z in a text field undoes the
// typing as the browser does, in one step, without undoing the graph.
func TestBrowserKeyboardSelectsEscapesRunsAndUndoesTypingAsTheBrowserDoes(t *testing.T) {
	rdb := storetest.Real(t)
	flowID := storetest.FlowID(t)
	storetest.DeleteFlowKeys(t, rdb, flowID)
	dir := t.TempDir()
	writeDoc(t, dir, exampleDoc(t, "linear", flowID))
	base := serveForBrowser(t, dir)
	b := newBrowser(t, base)
	b.open("/flows/" + flowID)
	b.waitFor("the editor", `document.querySelectorAll(".react-flow__node").length === 4`)

	// A note, then Ctrl+A on the canvas: all four nodes and the note are selected.
	b.click("#add-note")
	b.waitFor("a note", `!!document.querySelector(".canvas-note textarea")`)
	b.click(".react-flow__pane")
	b.run("press Ctrl+A", chromedp.KeyEvent("a", chromedp.KeyModifiers(chromedp.ModifierCtrl)))
	b.waitFor("every node and the note selected", `document.querySelectorAll(".react-flow__node.selected").length === 5`)
	b.run("press Escape", chromedp.KeyEvent(kb.Escape))
	b.waitFor("nothing selected", `document.querySelectorAll(".react-flow__node.selected").length === 0`)
	// In a text field Ctrl+A selects its text, not the nodes.
	b.inspect("greet")
	b.run("press Ctrl+A in a field", chromedp.Focus(chromedp.CSS(`input[aria-label="Label"]`)), chromedp.KeyEvent("a", chromedp.KeyModifiers(chromedp.ModifierCtrl)))
	if n := evaluate[int](b, `document.querySelectorAll(".react-flow__node.selected").length`); n != 1 {
		t.Errorf("Ctrl+A in a text field selected %d nodes, want greet alone", n)
	}

	// Ctrl+Z in a text field undoes what was typed there, as the browser does: the whole
	// word at once, not a character at a time, and not the note added before.
	expr := `textarea[data-param="expr"]`
	before := evaluate[string](b, `document.querySelector('textarea[data-param="expr"]').value`)
	b.run("type into the expression", chromedp.Focus(chromedp.CSS(expr)), chromedp.KeyEvent(kb.End, chromedp.KeyModifiers(chromedp.ModifierCtrl)), chromedp.SendKeys(chromedp.CSS(expr), " | ."))
	b.waitFor("the typing on the canvas", `document.querySelector('[data-node="greet"]').innerText.includes("| .")`)
	b.run("press Ctrl+Z in the field", chromedp.KeyEvent("z", chromedp.KeyModifiers(chromedp.ModifierCtrl)))
	b.waitFor("the field as it was", fmt.Sprintf(`document.querySelector('textarea[data-param="expr"]').value === %q`, before))
	b.waitFor("the node as it was", `!document.querySelector('[data-node="greet"]').innerText.includes("|")`)
	b.run("press Ctrl+Z in the field again", chromedp.KeyEvent("z", chromedp.KeyModifiers(chromedp.ModifierCtrl)))
	if n := evaluate[int](b, `document.querySelectorAll(".canvas-note").length`); n != 1 {
		t.Errorf("Ctrl+Z in a text field undid the graph: %d notes, want the one added", n)
	}
	if got := evaluate[string](b, `document.querySelector('textarea[data-param="expr"]').value`); got != before {
		t.Errorf("a second Ctrl+Z in the field left %q, want %q", got, before)
	}

	// Ctrl+Enter on the canvas runs the flow (saving first): the Test run tab shows it.
	b.click(".react-flow__pane")
	b.run("press Ctrl+Enter", chromedp.KeyEvent("\r", chromedp.KeyModifiers(chromedp.ModifierCtrl)))
	b.waitText("#run-status", "succeeded")
	first := evaluate[string](b, `document.querySelector("#run-summary-id").innerText`)
	// ... and from the input field, with what it holds.
	b.typeInto("#run-input", `{"name": "Grace"}`)
	b.run("press Ctrl+Enter in the input", chromedp.KeyEvent("\r", chromedp.KeyModifiers(chromedp.ModifierCtrl)))
	b.waitFor("a second run", fmt.Sprintf(`document.querySelector("#run-summary-id")?.innerText !== %q`, first))
	b.waitText("#run-status", "succeeded")
	b.waitText("#run-output", "HELLO, GRACE!")
	b.click(".react-flow__pane")
	b.run("press ?", chromedp.KeyEvent("?"))
	for _, want := range []string{"Ctrl/⌘ A", "Ctrl/⌘ Enter", "Esc"} {
		b.waitText("#keyboard-help", want)
	}
}

// Bug 9: after a run opened from its page (?run=), a later test run is the one the URL
// names, so a reload shows it and not the older one.
func TestBrowserAReloadShowsTheLatestTestRun(t *testing.T) {
	rdb := storetest.Real(t)
	flowID := storetest.FlowID(t)
	storetest.DeleteFlowKeys(t, rdb, flowID)
	dir := t.TempDir()
	writeDoc(t, dir, exampleDoc(t, "linear", flowID))
	base := serveForBrowser(t, dir)
	var old struct {
		Run string `json:"run"`
	}
	post(t, base+"/api/flows/"+flowID+"/runs", `{"input": {"name": "Old"}}`, http.StatusAccepted, &old)

	b := newBrowser(t, base)
	b.open("/flows/" + flowID + "?run=" + old.Run)
	b.waitFor("the old run", fmt.Sprintf(`document.querySelector("#run-summary-id")?.innerText === %q`, old.Run))
	b.waitText("#run-status", "succeeded")
	b.typeInto("#run-input", `{"name": "New"}`)
	b.click("#run-button")
	b.waitFor("a new run", fmt.Sprintf(`!!document.querySelector("#run-summary-id") && document.querySelector("#run-summary-id").innerText !== %q`, old.Run))
	b.waitText("#run-status", "succeeded")
	latest := evaluate[string](b, `document.querySelector("#run-summary-id").innerText`)
	if got := evaluate[string](b, `location.search`); got != "?run="+latest {
		t.Errorf("after a test run the URL's query is %q, want ?run=%s", got, latest)
	}
	b.run("reload", chromedp.Reload(), chromedp.WaitReady(chromedp.CSS("body")))
	b.waitFor("the latest run after a reload", fmt.Sprintf(`document.querySelector("#run-summary-id")?.innerText === %q`, latest))
	b.waitText("#run-output", "HELLO, NEW!")
}

type nodeBox struct {
	ID         string
	X, Y, W, H float64
}

// nodeBoxes returns where every node and note is drawn.
func (b *browser) nodeBoxes() []nodeBox {
	b.t.Helper()
	return evaluate[[]nodeBox](b, `[...document.querySelectorAll(".react-flow__node")].map(n => { const r = n.getBoundingClientRect(); return {ID: n.dataset.id, X: r.x, Y: r.y, W: r.width, H: r.height}; })`)
}

// overlaps lists the pairs of nodes drawn over one another.
func overlaps(boxes []nodeBox) []string {
	var out []string
	for i, a := range boxes {
		for _, c := range boxes[i+1:] {
			if a.X < c.X+c.W && c.X < a.X+a.W && a.Y < c.Y+c.H && c.Y < a.Y+a.H {
				out = append(out, fmt.Sprintf("%s %+v and %s %+v", a.ID, a, c.ID, c))
			}
		}
	}
	return out
}

// Bug 8: nodes added with Enter and nodes dropped onto others land clear of them, and a
// node that streams a long reply does not grow over its neighbours.
func TestBrowserNodesLandAndGrowClearOfOneAnother(t *testing.T) {
	t.Run("added", func(t *testing.T) {
		base := serveForBrowser(t, t.TempDir())
		b := newBrowser(t, base)
		b.open("/flows/new?name=Crowded")
		b.waitFor("the palette", `document.querySelectorAll(".palette-item").length > 0`)
		for i, kind := range []string{"input", "transform", "template", "output"} {
			b.run("focus "+kind+" in the palette", chromedp.Focus(chromedp.CSS(fmt.Sprintf(`.palette-item[data-type=%q]`, kind))))
			b.run("press Enter", chromedp.KeyEvent("\r"))
			b.waitFor(fmt.Sprintf("%d nodes", i+1), fmt.Sprintf(`document.querySelectorAll(".react-flow__node").length === %d`, i+1))
		}
		if o := overlaps(b.nodeBoxes()); len(o) > 0 {
			t.Errorf("nodes added with Enter overlap: %s", strings.Join(o, "; "))
		}
		// Dropped onto the middle of a node, a new one lands beside it.
		target := b.center(`.react-flow__node[data-id="transform"]`)
		b.dragUntil("an LLM onto the transform", `.palette-item[data-type="llm"]`, target, `document.querySelectorAll(".react-flow__node").length === 5`)
		b.waitFor("the LLM drawn", `!!document.querySelector('.react-flow__node[data-id="llm"]')`)
		if o := overlaps(b.nodeBoxes()); len(o) > 0 {
			t.Errorf("a node dropped onto another overlaps: %s", strings.Join(o, "; "))
		}
	})

	t.Run("streaming", func(t *testing.T) {
		rdb := storetest.Real(t)
		flowID := storetest.FlowID(t)
		storetest.DeleteFlowKeys(t, rdb, flowID)
		model := llmtest.New(t)
		long := strings.Repeat("A stream is an append-only log of entries, each with an id. ", 12)
		model.Reply(llmtest.Reply{Content: long}, llmtest.Reply{Content: long})
		dir := t.TempDir()
		at := func(x, y int) map[string]any { return map[string]any{"x": x, "y": y} }
		tell := func(id string) map[string]any {
			return map[string]any{"id": id, "type": "llm", "position": at(0, 0), "params": map[string]any{"model": "test-model", "user": "Tell me about {{.topic}}.", "stream": true, "as": id}}
		}
		// Two branches that both stream, one above the other: whichever auto-layout puts on
		// top grows towards the other.
		writeDoc(t, dir, map[string]any{
			"sluice": 1, "id": flowID, "name": "Two branches",
			"nodes": []any{
				map[string]any{"id": "in", "type": "input", "position": at(0, 0), "params": map[string]any{"example": map[string]any{"topic": "Redis streams"}}},
				tell("tell"), tell("retell"),
				map[string]any{"id": "told", "type": "output", "position": at(0, 0), "params": map[string]any{"value": "{tell}"}},
				map[string]any{"id": "retold", "type": "output", "position": at(0, 0), "params": map[string]any{"value": "{retell}"}},
			},
			"edges": []any{
				map[string]any{"from": "in", "to": "tell"}, map[string]any{"from": "in", "to": "retell"},
				map[string]any{"from": "tell", "to": "told"}, map[string]any{"from": "retell", "to": "retold"},
			},
		})
		base := serveForBrowserEnv(t, dir, []string{"OPENAI_BASE_URL=" + model.URL, "OPENAI_API_KEY=test-key", "SLUICE_PROVIDERS="})
		b := newBrowser(t, base)
		b.open("/flows/" + flowID)
		b.waitFor("the editor", `document.querySelectorAll(".react-flow__node").length === 5`)
		// Auto-layout puts the two branches one above the other.
		b.click(".react-flow__pane")
		b.run("press l", chromedp.KeyEvent("l"))
		b.waitFor("the branches apart", `Math.abs(document.querySelector('.react-flow__node[data-id="tell"]').getBoundingClientRect().y - document.querySelector('.react-flow__node[data-id="retell"]').getBoundingClientRect().y) > 40`)
		if o := overlaps(b.nodeBoxes()); len(o) > 0 {
			t.Fatalf("nodes overlap after auto-layout: %s", strings.Join(o, "; "))
		}
		b.click("#run-tab")
		b.click("#run-button")
		b.waitText("#run-status", "succeeded")
		for _, n := range []string{"tell", "retell"} {
			b.waitText(fmt.Sprintf(`[data-node=%q] .flow-node-stream`, n), "entries, each with an id.")
		}
		if o := overlaps(b.nodeBoxes()); len(o) > 0 {
			t.Errorf("after streaming its reply a node overlaps its neighbour: %s", strings.Join(o, "; "))
		}
		b.shot("editor-streamed")
	})
}

// One node run alone from its inspector, as n8n's "execute step": on a state typed in,
// then on the state it received in the last run, as the working copy has the node (an
// edit not saved yet), and nothing is stored.
func TestBrowserRunOneNodeAloneOnAGivenOrTheLastRunsInput(t *testing.T) {
	rdb := storetest.Real(t)
	flowID := storetest.FlowID(t)
	storetest.DeleteFlowKeys(t, rdb, flowID)
	dir := t.TempDir()
	writeDoc(t, dir, exampleDoc(t, "linear", flowID))
	base := serveForBrowser(t, dir)
	post(t, base+"/api/flows/"+flowID+"/runs?wait=20s", `{"input": {"name": "Ada"}}`, http.StatusOK, nil)

	b := newBrowser(t, base)
	b.open("/flows/" + flowID)
	b.waitFor("the canvas", `!!document.querySelector('[data-node="shout"]')`)
	b.click(`[data-node="shout"]`)
	b.waitFor("the shout node's inspector", `!!document.querySelector('.try-node')`)
	b.click(".try-node summary")
	b.typeInto("#try-state", `{"greeting": "hey there"}`)
	b.click("#try-run")
	b.waitText("#try-output", `"HEY THERE"`)

	b.click("#try-from-run")
	b.waitFor("the state of the last run", `document.querySelector("#try-state").value.includes("Hello, Ada!")`)
	b.click("#try-run")
	b.waitText("#try-output", `"HELLO, ADA!"`)
	b.shot("try-node")

	res, err := http.Get(base + "/api/flows/" + flowID + "/runs")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var runs struct {
		Total int `json:"total"`
	}
	json.NewDecoder(res.Body).Decode(&runs)
	if runs.Total != 1 {
		t.Errorf("%d runs: running a node alone must not make one", runs.Total)
	}
}
