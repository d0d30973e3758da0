package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/sluicehq/sluice/flows/engine"
	"github.com/sluicehq/sluice/store/storetest"
)

// A saved flow edited and saved again with a note: the History tab lists the versions,
// shows what the second changed on the canvas, compares any two (a node and edges added
// one way, removed the other), and rolls back to the first.
func TestBrowserHistoryShowsChangesAndRollsBack(t *testing.T) {
	rdb := storetest.Real(t)
	dir := t.TempDir()
	flowID, path := writeExampleFlow(t, dir, "linear", nil)
	storetest.DeleteFlowKeys(t, rdb, flowID)
	first := mustRead(t, path)
	base := serveForBrowser(t, dir)
	b := newBrowser(t, base)
	dialogs := b.acceptDialogs()

	b.open("/flows/" + flowID)
	b.waitFor("the editor", `document.querySelectorAll(".react-flow__node").length === 4`)
	b.click("#history-tab")
	b.waitFor("the first version", `document.querySelectorAll(".version").length === 1`)

	b.click(`.react-flow__node[data-id="greet"]`)
	b.click(`.tabs button:first-child`) // Inspect
	b.typeInto(`input[aria-label="Label"]`, "Say hello")
	b.click("#history-tab")
	b.typeInto("#save-note", "a friendlier label")
	b.click("#save-button")
	b.waitText("#save-state", "Saved")
	b.waitFor("two versions", `document.querySelectorAll(".version").length === 2`)
	b.waitText(".version.current", "a friendlier label")

	// What the new version changed, on the canvas.
	b.run("show the changes of the current version", chromedp.Click(chromedp.CSS(`.version.current .version-actions button:nth-child(2)`)))
	b.waitText("#view-banner", "nodes: 1 changed")
	b.waitFor("greet marked changed", `document.querySelector('[data-node="greet"]').dataset.mark === "changed"`)
	b.waitText("#version-changes", "label")
	b.waitText("#version-changes", "Say hello")
	b.shot("editor-version-diff")
	b.click("#back-to-editing")
	b.waitFor("the banner gone", `!document.querySelector("#view-banner")`)

	// A third version, saved elsewhere, puts a node between shout and out: one node and
	// two edges added, one edge removed.
	status := evaluate[int](b, `(async () => {
		const id = `+fmt.Sprintf("%q", flowID)+`;
		const d = await (await fetch("/api/flows/" + id)).json();
		d.nodes.push({id: "exclaim", type: "transform", position: {x: 960, y: 0}, params: {expr: "{greeting: (.greeting + \"!\")}"}});
		d.edges = d.edges.filter((e) => !(e.from === "shout" && e.to === "out"));
		d.edges.push({from: "shout", to: "exclaim"}, {from: "exclaim", to: "out"});
		const res = await fetch("/api/flows/" + id + "?message=exclaim", {method: "PUT", headers: {"Content-Type": "application/json"}, body: JSON.stringify(d)});
		return res.status;
	})()`, chromedp.EvalAwaitPromise)
	if status != 200 {
		t.Fatalf("saving the third version: %v", status)
	}
	b.open("/flows/" + flowID)
	b.waitFor("the editor on the third version", `document.querySelectorAll(".react-flow__node").length === 5`)
	b.click("#history-tab")
	b.waitFor("three versions", `document.querySelectorAll(".version").length === 3`)
	versions := evaluate[[]string](b, `[...document.querySelectorAll(".version")].map((v) => v.dataset.version)`)
	v3, v1 := versions[0], versions[2]

	// Any two versions compare, in either direction: the first to the third ...
	b.choose("#compare-from", v1)
	b.choose("#compare-to", v3)
	b.click("#compare-button")
	b.waitText("#view-banner", "nodes: 1 added, 1 changed; edges: 2 added, 1 removed")
	b.waitFor("exclaim marked added", `document.querySelector('[data-node="exclaim"]')?.dataset.mark === "added"`)
	b.waitFor("greet marked changed", `document.querySelector('[data-node="greet"]').dataset.mark === "changed"`)
	b.waitFor("two edges added and one removed on the canvas", `document.querySelectorAll(".react-flow__edge.edge-added").length === 2 && document.querySelectorAll(".react-flow__edge.edge-removed").length === 1`)
	b.waitText("#version-changes", "added node exclaim")
	b.waitText("#version-changes", "removed edge shout.out → out.in")
	b.shot("editor-version-compare")
	// ... and back from the third to the first.
	b.choose("#compare-from", v3)
	b.choose("#compare-to", v1)
	b.click("#compare-button")
	b.waitText("#view-banner", "nodes: 1 removed, 1 changed; edges: 1 added, 2 removed")
	b.waitFor("exclaim marked removed", `document.querySelector('[data-node="exclaim"]')?.dataset.mark === "removed"`)
	b.waitFor("one edge added and two removed on the canvas", `document.querySelectorAll(".react-flow__edge.edge-added").length === 1 && document.querySelectorAll(".react-flow__edge.edge-removed").length === 2`)
	b.waitText("#version-changes", "removed node exclaim")
	b.waitText("#version-changes", "added edge shout.out → out.in")
	// The same version twice is no comparison.
	b.choose("#compare-to", v3)
	b.waitFor("compare disabled", `document.querySelector("#compare-button").disabled`)
	b.click("#back-to-editing")
	b.waitFor("the banner gone", `!document.querySelector("#view-banner")`)

	// A note added after the first version (notes are layout, not part of a version).
	b.click("#add-note")
	b.waitFor("a note", `!!document.querySelector(".canvas-note textarea")`)
	b.run("write on it", chromedp.SendKeys(chromedp.CSS(".canvas-note textarea"), "Kept across rollbacks."))
	b.click(".react-flow__pane")
	b.waitText("#save-state", "Draft saved")

	// Open the first version read-only, then roll back to it.
	first1 := fmt.Sprintf(`.version[data-version=%q]`, v1)
	b.run("open the first version", chromedp.Click(chromedp.CSS(first1+` .version-actions button`)))
	b.waitText("#view-banner", "read-only")
	b.waitFor("greet without its label", `!document.querySelector('[data-node="greet"]').innerText.includes("Say hello")`)
	b.run("roll back", chromedp.Click(chromedp.CSS(first1+` .version-actions button.danger`)))
	b.waitFor("the editor reloaded on the first version", `!document.querySelector("#view-banner") && document.querySelectorAll(".react-flow__node-flow").length === 4 && !document.body.innerText.includes("Say hello")`)
	if got := strings.Join(dialogs(), "\n"); !strings.Contains(got, "Roll back to version") {
		t.Errorf("rollback did not ask first; dialogs: %q", got)
	}
	// Bug 5 (issue 27): the note stays, on the canvas and in the file; the rest of the
	// file is the first version as it was saved.
	b.waitFor("the note after the rollback", `document.querySelector(".canvas-note textarea")?.value === "Kept across rollbacks."`)
	got := mustRead(t, path)
	var doc map[string]any
	if err := json.Unmarshal([]byte(got), &doc); err != nil {
		t.Fatal(err)
	}
	notes, _ := doc["notes"].([]any)
	if len(notes) != 1 || !strings.Contains(fmt.Sprint(notes[0]), "Kept across rollbacks.") {
		t.Errorf("the file after rollback has the notes %v, want the one added after the first version", doc["notes"])
	}
	delete(doc, "notes")
	var want map[string]any
	json.Unmarshal([]byte(first), &want)
	if a, b := fmt.Sprint(doc), fmt.Sprint(want); a != b {
		t.Errorf("the file after rollback, notes aside:\n%s\nwant the first version:\n%s", a, b)
	}
	h, err := engine.New(rdb, registry(nil), engine.Options{}).Versions(context.Background(), flowID)
	if err != nil {
		t.Fatal(err)
	}
	if len(h.Versions) != 3 || !h.Versions[2].Current {
		t.Errorf("after rollback the current version is not the first: %+v", h.Versions)
	}
}

