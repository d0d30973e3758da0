package server_test

import (
	"encoding/json"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/server"
	"github.com/sluicehq/sluice/store/storetest"
)

func langflowFixture(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile("../flows/langflow/testdata/" + name + ".json")
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestImportAcceptsALangflowExport(t *testing.T) {
	a := newAPI(t, storetest.Embedded(t))
	id := storetest.FlowID(t)
	var saved server.SavedFlow
	a.must(http.StatusCreated, "POST", "/api/flows?id="+id, langflowFixture(t, "basic_prompting")).into(t, &saved)
	if saved.ID != id || !saved.Published || saved.Import == nil || saved.Import.From != "langflow" || len(saved.Import.Gaps) != 0 || len(saved.Import.Notes) == 0 {
		t.Fatalf("saved = %+v", saved)
	}
	var doc struct {
		Nodes []struct{ ID, Type string } `json:"nodes"`
	}
	a.must(200, "GET", "/api/flows/"+id, nil).into(t, &doc)
	if len(doc.Nodes) != 4 || doc.Nodes[2].Type != "llm" {
		t.Errorf("imported flow %+v", doc)
	}
	a.must(http.StatusConflict, "POST", "/api/flows?id="+id, langflowFixture(t, "basic_prompting"))

	// Nodes without an equivalent: refused, one problem per node ...
	id2 := storetest.FlowID(t) + "-partial"
	e := a.must(http.StatusBadRequest, "POST", "/api/flows?id="+id2, langflowFixture(t, "unmapped")).errorBody(t)
	if len(e.Problems) != 4 {
		t.Fatalf("problems = %+v", e.Problems)
	}
	for _, p := range e.Problems {
		if p.Code != server.CodeUnmapped || p.Node == "" || !strings.Contains(p.Message, "no Sluice equivalent") {
			t.Errorf("problem %+v", p)
		}
	}
	a.must(http.StatusNotFound, "GET", "/api/flows/"+id2, nil)
	// ... unless partial: saved with placeholders, not published, failing validation.
	a.must(http.StatusCreated, "POST", "/api/flows?partial=true&id="+id2, langflowFixture(t, "unmapped")).into(t, &saved)
	if saved.Published || len(saved.Import.Gaps) != 4 {
		t.Errorf("partial import = %+v", saved)
	}
	unknown := 0
	for _, p := range saved.Problems {
		if p.Code == "unknown_type" {
			unknown++
		}
	}
	if unknown != 4 {
		t.Errorf("problems of the partial import %+v, want the 4 placeholders as unknown types", saved.Problems)
	}
	raw := a.must(200, "GET", "/api/flows/"+id2, nil)
	var d map[string]any
	if err := json.Unmarshal(raw.body, &d); err != nil || !strings.Contains(string(raw.body), `"langflow:Chroma"`) {
		t.Errorf("the partial flow's file: %s", raw.body)
	}
}
