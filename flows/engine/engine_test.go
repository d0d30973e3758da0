package engine_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/flows"
	"github.com/sluicehq/sluice/flows/engine"
	"github.com/sluicehq/sluice/flows/examples"
	"github.com/sluicehq/sluice/flows/nodes/nodetest"
	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/storetest"
)

// env is one test's engine on one Redis, with its own flow ids.
type env struct {
	t   *testing.T
	r   *store.Redis
	e   *engine.Engine
	reg *flows.Registry
}

func newEnv(t *testing.T, r *store.Redis) *env {
	t.Helper()
	reg := nodetest.Registry(r.Client)
	return &env{t: t, r: r, reg: reg, e: engine.New(r, reg, engine.Options{Logger: testLogger(t)})}
}

// compile compiles doc after giving it a flow id of its own ("FLOW" in doc is replaced).
func (v *env) compile(doc string) *flows.Plan {
	v.t.Helper()
	id := storetest.FlowID(v.t)
	doc = strings.ReplaceAll(doc, `"FLOW"`, `"`+id+`"`)
	p, probs, err := v.e.Compile([]byte(doc))
	if err != nil {
		v.t.Fatalf("compile: %v\n%v", err, probs)
	}
	storetest.DeleteFlowKeys(v.t, v.r, id)
	if err := v.e.Publish(context.Background(), p); err != nil {
		v.t.Fatal(err)
	}
	return p
}

// example compiles an example flow under a flow id of its own.
func (v *env) example(name string) *flows.Plan {
	v.t.Helper()
	b, err := examples.Read(name)
	if err != nil {
		v.t.Fatal(err)
	}
	var d map[string]any
	_ = json.Unmarshal(b, &d)
	d["id"] = "FLOW"
	b, _ = json.Marshal(d)
	return v.compile(string(b))
}

// work runs a worker for the plans' flows until the test ends.
func (v *env) work(plans ...*flows.Plan) {
	v.t.Helper()
	var ids []string
	for _, p := range plans {
		ids = append(ids, p.Flow)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	w := v.e.NewWorker(engine.WorkerOptions{Flows: ids, Block: 200 * time.Millisecond, Grace: 2 * time.Second})
	go func() { done <- w.Run(ctx) }()
	v.t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			v.t.Error("worker did not stop within 10s")
		}
	})
}

func (v *env) start(p *flows.Plan, input string) string {
	v.t.Helper()
	id, err := v.e.Start(context.Background(), p, json.RawMessage(input), engine.StartOptions{})
	if err != nil {
		v.t.Fatalf("start: %v", err)
	}
	return id
}

// wait waits for a run to settle (finish or wait for a person) within 20s.
func (v *env) wait(p *flows.Plan, run string) *store.Run {
	v.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	r, err := v.e.Wait(ctx, p.Flow, run)
	if err != nil {
		v.t.Fatalf("run %s did not settle: %v (last seen %+v)", run, err, r)
	}
	return r
}

func (v *env) run(p *flows.Plan, input string) *store.Run {
	v.t.Helper()
	return v.wait(p, v.start(p, input))
}

func output(t *testing.T, r *store.Run) map[string]any {
	t.Helper()
	var out map[string]any
	if err := json.Unmarshal(r.Output(), &out); err != nil {
		t.Fatalf("output %s of run %s (%s, error %q): %v", r.Output(), r.ID, r.Status, r.Error, err)
	}
	return out
}

func mustStatus(t *testing.T, r *store.Run, want string) {
	t.Helper()
	if r.Status != want {
		t.Fatalf("run %s: status %q (error %q, last error %q), want %q", r.ID, r.Status, r.Error, r.LastError, want)
	}
}

// drained asserts that every node stream of the flow is empty and nothing is pending.
func (v *env) drained(p *flows.Plan) {
	v.t.Helper()
	nodes := p.NodeIDs()
	length, pending := v.r.NodeBacklog(context.Background(), p.Flow, nodes)
	for i, n := range nodes {
		if length[i] != 0 || pending[i] != 0 {
			v.t.Errorf("node %s: stream length %d, pending %d (over its partitions); want both 0", n, length[i], pending[i])
		}
	}
}

