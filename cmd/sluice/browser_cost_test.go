package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/sluicehq/sluice/flows/nodes/llmtest"
	"github.com/sluicehq/sluice/store/storetest"
)

// A person sees what a run's model calls cost: per node and for the run in the editor's
// test-run panel and on the run page, and the flow's success rate on the flows page.
func TestBrowserShowsTokensAndCostPerNodeAndRun(t *testing.T) {
	rdb := storetest.Real(t)
	flowID := storetest.FlowID(t)
	storetest.DeleteFlowKeys(t, rdb, flowID)
	model := llmtest.New(t)
	model.Reply(llmtest.Reply{Content: "Streams are append-only logs.", PromptTokens: 12, CompletionTokens: 7})

	dir := t.TempDir()
	providers := filepath.Join(t.TempDir(), "providers.json")
	os.WriteFile(providers, []byte(`{"providers": {"default": {"base_url": "`+model.URL+`", "prices": {"test-model": {"input": 1000, "output": 2000}}}}}`), 0o600)
	doc := map[string]any{
		"sluice": 1, "id": flowID, "name": "Explain",
		"nodes": []any{
			map[string]any{"id": "in", "type": "input", "position": map[string]any{"x": 0, "y": 0}, "params": map[string]any{"example": map[string]any{"topic": "Redis streams"}}},
			map[string]any{"id": "ask", "type": "llm", "position": map[string]any{"x": 260, "y": 0}, "params": map[string]any{"model": "test-model", "user": "Explain {{.topic}} in one line."}},
			map[string]any{"id": "out", "type": "output", "position": map[string]any{"x": 520, "y": 0}, "params": map[string]any{"value": "{answer}"}},
		},
		"edges": []any{map[string]any{"from": "in", "to": "ask"}, map[string]any{"from": "ask", "to": "out"}},
	}
	raw, _ := json.MarshalIndent(doc, "", "  ")
	if err := os.WriteFile(filepath.Join(dir, flowID+".json"), raw, 0o644); err != nil {
		t.Fatal(err)
	}
	base := serveForBrowserEnv(t, dir, []string{"SLUICE_PROVIDERS=" + providers})
	b := newBrowser(t, base)
	b.open("/flows/" + flowID)
	b.waitFor("the editor", `document.querySelectorAll(".react-flow__node").length === 3`)
	b.click("#run-tab")
	b.click("#run-button")
	b.waitText("#run-status", "succeeded")
	// 12 input tokens at $1000/M and 7 output at $2000/M: $0.026.
	b.waitText(".node-statuses", "$0.0260")
	b.waitText("#run-cost", "$0.0260")
	b.shot("editor-run-cost")
	run := evaluate[string](b, `document.querySelector(".run-summary a.mono").textContent`)

	b.open("/flows/" + flowID + "/runs/" + run)
	b.waitText(`#run-usage tr[data-node="ask"]`, "$0.0260")
	b.waitText("#run-usage-total", "$0.0260")
	b.waitText(`#timeline li[data-node="ask"]`, "$0.0260")
	b.shot("run-cost")

	b.open("/")
	b.waitText(`tr[data-flow="`+flowID+`"] .flow-success`, "100%")
	b.shot("flows-success")
}
