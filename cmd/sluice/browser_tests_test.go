package main

// Browser test of the test-case loop (issue 25): save a run as a case, change a prompt,
// run the cases on the working copy before saving, see the regressed case and the nodes
// whose output changed; the version history shows the last result.

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/flows/nodes/llmtest"
	"github.com/sluicehq/sluice/store/storetest"
)

func TestBrowserSaveARunAsACaseChangeAPromptAndSeeTheRegression(t *testing.T) {
	rdb := storetest.Real(t)
	flowID := storetest.FlowID(t)
	storetest.DeleteFlowKeys(t, rdb, flowID)
	model := llmtest.New(t)
	model.Respond(func(r llmtest.Request) llmtest.Reply {
		if strings.Contains(r.Last().Text(), "goodbye") {
			return llmtest.Text("Goodbye, Ada.")
		}
		return llmtest.Text("Hello, Ada.")
	})
	dir := t.TempDir()
	doc := map[string]any{
		"sluice": 1, "id": flowID, "name": "Greet",
		"nodes": []any{
			map[string]any{"id": "in", "type": "input", "position": map[string]any{"x": 0, "y": 0}, "params": map[string]any{"example": map[string]any{"name": "Ada"}}},
			map[string]any{"id": "ask", "type": "llm", "position": map[string]any{"x": 260, "y": 0}, "params": map[string]any{"model": "test-model", "user": "Say hello to {{.name}}."}},
			map[string]any{"id": "shout", "type": "transform", "position": map[string]any{"x": 520, "y": 0}, "params": map[string]any{"expr": `{loud: (.answer | ascii_upcase)}`}},
			map[string]any{"id": "out", "type": "output", "position": map[string]any{"x": 780, "y": 0}, "params": map[string]any{"value": "{answer, loud}"}},
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

	// A test run, saved as a case: its input, and its output as the expected one.
	b.click("#run-tab")
	b.click("#run-button")
	b.waitText("#run-status", "succeeded")
	b.click("#tests-tab")
	b.waitFor("no cases yet", `document.querySelector("#cases-editor summary")?.innerText.includes("(0)")`)
	b.click("#save-run-as-case")
	b.waitFor("one case", `document.querySelector("#cases-editor summary")?.innerText.includes("(1)")`)
	cases, err := os.ReadFile(filepath.Join(dir, flowID+".cases.json"))
	if err != nil {
		t.Fatalf("the cases file beside the flow: %v", err)
	}
	if !strings.Contains(string(cases), `"loud": "HELLO, ADA."`) || !strings.Contains(string(cases), `"name": "Ada"`) {
		t.Errorf("the saved case lacks the run's input or output:\n%s", cases)
	}

	// The cases pass on the flow as it is.
	b.click("#run-cases")
	b.waitText("#test-summary", "1/1 passed")
	b.waitFor("no node marked", `!document.querySelector('[data-output-changed="true"]')`)

	// Change the prompt, do not save: the cases run on the working copy and regress.
	b.inspect("ask")
	b.typeInto(`[data-param="user"]`, "Say goodbye to {{.name}}.")
	b.waitText("#save-state", "Draft saved")
	b.click("#tests-tab")
	b.click("#run-cases")
	b.waitText("#test-summary", "0/1 passed")
	b.waitText("#test-case-detail", `want {"answer":"Hello, Ada.","loud":"HELLO, ADA."}`)
	b.waitText("#changed-nodes", "ask")
	b.waitFor("ask and shout marked on the canvas", `document.querySelector('[data-node="ask"]')?.dataset.outputChanged === "true" && document.querySelector('[data-node="shout"]')?.dataset.outputChanged === "true"`)
	if evaluate[bool](b, `!!document.querySelector('[data-node="in"][data-output-changed]')`) {
		t.Error("the input node, whose output did not change, is marked")
	}
	b.waitText(`[data-node="ask"]`, "output changed")
	b.shot("editor-tests-regression")
	// The marks stay while the node is inspected, and go with Clear.
	b.inspect("ask")
	b.waitFor("the marks while inspecting", `document.querySelector('[data-node="ask"]')?.dataset.outputChanged === "true"`)
	b.click("#tests-tab")
	b.waitText("#test-summary", "0/1 passed")
	b.click("#clear-test-report")
	b.waitFor("no marks after Clear", `!document.querySelector('[data-output-changed="true"]')`)

	// The version history shows the saved version's last result (1/1 passed).
	b.click("#history-tab")
	b.waitFor("the last test result in the history", `[...document.querySelectorAll(".version-tests")].some(e => e.innerText.includes("1/1 passed"))`)
}
