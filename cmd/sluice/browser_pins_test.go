package main

// Browser test of pinned data (issue 17, n8n's pinned data): a node's output pinned from
// its checkpoint holds for the next test runs, so the rest of the flow runs without
// calling the model again.

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/sluicehq/sluice/flows/nodes/llmtest"
	"github.com/sluicehq/sluice/store/storetest"
)

func TestBrowserPinANodesOutputAndRunWithoutCallingTheModel(t *testing.T) {
	rdb := storetest.Real(t)
	flowID := storetest.FlowID(t)
	storetest.DeleteFlowKeys(t, rdb, flowID)
	model := llmtest.New(t)
	model.Reply(llmtest.Text("Streams are append-only logs."))

	dir := t.TempDir()
	doc := map[string]any{
		"sluice": 1, "id": flowID, "name": "Explain and shout",
		"nodes": []any{
			map[string]any{"id": "in", "type": "input", "position": map[string]any{"x": 0, "y": 0}, "params": map[string]any{"example": map[string]any{"topic": "Redis streams"}}},
			map[string]any{"id": "ask", "type": "llm", "position": map[string]any{"x": 260, "y": 0}, "params": map[string]any{"model": "test-model", "user": "Explain {{.topic}} in one line."}},
			map[string]any{"id": "shout", "type": "transform", "position": map[string]any{"x": 520, "y": 0}, "params": map[string]any{"expr": `{loud: (.answer | ascii_upcase), topic}`}},
			map[string]any{"id": "out", "type": "output", "position": map[string]any{"x": 780, "y": 0}, "params": map[string]any{"value": "{answer, loud, topic}"}},
		},
		"edges": []any{map[string]any{"from": "in", "to": "ask"}, map[string]any{"from": "ask", "to": "shout"}, map[string]any{"from": "shout", "to": "out"}},
	}
	raw, _ := json.MarshalIndent(doc, "", "  ")
	if err := os.WriteFile(filepath.Join(dir, flowID+".json"), raw, 0o644); err != nil {
		t.Fatal(err)
	}
	base := serveForBrowserEnv(t, dir, []string{"OPENAI_BASE_URL=" + model.URL, "OPENAI_API_KEY=test-key", "SLUICE_PROVIDERS="})
	b := newBrowser(t, base)
	b.open("/flows/" + flowID)
	b.waitFor("the editor", `document.querySelectorAll(".react-flow__node").length === 4`)
	b.click("#run-tab")
	b.waitFor("nothing pinned yet", `!document.querySelector("#pinned") && !document.querySelector(".pin-badge")`)

	// The first run calls the model.
	b.click("#run-button")
	b.waitText("#run-status", "succeeded")
	b.waitText("#run-output", `"loud": "STREAMS ARE APPEND-ONLY LOGS."`)
	first := evaluate[string](b, `document.querySelector("#run-summary-id").innerText`)
	if n := model.Calls(); n != 1 {
		t.Fatalf("the first run made %d model requests, want 1", n)
	}

	// A pure node offers no pin: it calls nothing outside.
	b.click(`.react-flow__node[data-id="shout"]`)
	b.waitText(`[aria-label="checkpoints of shout"]`, "State after this step")
	if evaluate[bool](b, `!!document.querySelector('[aria-label="checkpoints of shout"] .pin-this')`) {
		t.Error("the transform's checkpoint offers a pin; only nodes that call something outside can be pinned")
	}

	// Pin the model's output from its checkpoint in that run.
	b.click(`.react-flow__node[data-id="ask"]`)
	b.click(`[aria-label="checkpoints of ask"] .pin-this`)
	b.waitFor("the pin badge on the node", `!!document.querySelector('[data-node="ask"] .pin-badge')`)
	b.waitFor("the node in the Pinned list", `!!document.querySelector('#pinned li[data-pin="ask"]')`)
	b.waitText(`#pinned li[data-pin="ask"]`, "from run "+first)
	b.waitText(`[aria-label="checkpoints of ask"] .pin-action`, "pinned")
	b.waitText("#save-state", "Saved") // a pin is not an edit of the flow
	evaluate[bool](b, `(document.querySelector('[aria-label="checkpoints of ask"] .pin-action').scrollIntoView({block: "center"}), true)`)
	b.shot("editor-pin-checkpoint")

	// The pin is kept in this browser: a reload still has it.
	b.run("reload", chromedp.Reload(), chromedp.WaitReady(chromedp.CSS("body")))
	b.waitFor("the editor after a reload", `document.querySelectorAll(".react-flow__node").length === 4`)
	b.waitFor("the pin badge after a reload", `!!document.querySelector('[data-node="ask"] .pin-badge')`)
	b.click("#run-tab")
	b.waitFor("the Pinned list after a reload", `!!document.querySelector('#pinned li[data-pin="ask"]')`)

	// Run again with another topic: the pin answers, the model is not asked, and the
	// rest of the flow runs on the pinned output.
	b.typeInto("#run-input", `{"topic": "Kafka"}`)
	b.click("#run-button")
	b.waitFor("a second run", fmt.Sprintf(`(document.querySelector("#run-summary-id")?.innerText ?? %q) !== %q`, first, first))
	b.waitText("#run-status", "succeeded")
	second := evaluate[string](b, `document.querySelector("#run-summary-id").innerText`)
	b.waitText("#run-output", `"answer": "Streams are append-only logs."`)
	b.waitText("#run-output", `"loud": "STREAMS ARE APPEND-ONLY LOGS."`)
	b.waitText("#run-output", `"topic": "Kafka"`)
	b.waitText(`[data-node="ask"] .run-pinned`, "pinned")
	b.waitFor("the node list says pinned", `[...document.querySelectorAll('[aria-label="nodes in this run"] li')].some(li => li.innerText.includes("ask") && !!li.querySelector(".run-pinned"))`)
	if evaluate[bool](b, `!!document.querySelector('[data-node="shout"] .run-pinned')`) {
		t.Error("the transform, which ran, shows as pinned")
	}
	if n := model.Calls(); n != 1 {
		t.Fatalf("the run with ask pinned made %d model requests in all, want still 1", n)
	}
	b.click(`.react-flow__node[data-id="ask"]`)
	b.waitText(`[aria-label="checkpoints of ask"]`, "pinned: did not run")
	b.shot("editor-pinned")

	// Edit the pin by hand, as n8n allows: the next run gives back the edited update.
	b.click(`#pinned li[data-pin="ask"] .pin-edit`)
	b.typeInto(`#pinned li[data-pin="ask"] textarea[data-field="update"]`, `{"answer": "Edited by hand."}`)
	b.click(`#pinned li[data-pin="ask"] .pin-editor button[type=submit]`)
	b.waitText(`#pinned li[data-pin="ask"]`, "edited")
	b.click("#run-button")
	b.waitFor("a run on the edited pin", fmt.Sprintf(`(document.querySelector("#run-summary-id")?.innerText ?? %q) !== %q`, second, second))
	b.waitText("#run-status", "succeeded")
	second = evaluate[string](b, `document.querySelector("#run-summary-id").innerText`)
	b.waitText("#run-output", `"loud": "EDITED BY HAND."`)
	if n := model.Calls(); n != 1 {
		t.Fatalf("the run on the edited pin made %d model requests in all, want still 1", n)
	}

	// Unpin: the next run asks the model again.
	model.Reply(llmtest.Text("Kafka is a distributed log."))
	b.click(`#pinned li[data-pin="ask"] .unpin`)
	b.waitFor("the pin gone", `!document.querySelector("#pinned") && !document.querySelector('[data-node="ask"] .pin-badge')`)
	b.click("#run-button")
	b.waitFor("a third run", fmt.Sprintf(`(document.querySelector("#run-summary-id")?.innerText ?? %q) !== %q`, second, second))
	b.waitText("#run-status", "succeeded")
	third := evaluate[string](b, `document.querySelector("#run-summary-id").innerText`)
	b.waitText("#run-output", `"answer": "Kafka is a distributed log."`)
	if n := model.Calls(); n != 2 {
		t.Fatalf("the run after unpinning made %d model requests in all, want 2", n)
	}
	if evaluate[bool](b, `!!document.querySelector('[data-node="ask"] .run-pinned')`) {
		t.Error("ask shows as pinned in the run after unpinning")
	}

	// Pins never touch the flow: all three runs ran the same version.
	versions := map[string]bool{}
	for _, run := range []string{first, second, third} { // second: the run on the edited pin
		versions[runVersion(t, base, flowID, run)] = true
	}
	if len(versions) != 1 {
		t.Errorf("the runs ran %d versions of the flow, want 1 (pinning changed the document?)", len(versions))
	}
}

// runVersion is the flow version a run ran, from the API.
func runVersion(t *testing.T, base, flow, run string) string {
	t.Helper()
	res, err := http.Get(fmt.Sprintf("%s/api/flows/%s/runs/%s", base, flow, run))
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var r struct {
		Version string `json:"version"`
	}
	if err := json.NewDecoder(res.Body).Decode(&r); err != nil || r.Version == "" {
		t.Fatalf("run %s: version %q, %v (status %d)", run, r.Version, err, res.StatusCode)
	}
	return r.Version
}
