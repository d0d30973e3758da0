package server_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/flows/engine"
	"github.com/sluicehq/sluice/store/storetest"
)

// One node run alone, as n8n's "execute step": on a state given, on the state it
// received in a past run, and as the editor's working copy has it — without a run.
func TestANodeRunsAloneOnAGivenOrAPastInput(t *testing.T) {
	a := newAPI(t, storetest.Real(t))
	flow, doc := a.flowDoc("linear", nil)
	a.must(http.StatusCreated, "PUT", "/api/flows/"+flow, doc)

	var tr engine.Trial
	a.must(http.StatusOK, "POST", "/api/flows/"+flow+"/nodes/shout/try", map[string]any{"state": map[string]any{"greeting": "hi there"}}).into(t, &tr)
	if tr.Output == nil || tr.Update["greeting"] != "HI THERE" || tr.State["greeting"] != "HI THERE" || strings.Join(tr.Next, ",") != "out" || tr.Error != "" {
		t.Errorf("shout on a given state: %+v", tr)
	}

	// The state shout received in a past run.
	id := a.start(flow, map[string]any{"input": map[string]any{"name": "Ada"}})
	a.settle(flow, id)
	var cps struct {
		Checkpoints []struct {
			ID   string `json:"id"`
			Node string `json:"node"`
		} `json:"checkpoints"`
	}
	a.must(http.StatusOK, "GET", "/api/flows/"+flow+"/runs/"+id+"/checkpoints", nil).into(t, &cps)
	shout := ""
	for _, c := range cps.Checkpoints {
		if c.Node == "shout" {
			shout = c.ID
		}
	}
	a.must(http.StatusOK, "POST", "/api/flows/"+flow+"/nodes/shout/try", map[string]any{"from": map[string]any{"run": id, "checkpoint": shout}}).into(t, &tr)
	if tr.Update["greeting"] != "HELLO, ADA!" {
		t.Errorf("shout on the input it had in run %s: %+v", id, tr)
	}

	// The working copy's node, edited and not saved.
	var d map[string]any
	json.Unmarshal(doc, &d)
	d["nodes"].([]any)[2].(map[string]any)["params"] = map[string]any{"expr": `{greeting: (.greeting + "?")}`}
	a.must(http.StatusOK, "POST", "/api/flows/"+flow+"/nodes/shout/try", map[string]any{"document": d, "from": map[string]any{"run": id, "checkpoint": shout}}).into(t, &tr)
	if tr.Update["greeting"] != "Hello, Ada!?" {
		t.Errorf("the working copy's shout: %+v", tr)
	}

	// A failure is the trial's answer, with the node's error; nothing ran as a run.
	d["nodes"].([]any)[2].(map[string]any)["params"] = map[string]any{"expr": `{n: (.greeting | tonumber)}`}
	a.must(http.StatusOK, "POST", "/api/flows/"+flow+"/nodes/shout/try", map[string]any{"document": d, "state": map[string]any{"greeting": "Ada"}}).into(t, &tr)
	if tr.Error == "" || tr.Retryable {
		t.Errorf("a failing expression: %+v; want its error, not retryable", tr)
	}
	if n := a.runCount(flow); n != 1 {
		t.Errorf("%d runs, want 1: trials are no runs", n)
	}
	a.must(http.StatusNotFound, "POST", "/api/flows/"+flow+"/nodes/nope/try", map[string]any{"state": map[string]any{}})
	a.must(http.StatusBadRequest, "POST", "/api/flows/"+flow+"/nodes/shout/try", map[string]any{"state": "x"})
}
