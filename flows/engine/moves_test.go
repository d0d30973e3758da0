package engine_test

import (
	"context"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/flows"
	"github.com/sluicehq/sluice/flows/engine"
	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/storetest"
)

// The first debug loop of issue 24: a transform fails on the customer's input, is fixed,
// and its dead letter is retried on the fixed version.
func discountFlow(expr string) string {
	return `{"sluice": 1, "id": "FLOW",
	 "nodes": [
	  {"id": "in", "type": "input"},
	  {"id": "price", "type": "transform", "params": {"expr": ` + flowsQuote(expr) + `}},
	  {"id": "out", "type": "output", "params": {"value": "{tier, discount}"}}
	 ],
	 "edges": [{"from": "in", "to": "price"}, {"from": "price", "to": "out"}]}`
}

func flowsQuote(s string) string { return `"` + strings.ReplaceAll(s, `"`, `\"`) + `"` }

// version compiles another version of p's flow (not made current).
func (v *env) version(p *flows.Plan, doc string) *flows.Plan {
	v.t.Helper()
	q, probs, err := v.e.Compile([]byte(strings.ReplaceAll(doc, `"FLOW"`, `"`+p.Flow+`"`)))
	if err != nil {
		v.t.Fatalf("compile: %v\n%v", err, probs)
	}
	return q
}

func (v *env) deadOf(p *flows.Plan, run string) store.DeadLetter {
	v.t.Helper()
	ds, err := v.r.RunDeadLetters(context.Background(), p.Flow, run)
	if err != nil || len(ds) != 1 {
		v.t.Fatalf("dead letters of run %s: %+v, %v; want 1", run, ds, err)
	}
	return ds[0]
}

// attempts lists the attempt numbers of node's checkpoints (failed attempts and steps).
func (v *env) attempts(p *flows.Plan, run, node string) []int {
	var out []int
	for _, c := range v.checkpoints(p, run) {
		if c.Node == node && (c.Kind == store.KindError || c.Kind == "step") {
			out = append(out, c.Attempt)
		}
	}
	return out
}

func TestRetryOnTheFixedVersionRunsTheFixAndRecordsTheMove(t *testing.T) {
	storetest.Each(t, func(t *testing.T, r *store.Redis) {
		v := newEnv(t, r)
		ctx := context.Background()
		broken := v.compile(discountFlow(`{tier: "small", discount: (.customer | tonumber)}`))
		v.work(broken)
		run := v.run(broken, `{"customer":"Ada","amount":50}`)
		mustStatus(t, run, store.StatusFailed)
		d := v.deadOf(broken, run.ID)
		if d.Version != broken.Version {
			t.Fatalf("dead letter version %q, want %q", d.Version, broken.Version)
		}

		// As it was: the old expression fails again, as attempt 2.
		if _, err := v.e.RetryDead(ctx, broken.Flow, d.ID, engine.RetryOptions{}); err != nil {
			t.Fatal(err)
		}
		again := v.wait(broken, run.ID)
		mustStatus(t, again, store.StatusFailed)
		if got := v.attempts(broken, run.ID, "price"); len(got) != 2 || got[0] != 1 || got[1] != 2 {
			t.Fatalf("attempts after a retry as it was: %v, want [1 2]", got)
		}

		fixed := v.version(broken, discountFlow(`{tier: "small", discount: (.amount / 10)}`))
		d = v.deadOf(broken, run.ID)
		res, err := v.e.RetryDead(ctx, broken.Flow, d.ID, engine.RetryOptions{Target: fixed, By: "test"})
		if err != nil {
			t.Fatal(err)
		}
		if !res.Moved || res.From != broken.Version || res.To != fixed.Version || res.Attempt != 3 {
			t.Errorf("retry = %+v, want a move from %.7s to %.7s, attempt 3", res, broken.Version, fixed.Version)
		}
		done := v.wait(broken, run.ID)
		mustStatus(t, done, store.StatusSucceeded)
		if out := output(t, done); out["discount"] != 5.0 || out["tier"] != "small" {
			t.Errorf("output %v, want the fixed expression's {tier: small, discount: 5}", out)
		}
		if done.Version != fixed.Version {
			t.Errorf("run version %.7s after the move, want %.7s", done.Version, fixed.Version)
		}
		if len(done.Moves) != 1 || done.Moves[0].From != broken.Version || done.Moves[0].To != fixed.Version ||
			done.Moves[0].Node != "price" || done.Moves[0].By != "test" || done.Moves[0].At == 0 || done.Moves[0].Attempt != 3 {
			t.Errorf("moves = %+v, want one from the broken version to the fixed one at price, by test", done.Moves)
		}
		if got := v.attempts(broken, run.ID, "price"); len(got) != 3 || got[2] != 3 {
			t.Errorf("attempts: %v, want [1 2 3] (numbered across retries)", got)
		}
		v.drained(broken)
	})
}

