package engine_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/flows"
	"github.com/sluicehq/sluice/flows/engine"
	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/storetest"
)

// A run whose steps are all pure has finished when Start returns, on an engine with a
// worker serving its flow: the steps ran in the starting process and their commit
// started the run (one script call). Its history and output are those of any run, and
// every stream is drained. A run whose first step fails there starts as usual and fails
// on the worker, with its node and error.
func TestARunOfPureStepsHasFinishedWhenItsStartReturns(t *testing.T) {
	storetest.Each(t, func(t *testing.T, r *store.Redis) {
		v := newEnv(t, r)
		p := v.compile(`{"sluice": 1, "id": "FLOW", "settings": {"max_attempts": 1}, "nodes": [
		  {"id": "in", "type": "input"},
		  {"id": "t", "type": "transform", "params": {"expr": "{t: .n.x}"}},
		  {"id": "out", "type": "output", "params": {"value": ".t"}}],
		 "edges": [{"from": "in", "to": "t"}, {"from": "t", "to": "out"}]}`)
		v.work(p)
		mustStatus(t, v.run(p, `{"n": {"x": 1}}`), store.StatusSucceeded) // the worker is up

		ctx := context.Background()
		id := v.start(p, `{"n": {"x": 2}}`)
		got, err := r.GetRun(ctx, p.Flow, id)
		if err != nil {
			t.Fatal(err)
		}
		mustStatus(t, got, store.StatusSucceeded)
		if string(got.Output()) != "2" || got.Steps != 3 {
			t.Errorf("output %s after %d steps, want 2 after 3", got.Output(), got.Steps)
		}
		cps, err := v.e.Checkpoints(ctx, p.Flow, id)
		if err != nil {
			t.Fatal(err)
		}
		var nodes []string
		for _, c := range cps {
			nodes = append(nodes, c.Kind+":"+c.Node)
		}
		if strings.Join(nodes, " ") != "input: step:in step:t step:out" {
			t.Errorf("history %v, want the input, then in, t and out", nodes)
		}
		v.drained(p)

		bad := v.wait(p, v.start(p, `{"n": 1}`))
		mustStatus(t, bad, store.StatusFailed)
		if bad.ErrorNode != "t" || !strings.Contains(bad.Error+bad.LastError, "expected an object") {
			t.Errorf("the failed run's error %q (last %q) at %q, want t's jq error", bad.Error, bad.LastError, bad.ErrorNode)
		}
	})
}

// With fusion off (sluice bench --no-fuse), a start runs no step: each run's first
// activation goes through its node's stream.
func TestWithoutFusionAStartRunsNoStep(t *testing.T) {
	r := storetest.Real(t)
	reg := newEnv(t, r).reg
	v := &env{t: t, r: r, reg: reg, e: engine.New(r, reg, engine.Options{Logger: testLogger(t), NoFuse: true})}
	p := v.inToOutWorking() // one run
	for i := 1; i < 4; i++ {
		if i > 1 {
			mustStatus(t, v.run(p, `{"n": 0}`), store.StatusSucceeded)
		}
		info, err := r.Client.XInfoStream(context.Background(), store.PartKeys(p.Flow, 0).In("in")).Result()
		if err != nil {
			t.Fatal(err)
		}
		if info.EntriesAdded != int64(i) {
			t.Fatalf("after %d runs the input node's stream had %d entries added, want %d", i, info.EntriesAdded, i)
		}
	}
}

// A run whose start is its first commit is started without asking Redis whether it
// holds the run's version. When Redis lost the version (it restarted empty), such starts
// store it again within a second or so, as a start that asks does at once.
func TestAVersionRedisLostIsStoredAgainByStartsThatRunTheirSteps(t *testing.T) {
	r := storetest.Real(t)
	v := newEnv(t, r)
	p := v.inToOutWorking()
	ctx := context.Background()
	if err := r.Client.Del(ctx, store.FlowKeys(p.Flow).Version(p.Version)).Err(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		v.start(p, `{"n": 1}`)
		if has, err := r.HasVersion(ctx, p.Flow, p.Version); err != nil {
			t.Fatal(err)
		} else if has {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the version Redis lost was not stored again within 20s of starts")
		}
		time.Sleep(50 * time.Millisecond) // a poll: the condition is the version's key
	}
}

// A Start whose context has ended makes no run: it answers the context's error, and a
// caller who tries again does not get two runs. (The commit that would start the run is
// dropped unsent; it was sent about half the time when the committer did not look.)
func TestAStartWhoseContextEndedMakesNoRun(t *testing.T) {
	r := storetest.Real(t)
	v := newEnv(t, r)
	p := v.inToOutWorking()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for range 40 {
		if _, err := v.e.Start(ctx, p, json.RawMessage(`{"n": 1}`), engine.StartOptions{}); err == nil {
			t.Fatal("a start with an ended context succeeded")
		}
	}
	// Three starts after them, each waiting for its commit: a commit queued before them
	// has been sent by then.
	for range 3 {
		mustStatus(t, v.run(p, `{"n": 2}`), store.StatusSucceeded)
	}
	if n, err := r.CountRuns(context.Background(), p.Flow, time.Time{}, time.Time{}); err != nil || n != 4 {
		t.Errorf("%d runs (%v) after 40 starts whose context had ended, want only the 4 others", n, err)
	}
}

// inToOutWorking compiles a flow of an input node and an output node (".n"), starts a
// worker for it, and waits for one run to succeed: the worker is up.
func (v *env) inToOutWorking() *flows.Plan {
	v.t.Helper()
	p := v.compile(`{"sluice": 1, "id": "FLOW", "nodes": [
	  {"id": "in", "type": "input"}, {"id": "out", "type": "output", "params": {"value": ".n"}}],
	 "edges": [{"from": "in", "to": "out"}]}`)
	v.work(p)
	mustStatus(v.t, v.run(p, `{"n": 0}`), store.StatusSucceeded)
	return p
}
