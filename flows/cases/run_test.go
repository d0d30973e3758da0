package cases_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/flows"
	"github.com/sluicehq/sluice/flows/cases"
	"github.com/sluicehq/sluice/flows/engine"
	"github.com/sluicehq/sluice/flows/nodes"
	"github.com/sluicehq/sluice/flows/nodes/llmtest"
	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/storetest"
)

// replyFlow asks a model to classify, then shapes the reply: in → classify (llm) →
// shape (transform) → out.
const replyFlow = `{"sluice": 1, "id": "FLOW", "settings": {"max_attempts": 1}, "nodes": [
  {"id": "in", "type": "input", "params": {}},
  {"id": "classify", "type": "llm", "params": {"model": "m", "user": "Classify: {{.text}}", "as": "intent"}},
  {"id": "shape", "type": "transform", "params": {"expr": "{label: (.intent | ascii_downcase)}"}},
  {"id": "out", "type": "output", "params": {"value": "{label}"}}],
 "edges": [{"from": "in", "to": "classify"}, {"from": "classify", "to": "shape"}, {"from": "shape", "to": "out"}]}`

type harness struct {
	e    *engine.Engine
	plan *flows.Plan
	llm  *llmtest.Server
	env  *nodes.Env
}

// newHarness compiles replyFlow under a flow id of this test and runs a worker for it.
func newHarness(t *testing.T, r *store.Redis) *harness {
	t.Helper()
	flow := storetest.FlowID(t)
	storetest.DeleteFlowKeys(t, r, flow)
	srv := llmtest.New(t)
	env := srv.Env(0)
	reg := flows.NewRegistry()
	nodes.Register(reg, env)
	e := engine.New(r, reg, engine.Options{Logger: slog.New(slog.DiscardHandler)})
	plan, _, err := e.Compile([]byte(strings.ReplaceAll(replyFlow, "FLOW", flow)))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	w := e.NewWorker(engine.WorkerOptions{Flows: []string{flow}})
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return &harness{e: e, plan: plan, llm: srv, env: env}
}

func parse(t *testing.T, src string, plan *flows.Plan) *cases.File {
	t.Helper()
	ids := map[string]bool{}
	for id := range plan.Nodes {
		ids[id] = true
	}
	f, probs := cases.Parse([]byte(src), ids)
	if f == nil {
		t.Fatalf("cases: %v", probs)
	}
	return f
}

// Cases run as runs of the flow and are checked: a passing case, a regressed one with
// the node whose output changed, a case started at a node with a recorded state and one
// with a pinned model (neither calls the model), and a failure expected at a node.
func TestRunChecksEachCase(t *testing.T) {
	storetest.Each(t, func(t *testing.T, r *store.Redis) {
		h := newHarness(t, r)
		h.llm.Respond(func(req llmtest.Request) llmtest.Reply {
			if strings.Contains(req.Last().Text(), "broken") {
				return llmtest.Error(400, "bad request")
			}
			if strings.Contains(req.Last().Text(), "refund") {
				return llmtest.Text("REFUND")
			}
			return llmtest.Text("QUESTION")
		})
		f := parse(t, `{"sluice_cases": 1, "cases": [
		  {"id": "refund", "input": {"text": "I want a refund"}, "expect": [{"succeeds": true}, {"equals": {"label": "refund"}}, {"max_tokens": 1000}],
		   "node_outputs": {"classify": "REFUND", "shape": {"label": "refund"}}},
		  {"id": "regressed", "input": {"text": "where is my parcel"}, "expect": [{"path": ".label", "equals": "refund"}],
		   "node_outputs": {"classify": "REFUND", "shape": {"label": "refund"}}},
		  {"id": "at-shape", "start": {"node": "shape", "state": {"text": "x", "intent": "COMPLAINT"}}, "expect": [{"path": ".label", "equals": "complaint"}]},
		  {"id": "pinned", "input": {"text": "hello"}, "pins": {"classify": {"output": "PINNED", "update": {"intent": "PINNED"}}}, "expect": [{"contains": {"label": "pinned"}}]},
		  {"id": "broken", "input": {"text": "broken"}, "expect": [{"fails_at": "classify"}]}]}`, h.plan)
		res, err := cases.Run(context.Background(), h.e, h.plan, f, cases.Options{Parallel: 3})
		if err != nil {
			t.Fatal(err)
		}
		byID := map[string]cases.Result{}
		for _, r := range res {
			byID[r.Case] = r
		}
		want := map[string]bool{"refund": true, "regressed": false, "at-shape": true, "pinned": true, "broken": true}
		for id, pass := range want {
			if got := byID[id]; got.Pass != pass {
				t.Errorf("case %s: pass = %v (%s; checks %+v), want %v", id, got.Pass, got.Why, got.Checks, pass)
			}
		}
		if got := byID["regressed"]; got.Why != `equals: got "question", want "refund"` || strings.Join(got.Changed, ",") != "classify,shape" {
			t.Errorf("regressed case: why %q, changed %v; want the difference and classify,shape changed", got.Why, got.Changed)
		}
		if got := byID["refund"]; len(got.Changed) != 0 || got.Tokens == 0 || got.Run == "" {
			t.Errorf("refund case: changed %v, tokens %d, run %q; want nothing changed, the model's tokens and its run", got.Changed, got.Tokens, got.Run)
		}
		for _, req := range h.llm.Requests() {
			if txt := req.Last().Text(); strings.Contains(txt, "hello") || strings.Contains(txt, ": x") {
				t.Errorf("the model was asked %q: a pinned node and the nodes before a case's start must not run", txt)
			}
		}
		if n := h.llm.Calls(); n != 3 {
			t.Errorf("%d model calls, want 3 (refund, regressed, broken)", n)
		}
		run, err := h.e.Get(context.Background(), h.plan.Flow, byID["at-shape"].Run)
		if err != nil {
			t.Fatal(err)
		}
		if run.Trigger != "test:at-shape" {
			t.Errorf("a case's run has trigger %q, want test:at-shape", run.Trigger)
		}
		s := cases.Summarize(h.plan.Version, res)
		if s.Passed != 4 || s.Failed != 1 || s.Failing[0] != "regressed" {
			t.Errorf("summary %+v", s)
		}
	})
}

// A case that cannot start (a pin of a node that calls nothing) fails with the reason;
// the other cases still run.
func TestCaseThatCannotStartFails(t *testing.T) {
	h := newHarness(t, storetest.Embedded(t))
	h.llm.Respond(func(llmtest.Request) llmtest.Reply { return llmtest.Text("X") })
	f := parse(t, `{"sluice_cases": 1, "cases": [
	  {"id": "bad-pin", "input": {}, "pins": {"shape": {"output": 1}}, "expect": [{"succeeds": true}]},
	  {"id": "ok", "input": {"text": "t"}, "expect": [{"succeeds": true}]}]}`, h.plan)
	res, err := cases.Run(context.Background(), h.e, h.plan, f, cases.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if res[0].Pass || !strings.Contains(res[0].Why, "did not start") || !strings.Contains(res[0].Why, "calls nothing outside") {
		t.Errorf("bad pin: %+v", res[0])
	}
	if !res[1].Pass {
		t.Errorf("ok: %+v", res[1])
	}
	out, _ := json.Marshal(res[1].Output)
	if string(out) != `{"label":"x"}` {
		t.Errorf("ok's output %s", out)
	}
}
