package engine_test

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/flows/engine"
	"github.com/sluicehq/sluice/flows/nodes/nodetest"
	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/storetest"
)

// A fork of three branches of pure steps into a join: branch a two transforms long, b
// one, c one transform and then a step with side effects (a script), which does not run
// inline.
const forkOfPureBranches = `{"sluice": 1, "id": "FLOW",
 "state": {"seen": {"reducer": "append"}},
 "nodes": [
  {"id": "in", "type": "input"},
  {"id": "a", "type": "transform", "params": {"expr": "{seen: [\"a\"]}"}},
  {"id": "a2", "type": "transform", "params": {"expr": "{seen: [\"a2\"]}"}},
  {"id": "b", "type": "transform", "params": {"expr": "{seen: [\"b\"]}"}},
  {"id": "c", "type": "transform", "params": {"expr": "{seen: [\"c\"]}"}},
  {"id": "s", "type": "script", "params": {"update": {"seen": ["s"]}}},
  {"id": "j", "type": "join"},
  {"id": "out", "type": "output", "params": {"value": ".seen"}}
 ],
 "edges": [
  {"from": "in", "to": "a"}, {"from": "in", "to": "b"}, {"from": "in", "to": "c"},
  {"from": "a", "to": "a2"}, {"from": "a2", "to": "j"}, {"from": "b", "to": "j"},
  {"from": "c", "to": "s"}, {"from": "s", "to": "j"},
  {"from": "j", "to": "out"}
 ]}`

// forkRun is what a user sees of a run of a flow with a fork.
type forkRun struct {
	output  string
	history []string          // each checkpoint: "node <- parent's node: update", sorted
	steps   []int             // the checkpoints' step numbers, sorted
	events  []string          // each step event: "node: its checkpoint's node", sorted
	last    string            // the run's last event: "type node", "run" with its status
	entry   map[string]string // the events entry each node's step event came in
	states  map[string]string // the states after each node's steps, sorted, by node
	joins   map[string]string // each join's branches: their checkpoints' nodes, in order
	added   map[string]int64  // activations added to each node's stream
	forked  string            // the output of a fork of the run from a checkpoint
}

func runForkOfPureBranches(t *testing.T, r *store.Redis, noFuse bool) forkRun {
	return runFork(t, r, forkOfPureBranches, noFuse, "a2")
}

// runFork runs flow doc with input {} to its end, reads what a user sees of the run, and
// forks it from the checkpoint of node forkAt.
func runFork(t *testing.T, r *store.Redis, doc string, noFuse bool, forkAt string) forkRun {
	t.Helper()
	ctx := context.Background()
	reg := nodetest.Registry(r.Client)
	v := &env{t: t, r: r, reg: reg, e: engine.New(r, reg, engine.Options{Logger: testLogger(t), NoFuse: noFuse})}
	p := v.compile(doc)
	v.work(p)
	run := v.run(p, `{}`)
	mustStatus(t, run, store.StatusSucceeded)
	got := forkRun{output: string(run.Outputs["out"]), states: map[string]string{}, joins: map[string]string{}, added: map[string]int64{}, entry: map[string]string{}}
	cps := v.checkpoints(p, run.ID)
	byID := map[string]store.Checkpoint{}
	for _, c := range cps {
		byID[c.ID] = c
	}
	var from string
	states := map[string][]string{} // a node's steps (a fanout's items') commit in any order
	for _, c := range cps {
		parent := "-"
		if pc, ok := byID[c.Parent]; ok {
			parent = pc.Node
		}
		got.history = append(got.history, fmt.Sprintf("%s <- %s: %s %s", c.Node, parent, c.Kind, c.Update))
		got.steps = append(got.steps, c.Step)
		if c.Kind == "join" {
			var br []string
			for _, id := range c.Branches {
				br = append(br, byID[id].Node)
			}
			got.joins[c.Node] = strings.Join(br, " ")
		}
		if c.Node == "" {
			continue
		}
		full, err := v.e.Checkpoint(ctx, p.Flow, run.ID, c.ID)
		if err != nil {
			t.Fatalf("checkpoint %s of %s: %v", c.ID, c.Node, err)
		}
		states[c.Node] = append(states[c.Node], string(full.State))
		if c.Node == forkAt {
			from = c.ID
		}
	}
	for node, sts := range states {
		slices.Sort(sts)
		got.states[node] = strings.Join(sts, "\n")
	}
	slices.Sort(got.history)
	slices.Sort(got.steps)
	evs, err := r.EventsAfter(ctx, p.Flow, "0", 1000)
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range evs {
		if ev.Run != run.ID {
			continue
		}
		got.last = ev.Type + " " + ev.Node
		if ev.Type == "run" {
			got.last = "run " + string(ev.Data)
		}
		if ev.Type == "step" {
			got.events = append(got.events, fmt.Sprintf("%s: %s", ev.Node, byID[ev.Ckpt].Node))
			got.entry[ev.Node], _, _ = strings.Cut(ev.ID, ".")
		}
	}
	slices.Sort(got.events)
	k := store.FlowKeys(p.Flow)
	for _, node := range p.NodeIDs() {
		info, err := r.Client.XInfoStream(ctx, k.In(node)).Result()
		if err == nil {
			got.added[node] = info.EntriesAdded
		}
	}
	v.drained(p)
	id, err := v.e.Fork(ctx, p.Flow, run.ID, from, nil, engine.ForkOptions{})
	if err != nil {
		t.Fatalf("fork from %s's checkpoint: %v", forkAt, err)
	}
	fr := v.wait(p, id)
	mustStatus(t, fr, store.StatusSucceeded)
	got.forked = string(fr.Outputs["out"])
	return got
}

