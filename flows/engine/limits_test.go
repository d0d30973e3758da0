package engine_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/flows"
	"github.com/sluicehq/sluice/flows/engine"
	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/storetest"
)

// A step whose state would outgrow max_state_bytes fails for good with the size and the
// limit, before anything reaches Redis.
func TestAStateOverMaxStateBytesFailsTheStepWithTheFigures(t *testing.T) {
	storetest.Each(t, func(t *testing.T, r *store.Redis) {
		v := newEnv(t, r)
		p := v.compile(`{"sluice": 1, "id": "FLOW", "settings": {"max_state_bytes": 100000},
		 "nodes": [{"id": "in", "type": "input"}, {"id": "big", "type": "transform", "params": {"expr": "{blob: (\"x\" * 200000)}"}}, {"id": "out", "type": "output"}],
		 "edges": [{"from": "in", "to": "big"}, {"from": "big", "to": "out"}]}`)
		v.work(p)
		run := v.run(p, `{}`)
		mustStatus(t, run, store.StatusFailed)
		if run.ErrorNode != "big" || !strings.Contains(run.Error, "over max_state_bytes (100,000)") || !strings.Contains(run.Error, "200,0") {
			t.Errorf("error %q at node %q, want the state's size and the limit at node big", run.Error, run.ErrorNode)
		}
		if run.Dead != 1 {
			t.Errorf("dead letters %d, want 1 (a permanent failure, not retried)", run.Dead)
		}
		for _, c := range v.checkpoints(p, run.ID) {
			if c.Node == "big" && c.Kind == "step" {
				t.Errorf("the oversized step was committed: %+v", c)
			}
		}
	})
}

// A state nested deeper than any reader can decode is refused at commit: no run
// succeeds whose history could not be read back.
func TestADeeplyNestedStateIsRefusedAndTheHistoryStaysReadable(t *testing.T) {
	v := newEnv(t, storetest.Real(t))
	p := v.compile(`{"sluice": 1, "id": "FLOW",
	 "nodes": [{"id": "in", "type": "input"}, {"id": "deep", "type": "transform", "params": {"expr": "{x: reduce range(20000) as $i (1; [.])}"}}, {"id": "out", "type": "output"}],
	 "edges": [{"from": "in", "to": "deep"}, {"from": "deep", "to": "out"}]}`)
	v.work(p)
	run := v.run(p, `{}`)
	mustStatus(t, run, store.StatusFailed)
	if run.ErrorNode != "deep" || !strings.Contains(run.Error, "nests deeper than") {
		t.Errorf("error %q at node %q", run.Error, run.ErrorNode)
	}
	for _, c := range v.checkpoints(p, run.ID) {
		full, err := v.e.Checkpoint(context.Background(), p.Flow, run.ID, c.ID)
		if err != nil {
			t.Fatalf("checkpoint %s: %v", c.ID, err)
		}
		if _, err := json.Marshal(full); err != nil {
			t.Errorf("checkpoint %s cannot be written as JSON: %v", c.ID, err)
		}
	}
}

