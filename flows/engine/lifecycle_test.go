package engine_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/flows"
	"github.com/sluicehq/sluice/flows/engine"
	"github.com/sluicehq/sluice/flows/nodes/llmtest"
	"github.com/sluicehq/sluice/flows/nodes/nodetest"
	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/storetest"
)

// A model call in flight when its run is cancelled in another process is aborted (the
// model server sees the request go), the step is not retried, and the run's history says
// it was interrupted.
func TestCancelStopsAModelCallInFlightAndRecordsIt(t *testing.T) {
	storetest.Conformance(t, func(t *testing.T, r *store.Redis) {
		srv := llmtest.New(t)
		hold := make(chan struct{})
		defer close(hold)
		srv.Respond(func(llmtest.Request) llmtest.Reply { return llmtest.Reply{Content: "late", Wait: hold} })
		v, _, _ := componentEnv(t, r, srv)
		p := v.compile(`{"sluice": 1, "id": "FLOW", "settings": {"max_attempts": 3},
		 "nodes": [{"id": "in", "type": "input"}, {"id": "ask", "type": "llm", "params": {"model": "m", "user": "hello"}}, {"id": "out", "type": "output"}],
		 "edges": [{"from": "in", "to": "ask"}, {"from": "ask", "to": "out"}]}`)
		v.work(p)
		id := v.start(p, `{}`)
		waitFor(t, "the model call to arrive", 20*time.Second, func() bool { return srv.Calls() == 1 })

		// Cancelled through another engine, as the API of another process would.
		other := engine.New(r, v.reg, engine.Options{Logger: testLogger(t)})
		if err := other.Cancel(context.Background(), p.Flow, id); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "the model server to see the request aborted", 20*time.Second, func() bool { return srv.Aborted() == 1 })
		waitFor(t, "the step's entry to be acknowledged", 20*time.Second, func() bool {
			length, pending := r.NodeBacklog(context.Background(), p.Flow, []string{"ask"})
			return length[0] == 0 && pending[0] == 0
		})
		run, err := v.e.Get(context.Background(), p.Flow, id)
		if err != nil {
			t.Fatal(err)
		}
		mustStatus(t, run, store.StatusCancelled)
		if srv.Calls() != 1 {
			t.Errorf("the model was called %d times, want once: nothing retries after a cancel", srv.Calls())
		}
		var kinds []string
		for _, c := range v.checkpoints(p, id) {
			if c.Node == "ask" {
				kinds = append(kinds, c.Kind)
			}
		}
		if strings.Join(kinds, ",") != store.KindInterrupted {
			t.Errorf("history of ask: %v, want one interrupted step", kinds)
		}
	})
}

// An HTTP request in flight when its run is cancelled in another process is aborted (the
// upstream sees the client go), the step is not retried, and the run's history says it
// was interrupted.
func TestCancelAbortsAnHTTPRequestInFlightAndRecordsIt(t *testing.T) {
	storetest.Each(t, func(t *testing.T, r *store.Redis) {
		var calls, aborted atomic.Int32
		hold := make(chan struct{})
		api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			calls.Add(1)
			select {
			case <-req.Context().Done(): // the client closed the connection
				aborted.Add(1)
			case <-hold:
				_, _ = w.Write([]byte(`{"late": true}`))
			}
		}))
		defer api.Close()
		defer close(hold) // before Close, which waits for the handler
		v, _, _ := componentEnv(t, r, nil)
		p := v.compile(`{"sluice": 1, "id": "FLOW", "settings": {"max_attempts": 3},
		 "nodes": [{"id": "in", "type": "input"}, {"id": "fetch", "type": "http", "params": {"url": "` + api.URL + `/slow", "timeout": "1m"}}, {"id": "out", "type": "output"}],
		 "edges": [{"from": "in", "to": "fetch"}, {"from": "fetch", "to": "out"}]}`)
		v.work(p)
		id := v.start(p, `{}`)
		waitFor(t, "the request to arrive", 20*time.Second, func() bool { return calls.Load() == 1 })

		// Cancelled through another engine, as the API of another process would.
		other := engine.New(r, v.reg, engine.Options{Logger: testLogger(t)})
		if err := other.Cancel(context.Background(), p.Flow, id); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "the upstream to see the request aborted", 20*time.Second, func() bool { return aborted.Load() == 1 })
		waitFor(t, "the step's entry to be acknowledged", 20*time.Second, func() bool {
			length, pending := r.NodeBacklog(context.Background(), p.Flow, []string{"fetch"})
			return length[0] == 0 && pending[0] == 0
		})
		run, err := v.e.Get(context.Background(), p.Flow, id)
		if err != nil {
			t.Fatal(err)
		}
		mustStatus(t, run, store.StatusCancelled)
		if n := calls.Load(); n != 1 {
			t.Errorf("the upstream was called %d times, want once: nothing retries after a cancel", n)
		}
		var kinds []string
		for _, c := range v.checkpoints(p, id) {
			if c.Node == "fetch" {
				kinds = append(kinds, c.Kind)
			}
		}
		if strings.Join(kinds, ",") != store.KindInterrupted {
			t.Errorf("history of fetch: %v, want one interrupted step", kinds)
		}
	})
}

