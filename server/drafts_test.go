package server_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/flows"
	"github.com/sluicehq/sluice/server"
	"github.com/sluicehq/sluice/store/storetest"
)

func TestADraftIsKeptWithItsProblemsAndNeverRuns(t *testing.T) {
	a := newAPI(t, storetest.Real(t))
	id, broken := a.flowDoc("linear", func(d map[string]any) {
		d["nodes"].([]any)[1].(map[string]any)["params"] = map[string]any{}
	})

	// A document that does not validate is not saved, but is kept as a draft.
	a.must(http.StatusBadRequest, "PUT", "/api/flows/"+id, broken)
	var saved server.DraftSaved
	a.must(http.StatusCreated, "PUT", "/api/flows/"+id+"/draft?create=true", broken).into(t, &saved)
	if !saved.Draft || saved.Valid || len(saved.Problems.Errors()) != 1 || saved.Problems[0].Node != "greet" {
		t.Errorf("draft saved = %+v, want an invalid draft with greet's problem", saved)
	}
	if got := a.must(200, "GET", "/api/flows/"+id+"/draft", nil); !strings.Contains(got.String(), `"greet"`) {
		t.Errorf("draft read back: %s", got)
	}
	a.must(http.StatusConflict, "PUT", "/api/flows/"+id+"/draft?create=true", broken)

	// Nothing runs it: the answer says why.
	e := a.must(http.StatusBadRequest, "POST", "/api/flows/"+id+"/runs", map[string]any{"input": map[string]any{}}).errorBody(t)
	if e.Code != flows.Invalid || !strings.Contains(e.Message, "draft") || !strings.Contains(e.Message, "greet") {
		t.Errorf("run of a draft-only flow: %+v, want invalid, saying it is a draft and where", e)
	}
	a.must(http.StatusNotFound, "GET", "/api/flows/"+id, nil)
	var list server.FlowList
	a.must(200, "GET", "/api/flows", nil).into(t, &list)
	found := false
	for _, f := range list.Flows {
		if f.ID == id {
			found = true
			if f.Published || f.Valid || f.Draft == nil || f.Draft.Errors != 1 {
				t.Errorf("listed as %+v, want an unpublished flow with a draft of 1 error", f)
			}
		}
	}
	if !found {
		t.Errorf("the draft-only flow %s is not listed", id)
	}

	// Saved valid: published, and the draft is gone; a new draft leaves the file alone.
	_, fixed := a.flowDoc("linear", func(d map[string]any) { d["id"] = id })
	a.must(http.StatusCreated, "PUT", "/api/flows/"+id, fixed)
	a.must(http.StatusNotFound, "GET", "/api/flows/"+id+"/draft", nil)
	a.must(200, "PUT", "/api/flows/"+id+"/draft", broken).into(t, &saved)
	if saved.Valid {
		t.Errorf("the broken draft answered valid")
	}
	r := a.settle(id, a.start(id, map[string]any{"input": map[string]any{"name": "Ada"}}))
	if r.Status != "succeeded" {
		t.Errorf("a run of the published flow while a broken draft exists: %s (%s)", r.Status, r.Error)
	}
	a.must(http.StatusNoContent, "DELETE", "/api/flows/"+id+"/draft", nil)
	a.must(http.StatusNotFound, "DELETE", "/api/flows/"+id+"/draft", nil)

	// A draft's id must be the flow's; a draft is a JSON object.
	e = a.must(http.StatusBadRequest, "PUT", "/api/flows/"+id+"/draft", map[string]any{"sluice": 1, "id": "other", "nodes": []any{}}).errorBody(t)
	if e.Path != "id" {
		t.Errorf("a draft under another id: %+v, want path id", e)
	}
	a.must(http.StatusBadRequest, "PUT", "/api/flows/"+id+"/draft", []any{1})
}