// A step's output is stored (in its checkpoint and, for an output node, in the run) like
// its state, so it counts against max_state_bytes too: an output node whose value is
// over the limit, or a step whose raw output is over it though its mapped update is
// small, fails for good with the size and the limit, and nothing of it is committed.
func TestAnOutputOverMaxStateBytesFailsTheStepWithTheFigures(t *testing.T) {
	v := newEnv(t, storetest.Real(t))
	for _, c := range []struct{ name, node, nodes string }{
		{"an output node's value", "out", `{"id": "in", "type": "input"}, {"id": "mid", "type": "transform", "params": {"expr": "{}"}},
		 {"id": "out", "type": "output", "params": {"value": "\"x\" * 200000"}}`},
		{"a step's raw output", "mid", `{"id": "in", "type": "input"},
		 {"id": "mid", "type": "transform", "params": {"expr": "{blob: (\"x\" * 200000)}"}, "output": "{n: (.blob | length)}"},
		 {"id": "out", "type": "output"}`},
	} {
		{
			p := v.compile(`{"sluice": 1, "id": "FLOW", "settings": {"max_state_bytes": 100000}, "nodes": [` + c.nodes + `],
			 "edges": [{"from": "in", "to": "mid"}, {"from": "mid", "to": "out"}]}`)
			v.work(p)
			run := v.run(p, `{}`)
			mustStatus(t, run, store.StatusFailed)
			if run.ErrorNode != c.node || !strings.Contains(run.Error, "output") || !strings.Contains(run.Error, "over max_state_bytes (100,000)") || !strings.Contains(run.Error, "200,0") {
				t.Errorf("%s: error %q at node %q, want the output's size and the limit at node %s", c.name, run.Error, run.ErrorNode, c.node)
			}
			if run.Dead != 1 {
				t.Errorf("%s: dead letters %d, want 1 (a permanent failure, not retried)", c.name, run.Dead)
			}
			if out := run.Output(); out != nil {
				t.Errorf("%s: the run recorded an output of %d bytes", c.name, len(out))
			}
			for _, ck := range v.checkpoints(p, run.ID) {
				if ck.Node == c.node && ck.Kind == "step" {
					t.Errorf("%s: the step with the oversized output was committed: %s", c.name, ck.ID)
				}
			}
		}
	}
}

// An output nested deeper than any reader decodes is refused at commit like such a
// state: the run fails at that node with a clear error, and the run and its history
// can be read back and written as JSON.
func TestADeeplyNestedOutputIsRefusedAndTheRunStaysReadable(t *testing.T) {
	v := newEnv(t, storetest.Real(t))
	p := v.compile(`{"sluice": 1, "id": "FLOW",
	 "nodes": [{"id": "in", "type": "input"}, {"id": "out", "type": "output", "params": {"value": "reduce range(20000) as $i (1; [.])"}}],
	 "edges": [{"from": "in", "to": "out"}]}`)
	v.work(p)
	run := v.run(p, `{}`)
	mustStatus(t, run, store.StatusFailed)
	if run.ErrorNode != "out" || !strings.Contains(run.Error, "output") || !strings.Contains(run.Error, "nests deeper than") {
		t.Errorf("error %q at node %q, want the output refused at node out", run.Error, run.ErrorNode)
	}
	if _, err := json.Marshal(run); err != nil {
		t.Errorf("the run cannot be written as JSON: %v", err)
	}
	if _, err := json.Marshal(run.Output()); err != nil {
		t.Errorf("the run's output cannot be written as JSON: %v", err)
	}
	for _, c := range v.checkpoints(p, run.ID) {
		full, err := v.e.Checkpoint(context.Background(), p.Flow, run.ID, c.ID)
		if err != nil {
			t.Fatalf("checkpoint %s: %v", c.ID, err)
		}
		if _, err := json.Marshal(full); err != nil {
			t.Errorf("checkpoint %s cannot be written as JSON: %v", c.ID, err)
		}
	}
}

// An input over the flow's limit is refused when the run starts.
func TestAnInputOverMaxStateBytesIsRefusedAtStart(t *testing.T) {
	v := newEnv(t, storetest.Embedded(t))
	p := v.compile(`{"sluice": 1, "id": "FLOW", "settings": {"max_state_bytes": 2048},
	 "nodes": [{"id": "in", "type": "input"}, {"id": "out", "type": "output"}], "edges": [{"from": "in", "to": "out"}]}`)
	big, _ := json.Marshal(map[string]string{"text": strings.Repeat("x", 4000)})
	_, err := v.e.Start(context.Background(), p, big, engine.StartOptions{})
	if flows.ErrorCode(err) != flows.TooLarge || !strings.Contains(err.Error(), "over max_state_bytes (2,048)") {
		t.Fatalf("start: %v, want too_large with the limit", err)
	}
}