func (v *env) checkpoints(p *flows.Plan, run string) []store.Checkpoint {
	v.t.Helper()
	ref, err := v.r.FindRun(context.Background(), p.Flow, run)
	if err != nil {
		v.t.Fatal(err)
	}
	cps, err := v.r.Checkpoints(context.Background(), ref, "-", 0)
	if err != nil {
		v.t.Fatal(err)
	}
	return cps
}

func (v *env) calls(p *flows.Plan, run, node string) int {
	v.t.Helper()
	n, _ := v.r.Client.Get(context.Background(), nodetest.CountKey(p.Flow, run, node)).Int()
	return n
}

func TestLinearExampleRunsEveryStepAndDrains(t *testing.T) {
	storetest.Conformance(t, func(t *testing.T, r *store.Redis) {
		v := newEnv(t, r)
		p := v.example("linear")
		v.work(p)
		run := v.run(p, `{"name": "Ada"}`)
		mustStatus(t, run, store.StatusSucceeded)
		if got := output(t, run)["greeting"]; got != "HELLO, ADA!" {
			t.Errorf("greeting = %v, want HELLO, ADA!", got)
		}
		cps := v.checkpoints(p, run.ID)
		var nodes []string
		for _, c := range cps {
			nodes = append(nodes, c.Node)
		}
		if got := strings.Join(nodes, ","); got != ",in,greet,shout,out" {
			t.Errorf("checkpoints by node = %s, want the input then in,greet,shout,out", got)
		}
		if run.Steps != 4 {
			t.Errorf("steps = %d, want 4", run.Steps)
		}
		v.drained(p)
	})
}

func TestInputSchemaRejectsBadInputAtStart(t *testing.T) {
	v := newEnv(t, storetest.Embedded(t))
	p := v.example("linear")
	_, err := v.e.Start(context.Background(), p, json.RawMessage(`{"nome": "Ada"}`), engine.StartOptions{})
	if flows.ErrorCode(err) != flows.Invalid || !strings.Contains(err.Error(), "name") {
		t.Fatalf("start with bad input: %v, want an invalid-input error naming the missing field", err)
	}
}

func TestRouterSendsEachRunDownOneRoute(t *testing.T) {
	storetest.Conformance(t, func(t *testing.T, r *store.Redis) {
		v := newEnv(t, r)
		p := v.example("triage")
		v.work(p)
		for intent, team := range map[string]string{"code": "coding", "database": "database", "billing": "support"} {
			run := v.run(p, fmt.Sprintf(`{"intent": %q, "ticket": "T"}`, intent))
			mustStatus(t, run, store.StatusSucceeded)
			out := output(t, run)
			if out["team"] != team {
				t.Errorf("intent %s: team %v, want %s", intent, out["team"], team)
			}
			if log, _ := out["log"].([]any); len(log) != 1 {
				t.Errorf("intent %s: log %v, want exactly one branch's entry", intent, out["log"])
			}
		}
		v.drained(p)
	})
}

func TestFanoutOverZeroOneAndManyItemsJoinsOnceInItemOrder(t *testing.T) {
	storetest.Conformance(t, func(t *testing.T, r *store.Redis) {
		v := newEnv(t, r)
		p := v.example("fanout")
		v.work(p)
		for _, n := range []int{0, 1, 100} {
			docs := make([]string, n)
			for i := range docs {
				docs[i] = strings.Repeat("x", i%7) + fmt.Sprint(i)
			}
			in, _ := json.Marshal(map[string]any{"documents": docs})
			run := v.run(p, string(in))
			mustStatus(t, run, store.StatusSucceeded)
			results, _ := output(t, run)["results"].([]any)
			if len(results) != n {
				t.Fatalf("%d items: %d results, want %d", n, len(results), n)
			}
			for i, res := range results {
				if doc := res.(map[string]any)["doc"]; doc != docs[i] {
					t.Fatalf("%d items: result %d is for %v, want %v (item order)", n, i, doc, docs[i])
				}
			}
			joins := 0
			for _, c := range v.checkpoints(p, run.ID) {
				if c.Node == "merge" {
					joins++
				}
			}
			if joins != 1 {
				t.Errorf("%d items: the join ran %d times, want once", n, joins)
			}
		}
		v.drained(p)
	})
}