// The branches of a fork that start at pure steps run inline, in the commit of the step
// that opened the fork: the run has the same output, history (every branch step with its
// own checkpoint, its parent the step before it in its branch) and live events as with
// fusion off, and the branches' pure steps never go through their streams. A fork from a
// branch step's checkpoint works as before.
func TestPureBranchesOfAForkRunInlineWithTheSameRun(t *testing.T) {
	storetest.Conformance(t, func(t *testing.T, r *store.Redis) {
		fused := runForkOfPureBranches(t, r, false)
		plain := runForkOfPureBranches(t, r, true)
		if fused.output != `["a","a2","b","c","s"]` || fused.output != plain.output {
			t.Errorf("output %s, with fusion off %s; want [\"a\",\"a2\",\"b\",\"c\",\"s\"]", fused.output, plain.output)
		}
		if a, b := strings.Join(fused.history, "\n"), strings.Join(plain.history, "\n"); a != b {
			t.Errorf("history:\n%s\nwith fusion off:\n%s", a, b)
		}
		if !slices.Equal(fused.steps, plain.steps) || !slices.Equal(fused.steps, []int{0, 1, 2, 3, 4, 5, 6, 7, 8}) {
			t.Errorf("step numbers %v, with fusion off %v; want 0..8", fused.steps, plain.steps)
		}
		if a, b := strings.Join(fused.events, ", "), strings.Join(plain.events, ", "); a != b || len(fused.events) != 8 {
			t.Errorf("step events %s; with fusion off %s (want one per step, with its checkpoint)", a, b)
		}
		for node, st := range plain.states {
			if fused.states[node] != st {
				t.Errorf("the state after %s: %s, with fusion off %s", node, fused.states[node], st)
			}
		}
		if fused.forked != `["a","a2"]` || fused.forked != plain.forked {
			t.Errorf("a fork from a2's checkpoint gives %s, with fusion off %s; want [\"a\",\"a2\"]", fused.forked, plain.forked)
		}
		if plain.added["in"] == 0 {
			return // this Redis does not count a stream's entries (XINFO STREAM's entries-added)
		}
		for node, want := range map[string]int64{"in": 1, "a": 0, "a2": 0, "b": 0, "c": 0, "s": 1, "j": 1, "out": 0} {
			if fused.added[node] != want {
				t.Errorf("node %s: %d activations added to its stream, want %d (with fusion off %d)", node, fused.added[node], want, plain.added[node])
			}
		}
	})
}