// A template that loops past its node's timeout fails at the deadline.
func TestATemplatePastItsTimeoutFailsAtTheDeadline(t *testing.T) {
	v := newEnv(t, storetest.Real(t))
	p := v.compile(`{"sluice": 1, "id": "FLOW", "settings": {"max_attempts": 1},
	 "nodes": [{"id": "in", "type": "input"}, {"id": "t", "type": "template", "timeout": "300ms", "params": {"template": "{{range 150000000}}{{end}}"}}, {"id": "out", "type": "output"}],
	 "edges": [{"from": "in", "to": "t"}, {"from": "t", "to": "out"}]}`)
	v.work(p)
	run := v.run(p, `{}`)
	mustStatus(t, run, store.StatusFailed)
	if run.ErrorNode != "t" || !strings.Contains(run.Error, "timed out") {
		t.Errorf("error %q at node %q, want a timeout at t", run.Error, run.ErrorNode)
	}
}

// Expired runs leave the run index by themselves (every worker prunes it), failed runs'
// checkpoints expire with them, and a listing's total and pages count only runs that
// exist.
func TestExpiredRunsLeaveTheRunIndexAndTheListingCountsRight(t *testing.T) {
	storetest.Conformance(t, func(t *testing.T, r *store.Redis) {
		v := newEnv(t, r)
		ctx := context.Background()
		short := v.compile(`{"sluice": 1, "id": "FLOW", "settings": {"checkpoint_ttl": "1s", "max_attempts": 1},
		 "nodes": [{"id": "in", "type": "input"}, {"id": "t", "type": "transform", "params": {"expr": "if .fail then error(\"no\") else {ok: true} end"}}, {"id": "out", "type": "output"}],
		 "edges": [{"from": "in", "to": "t"}, {"from": "t", "to": "out"}]}`)
		w := v.e.NewWorker(engine.WorkerOptions{Flows: []string{short.Flow}, Block: 200 * time.Millisecond, Prune: 100 * time.Millisecond})
		wctx, stop := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- w.Run(wctx) }()
		defer func() { stop(); <-done }()
		var runs []string
		for i := 0; i < 12; i++ {
			run := v.run(short, fmt.Sprintf(`{"fail": %v}`, i%4 == 0))
			runs = append(runs, run.ID)
		}
		parts, err := r.Parts(ctx, short.Flow)
		if err != nil {
			t.Fatal(err)
		}
		// indexed counts the runs in the flow's run or expiry indexes over its partitions.
		indexed := func(key func(store.Keys) string) int64 {
			var n int64
			for _, p := range parts {
				m, err := r.Client.ZCard(ctx, key(store.PartKeys(p.Flow, p.Part))).Result()
				if err != nil {
					t.Fatal(err)
				}
				n += m
			}
			return n
		}
		refs, err := r.RunRefs(ctx, short.Flow, runs)
		if err != nil {
			t.Fatal(err)
		}
		waitFor(t, "every run's keys expire and the index is empty", 20*time.Second, func() bool {
			if indexed(store.Keys.Runs) != 0 {
				return false
			}
			for _, ref := range refs {
				if m, _ := r.Client.Exists(ctx, store.PartKeys(ref.Flow, ref.Part).RunKeys(ref.Run)...).Result(); m != 0 {
					return false
				}
			}
			return true
		})
		list, total, err := v.e.List(ctx, short.Flow, engine.ListQuery{Limit: 5})
		if err != nil || total != 0 || len(list) != 0 {
			t.Errorf("listing after expiry: %d runs, total %d, %v; want none", len(list), total, err)
		}
		if n := indexed(store.Keys.Expiry); n != 0 {
			t.Errorf("expiry index holds %d runs, want 0", n)
		}

		// Kept and expired runs mixed: the total and the pages count the kept ones.
		keep := v.compile(`{"sluice": 1, "id": "FLOW", "nodes": [{"id": "in", "type": "input"}, {"id": "out", "type": "output"}], "edges": [{"from": "in", "to": "out"}]}`)
		v.work(keep)
		for i := 0; i < 7; i++ {
			mustStatus(t, v.run(keep, `{}`), store.StatusSucceeded)
		}
		page, total, err := v.e.List(ctx, keep.Flow, engine.ListQuery{Limit: 5})
		if err != nil || total != 7 || len(page) != 5 {
			t.Errorf("first page: %d runs of %d, %v; want 5 of 7", len(page), total, err)
		}
	})
}
