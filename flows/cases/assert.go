package cases

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"time"

	"github.com/itchyny/gojq"
	"github.com/sluicehq/sluice/flows"
	"github.com/sluicehq/sluice/flows/nodes"
)

// Outcome is what a case's run came to: what assertions look at.
type Outcome struct {
	Flow, Run string
	Status    string // succeeded, failed, cancelled, waiting, or timeout (never finished)
	Error     string
	ErrorNode string
	Output    any
	State     map[string]any
	Usage     flows.Usage
	Duration  time.Duration
}

// Grader grades an output against a rubric (nodes.Env).
type Grader interface {
	Grade(ctx context.Context, r nodes.GradeRequest) (*nodes.Grade, error)
}

// Check is one assertion's verdict.
type Check struct {
	Kind string `json:"kind"`
	Name string `json:"name,omitempty"`
	Pass bool   `json:"pass"`
	// Why says what was wrong (or, for a graded one, the model's reason either way).
	Why string `json:"why,omitempty"`
	// Usage is what grading spent.
	Usage flows.Usage `json:"usage,omitzero"`
}

// Evaluate checks assertion a on the run's outcome. A mistake in the assertion (a jq
// error) fails it, saying so; it never panics.
func Evaluate(ctx context.Context, a *Assertion, o *Outcome, g Grader) Check {
	c := Check{Kind: a.Kind(), Name: a.Name}
	fail := func(format string, args ...any) Check {
		c.Pass, c.Why = false, fmt.Sprintf(format, args...)
		return c
	}
	pass := func() Check { c.Pass = true; return c }
	// Every assertion on the output wants a run that produced one.
	needOutput := func() (any, bool, Check) {
		if o.Status != "succeeded" {
			return nil, false, fail("the run %s%s, so there is no output to check%s", o.Status, at(o.ErrorNode), colon(o.Error))
		}
		v := flows.JSONValue(o.Output)
		if a.Path == "" {
			return v, true, c
		}
		sel, err := runJQ(ctx, a.Path, v, o)
		if err != nil {
			return nil, false, fail("path %s: %v", a.Path, err)
		}
		return sel, true, c
	}
	switch c.Kind {
	case "succeeds":
		ok := o.Status == "succeeded"
		if ok == *a.Succeeds {
			return pass()
		}
		if *a.Succeeds {
			return fail("the run %s%s%s", o.Status, at(o.ErrorNode), colon(o.Error))
		}
		return fail("the run succeeded; it should not have")
	case "fails_at":
		if o.Status == "failed" && (a.FailsAt == "*" || o.ErrorNode == a.FailsAt) {
			return pass()
		}
		if o.Status == "failed" {
			return fail("the run failed at %q, not at %q%s", o.ErrorNode, a.FailsAt, colon(o.Error))
		}
		return fail("the run %s; it should have failed at %q", o.Status, a.FailsAt)
	case "max_tokens":
		if t := o.Usage.InputTokens + o.Usage.OutputTokens; t > *a.MaxTokens {
			return fail("%d tokens, over the ceiling of %d", t, *a.MaxTokens)
		}
		return pass()
	case "max_cost_usd":
		if o.Usage.CostUSD > *a.MaxCostUSD {
			return fail("$%.6f, over the ceiling of $%g", o.Usage.CostUSD, *a.MaxCostUSD)
		}
		return pass()
	case "max_duration":
		if o.Duration > a.MaxDuration.D() {
			return fail("took %s, over the ceiling of %s", o.Duration.Round(time.Millisecond), a.MaxDuration.D())
		}
		return pass()
	case "jq":
		// Any outcome: a predicate may check a failure or a run waiting for approval.
		x, err := runJQ(ctx, a.JQ, flows.JSONValue(o.Output), o)
		if err != nil {
			return fail("jq %s: %v", a.JQ, err)
		}
		if x == nil || x == false {
			return fail("%s is %s", a.JQ, short(x))
		}
		return pass()
	case "equals":
		v, ok, f := needOutput()
		if !ok {
			return f
		}
		want, err := decode(a.Equals)
		if err != nil {
			return fail("equals: %v", err)
		}
		if !reflect.DeepEqual(canon(v), canon(want)) {
			return fail("got %s, want %s", short(v), short(want))
		}
		return pass()
	case "contains":
		v, ok, f := needOutput()
		if !ok {
			return f
		}
		want, err := decode(a.Contains)
		if err != nil {
			return fail("contains: %v", err)
		}
		yes, err := jqContains(ctx, v, want)
		if err != nil {
			return fail("contains: %v", err)
		}
		if !yes {
			return fail("%s does not contain %s", short(v), short(want))
		}
		return pass()
	case "schema":
		v, ok, f := needOutput()
		if !ok {
			return f
		}
		s, err := flows.CompileSchema(a.Schema)
		if err != nil {
			return fail("schema: %v", err)
		}
		b, _ := json.Marshal(v)
		if probs := flows.SchemaProblems(s, b); len(probs) > 0 {
			var msgs []string
			for _, p := range probs {
				where := p.Path
				if where == "" {
					where = "the output"
				}
				msgs = append(msgs, where+": "+p.Message)
			}
			return fail("does not match the schema: %s", strings.Join(msgs, "; "))
		}
		return pass()
	case "graded":
		v, ok, f := needOutput()
		if !ok {
			return f
		}
		if g == nil {
			return fail("no model to grade with here")
		}
		gr, err := g.Grade(ctx, nodes.GradeRequest{Flow: o.Flow, Run: o.Run, Provider: a.Graded.Provider, Model: a.Graded.Model, Rubric: a.Graded.Rubric, Output: v})
		if err != nil {
			return fail("grading: %v", err)
		}
		c.Pass, c.Why, c.Usage = gr.Pass, gr.Reason, gr.Usage
		return c
	}
	return fail("an assertion needs exactly one kind")
}

