package main

// Browser tests of issue 24: fix forward — a failed step retried on the version that has
// the fix.

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/sluicehq/sluice/store/storetest"
)

// The first debug loop a new user tries: a transform fails on the customer's input and
// is dead-lettered; the user fixes the expression, presses Ctrl+S, selects the node of
// the failed run and retries it with the current version — the step runs the fix on the
// state it had received, the run succeeds, and the attempts are numbered 1 and 2.
func TestBrowserFixAFailedStepAndRetryItWithTheCurrentVersion(t *testing.T) {
	rdb := storetest.Real(t)
	flowID := storetest.FlowID(t)
	storetest.DeleteFlowKeys(t, rdb, flowID)
	dir := t.TempDir()
	doc := map[string]any{
		"sluice": 1, "id": flowID, "name": "Discounts",
		"nodes": []any{
			map[string]any{"id": "in", "type": "input", "position": map[string]any{"x": 0, "y": 0}},
			map[string]any{"id": "price", "type": "transform", "position": map[string]any{"x": 260, "y": 0}, "params": map[string]any{"expr": `{tier: "small", discount: (.customer | tonumber)}`}},
			map[string]any{"id": "out", "type": "output", "position": map[string]any{"x": 520, "y": 0}, "params": map[string]any{"value": "{tier, discount}"}},
		},
		"edges": []any{map[string]any{"from": "in", "to": "price"}, map[string]any{"from": "price", "to": "out"}},
	}
	raw, _ := json.MarshalIndent(doc, "", "  ")
	if err := os.WriteFile(filepath.Join(dir, flowID+".json"), raw, 0o644); err != nil {
		t.Fatal(err)
	}
	base := serveForBrowser(t, dir)
	b := newBrowser(t, base)
	b.open("/flows/" + flowID)
	b.waitFor("the editor", `document.querySelectorAll(".react-flow__node").length === 3`)

	// The run fails at the transform and its step is a dead letter.
	b.click("#run-tab")
	b.typeInto("#run-input", `{"customer":"Ada","amount":50}`)
	b.click("#run-button")
	b.waitText("#run-status", "failed")
	run := evaluate[string](b, `document.querySelector("#run-summary-id").innerText`)
	b.waitText(`[data-node="price"]`, "failed")
	broken := runVersion(t, base, flowID, run)

	// Fix the expression and save it.
	b.inspect("price")
	b.typeInto(`textarea[data-param="expr"]`, `{tier: "small", discount: (.amount / 10)}`)
	b.waitFor("the fix on the canvas", `document.querySelector('[data-node="price"]').innerText.includes(".amount / 10")`)
	b.click(".react-flow__pane")
	b.run("press Ctrl+S", chromedp.KeyEvent("s", chromedp.KeyModifiers(chromedp.ModifierCtrl)))
	b.waitText("#save-state", "Saved")

	// Pick the failed run's node: Retry offers the version it ran and the current one.
	b.click("#run-tab")
	b.click(`.react-flow__node[data-id="price"]`)
	b.waitText(`[aria-label="checkpoints of price"] .attempts`, "attempt 1")
	b.waitText(`[aria-label="checkpoints of price"] .retry-original`, "as it was ("+broken[:7]+")")
	b.waitFor("Retry with the current version", `!!document.querySelector('[aria-label="checkpoints of price"] .retry-current')`)
	current := evaluate[string](b, `document.querySelector('[aria-label="checkpoints of price"] .retry-current').innerText`)
	if !strings.Contains(current, "with the current version (") || strings.Contains(current, broken[:7]) {
		t.Fatalf("the current-version button says %q; want the saved version, not %.7s", current, broken)
	}
	b.shot("editor-retry-versions")
	b.click(`[aria-label="checkpoints of price"] .retry-current`)

	// The fix runs on the state the step had received: the run succeeds.
	b.waitText("#run-status", "succeeded")
	b.waitText("#run-output", `"discount": 5`)
	b.waitText("#run-output", `"tier": "small"`)
	b.waitText("#run-moves", "moved from "+broken[:7])
	b.waitText(`[data-node="price"] .run-moved`, "moved to")
	// Attempts are numbered across the retry: 1 failed, 2 committed.
	b.waitText(`[aria-label="checkpoints of price"] .attempts`, "attempt 1")
	b.waitText(`[aria-label="checkpoints of price"]`, "attempt 2")
	if evaluate[bool](b, `[...document.querySelectorAll('[aria-label="checkpoints of price"] .attempt-head')].filter(e => e.innerText.includes("attempt 1")).length !== 1`) {
		t.Error("the failed attempts do not list attempt 1 exactly once")
	}
	if v := runVersion(t, base, flowID, run); v == broken {
		t.Errorf("the run is still on version %.7s after the retry with the current version", v)
	}
	b.shot("editor-retried-on-current")

	// The run page shows the move.
	b.open("/flows/" + flowID + "/runs/" + run)
	b.waitText("#run-moves", "moved from "+broken[:7])
}
