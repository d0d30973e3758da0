package server_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/server"
	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/storetest"
)

// A run whose output could not be stored (over max_state_bytes, or nested deeper than
// any JSON reader decodes) fails at its output node with the reason; starting it with
// ?wait=, reading it and listing its flow's runs all answer 200.
func TestAnOutputTooLargeOrTooDeepFailsItsRunAndEveryAnswerStaysReadable(t *testing.T) {
	a := newAPI(t, storetest.Real(t))
	for _, c := range []struct{ name, value, want string }{
		{"too deep", `reduce range(20000) as $i (1; [.])`, "nests deeper than 512 levels"},
		{"too large", `[range(200000)] | map("x") | add`, "over max_state_bytes (100,000)"},
	} {
		id := a.saveFlow(`{"sluice": 1, "id": "x", "settings": {"max_state_bytes": 100000},
		 "nodes": [{"id": "in", "type": "input"}, {"id": "out", "type": "output", "params": {"value": `+quote(c.value)+`}}],
		 "edges": [{"from": "in", "to": "out"}]}`, nil)
		var r run
		a.must(http.StatusOK, "POST", "/api/flows/"+id+"/runs?wait=30s", `{}`).into(t, &r)
		if r.Status != store.StatusFailed || r.ErrorNode != "out" || !strings.Contains(r.Error, c.want) {
			t.Errorf("%s: run %s %s at %q: %q; want failed at out with %q", c.name, r.ID, r.Status, r.ErrorNode, r.Error, c.want)
		}
		a.must(http.StatusOK, "GET", "/api/flows/"+id+"/runs/"+r.ID, nil)
		var list server.RunList
		a.must(http.StatusOK, "GET", "/api/flows/"+id+"/runs", nil).into(t, &list)
		if len(list.Runs) != 1 {
			t.Errorf("%s: %d runs listed, want 1", c.name, len(list.Runs))
		}
	}
}

// A run stored with an output no JSON reader takes (from before outputs were checked at
// commit) still reads back: its GET, the runs listing and its page answer 200, its
// output is null and output_error names the node and why.
func TestARunWhoseStoredOutputCannotBeReadShowsWhyAndTheListingStillAnswers(t *testing.T) {
	rdb := storetest.Real(t)
	a := newAPI(t, rdb)
	id := a.saveFlow(`{"sluice": 1, "id": "x", "nodes": [{"id": "in", "type": "input"}, {"id": "out", "type": "output"}],
	 "edges": [{"from": "in", "to": "out"}]}`, nil)
	good := a.settle(id, a.start(id, `{"input": {"n": 1}}`))
	broken := a.settle(id, a.start(id, `{"input": {"n": 2}}`))
	var view struct {
		Part int `json:"partition"`
	}
	a.must(http.StatusOK, "GET", "/api/flows/"+id+"/runs/"+broken.ID, nil).into(t, &view)
	deep := strings.Repeat("[", 20000) + "1" + strings.Repeat("]", 20000)
	if err := rdb.Client.HSet(context.Background(), store.PartKeys(id, view.Part).Run(broken.ID), "out:out", deep).Err(); err != nil {
		t.Fatal(err)
	}

	var got struct {
		run
		OutputError string `json:"output_error"`
	}
	a.must(http.StatusOK, "GET", "/api/flows/"+id+"/runs/"+broken.ID, nil).into(t, &got)
	if string(got.Output) != "null" || !strings.Contains(got.OutputError, `node "out"`) || !strings.Contains(got.OutputError, "exceeded max depth") {
		t.Errorf("run with an unreadable output: output %s, output_error %q; want null and the node and reason", got.Output, got.OutputError)
	}
	var list struct {
		Runs []struct {
			ID          string          `json:"id"`
			Output      json.RawMessage `json:"output"`
			OutputError string          `json:"output_error"`
		} `json:"runs"`
	}
	a.must(http.StatusOK, "GET", "/api/flows/"+id+"/runs", nil).into(t, &list)
	if len(list.Runs) != 2 || list.Runs[0].ID != broken.ID || list.Runs[0].OutputError == "" ||
		list.Runs[1].ID != good.ID || string(list.Runs[1].Output) != `{"n":1}` || list.Runs[1].OutputError != "" {
		t.Errorf("listing = %+v; want the broken run with its output_error and the good one with its output", list.Runs)
	}
	a.must(http.StatusOK, "GET", "/flows/"+id+"/runs/"+broken.ID, nil)
}

// quote is s as a JSON string.
func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