// A fork of eleven branches, each one pure step, into a join and two pure steps after it.
const forkOfElevenPureBranches = `{"sluice": 1, "id": "FLOW",
 "state": {"seen": {"reducer": "append"}},
 "nodes": [
  {"id": "in", "type": "input"},
  BRANCHES
  {"id": "j", "type": "join"},
  {"id": "t", "type": "transform", "params": {"expr": "{seen: [\"t\"], before: .seen}"}},
  {"id": "out", "type": "output", "params": {"value": "{seen, before}"}}
 ],
 "edges": [EDGES
  {"from": "j", "to": "t"}, {"from": "t", "to": "out"}
 ]}`

// A fork whose branches all run inline in the commit of the step that opened it runs
// its join there too, and the pure steps after the join: the run has the same output,
// history (the join's checkpoint naming its branches in branch order, 10 after 9), step
// numbers, live events (the run's end the last of them) and states as with fusion off,
// a fork from the step after the join gives the same, and the join and the steps after
// it commit with the fork's step (one events entry) instead of going through their
// streams. In the second flow every step up to u finishes in bounded time, so the start
// itself runs the fork's step and commits the run's first steps (startInline): the join
// and t run there, and u, which may not finish in bounded time, waits for a worker. In
// the third, a fanout's eleven items each run their branch from their own seed, and
// their join merges them in item order.
func TestAJoinWhoseBranchesAllRanInlineRunsInTheSameCommit(t *testing.T) {
	var nodes, edges strings.Builder
	for b := 1; b <= 11; b++ {
		fmt.Fprintf(&nodes, `{"id": "b%d", "type": "transform", "params": {"expr": "{seen: [\"b%d\"]}"}},`+"\n", b, b)
		fmt.Fprintf(&edges, `{"from": "in", "to": "b%d"}, {"from": "b%d", "to": "j"},`, b, b)
	}
	const bounded = `{"sluice": 1, "id": "FLOW",
	 "nodes": [
	  {"id": "in", "type": "input"},
	  {"id": "b1", "type": "transform", "params": {"expr": "{b1: 1}"}},
	  {"id": "b2", "type": "transform", "params": {"expr": "{b2: 2}"}},
	  {"id": "j", "type": "join"},
	  {"id": "t", "type": "transform", "params": {"expr": "{t: .b1}"}},
	  {"id": "u", "type": "transform", "params": {"expr": "{u: (.b2 + 1)}"}},
	  {"id": "out", "type": "output", "params": {"value": "{b1, b2, t, u}"}}
	 ],
	 "edges": [{"from": "in", "to": "b1"}, {"from": "in", "to": "b2"}, {"from": "b1", "to": "j"}, {"from": "b2", "to": "j"},
	  {"from": "j", "to": "t"}, {"from": "t", "to": "u"}, {"from": "u", "to": "out"}]}`
	const fanout = `{"sluice": 1, "id": "FLOW",
	 "state": {"seen": {"reducer": "append"}},
	 "nodes": [
	  {"id": "in", "type": "input"},
	  {"id": "each", "type": "fanout", "params": {"items": "[\"a\", \"b\", \"c\", \"d\", \"e\", \"f\", \"g\", \"h\", \"i\", \"j\", \"k\"]", "as": "x"}},
	  {"id": "m", "type": "transform", "params": {"expr": "{seen: [.x]}"}},
	  {"id": "j", "type": "join"},
	  {"id": "t", "type": "transform", "params": {"expr": "{n: .seen}"}},
	  {"id": "out", "type": "output", "params": {"value": ".n"}}
	 ],
	 "edges": [{"from": "in", "to": "each"}, {"from": "each", "to": "m"}, {"from": "m", "to": "j"}, {"from": "j", "to": "t"}, {"from": "t", "to": "out"}]}`
	for _, tc := range []struct {
		name, doc, output, branches string
		steps, seeds                int      // checkpoints, and of them a fanout's items' (no step event)
		with                        string   // the step the others commit with ("": in)
		together, apart             []string // nodes whose steps commit with it, and those that do not
	}{
		{name: "eleven branches", doc: strings.NewReplacer("BRANCHES", nodes.String(), "EDGES", edges.String()).Replace(forkOfElevenPureBranches),
			output:   `{"before":["b1","b2","b3","b4","b5","b6","b7","b8","b9","b10","b11"],"seen":["b1","b2","b3","b4","b5","b6","b7","b8","b9","b10","b11","t"]}`,
			branches: "b1 b2 b3 b4 b5 b6 b7 b8 b9 b10 b11", steps: 16, together: []string{"b1", "b11", "j", "t", "out"}},
		{name: "bounded steps, started by its commit", doc: bounded, output: `{"b1":1,"b2":2,"t":1,"u":3}`,
			branches: "b1 b2", steps: 8, together: []string{"b1", "b2", "j", "t"}, apart: []string{"u", "out"}},
		{name: "a fanout's items", doc: fanout, output: `["a","b","c","d","e","f","g","h","i","j","k"]`,
			branches: "m m m m m m m m m m m", steps: 28, seeds: 11, with: "each", together: []string{"m", "j", "t", "out"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			storetest.Conformance(t, func(t *testing.T, r *store.Redis) {
				fused := runFork(t, r, tc.doc, false, "t")
				plain := runFork(t, r, tc.doc, true, "t")
				if fused.output != tc.output || plain.output != tc.output {
					t.Errorf("output %s, with fusion off %s; want %s", fused.output, plain.output, tc.output)
				}
				if a, b := strings.Join(fused.history, "\n"), strings.Join(plain.history, "\n"); a != b {
					t.Errorf("history:\n%s\nwith fusion off:\n%s", a, b)
				}
				if fused.joins["j"] != tc.branches || plain.joins["j"] != tc.branches {
					t.Errorf("the join's branches: %q, with fusion off %q; want %q", fused.joins["j"], plain.joins["j"], tc.branches)
				}
				if !slices.Equal(fused.steps, plain.steps) || len(fused.steps) != tc.steps {
					t.Errorf("step numbers %v, with fusion off %v; want 0..%d", fused.steps, plain.steps, tc.steps-1)
				}
				if a, b := strings.Join(fused.events, ", "), strings.Join(plain.events, ", "); a != b || len(fused.events) != tc.steps-1-tc.seeds {
					t.Errorf("step events %s; with fusion off %s (want one per step, with its checkpoint)", a, b)
				}
				if want := `run {"status":"succeeded"}`; fused.last != want || plain.last != want {
					t.Errorf("the run's last event: %s, with fusion off %s; want %s", fused.last, plain.last, want)
				}
				for node, st := range plain.states {
					if fused.states[node] != st {
						t.Errorf("the state after %s: %s, with fusion off %s", node, fused.states[node], st)
					}
				}
				if fused.forked != tc.output || plain.forked != tc.output {
					t.Errorf("a fork from t's checkpoint gives %s, with fusion off %s; want %s", fused.forked, plain.forked, tc.output)
				}
				with := cmp.Or(tc.with, "in")
				for _, node := range tc.together {
					if fused.entry[node] != fused.entry[with] || plain.entry[node] == plain.entry[with] {
						t.Errorf("%s's step event is in events entry %s, %s's in %s (with fusion off %s and %s): want the same entry, and not with fusion off",
							node, fused.entry[node], with, fused.entry[with], plain.entry[node], plain.entry[with])
					}
				}
				for _, node := range tc.apart {
					if fused.entry[node] == fused.entry[with] {
						t.Errorf("%s's step event is in %s's events entry %s: it should have waited for a worker", node, with, fused.entry[node])
					}
				}
			})
		})
	}
}

