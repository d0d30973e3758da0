package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/sluicehq/sluice/flows/engine"
	"github.com/sluicehq/sluice/store/storetest"
)

// A saved flow edited and saved again with a note: the History tab lists both versions,
// shows what the second changed on the canvas, and rolls back to the first.
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

	// Open the first version read-only, then roll back to it.
	b.run("open the first version", chromedp.Click(chromedp.CSS(`.version:not(.current) .version-actions button`)))
	b.waitText("#view-banner", "read-only")
	b.waitFor("greet without its label", `!document.querySelector('[data-node="greet"]').innerText.includes("Say hello")`)
	b.run("roll back", chromedp.Click(chromedp.CSS(`.version:not(.current) .version-actions button.danger`)))
	b.waitFor("the editor reloaded on the first version", `!document.querySelector("#view-banner") && document.querySelectorAll(".react-flow__node").length === 4 && !document.body.innerText.includes("Say hello")`)
	if got := strings.Join(dialogs(), "\n"); !strings.Contains(got, "Roll back to version") {
		t.Errorf("rollback did not ask first; dialogs: %q", got)
	}
	if got := mustRead(t, path); got != first {
		t.Errorf("the file after rollback:\n%s\nwant the first version as it was saved", got)
	}
	h, err := engine.New(rdb, registry(nil), engine.Options{}).Versions(context.Background(), flowID)
	if err != nil {
		t.Fatal(err)
	}
	if len(h.Versions) != 2 || !h.Versions[1].Current {
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
	// The flow id comes from the export's name.
	raw = strings.Replace(raw, `"name": "Docs Q&A with memory"`, fmt.Sprintf(`"name": %q`, flowID), 1)
	if err := os.WriteFile(file, []byte(raw), 0o644); err != nil {
		t.Fatal(err)
	}
	b := newBrowser(t, serveForBrowser(t, t.TempDir()))
	dialogs := b.acceptDialogs()
	b.open("/")
	b.run("choose the Langflow export", chromedp.SetUploadFiles(chromedp.CSS("#import-file"), []string{file}))
	b.waitFor("the imported flow in the editor", `location.pathname.endsWith("/`+flowID+`") && document.querySelectorAll(".react-flow__node").length === 8`)
	if got := strings.Join(dialogs(), "\n"); !strings.Contains(got, "4 Langflow node(s) have no Sluice equivalent") || !strings.Contains(got, "Chroma-v1") {
		t.Errorf("the import did not list the nodes first; dialogs: %q", got)
	}
	b.waitText("#import-report", "4 placeholders to replace")
	b.waitText(`[data-node="chroma_db"]`, "placeholder for Langflow")
	b.waitFor("the placeholders' edges drawn", `document.querySelectorAll(".react-flow__edge").length === 7`)
	b.waitText("#problems-count", "4 errors")
	b.shot("editor-langflow-import")
}
