package server_test

import (
	"encoding/json"
	"html"
	"net/http"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/storetest"
)

// A run keeps its input once (docs/benchmarks.md, issue 29), and what a person reads
// through the API and the run page is the same as when it kept three copies: the run's
// input, and the input node's output in the history and in its checkpoint.
func TestTheInputKeptOnceReadsTheSameThroughTheAPIAndTheRunPage(t *testing.T) {
	r := storetest.Real(t)
	a := newAPI(t, r)
	flow := a.saveFlow(`{"sluice": 1, "id": "kept-once", "nodes": [
		{"id": "in", "type": "input"},
		{"id": "shout", "type": "transform", "params": {"expr": "{said: (.note | ascii_upcase)}"}},
		{"id": "out", "type": "output", "params": {"value": ".said"}}],
		"edges": [{"from": "in", "to": "shout"}, {"from": "shout", "to": "out"}]}`, nil)
	note := strings.Repeat("kept once ", 30)
	input := `{"note":"` + note + `"}`
	run := a.settle(flow, a.start(flow, map[string]any{"input": json.RawMessage(input)}))
	if run.Status != store.StatusSucceeded {
		t.Fatalf("run %+v", run)
	}
	var got struct {
		Input json.RawMessage `json:"input"`
	}
	a.must(http.StatusOK, "GET", "/api/flows/"+flow+"/runs/"+run.ID, nil).into(t, &got)
	if string(got.Input) != input {
		t.Errorf("the run's input through the API is %s, want %s", got.Input, input)
	}
	var list struct {
		Checkpoints []struct {
			ID     string          `json:"id"`
			Node   string          `json:"node"`
			Output json.RawMessage `json:"output"`
		} `json:"checkpoints"`
	}
	a.must(http.StatusOK, "GET", "/api/flows/"+flow+"/runs/"+run.ID+"/checkpoints", nil).into(t, &list)
	var in string
	for _, c := range list.Checkpoints {
		if c.Node == "in" {
			in = c.ID
			if string(c.Output) != input {
				t.Errorf("the input node's output in the history is %s, want the input", c.Output)
			}
		}
	}
	if in == "" {
		t.Fatalf("no checkpoint of the input node in %+v", list.Checkpoints)
	}
	var one struct {
		Output json.RawMessage `json:"output"`
	}
	a.must(http.StatusOK, "GET", "/api/flows/"+flow+"/runs/"+run.ID+"/checkpoints/"+in, nil).into(t, &one)
	if string(one.Output) != input {
		t.Errorf("the input node's checkpoint through the API: output %s, want the input", one.Output)
	}
	page := html.UnescapeString(a.must(http.StatusOK, "GET", "/flows/"+flow+"/runs/"+run.ID+"?checkpoint="+in, nil).String())
	if !strings.Contains(page, note) {
		t.Errorf("the run page does not show the run's input")
	}
	// The selected checkpoint's output comes after the run's own.
	i := strings.LastIndex(page, "<h3>Output</h3>")
	out, _, _ := strings.Cut(page[max(i, 0):], "</pre>")
	if i < 0 || !strings.Contains(out, note) {
		t.Errorf("the run page's input node checkpoint shows no output with the input (%q)", out)
	}
}