// A fork whose branch c runs two pure steps inline and then activates a step with side
// effects (s): that activation is as deep as it would be had c and c2 each been an
// activation of their own, so max_steps stops the run at the same depth with fusion on
// and off.
const forkDeepBranch = `{"sluice": 1, "id": "FLOW",
 "settings": {"max_steps": MAX},
 "nodes": [
  {"id": "in", "type": "input"},
  {"id": "a", "type": "transform", "params": {"expr": "{}"}},
  {"id": "c", "type": "transform", "params": {"expr": "{}"}},
  {"id": "c2", "type": "transform", "params": {"expr": "{}"}},
  {"id": "s", "type": "script", "params": {}},
  {"id": "j", "type": "join"},
  {"id": "out", "type": "output", "params": {"value": "1"}}
 ],
 "edges": [
  {"from": "in", "to": "a"}, {"from": "in", "to": "c"}, {"from": "a", "to": "j"},
  {"from": "c", "to": "c2"}, {"from": "c2", "to": "s"}, {"from": "s", "to": "j"},
  {"from": "j", "to": "out"}
 ]}`

// With s a pure step too, the join runs in the commit of in's step, and the output
// after it: max_steps stops the run at the same depth with fusion on and off too.
func TestMaxStepsCountsTheStepsOfBranchesRunInline(t *testing.T) {
	for _, doc := range []string{forkDeepBranch,
		strings.Replace(forkDeepBranch, `{"id": "s", "type": "script", "params": {}}`, `{"id": "s", "type": "transform", "params": {"expr": "{}"}}`, 1)} {
		maxStepsFusedAndNot(t, doc)
	}
}

