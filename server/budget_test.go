package server_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/flows"
	"github.com/sluicehq/sluice/flows/nodes/llmtest"
	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/storetest"
)

// A run that crosses its token budget fails at the crossing step, for good, with the
// budget and the spend; the run page shows the spend against the budget.
func TestRunThatCrossesItsTokenBudgetFailsAtTheCrossingStep(t *testing.T) {
	r := storetest.Real(t)
	a, model := budgetAPI(t, r)
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

// What the flow spent in the day (all its runs) is shown against the budget's day caps
// on the run page and in the run's API answer.
func TestRunShowsItsFlowsDaySpendAgainstTheDayBudget(t *testing.T) {
	r := storetest.Real(t)
	a, _ := budgetAPI(t, r)
	flow := a.saveFlow(`{"sluice": 1, "id": "x", "settings": {"budget": {"run_tokens": 1000, "day_tokens": 100, "day_usd": 2}}, "nodes": [
		{"id": "in", "type": "input"},
		{"id": "ask", "type": "llm", "params": {"model": "m", "user": "one"}},
		{"id": "out", "type": "output"}],
		"edges": [{"from": "in", "to": "ask"}, {"from": "ask", "to": "out"}]}`, nil)
	today := time.Now().UTC().Format(time.DateOnly)
	// Another run of the flow spent 40 tokens today already.
	if _, _, err := store.NewLedger(r).Spend(context.Background(), flow, "earlier", today, flows.Spend{Tokens: 40}, false); err != nil {
		t.Fatal(err)
	}
	run := a.settle(flow, a.start(flow, map[string]any{"input": map[string]any{}}))
	if run.Status != store.StatusSucceeded {
		t.Fatalf("run %+v", run)
	}
	if time.Now().UTC().Format(time.DateOnly) != today {
		t.Skip("the UTC day changed while the test ran")
	}
	var view struct {
		Spend    struct{ Tokens int64 }
		DaySpend *struct {
			Day    string  `json:"day"`
			Tokens int64   `json:"tokens"`
			USD    float64 `json:"usd"`
		} `json:"day_spend"`
		Budget struct {
			DayTokens int64 `json:"day_tokens"`
		}
	}
	a.must(http.StatusOK, "GET", "/api/flows/"+flow+"/runs/"+run.ID, nil).into(t, &view)
	if view.Spend.Tokens != 15 || view.DaySpend == nil || view.DaySpend.Day != today || view.DaySpend.Tokens != 55 || view.Budget.DayTokens != 100 {
		t.Errorf("the run's spend %+v, the flow's day %+v, budget %+v through the API; want 15, 55 on %s, 100", view.Spend, view.DaySpend, view.Budget, today)
	}
	page := a.must(http.StatusOK, "GET", "/flows/"+flow+"/runs/"+run.ID, nil, "Accept", "text/html").String()
	i := strings.Index(page, `id="run-budget-day"`)
	if i < 0 {
		t.Fatal("the run page shows no spend of the flow's day")
	}
	day := page[i:min(len(page), i+900)]
	day = day[:strings.Index(day, "</div>")]
	for _, want := range []string{"The flow today", `<span class="mono">55</span> of <span class="mono">100</span> budgeted`, `value="55"`,
		`<span class="mono">$0.0000</span> of <span class="mono">$2.0000</span> budgeted`} {
		if !strings.Contains(day, want) {
			t.Errorf("the flow's day on the run page lacks %q: %s", want, day)
		}
	}
}

// A day cap stops a flow whose runs are spread over partitions when their spend adds up
// to it: the day is every partition's spend, not the crossing run's partition's.
func TestADayBudgetStopsRunsSpreadOverPartitions(t *testing.T) {
	r := storetest.Real(t)
	a, model := budgetAPI(t, r)
	flow := a.saveFlow(`{"sluice": 1, "id": "x", "settings": {"partitions": 4, "budget": {"day_tokens": 100}}, "nodes": [
		{"id": "in", "type": "input"},
		{"id": "ask", "type": "llm", "params": {"model": "m", "user": "one"}},
		{"id": "out", "type": "output"}],
		"edges": [{"from": "in", "to": "ask"}, {"from": "ask", "to": "out"}]}`, nil)
	today := time.Now().UTC().Format(time.DateOnly)
	parts := map[int]bool{}
	// 15 tokens a run: six runs spend 90, the seventh's call takes the day to 105.
	for i := 1; i <= 6; i++ {
		id := a.start(flow, map[string]any{"input": map[string]any{}})
		if run := a.settle(flow, id); run.Status != store.StatusSucceeded {
			t.Fatalf("run %d of 6 within the day's budget: %+v", i, run)
		}
		ref, err := r.FindRun(context.Background(), flow, id)
		if err != nil {
			t.Fatal(err)
		}
		parts[ref.Part] = true
	}
	crossing := a.settle(flow, a.start(flow, map[string]any{"input": map[string]any{}}))
	after := a.settle(flow, a.start(flow, map[string]any{"input": map[string]any{}}))
	if time.Now().UTC().Format(time.DateOnly) != today {
		t.Skip("the UTC day changed while the test ran")
	}
	if len(parts) < 2 {
		t.Fatalf("six runs over 4 partitions all landed on %v: the test shows nothing", parts)
	}
	if crossing.Status != store.StatusFailed || !strings.Contains(crossing.Error, "over budget: the flow today (UTC) spent 105 tokens, its budget is 100 tokens (this step's model call crossed it)") {
		t.Errorf("the seventh run (runs on partitions %v before it): %s %q, want it failed crossing the day's budget at 105 tokens", parts, crossing.Status, crossing.Error)
	}
	if after.Status != store.StatusFailed || !strings.Contains(after.Error, "reached before this step's model call") {
		t.Errorf("the eighth run: %s %q, want it failed before calling the model", after.Status, after.Error)
	}
	if model.Calls() != 7 {
		t.Errorf("%d model calls, want 7: none once the day's budget was spent", model.Calls())
	}
}

// budgetAPI is an API whose flows keep their spend in r's ledger, with a model that
// answers "ok" for 10 prompt and 5 completion tokens.
func budgetAPI(t *testing.T, r *store.Redis) (*api, *llmtest.Server) {
	t.Helper()
	model := llmtest.New(t)
	model.Respond(func(llmtest.Request) llmtest.Reply {
		return llmtest.Reply{Content: "ok", PromptTokens: 10, CompletionTokens: 5}
	})
	env := model.Env(0)
	env.Ledger = store.NewLedger(r)
	return newAPIWith(t, r, env), model
}