// The Schedules tab shows when a saved schedule fires next, pauses it, and checks an
// edited one.
func TestBrowserSchedulesTabPausesAndChecksSchedules(t *testing.T) {
	rdb := storetest.Real(t)
	dir := t.TempDir()
	flowID, _ := writeExampleFlow(t, dir, "linear", func(d map[string]any) {
		d["settings"] = map[string]any{"schedules": []any{map[string]any{"cron": "0 6 * * *", "timezone": "Europe/Paris", "input": map[string]any{"name": "Ada"}}}}
	})
	storetest.DeleteFlowKeys(t, rdb, flowID)
	b := newBrowser(t, serveForBrowser(t, dir))
	b.open("/flows/" + flowID)
	b.waitFor("the editor", `document.querySelectorAll(".react-flow__node").length === 4`)
	b.click("#schedules-tab")
	b.waitFor("the schedule running with its next fire times", `document.querySelector('[data-schedule="0"] .schedule-running')?.dataset.state === "running" && document.querySelectorAll('[data-schedule="0"] .schedule-next li').length === 3`)
	// Each fire time is shown in the schedule's own zone too, whatever the browser's.
	b.waitText(`[data-schedule="0"] .schedule-next li .schedule-zone`, "06:00 Europe/Paris")
	b.shot("editor-schedules")
	b.click(`[data-schedule="0"] .schedule-running button`)
	b.waitFor("the schedule paused", `document.querySelector('[data-schedule="0"] .schedule-running')?.dataset.state === "paused"`)
	b.waitText("#toast", "paused")

	// A new schedule is not running until saved; a bad cron shows its problem.
	b.click(`.schedules-panel > button`)
	b.waitText(`[data-schedule="1"]`, "Not saved yet")
	b.typeInto(`input[aria-label="cron of schedule 1"]`, "every day")
	b.waitText(`[data-schedule="1"]`, "not a valid cron")
}

