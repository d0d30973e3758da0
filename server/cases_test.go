package server_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/flows/cases"
	"github.com/sluicehq/sluice/store/storetest"
)

// The test-case loop through the API: save a run as a case (its input, its output as the
// expected one, each node's output), change the flow in the working copy, run the cases
// on it before saving and see the regressed case and the node whose output changed; the
// version's last result is kept for the version history.
func TestSaveARunAsACaseAndRunTheCasesOnAWorkingCopy(t *testing.T) {
	a := newAPI(t, storetest.Real(t))
	flow, doc := a.flowDoc("linear", nil)
	a.must(http.StatusCreated, "PUT", "/api/flows/"+flow, doc)

	var empty server_CasesView
	a.must(http.StatusOK, "GET", "/api/flows/"+flow+"/cases", nil).into(t, &empty)
	if empty.Exists || !strings.Contains(string(empty.File), `"cases":[]`) {
		t.Errorf("a flow without cases: %+v", empty)
	}

	id := a.start(flow, map[string]any{"input": map[string]any{"name": "Ada"}})
	a.settle(flow, id)
	var saved struct {
		Case cases.Case      `json:"case"`
		File json.RawMessage `json:"file"`
	}
	a.must(http.StatusCreated, "POST", "/api/flows/"+flow+"/cases", map[string]any{"run": id, "id": "ada"}).into(t, &saved)
	if string(saved.Case.Input) != `{"name":"Ada"}` || len(saved.Case.Expect) != 1 || !cases.SameJSON(saved.Case.Expect[0].Equals, json.RawMessage(`{"greeting": "HELLO, ADA!"}`)) {
		t.Fatalf("the saved case: %+v", saved.Case)
	}
	if !cases.SameJSON(saved.Case.NodeOutputs["greet"], json.RawMessage(`{"greeting": "Hello, Ada!"}`)) || saved.Case.Origin.Run != id {
		t.Errorf("the case keeps each node's output and its origin: %+v", saved.Case)
	}
	// From a node: the case starts at shout with the state shout received.
	a.must(http.StatusCreated, "POST", "/api/flows/"+flow+"/cases", map[string]any{"run": id, "id": "shout-alone", "node": "shout"}).into(t, &saved)
	if saved.Case.Start == nil || saved.Case.Start.Node != "shout" || !strings.Contains(string(saved.Case.Start.State), `"greeting":"Hello, Ada!"`) {
		t.Errorf("a case from a node: %+v", saved.Case)
	}
	if e := a.must(http.StatusConflict, "POST", "/api/flows/"+flow+"/cases", map[string]any{"run": id, "id": "ada"}).errorBody(t); !strings.Contains(e.Message, `already has a case "ada"`) {
		t.Errorf("a second case of the same id: %+v", e)
	}
	var got server_CasesView
	a.must(http.StatusOK, "GET", "/api/flows/"+flow+"/cases", nil).into(t, &got)
	if !got.Exists || len(got.Problems) != 0 || !strings.Contains(string(got.File), `"shout-alone"`) {
		t.Errorf("the cases file after saving two cases: %+v", got)
	}

	// The saved flow passes its cases.
	var rep cases.Report
	a.must(http.StatusOK, "POST", "/api/flows/"+flow+"/cases/run", map[string]any{}).into(t, &rep)
	if rep.Passed != 2 || rep.Failed != 0 {
		t.Fatalf("the saved flow: %+v", rep)
	}
	savedVersion := rep.Version

	// The working copy greets differently: both cases regress, at greet (and after it).
	var d map[string]any
	json.Unmarshal(doc, &d)
	d["nodes"].([]any)[1].(map[string]any)["params"] = map[string]any{"expr": `{greeting: ("Hi, " + .name + "!")}`}
	a.must(http.StatusOK, "POST", "/api/flows/"+flow+"/cases/run", map[string]any{"document": d, "cases": []string{"ada"}}).into(t, &rep)
	if rep.Cases != 1 || rep.Failed != 1 || !rep.Draft || rep.Version == savedVersion {
		t.Fatalf("the working copy: %+v", rep)
	}
	r := rep.Results[0]
	if !strings.Contains(r.Why, `want {"greeting":"HELLO, ADA!"}`) || strings.Join(r.Changed, ",") != "greet,out,shout" {
		t.Errorf("the regressed case: why %q, changed %v; want the expected output and greet, out, shout changed", r.Why, r.Changed)
	}

	// Each version's last result, for the version history.
	var sums struct {
		Versions map[string]cases.LastResult `json:"versions"`
	}
	a.must(http.StatusOK, "GET", "/api/flows/"+flow+"/tests", nil).into(t, &sums)
	if s := sums.Versions[savedVersion]; s.Passed != 2 || s.Draft {
		t.Errorf("the saved version's last result: %+v", s)
	}
	if s := sums.Versions[rep.Version]; s.Failed != 1 || !s.Draft || s.Verdicts[0].Case != "ada" {
		t.Errorf("the working copy's last result: %+v", s)
	}
	var whole cases.Report
	a.must(http.StatusOK, "GET", "/api/flows/"+flow+"/tests/"+rep.Version[:12], nil).into(t, &whole)
	if len(whole.Results) != 1 || whole.Results[0].Run == "" {
		t.Errorf("the whole last result: %+v", whole)
	}
}