// A queued activation of a cancelled run is acknowledged without running its component.
func TestAQueuedStepOfACancelledRunNeverRuns(t *testing.T) {
	storetest.Each(t, func(t *testing.T, r *store.Redis) {
		v := newEnv(t, r)
		p := v.compile(scripted(`{"update": {"done": true}}`))
		_, stop := startWorker(t, v.e, time.Second, p.Flow)
		orig := v.run(p, `{}`)
		mustStatus(t, orig, store.StatusSucceeded)
		ctx := context.Background()
		cps := v.checkpoints(p, orig.ID)
		// A fork from the input node's checkpoint queues an activation of "work" straight
		// away; no worker serves the flow while it is queued and cancelled.
		stop()
		id, err := v.e.Fork(ctx, p.Flow, orig.ID, cps[1].ID, nil, engine.ForkOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if err := v.e.Cancel(ctx, p.Flow, id); err != nil {
			t.Fatal(err)
		}
		v.work(p)
		waitFor(t, "the cancelled run's activation to be acknowledged", 20*time.Second, func() bool {
			length, pending := r.NodeBacklog(ctx, p.Flow, []string{"work"})
			return length[0] == 0 && pending[0] == 0
		})
		if n := v.calls(p, id, "work"); n != 0 {
			t.Errorf("work ran %d times for a cancelled run, want never", n)
		}
	})
}

// A queued pure step of a cancelled run is acknowledged without running its component,
// like a step with side effects: whether the cancel was made in the worker's process
// (known there without a read) or in another one (the worker reads the run's status with
// the step's state).
func TestAQueuedPureStepOfACancelledRunNeverRuns(t *testing.T) {
	for _, where := range []string{"here", "elsewhere"} {
		t.Run(where, func(t *testing.T) {
			r := storetest.Real(t)
			var calls atomic.Int32
			reg := nodetest.Registry(r.Client)
			reg.Register(countingPureSpec(&calls))
			v := &env{t: t, r: r, reg: reg, e: engine.New(r, reg, engine.Options{Logger: testLogger(t)})}
			p := v.compile(`{"sluice": 1, "id": "FLOW",
			 "nodes": [{"id": "in", "type": "input"}, {"id": "count", "type": "counting_pure"}, {"id": "out", "type": "output"}],
			 "edges": [{"from": "in", "to": "count"}, {"from": "count", "to": "out"}]}`)
			ctx := context.Background()
			// Started and cancelled while no worker serves the flow; the worker then runs in
			// the engine that cancelled it, or in one that only sees Redis.
			starter := v.e
			if where == "elsewhere" {
				starter = engine.New(r, reg, engine.Options{Logger: testLogger(t)})
			}
			id, err := starter.Start(ctx, p, json.RawMessage(`{}`), engine.StartOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if err := starter.Cancel(ctx, p.Flow, id); err != nil {
				t.Fatal(err)
			}
			v.work(p)
			waitFor(t, "the cancelled run's activation to be acknowledged", 20*time.Second, func() bool {
				length, pending := r.NodeBacklog(ctx, p.Flow, []string{p.Entry})
				return length[0] == 0 && pending[0] == 0
			})
			if n := calls.Load(); n != 0 {
				t.Errorf("the pure component ran %d times for a cancelled run, want never", n)
			}
			mustStatus(t, mustGet(t, v.e, p.Flow, id), store.StatusCancelled)
		})
	}
}

// countingPureSpec is a pure component (it says it needs no I/O, so it runs beside the
// reader and is fused) that counts its calls.
func countingPureSpec(calls *atomic.Int32) flows.Spec {
	return flows.Spec{
		Name: "counting_pure", Title: "Counting pure step (tests)", Category: "test",
		Description: "Counts its calls; needs no I/O.",
		Ports: []flows.Port{
			{Name: flows.PortIn, Direction: "in", Type: flows.PortState, Multiple: true},
			{Name: flows.PortOut, Direction: "out", Type: flows.PortState},
		},
		Params: json.RawMessage(`{"type": "object", "additionalProperties": false}`),
		New:    func(*flows.Build) (flows.Component, error) { return countingPure{calls}, nil },
	}
}

type countingPure struct{ calls *atomic.Int32 }

func (c countingPure) Run(context.Context, *flows.Step) (*flows.Result, error) {
	c.calls.Add(1)
	return &flows.Result{}, nil
}

func (countingPure) Inline() bool { return true }

func mustGet(t *testing.T, e *engine.Engine, flow, run string) *store.Run {
	t.Helper()
	got, err := e.Get(context.Background(), flow, run)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// A step that failed and waits for its retry is not retried once its run is cancelled.
func TestAFailedStepIsNotRetriedAfterItsRunIsCancelled(t *testing.T) {
	storetest.Each(t, func(t *testing.T, r *store.Redis) {
		v := newEnv(t, r)
		p := v.compile(`{"sluice": 1, "id": "FLOW",
		 "nodes": [{"id": "in", "type": "input"}, {"id": "work", "type": "script", "params": {"always_fail": true}, "retry": {"max_attempts": 5, "initial": "1s"}}, {"id": "out", "type": "output"}],
		 "edges": [{"from": "in", "to": "work"}, {"from": "work", "to": "out"}]}`)
		v.work(p)
		id := v.start(p, `{}`)
		ctx := context.Background()
		waitFor(t, "the first attempt to fail", 20*time.Second, func() bool {
			for _, c := range v.checkpoints(p, id) {
				if c.Kind == store.KindError {
					return true
				}
			}
			return false
		})
		if err := v.e.Cancel(ctx, p.Flow, id); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "the step's entry to be let go", 20*time.Second, func() bool {
			length, pending := r.NodeBacklog(ctx, p.Flow, []string{"work"})
			return length[0] == 0 && pending[0] == 0
		})
		if n := v.calls(p, id, "work"); n != 1 {
			t.Errorf("work ran %d times, want once: no retry after the cancel", n)
		}
	})
}

// A slow pure step delays only its own run: another run of the same flow finishes while
// it is still going (pure steps used to run one after another on the flow's reader).
func TestASlowPureStepDoesNotHoldUpOtherRuns(t *testing.T) {
	r := storetest.Real(t)
	v := newEnv(t, r)
	// The slow template would run for years: it ends when the worker stops, so the test
	// assumes nothing about how long the fast run takes.
	p := v.compile(`{"sluice": 1, "id": "FLOW", "settings": {"max_attempts": 1},
	 "nodes": [{"id": "in", "type": "input"},
	  {"id": "t", "type": "template", "timeout": "1h", "params": {"template": "{{if .slow}}{{range 9000000000000000000}}{{end}}{{end}}done"}},
	  {"id": "out", "type": "output", "params": {"value": ".text"}}],
	 "edges": [{"from": "in", "to": "t"}, {"from": "t", "to": "out"}]}`)
	v.work(p)
	slow := v.start(p, `{"slow": true}`)
	waitFor(t, "the slow run's step to be taken", 20*time.Second, func() bool {
		_, pending := r.NodeBacklog(context.Background(), p.Flow, []string{"in", "t"})
		return pending[0]+pending[1] == 1
	})
	fast := v.run(p, `{"slow": false}`)
	mustStatus(t, fast, store.StatusSucceeded)
	if got := string(fast.Output()); got != `"done"` {
		t.Errorf("fast run's output %s, want \"done\"", got)
	}
	if r, _ := v.e.Get(context.Background(), p.Flow, slow); store.Finished(r.Status) {
		t.Errorf("the slow run was %s before the fast one finished", r.Status)
	}
}

// A fanout item whose seed cannot be merged into its branch's state fails the step for
// good, naming the item (it used to start its branch from the parent's state instead).
func TestAFanoutItemThatCannotBeMergedFailsTheStep(t *testing.T) {
	v := newEnv(t, storetest.Embedded(t))
	p := v.compile(`{"sluice": 1, "id": "FLOW", "state": {"item": {"reducer": "add", "default": 0}},
	 "nodes": [{"id": "in", "type": "input"}, {"id": "each", "type": "fanout", "params": {"items": ".xs"}},
	  {"id": "work", "type": "transform", "params": {"expr": "{}"}}, {"id": "j", "type": "join"}, {"id": "out", "type": "output"}],
	 "edges": [{"from": "in", "to": "each"}, {"from": "each", "to": "work"}, {"from": "work", "to": "j"}, {"from": "j", "to": "out"}]}`)
	v.work(p)
	run := v.run(p, `{"xs": [1, "two"]}`)
	mustStatus(t, run, store.StatusFailed)
	if run.ErrorNode != "each" || !strings.Contains(run.Error, "items[1]") {
		t.Errorf("error %q at %q, want item 1 named at node each", run.Error, run.ErrorNode)
	}
	if run.Dead != 1 {
		t.Errorf("%d dead letters, want 1 (failed for good, not retried)", run.Dead)
	}
}

// The engine talks to Redis only through the store package.
func TestTheEngineDoesNotImportTheRedisClient(t *testing.T) {
	// store imports it, of course: what matters is that the engine's own files do not.
	imp, err := exec.Command("go", "list", "-f", `{{join .Imports " "}}`, "github.com/sluicehq/sluice/flows/engine").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, p := range strings.Fields(string(imp)) {
		if strings.HasPrefix(p, "github.com/redis/go-redis") {
			t.Errorf("flows/engine imports %s: Redis is the store package's", p)
		}
	}
}

// A run with a node's output pinned does not call that node's model: the step gives back
// the pinned output and update, the rest of the flow runs on them, and the history says
// the step was pinned.
func TestAPinnedNodeGivesItsPinWithoutRunning(t *testing.T) {
	storetest.Each(t, func(t *testing.T, r *store.Redis) {
		srv := llmtest.New(t)
		v, _, _ := componentEnv(t, r, srv)
		p := v.compile(`{"sluice": 1, "id": "FLOW",
		 "nodes": [{"id": "in", "type": "input"}, {"id": "ask", "type": "llm", "params": {"model": "m", "user": "hello", "as": "answer"}},
		  {"id": "out", "type": "output", "params": {"value": ".answer"}}],
		 "edges": [{"from": "in", "to": "ask"}, {"from": "ask", "to": "out"}]}`)
		v.work(p)
		pins := map[string]engine.Pin{"ask": {Output: json.RawMessage(`"pinned reply"`), Update: json.RawMessage(`{"answer": "pinned reply"}`)}}
		id, err := v.e.Start(context.Background(), p, json.RawMessage(`{}`), engine.StartOptions{Pins: pins})
		if err != nil {
			t.Fatal(err)
		}
		run := v.wait(p, id)
		mustStatus(t, run, store.StatusSucceeded)
		if got := string(run.Output()); got != `"pinned reply"` {
			t.Errorf("output %s, want the pinned reply", got)
		}
		if srv.Calls() != 0 {
			t.Errorf("the model was called %d times, want never", srv.Calls())
		}
		pinned := false
		for _, c := range v.checkpoints(p, id) {
			if c.Node == "ask" {
				pinned = c.Pinned
			}
		}
		if !pinned {
			t.Error("the history does not say the step was pinned")
		}
		// Pinning a node that calls nothing outside is refused, naming it.
		_, err = v.e.Start(context.Background(), p, json.RawMessage(`{}`), engine.StartOptions{Pins: map[string]engine.Pin{"out": {}}})
		if flows.ErrorCode(err) != flows.Invalid || !strings.Contains(err.Error(), `"out"`) {
			t.Errorf("pinning an output node: %v, want invalid", err)
		}
		// So is pinning a join: it merges its branches and calls nothing either.
		jp := v.compile(`{"sluice": 1, "id": "FLOW", "nodes": [{"id": "in", "type": "input"},
		  {"id": "a", "type": "transform", "params": {"expr": "{}"}}, {"id": "b", "type": "transform", "params": {"expr": "{}"}},
		  {"id": "j", "type": "join"}],
		 "edges": [{"from": "in", "to": "a"}, {"from": "in", "to": "b"}, {"from": "a", "to": "j"}, {"from": "b", "to": "j"}]}`)
		_, err = v.e.Start(context.Background(), jp, json.RawMessage(`{}`), engine.StartOptions{Pins: map[string]engine.Pin{"j": {}}})
		if flows.ErrorCode(err) != flows.Invalid || !strings.Contains(err.Error(), `"j"`) {
			t.Errorf("pinning a join: %v, want invalid", err)
		}
	})
}