func maxStepsFusedAndNot(t *testing.T, flow string) {
	r := storetest.Real(t)
	reg := nodetest.Registry(r.Client)
	fused := &env{t: t, r: r, reg: reg, e: engine.New(r, reg, engine.Options{Logger: testLogger(t)})}
	plain := &env{t: t, r: r, reg: reg, e: engine.New(r, reg, engine.Options{Logger: testLogger(t), NoFuse: true})}
	failed := 0
	for max := 2; max <= 8; max++ {
		doc := strings.Replace(flow, "MAX", fmt.Sprint(max), 1)
		var got [2]string
		for i, v := range []*env{fused, plain} {
			p := v.compile(doc)
			v.work(p)
			got[i] = v.run(p, `{}`).Status
		}
		if got[0] != got[1] {
			t.Errorf("max_steps %d: the run %s, with fusion off %s", max, got[0], got[1])
		}
		if got[1] == store.StatusFailed {
			failed++
		}
	}
	if failed == 0 || failed == 7 {
		t.Errorf("with fusion off, %d of the 7 runs failed: the test does not reach max_steps's edge", failed)
	}
}

// A branch whose node another worker pool serves is not run inline: it waits for a
// worker of that pool, while the fork's other branch ran inline.
func TestABranchOfAnotherPoolIsNotRunInline(t *testing.T) {
	r := storetest.Real(t)
	v := newEnv(t, r)
	ctx := context.Background()
	p := v.compile(`{"sluice": 1, "id": "FLOW", "state": {"seen": {"reducer": "append"}},
	 "nodes": [{"id": "in", "type": "input"},
	  {"id": "a", "type": "transform", "params": {"expr": "{seen: [\"a\"]}"}},
	  {"id": "b", "type": "transform", "params": {"expr": "{seen: [\"b\"]}"}},
	  {"id": "j", "type": "join"}, {"id": "out", "type": "output", "params": {"value": ".seen"}}],
	 "edges": [{"from": "in", "to": "a"}, {"from": "in", "to": "b"}, {"from": "a", "to": "j"}, {"from": "b", "to": "j"}, {"from": "j", "to": "out"}]}`)
	pool := func(nodes ...string) {
		v.worker(engine.WorkerOptions{Flows: []string{p.Flow}, Nodes: nodes, Block: 200 * time.Millisecond})
	}
	pool("in", "a", "j", "out")
	id := v.start(p, `{}`)
	waitFor(t, "the run to wait for a worker of node b", 20*time.Second, func() bool {
		run, err := v.e.Get(ctx, p.Flow, id)
		if err != nil || run.Status != store.StatusRunning {
			return false
		}
		nodes, err := r.WaitingForWorker(ctx, run.Ref(), run.Created)
		return err == nil && len(nodes) == 1 && nodes[0] == "b"
	})
	pool("b")
	run := v.wait(p, id)
	mustStatus(t, run, store.StatusSucceeded)
	if got := string(run.Outputs["out"]); got != `["a","b"]` {
		t.Errorf("output %s, want [\"a\",\"b\"]", got)
	}
	workers := map[string]string{}
	for _, c := range v.checkpoints(p, id) {
		workers[c.Node] = c.Worker
	}
	if workers["a"] != workers["in"] || workers["b"] == "" || workers["b"] == workers["a"] {
		t.Errorf("in, a and b ran on %q, %q and %q: want a inline with in, b on the other pool's worker", workers["in"], workers["a"], workers["b"])
	}
	v.drained(p)
}
