package server_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/flows"
	"github.com/sluicehq/sluice/flows/langflow/langflowtest"
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
	if len(e.Problems) != 3 {
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
	if saved.Published || len(saved.Import.Gaps) != 3 {
		t.Errorf("partial import = %+v", saved)
	}
	unknown := 0
	for _, p := range saved.Problems {
		if p.Code == "unknown_type" {
			unknown++
		}
	}
	if unknown != 3 {
		t.Errorf("problems of the partial import %+v, want the 3 placeholders as unknown types", saved.Problems)
	}
	raw := a.must(200, "GET", "/api/flows/"+id2, nil)
	var d map[string]any
	if err := json.Unmarshal(raw.body, &d); err != nil || !strings.Contains(string(raw.body), `"langflow:AssemblyAITranscriptionJobPoller"`) {
		t.Errorf("the partial flow's file: %s", raw.body)
	}
}

// A 40 KB export of 22 text inputs in a chain, each fed by 4 identical edges, used to
// keep the request converting 4^21 paths: it never answered.
func TestImportOfAChainOfRepeatedEdgesAnswers(t *testing.T) {
	a := newAPI(t, storetest.Embedded(t))
	for i, export := range [][]byte{langflowtest.Chain(22, 4, true), langflowtest.Chain(200, 4, false)} {
		id := fmt.Sprintf("%s-%d", storetest.FlowID(t), i)
		var saved server.SavedFlow
		a.must(http.StatusCreated, "POST", "/api/flows?id="+id, export).into(t, &saved)
		if !saved.Published || len(saved.Problems.Errors()) > 0 {
			t.Errorf("import of the chain: %+v", saved)
		}
	}
	// An export with more nodes than a flow may hold is refused at once.
	e := a.must(http.StatusRequestEntityTooLarge, "POST", "/api/flows?id="+storetest.FlowID(t)+"-big", langflowtest.Chain(flows.DefaultLimits.MaxNodes, 1, true)).errorBody(t)
	if e.Code != flows.TooLarge || !strings.Contains(e.Message, "at most") {
		t.Errorf("error = %+v", e)
	}
}

// A credential in an export reaches neither the saved file nor any answer: not the
// flow, not the report of the import, not the problems of a refused one.
func TestImportNeverCopiesACredential(t *testing.T) {
	const key = "sk-proj-Zyxwvutsrqponmlkjihg9876"
	a := newAPI(t, storetest.Embedded(t))
	noKey := func(where string, b []byte) {
		t.Helper()
		if strings.Contains(strings.ToLower(string(b)), strings.ToLower(key)) {
			t.Errorf("%s holds the key: %s", where, b)
		}
	}
	id := storetest.FlowID(t)
	// The API request's URL held the key: left out, the flow does not validate there and
	// is refused, unless partial: then saved to be finished, not published.
	e := a.must(http.StatusBadRequest, "POST", "/api/flows?id="+id, langflowtest.Credentials(key, false))
	noKey("the refusal of an import that does not validate", e.body)
	if ps := e.errorBody(t).Problems; len(ps) != 1 || ps[0].Node != "apirequest" || !strings.Contains(ps[0].Path, "params.url") {
		t.Errorf("problems %+v, want the request's empty URL", ps)
	}
	r := a.must(http.StatusCreated, "POST", "/api/flows?partial=true&id="+id, langflowtest.Credentials(key, false))
	noKey("the answer of the import", r.body)
	var saved server.SavedFlow
	r.into(t, &saved)
	if saved.Published || !strings.Contains(r.String(), "field template holds what looks like a credential; it was not copied") {
		t.Errorf("import = %s, want it saved unpublished, with the dropped key reported", r.body)
	}
	file, err := a.lib.Load(id)
	if err != nil {
		t.Fatal(err)
	}
	noKey("the saved file", file)

	partial := storetest.FlowID(t) + "-partial"
	r = a.must(http.StatusBadRequest, "POST", "/api/flows?id="+partial, langflowtest.Credentials(key, true))
	noKey("the refusal of an import with gaps", r.body)
	r = a.must(http.StatusCreated, "POST", "/api/flows?partial=true&id="+partial, langflowtest.Credentials(key, true))
	noKey("the answer of a partial import", r.body)
	file, err = a.lib.Load(partial)
	if err != nil {
		t.Fatal(err)
	}
	noKey("the saved file of a partial import", file)
	if !strings.Contains(string(file), `"langflow:AssemblyAITranscriptionJobCreator"`) {
		t.Errorf("no placeholder in %s", file)
	}
}

// The audit log names the flow an import made: a Sluice document's and a Langflow
// export's (the route has no flow in its path).
func TestAnImportIsAuditedWithTheFlowItMade(t *testing.T) {
	a := newAPI(t, storetest.Embedded(t))
	plain, doc := a.flowDoc("linear", nil)
	a.must(http.StatusCreated, "POST", "/api/flows", doc)
	converted := storetest.FlowID(t) + "-lf"
	a.must(http.StatusCreated, "POST", "/api/flows?id="+converted, langflowFixture(t, "basic_prompting"))
	log := a.must(http.StatusOK, "GET", "/api/audit?action=flow.import&format=jsonl", nil).String()
	var targets []string
	for _, line := range strings.Split(strings.TrimSpace(log), "\n") {
		var e struct{ Action, Target string }
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		targets = append(targets, e.Target)
	}
	if got := strings.Join(targets, " "); !strings.Contains(got, plain) || !strings.Contains(got, converted) {
		t.Errorf("the imports' audit entries name %q, want %s and %s:\n%s", targets, plain, converted, log)
	}
}