// server_CasesView is the answer of GET /api/flows/FLOW/cases.
type server_CasesView struct {
	Exists   bool            `json:"exists"`
	File     json.RawMessage `json:"file"`
	Problems []struct {
		Path    string `json:"path"`
		Message string `json:"message"`
	} `json:"problems"`
}

// A cases file is refused (400) with every problem at its JSON path; bad requests say where.
func TestCasesFileIsCheckedOnSave(t *testing.T) {
	a := newAPI(t, storetest.Embedded(t))
	flow, doc := a.flowDoc("linear", nil)
	a.must(http.StatusCreated, "PUT", "/api/flows/"+flow, doc)
	bad := map[string]any{"sluice_cases": 1, "cases": []any{
		map[string]any{"id": "a", "input": map[string]any{}, "expect": []any{map[string]any{"fails_at": "nowhere"}, map[string]any{"jq": ".x |"}}},
	}}
	e := a.must(http.StatusBadRequest, "PUT", "/api/flows/"+flow+"/cases", bad).errorBody(t)
	paths := map[string]bool{}
	for _, p := range e.Problems {
		paths[p.Path] = true
	}
	if !paths["cases[0].expect[0].fails_at"] || !paths["cases[0].expect[1].jq"] {
		t.Errorf("problems %+v, want cases[0].expect[0].fails_at and cases[0].expect[1].jq", e.Problems)
	}
	good := map[string]any{"sluice_cases": 1, "cases": []any{map[string]any{"id": "a", "input": map[string]any{"name": "x"}, "expect": []any{map[string]any{"succeeds": true}}}}}
	a.must(http.StatusOK, "PUT", "/api/flows/"+flow+"/cases", good)
	if e := a.must(http.StatusBadRequest, "POST", "/api/flows/"+flow+"/cases", map[string]any{}).errorBody(t); e.Path != "run" {
		t.Errorf("saving no run: %+v", e)
	}
	a.must(http.StatusNotFound, "POST", "/api/flows/"+flow+"/cases", map[string]any{"run": "nope"})
	a.must(http.StatusNotFound, "GET", "/api/flows/no-such-flow-here/cases", nil)
	if e := a.must(http.StatusNotFound, "POST", "/api/flows/"+flow+"/cases/run", map[string]any{"cases": []string{"zzz"}}).errorBody(t); !strings.Contains(e.Message, `no case "zzz"`) {
		t.Errorf("running an unknown case: %+v", e)
	}
}