func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(testLogWriter(t), &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// testLogWriter is where testLogger writes: the test's log, while the test runs.
func testLogWriter(t *testing.T) *testWriter {
	w := &testWriter{t: t}
	t.Cleanup(w.stop) // runs before the cleanups registered earlier, such as closing Redis
	return w
}

// testWriter sends an engine's log lines to its test's log while the test runs. A
// goroutine may outlive its test by a moment (the run watcher's last blocking read
// fails once the test's Redis client is closed); t.Log would then panic and fail the
// whole package, so its lines are dropped instead.
type testWriter struct {
	t    *testing.T
	mu   sync.Mutex
	done bool
}

func (w *testWriter) stop() {
	w.mu.Lock()
	w.done = true
	w.mu.Unlock()
}

func (w *testWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.done {
		w.t.Log(strings.TrimRight(string(p), "\n"))
	}
	return len(p), nil
}

func TestPureStepsAfterOneAnotherAreCommittedTogether(t *testing.T) {
	r := storetest.Real(t)
	v := newEnv(t, r)
	p := v.example("linear")
	v.work(p)
	run := v.run(p, `{"name": "Ada"}`)
	mustStatus(t, run, store.StatusSucceeded)
	ctx := context.Background()
	k := store.FlowKeys(p.Flow)
	// The input's activation went through its stream; greet, shout and out ran fused
	// with it, each with its own checkpoint, and never had a stream entry.
	for node, want := range map[string]int64{"in": 1, "greet": 0, "shout": 0, "out": 0} {
		info, err := r.Client.XInfoStream(ctx, k.In(node)).Result()
		if err != nil {
			t.Fatal(err)
		}
		if info.EntriesAdded != want {
			t.Errorf("node %s: %d activations added to its stream, want %d", node, info.EntriesAdded, want)
		}
	}
	if n := len(v.checkpoints(p, run.ID)); n != 5 {
		t.Errorf("%d checkpoints, want 5 (the input and one per step)", n)
	}
}

func TestUnfusedStepsGiveTheSameRun(t *testing.T) {
	storetest.Each(t, func(t *testing.T, r *store.Redis) {
		reg := nodetest.Registry(r.Client)
		v := &env{t: t, r: r, reg: reg, e: engine.New(r, reg, engine.Options{Logger: testLogger(t), NoFuse: true})}
		p := v.example("linear")
		v.work(p)
		run := v.run(p, `{"name": "Ada"}`)
		mustStatus(t, run, store.StatusSucceeded)
		if got := output(t, run)["greeting"]; got != "HELLO, ADA!" {
			t.Errorf("greeting %v", got)
		}
		var nodes []string
		for _, c := range v.checkpoints(p, run.ID) {
			nodes = append(nodes, c.Node)
		}
		if got := strings.Join(nodes, ","); got != ",in,greet,shout,out" {
			t.Errorf("checkpoints %s", got)
		}
		v.drained(p)
	})
}

func TestAnEvictedPlanIsCompiledAgainFromRedis(t *testing.T) {
	v := newEnv(t, storetest.Embedded(t))
	ctx := context.Background()
	var first *flows.Plan
	for i := 0; i < 300; i++ { // more versions than an engine keeps compiled
		p := v.compile(fmt.Sprintf(`{"sluice": 1, "id": "FLOW", "name": "version %d", "nodes": [{"id": "in", "type": "input"}, {"id": "out", "type": "output"}], "edges": [{"from": "in", "to": "out"}]}`, i))
		if first == nil {
			first = p
		}
	}
	// A fresh engine has nothing compiled; this one has evicted some: both load the
	// version's JSON from Redis.
	for _, e := range []*engine.Engine{v.e, engine.New(v.r, v.reg, engine.Options{})} {
		p, err := e.Plan(ctx, first.Flow, first.Version)
		if err != nil || p.Version != first.Version || p.Doc.Name != "version 0" {
			t.Fatalf("plan of the first version: %v %v", p, err)
		}
	}
}
