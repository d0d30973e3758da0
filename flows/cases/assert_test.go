package cases_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/flows"
	"github.com/sluicehq/sluice/flows/cases"
	"github.com/sluicehq/sluice/flows/nodes/llmtest"
)

func assertion(t *testing.T, src string) *cases.Assertion {
	t.Helper()
	var a cases.Assertion
	if err := json.Unmarshal([]byte(src), &a); err != nil {
		t.Fatalf("%s: %v", src, err)
	}
	return &a
}

func output(t *testing.T, src string) any {
	t.Helper()
	v, err := flows.DecodeJSON([]byte(src))
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// Each assertion kind passes on an outcome that meets it and fails, saying why, on one
// that does not.
func TestEachAssertionKind(t *testing.T) {
	ok := &cases.Outcome{Status: "succeeded", Output: output(t, `{"intent": "refund", "reply": "We will refund you.", "tags": ["a", "b"], "n": 3}`),
		State:    map[string]any{"ticket": "t-1"},
		Usage:    flows.Usage{InputTokens: 100, OutputTokens: 20, CostUSD: 0.002},
		Duration: 1500 * time.Millisecond}
	bad := &cases.Outcome{Status: "failed", ErrorNode: "classify", Error: "model unavailable",
		Usage: flows.Usage{InputTokens: 5000}, Duration: 2 * time.Minute}
	tests := []struct {
		name, assertion string
		o               *cases.Outcome
		pass            bool
		why             string // a part of the reason, for failures
	}{
		{"jq predicate true passes", `{"jq": ".intent == \"refund\""}`, ok, true, ""},
		{"jq predicate false fails", `{"jq": ".n > 5"}`, ok, false, ".n > 5 is false"},
		{"jq sees $state and $run", `{"jq": "$state.ticket == \"t-1\" and $run.tokens == 120"}`, ok, true, ""},
		{"jq on a failed run sees its error node", `{"jq": "$run.error_node == \"classify\""}`, bad, true, ""},
		{"jq runtime error fails with it", `{"jq": ".intent | keys"}`, ok, false, "jq .intent | keys"},
		{"equals the whole output in any key order", `{"equals": {"n": 3, "tags": ["a", "b"], "reply": "We will refund you.", "intent": "refund"}}`, ok, true, ""},
		{"equals a path", `{"path": ".n", "equals": 3.0}`, ok, true, ""},
		{"equals a different value fails", `{"path": ".intent", "equals": "question"}`, ok, false, `got "refund", want "question"`},
		{"equals on a failed run fails", `{"equals": 1}`, bad, false, `failed at node "classify"`},
		{"contains a substring", `{"path": ".reply", "contains": "refund"}`, ok, true, ""},
		{"contains array elements", `{"path": ".tags", "contains": ["b"]}`, ok, true, ""},
		{"contains a part of an object", `{"contains": {"intent": "refund"}}`, ok, true, ""},
		{"does not contain", `{"path": ".reply", "contains": "sorry"}`, ok, false, "does not contain"},
		{"schema matches", `{"schema": {"type": "object", "required": ["intent"], "properties": {"intent": {"enum": ["refund", "question"]}}}}`, ok, true, ""},
		{"schema mismatch names the path", `{"schema": {"type": "object", "properties": {"n": {"type": "string"}}}}`, ok, false, "n: is number, want string"},
		{"succeeds on success", `{"succeeds": true}`, ok, true, ""},
		{"succeeds on failure names node and error", `{"succeeds": true}`, bad, false, `failed at node "classify": model unavailable`},
		{"succeeds false on failure", `{"succeeds": false}`, bad, true, ""},
		{"fails_at the node", `{"fails_at": "classify"}`, bad, true, ""},
		{"fails_at any node", `{"fails_at": "*"}`, bad, true, ""},
		{"fails_at another node", `{"fails_at": "reply"}`, bad, false, `failed at "classify", not at "reply"`},
		{"fails_at on success", `{"fails_at": "classify"}`, ok, false, "succeeded"},
		{"max_tokens under", `{"max_tokens": 120}`, ok, true, ""},
		{"max_tokens over", `{"max_tokens": 1000}`, bad, false, "5000 tokens, over the ceiling of 1000"},
		{"max_cost_usd under", `{"max_cost_usd": 0.01}`, ok, true, ""},
		{"max_cost_usd over", `{"max_cost_usd": 0.001}`, ok, false, "over the ceiling of $0.001"},
		{"max_duration under", `{"max_duration": "2s"}`, ok, true, ""},
		{"max_duration over", `{"max_duration": "1m"}`, bad, false, "took 2m0s, over the ceiling of 1m0s"},
		{"graded without a grader fails", `{"graded": {"rubric": "polite"}}`, ok, false, "no model to grade with"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := cases.Evaluate(context.Background(), assertion(t, tt.assertion), tt.o, nil)
			if c.Pass != tt.pass {
				t.Fatalf("pass = %v (%s), want %v", c.Pass, c.Why, tt.pass)
			}
			if !tt.pass && !strings.Contains(c.Why, tt.why) {
				t.Errorf("why = %q, want it to contain %q", c.Why, tt.why)
			}
		})
	}
}