func TestAMoveTheTargetCannotTakeIsRefusedNamingTheNodeAndWhatIsMissing(t *testing.T) {
	storetest.Each(t, func(t *testing.T, r *store.Redis) {
		v := newEnv(t, r)
		ctx := context.Background()
		broken := v.compile(discountFlow(`{tier: "small", discount: (.customer | tonumber)}`))
		v.work(broken)
		run := v.run(broken, `{"customer":"Ada","amount":50}`)
		mustStatus(t, run, store.StatusFailed)
		d := v.deadOf(broken, run.ID)

		cases := []struct {
			name, doc string
			want      []string
		}{
			{"the node is gone", `{"sluice": 1, "id": "FLOW", "nodes": [{"id": "in", "type": "input"}, {"id": "cost", "type": "transform", "params": {"expr": "{tier: 1}"}}, {"id": "out", "type": "output", "params": {"value": ".tier"}}],
			  "edges": [{"from": "in", "to": "cost"}, {"from": "cost", "to": "out"}]}`, []string{`"price"`, "has no node"}},
			{"it reads what the state lacks", discountFlow(`{tier: "small", discount: (.coupon.percent)}`), []string{`"price"`, ".coupon", "does not have", "replay"}},
		}
		for _, c := range cases {
			target := v.version(broken, c.doc)
			_, err := v.e.RetryDead(ctx, broken.Flow, d.ID, engine.RetryOptions{Target: target})
			if flows.ErrorCode(err) != flows.Conflict {
				t.Fatalf("%s: err = %v, want a conflict", c.name, err)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%s: %q does not say %q", c.name, err, w)
				}
			}
			if fe, _ := err.(*flows.Error); fe == nil || fe.Node != "price" {
				t.Errorf("%s: error %#v does not name node price", c.name, err)
			}
		}
		// Refused moves leave the dead letter and the run as they were.
		if still := v.deadOf(broken, run.ID); still.ID != d.ID {
			t.Errorf("dead letter %s after refused moves, want %s", still.ID, d.ID)
		}
		if got, _ := v.e.Get(ctx, broken.Flow, run.ID); got.Status != store.StatusFailed || got.Version != broken.Version || len(got.Moves) != 0 {
			t.Errorf("run after refused moves: %s on %.7s with moves %v", got.Status, got.Version, got.Moves)
		}
	})
}

// A branch of a fork fails; the version it would move to no longer joins the branches.
func TestAMoveThatBreaksAnOpenForkIsRefused(t *testing.T) {
	storetest.Each(t, func(t *testing.T, r *store.Redis) {
		v := newEnv(t, r)
		ctx := context.Background()
		forked := `{"sluice": 1, "id": "FLOW",
		 "nodes": [
		  {"id": "in", "type": "input"},
		  {"id": "a", "type": "transform", "params": {"expr": "{a: 1}"}},
		  {"id": "b", "type": "transform", "params": {"expr": "{b: (.x | tonumber)}"}},
		  {"id": "j", "type": "join"},
		  {"id": "out", "type": "output", "params": {"value": "{a, b}"}}
		 ],
		 "edges": [{"from": "in", "to": "a"}, {"from": "in", "to": "b"}, {"from": "a", "to": "j"}, {"from": "b", "to": "j"}, {"from": "j", "to": "out"}]}`
		p := v.compile(forked)
		v.work(p)
		run := v.run(p, `{"x": "nope"}`)
		mustStatus(t, run, store.StatusFailed)
		d := v.deadOf(p, run.ID)
		if d.Node != "b" {
			t.Fatalf("dead letter at %q, want b", d.Node)
		}
		unjoined := v.version(p, `{"sluice": 1, "id": "FLOW",
		 "nodes": [
		  {"id": "in", "type": "input"},
		  {"id": "a", "type": "transform", "params": {"expr": "{a: 1}"}},
		  {"id": "b", "type": "transform", "params": {"expr": "{b: 2}"}},
		  {"id": "out", "type": "output", "params": {"value": "{a, b}"}}
		 ],
		 "edges": [{"from": "in", "to": "a"}, {"from": "in", "to": "b"}, {"from": "a", "to": "out"}, {"from": "b", "to": "out"}]}`)
		_, err := v.e.RetryDead(ctx, p.Flow, d.ID, engine.RetryOptions{Target: unjoined})
		if flows.ErrorCode(err) != flows.Conflict || !strings.Contains(err.Error(), `fork open at "in"`) {
			t.Fatalf("err = %v, want a conflict naming the fork open at in", err)
		}
		// The same fork with the branch fixed moves and joins.
		fixed := v.version(p, strings.Replace(forked, `(.x | tonumber)`, `2`, 1))
		if _, err := v.e.RetryDead(ctx, p.Flow, d.ID, engine.RetryOptions{Target: fixed}); err != nil {
			t.Fatal(err)
		}
		done := v.wait(p, run.ID)
		mustStatus(t, done, store.StatusSucceeded)
		if out := output(t, done); out["a"] != 1.0 || out["b"] != 2.0 {
			t.Errorf("output %v, want {a: 1, b: 2}", out)
		}
	})
}

func TestCompareSaysWhichNodeNowFails(t *testing.T) {
	storetest.Each(t, func(t *testing.T, r *store.Redis) {
		v := newEnv(t, r)
		ctx := context.Background()
		fixed := v.compile(discountFlow(`{tier: "small", discount: (.amount / 10)}`))
		v.work(fixed)
		good := v.run(fixed, `{"customer":"Ada","amount":50}`)
		mustStatus(t, good, store.StatusSucceeded)
		broken := v.version(fixed, discountFlow(`{tier: "small", discount: (.customer | tonumber)}`))
		id, err := v.e.Replay(ctx, fixed.Flow, good.ID, engine.ReplayOptions{Target: broken})
		if err != nil {
			t.Fatal(err)
		}
		mustStatus(t, v.wait(fixed, id), store.StatusFailed)
		cmp, err := v.e.Compare(ctx, fixed.Flow, good.ID, id)
		if err != nil {
			t.Fatal(err)
		}
		if cmp.Summary != "1 same, 1 now fails, 1 not run now" {
			t.Errorf("summary %q, want \"1 same, 1 now fails, 1 not run now\"", cmp.Summary)
		}
		if len(cmp.Nodes) != 3 || cmp.Nodes[1].Node != "price" || cmp.Nodes[1].Verdict != engine.VerdictNowFails || !strings.Contains(cmp.Nodes[1].After.Error, "tonumber") {
			t.Errorf("nodes %+v, want price now failing with its error", cmp.Nodes)
		}
	})
}