// A Langflow export with components Sluice lacks: the flows page lists them, imports the
// rest with placeholders, and the editor shows what to replace.
func TestBrowserImportsALangflowExportWithPlaceholders(t *testing.T) {
	file := filepath.Join(t.TempDir(), "docs-qa.json")
	raw := mustRead(t, filepath.Join("..", "..", "flows", "langflow", "testdata", "unmapped.json"))
	flowID := storetest.FlowID(t)
	storetest.DeleteFlowKeys(t, storetest.Real(t), flowID)
	// The flow id comes from the export's name.
	raw = strings.Replace(raw, `"name": "Docs Q&A with memory"`, fmt.Sprintf(`"name": %q`, flowID), 1)
	if err := os.WriteFile(file, []byte(raw), 0o644); err != nil {
		t.Fatal(err)
	}
	b := newBrowser(t, serveForBrowser(t, t.TempDir()))
	dialogs := b.acceptDialogs()
	b.open("/")
	b.run("choose the Langflow export", chromedp.SetUploadFiles(chromedp.CSS("#import-file"), []string{file}))
	// 8 converted nodes and placeholders, and what the agent needs that Langflow's has
	// built in: the session's history, loaded and stored, and a current-date tool.
	b.waitFor("the imported flow in the editor", `location.pathname.endsWith("/`+flowID+`") && document.querySelectorAll(".react-flow__node").length === 11`)
	if got := strings.Join(dialogs(), "\n"); !strings.Contains(got, "3 Langflow node(s) have no Sluice equivalent") || !strings.Contains(got, "AssemblyAITranscriptionJobPoller-m1") {
		t.Errorf("the import did not list the nodes first; dialogs: %q", got)
	}
	b.waitText("#import-report", "3 placeholders to replace")
	b.waitText(`[data-node="poll_transcript"]`, "placeholder for Langflow")
	b.waitFor("the placeholders' edges drawn", `document.querySelectorAll(".react-flow__edge").length === 10`)
	b.waitText("#problems-count", "3 errors")
	b.shot("editor-langflow-import")
}