// The model-graded assertion asks the provider's model with the rubric and the output,
// takes its pass or fail and reason, and asks once for the same rubric and output: the
// verdict is cached.
func TestGradedAssertionAsksTheModelOnce(t *testing.T) {
	srv := llmtest.New(t)
	env := srv.Env(0)
	srv.Respond(func(r llmtest.Request) llmtest.Reply {
		if strings.Contains(r.Last().Text(), "We apologise") {
			return llmtest.Text(`{"pass": true, "reason": "it apologises"}`)
		}
		return llmtest.Text(`{"pass": false, "reason": "no apology"}`)
	})
	a := assertion(t, `{"path": ".reply", "graded": {"model": "judge-1", "rubric": "The reply apologises to the customer."}}`)
	polite := &cases.Outcome{Flow: "f", Run: "r1", Status: "succeeded", Output: output(t, `{"reply": "We apologise for the delay."}`)}
	rude := &cases.Outcome{Flow: "f", Run: "r2", Status: "succeeded", Output: output(t, `{"reply": "Wait."}`)}
	ctx := context.Background()
	if c := cases.Evaluate(ctx, a, polite, env); !c.Pass || c.Why != "it apologises" {
		t.Fatalf("polite reply: %+v, want a pass with the model's reason", c)
	}
	if c := cases.Evaluate(ctx, a, rude, env); c.Pass || c.Why != "no apology" {
		t.Fatalf("rude reply: %+v, want a fail with the model's reason", c)
	}
	reqs := srv.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d requests, want 2", len(reqs))
	}
	if reqs[0].Model != "judge-1" || !strings.Contains(reqs[0].Last().Text(), "The reply apologises to the customer.") || !strings.Contains(reqs[0].Last().Text(), "We apologise") {
		t.Errorf("the request names model %q and says %q; want judge-1, the rubric and the selected output", reqs[0].Model, reqs[0].Last().Text())
	}
	if c := cases.Evaluate(ctx, a, polite, env); !c.Pass {
		t.Fatalf("polite again: %+v", c)
	}
	if n := srv.Calls(); n != 2 {
		t.Errorf("grading the same output again made %d requests in all, want 2 (cached)", n)
	}
	srv.Respond(func(llmtest.Request) llmtest.Reply { return llmtest.Text("I think it is fine") })
	other := &cases.Outcome{Status: "succeeded", Output: output(t, `{"reply": "something else"}`)}
	if c := cases.Evaluate(ctx, a, other, env); c.Pass || !strings.Contains(c.Why, "did not answer") {
		t.Errorf("an answer that is not a verdict: %+v, want a fail saying so", c)
	}
}

// A cases file is checked against its schema and beyond it; every problem is reported
// at its JSON path.
func TestParseReportsEveryProblemAtItsPath(t *testing.T) {
	nodes := map[string]bool{"in": true, "classify": true, "out": true}
	good := `{"sluice_cases": 1, "flow": "triage", "cases": [
	  {"id": "refund", "input": {"text": "refund me"}, "expect": [{"succeeds": true}, {"path": ".intent", "equals": "refund"}]},
	  {"id": "from-classify", "start": {"node": "classify", "state": {"text": "x"}}, "pins": {"classify": {"output": "q"}}, "expect": [{"fails_at": "*"}]}]}`
	f, probs := cases.Parse([]byte(good), nodes)
	if f == nil || len(probs) > 0 {
		t.Fatalf("a good file: %v", probs)
	}
	if len(f.Cases) != 2 || f.Cases[1].Start.Node != "classify" {
		t.Fatalf("decoded %+v", f)
	}
	bad := `{"sluice_cases": 1, "cases": [
	  {"id": "a", "input": {}, "expect": [{"succeeds": true, "equals": 1}, {}, {"jq": ".x | "}, {"max_tokens": -1}, {"path": ".x", "succeeds": true}]},
	  {"id": "a", "input": 1, "start": {"node": "nope", "state": {}}, "pins": {"ghost": {}}, "expect": [{"fails_at": "missing"}], "extra": 1},
	  {"id": "Bad Id", "expect": []}]}`
	_, probs = cases.Parse([]byte(bad), nodes)
	want := map[string]string{
		"cases[0].expect[3].max_tokens": "",
		"cases[1].extra":                "unknown field",
		"cases[2].id":                   "",
		"cases[2].expect":               "",
	}
	got := map[string]string{}
	for _, p := range probs {
		got[p.Path] = p.Message
	}
	for path, msg := range want {
		m, ok := got[path]
		if !ok {
			t.Errorf("no problem at %s; got %v", path, probs)
		} else if !strings.Contains(m, msg) {
			t.Errorf("%s: %q, want it to say %q", path, m, msg)
		}
	}
	// The schema-valid parts are checked beyond the schema once the schema passes.
	bad2 := `{"sluice_cases": 1, "cases": [
	  {"id": "a", "input": {}, "expect": [{"succeeds": true, "equals": 1}, {"name": "x"}, {"path": ".x", "succeeds": true}, {"jq": ".x | "}, {"jq": "$nope"}]},
	  {"id": "a", "input": 1, "start": {"node": "nope", "state": {}}, "pins": {"ghost": {}}, "expect": [{"fails_at": "missing"}]}]}`
	_, probs = cases.Parse([]byte(bad2), nodes)
	want = map[string]string{
		"cases[0].expect[0]":          "has equals and succeeds",
		"cases[0].expect[1]":          "needs one of",
		"cases[0].expect[2].path":     "does not use it",
		"cases[1].id":                 "also the id of cases[0]",
		"cases[1]":                    "an input or a start, not both",
		"cases[1].start.node":         `no node "nope"`,
		"cases[1].pins.ghost":         `no node "ghost"`,
		"cases[1].expect[0].fails_at": `no node "missing"`,
	}
	got = map[string]string{}
	for _, p := range probs {
		got[p.Path] = p.Message
	}
	for path, msg := range want {
		if m, ok := got[path]; !ok || !strings.Contains(m, msg) {
			t.Errorf("%s: got %q, want it to say %q (all: %v)", path, m, msg, probs)
		}
	}
	if _, probs := cases.Parse([]byte(`{"sluice_cases": 1, "cases": [`), nodes); len(probs) != 1 || probs[0].Code != flows.CodeSyntax {
		t.Errorf("truncated JSON: %v", probs)
	}
}
