package server_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/flows/nodes/llmtest"
	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/storetest"
)

// A run that crosses its token budget fails at the crossing step, for good, with the
// budget and the spend; the run page shows the spend against the budget.
func TestRunThatCrossesItsTokenBudgetFailsAtTheCrossingStep(t *testing.T) {
	r := storetest.Real(t)
	model := llmtest.New(t)
	model.Respond(func(llmtest.Request) llmtest.Reply {
		return llmtest.Reply{Content: "ok", PromptTokens: 10, CompletionTokens: 5}
	})
	env := model.Env(0)
	env.Ledger = store.NewLedger(r)
	a := newAPIWith(t, r, env)
	flow := a.saveFlow(`{"sluice": 1, "id": "x", "settings": {"budget": {"run_tokens": 20}}, "nodes": [
		{"id": "in", "type": "input"},
		{"id": "first", "type": "llm", "params": {"model": "m", "user": "one", "as": "a"}},
		{"id": "second", "type": "llm", "params": {"model": "m", "user": "two", "as": "b"}},
		{"id": "third", "type": "llm", "params": {"model": "m", "user": "three", "as": "c"}},
		{"id": "out", "type": "output"}],
		"edges": [{"from": "in", "to": "first"}, {"from": "first", "to": "second"}, {"from": "second", "to": "third"}, {"from": "third", "to": "out"}]}`, nil)
	run := a.settle(flow, a.start(flow, map[string]any{"input": map[string]any{}}))
	if run.Status != store.StatusFailed || run.ErrorNode != "second" || run.Dead != 1 ||
		!strings.Contains(run.Error, "over budget: the run spent 30 tokens, its budget is 20 tokens") {
		t.Fatalf("run %+v, want it failed at node second with the budget and the spend", run)
	}
	if model.Calls() != 2 {
		t.Errorf("%d model calls, want 2: one per step, and the second step was not retried", model.Calls())
	}
	var view struct {
		Spend  struct{ Tokens int64 }
		Budget struct {
			RunTokens int64 `json:"run_tokens"`
		}
	}
	a.must(http.StatusOK, "GET", "/api/flows/"+flow+"/runs/"+run.ID, nil).into(t, &view)
	if view.Spend.Tokens != 30 || view.Budget.RunTokens != 20 {
		t.Errorf("the run's spend %+v and budget %+v through the API", view.Spend, view.Budget)
	}
	page := a.must(http.StatusOK, "GET", "/flows/"+flow+"/runs/"+run.ID, nil, "Accept", "text/html").String()
	i := strings.Index(page, `id="run-budget"`)
	if i < 0 {
		t.Fatal("the run page shows no spend")
	}
	budget := page[i:min(len(page), i+600)]
	if !strings.Contains(budget, `budget-line over`) || !strings.Contains(budget, `<span class="mono">30</span>`) || !strings.Contains(budget, `<span class="mono">20</span> budgeted`) {
		t.Errorf("the run page's spend: %s", budget)
	}
}