func at(node string) string {
	if node == "" {
		return ""
	}
	return fmt.Sprintf(" at node %q", node)
}

func colon(s string) string {
	if s == "" {
		return ""
	}
	return ": " + s
}

// runJQ evaluates src on v with $state and $run, returning its first result.
func runJQ(ctx context.Context, src string, v any, o *Outcome) (any, error) {
	code, err := compileJQ(src)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, flows.JQTimeout)
	defer cancel()
	state := any(map[string]any{})
	if o.State != nil {
		state = flows.JSONValue(o.State)
	}
	run := map[string]any{"status": o.Status, "error": o.Error, "error_node": o.ErrorNode,
		"tokens": int(o.Usage.InputTokens + o.Usage.OutputTokens), "cost_usd": o.Usage.CostUSD,
		"duration_ms": float64(o.Duration.Microseconds()) / 1000}
	iter := code.RunWithContext(ctx, v, state, run)
	x, ok := iter.Next()
	if !ok {
		return nil, nil
	}
	if err, isErr := x.(error); isErr {
		return nil, err
	}
	return x, nil
}

// compileJQ compiles an assertion's jq: it sees $state and $run, and nothing of the
// process (no environment, no input).
func compileJQ(src string) (*gojq.Code, error) {
	q, err := gojq.Parse(src)
	if err != nil {
		return nil, err
	}
	return gojq.Compile(q, gojq.WithVariables([]string{"$state", "$run"}),
		gojq.WithEnvironLoader(func() []string { return nil }), gojq.WithInputIter(gojq.NewIter[any]()))
}

// jqContains is jq's contains: substrings, array elements, parts of objects.
func jqContains(ctx context.Context, v, want any) (bool, error) {
	code, err := gojq.Compile(mustParse("contains($want)"), gojq.WithVariables([]string{"$want"}))
	if err != nil {
		return false, err
	}
	ctx, cancel := context.WithTimeout(ctx, flows.JQTimeout)
	defer cancel()
	x, _ := code.RunWithContext(ctx, v, want).Next()
	if err, isErr := x.(error); isErr {
		return false, err
	}
	return x == true, nil
}

func mustParse(src string) *gojq.Query {
	q, err := gojq.Parse(src)
	if err != nil {
		panic(err)
	}
	return q
}

func decode(raw json.RawMessage) (any, error) {
	v, err := flows.DecodeJSON(raw)
	if err != nil {
		return nil, err
	}
	return flows.JSONValue(v), nil
}

// canon makes two JSON values comparable with DeepEqual whatever their number types.
func canon(v any) any {
	b, _ := json.Marshal(v)
	var out any
	_ = json.Unmarshal(b, &out)
	return out
}

// short is a value for a message, cut at 200 bytes.
func short(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	s := string(b)
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return s
}
