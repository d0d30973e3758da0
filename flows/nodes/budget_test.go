package nodes_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/flows"
	"github.com/sluicehq/sluice/flows/nodes"
	"github.com/sluicehq/sluice/flows/nodes/llmtest"
)

// buildBudgeted builds a node of a flow with budget.
func buildBudgeted(t *testing.T, env *nodes.Env, typ, params string, budget *flows.Budget) flows.Component {
	t.Helper()
	spec, _ := nodes.NewRegistry(env).Lookup(typ)
	p, err := spec.WithDefaults(json.RawMessage(params))
	if err != nil {
		t.Fatal(err)
	}
	c, err := spec.New(&flows.Build{Flow: &flows.Document{ID: "f", Settings: flows.Settings{Budget: budget}}, Node: &flows.Node{ID: "n", Type: typ}, Params: p})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func budgetError(t *testing.T, err error, path string, says ...string) {
	t.Helper()
	var fe *flows.Error
	if !errors.As(err, &fe) || !flows.IsPermanent(err) || fe.Path != path || fe.Node != "n" {
		t.Fatalf("error %v, want a permanent error at node n, %s", err, path)
	}
	for _, s := range says {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error %q does not say %q", err, s)
		}
	}
}

// An agent whose second model turn takes its run over the token budget fails at that
// turn, for good, with the budget and the spend; a step of the same run after it fails
// before calling the model.
func TestBudgetFailsTheStepThatCrossesTheRunsTokens(t *testing.T) {
	srv := llmtest.New(t)
	env := srv.Env(0)
	srv.Reply(
		llmtest.Reply{ToolCalls: []llmtest.ToolCall{llmtest.Call("c1", "query", `{"query": "."}`)}, PromptTokens: 60, CompletionTokens: 10},
		llmtest.Reply{Content: "done", PromptTokens: 80, CompletionTokens: 10},
	)
	a := buildBudgeted(t, env, "agent", `{"model": "m", "user": "go"}`, &flows.Budget{RunTokens: 100})
	s, _ := newStep(state(t, `{}`))
	s.Tools = map[string]flows.Tool{"query": buildIn(t, env, "data", `{"tool_name": "query"}`).(flows.Tool)}
	_, err := a.Run(context.Background(), s)
	budgetError(t, err, "settings.budget.run_tokens", "the run spent 160 tokens", "its budget is 100 tokens", "crossed it")
	if srv.Calls() != 2 {
		t.Errorf("%d model calls, want 2 (the second crossed the budget)", srv.Calls())
	}
	l := buildBudgeted(t, env, "llm", `{"model": "m", "user": "go"}`, &flows.Budget{RunTokens: 100})
	_, err = l.Run(context.Background(), s)
	budgetError(t, err, "settings.budget.run_tokens", "the run spent 160 tokens", "reached before")
	if srv.Calls() != 2 {
		t.Errorf("%d model calls, want none after the budget was spent", srv.Calls())
	}
	// Another run of the flow has its own budget.
	other, _ := newStep(state(t, `{}`))
	other.Run = "r2"
	srv.Reply(llmtest.Text("fine"))
	if _, err := l.Run(context.Background(), other); err != nil {
		t.Errorf("another run: %v", err)
	}
}

// Dollars come from the provider's prices; the flow's day budget counts every run.
func TestBudgetCountsDollarsAndTheFlowsDay(t *testing.T) {
	srv := llmtest.New(t)
	env := srv.Env(0)
	env.Providers["fake"].Prices = map[string]*nodes.Price{"m": {Input: 2, Output: 10}} // $ per million tokens
	srv.Respond(func(llmtest.Request) llmtest.Reply {
		return llmtest.Reply{Content: "ok", PromptTokens: 100000, CompletionTokens: 10000} // $0.20 + $0.10
	})
	l := buildBudgeted(t, env, "llm", `{"provider": "fake", "model": "m", "user": "go"}`, &flows.Budget{RunUSD: 0.5, DayUSD: 0.8})
	run := func(id string) error {
		s, _ := newStep(state(t, `{}`))
		s.Run = id
		_, err := l.Run(context.Background(), s)
		return err
	}
	if err := run("a"); err != nil {
		t.Fatal(err)
	}
	budgetError(t, run("a"), "settings.budget.run_usd", "the run spent $0.6000", "its budget is $0.5000")
	// Runs a (twice) and b have spent $0.90 today: b crossed the day's $0.80.
	budgetError(t, run("b"), "settings.budget.day_usd", "the flow today (UTC) spent $0.9000", "its budget is $0.8000", "crossed it")
	calls := srv.Calls()
	budgetError(t, run("c"), "settings.budget.day_usd", "reached before")
	if srv.Calls() != calls {
		t.Error("a run called the model after the flow's day budget was spent")
	}
}
