package server_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/flows/nodes/llmtest"
	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/storetest"
)

// Pinned data as the editor sends it: a run started with a node's pin does not call the
// model, and the run page marks the step pinned; a pin for a node that calls nothing
// outside is refused with the node named.
func TestARunWithAPinnedNodeDoesNotCallItAndItsPageSaysPinned(t *testing.T) {
	r := storetest.Real(t)
	model := llmtest.New(t)
	a := newAPIWith(t, r, model.Env(0))
	flow := a.saveFlow(`{"sluice": 1, "id": "x", "nodes": [
		{"id": "in", "type": "input"},
		{"id": "ask", "type": "llm", "params": {"model": "m", "user": "hi"}},
		{"id": "shape", "type": "transform", "params": {"expr": "{loud: (.answer | ascii_upcase)}"}},
		{"id": "out", "type": "output", "params": {"value": "{answer, loud}"}}],
		"edges": [{"from": "in", "to": "ask"}, {"from": "ask", "to": "shape"}, {"from": "shape", "to": "out"}]}`, nil)

	run := a.settle(flow, a.start(flow, map[string]any{"input": map[string]any{}, "pins": map[string]any{
		"ask": map[string]any{"output": "pinned reply", "update": map[string]any{"answer": "pinned reply"}}}}))
	if run.Status != store.StatusSucceeded || !strings.Contains(string(run.Output), `"loud":"PINNED REPLY"`) {
		t.Fatalf("run %+v, want it succeeded on the pinned reply", run)
	}
	if model.Calls() != 0 {
		t.Errorf("%d model calls, want none: ask was pinned", model.Calls())
	}

	page := a.must(http.StatusOK, "GET", "/flows/"+flow+"/runs/"+run.ID, nil, "Accept", "text/html").String()
	var pinned []string
	for _, li := range strings.Split(page, "<li ")[1:] {
		if strings.Contains(li, `badge-pinned`) {
			pinned = append(pinned, li[strings.Index(li, `data-node="`)+len(`data-node="`):][:3])
		}
	}
	if strings.Join(pinned, ",") != "ask" {
		t.Errorf("the timeline marks %q as pinned, want only ask", pinned)
	}
	var ckpts struct {
		Checkpoints []struct {
			ID, Node string
			Pinned   bool
		}
	}
	a.must(http.StatusOK, "GET", "/api/flows/"+flow+"/runs/"+run.ID+"/checkpoints", nil).into(t, &ckpts)
	for _, c := range ckpts.Checkpoints {
		if c.Node != "ask" {
			continue
		}
		detail := a.must(http.StatusOK, "GET", "/flows/"+flow+"/runs/"+run.ID+"?checkpoint="+c.ID, nil, "Accept", "text/html").String()
		if !strings.Contains(detail, `id="pinned-step"`) {
			t.Error("the pinned step's checkpoint on the run page does not say it was pinned")
		}
	}

	res := a.do("POST", "/api/flows/"+flow+"/runs", map[string]any{"input": map[string]any{}, "pins": map[string]any{"shape": map[string]any{"update": map[string]any{"loud": "X"}}}})
	if res.status != http.StatusBadRequest || !strings.Contains(res.String(), `shape`) {
		t.Errorf("a pin on a transform: %d %s, want 400 naming the node", res.status, res)
	}
}
