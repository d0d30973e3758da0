package engine_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/flows"
	"github.com/sluicehq/sluice/flows/engine"
	"github.com/sluicehq/sluice/flows/nodes"
	"github.com/sluicehq/sluice/flows/nodes/llmtest"
	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/storetest"
)

// componentEnv is a test engine whose components use the fake model, may reach loopback,
// cache in Redis and run subflows.
func componentEnv(t *testing.T, r *store.Redis, srv *llmtest.Server) (*env, *nodes.Env, *engine.Subflows) {
	t.Helper()
	ne := &nodes.Env{HTTP: &nodes.HTTPPolicy{Allow: []nodes.AllowRule{{Prefix: netip.MustParsePrefix("127.0.0.0/8")}}}}
	if srv != nil {
		ne = srv.Env(0)
		ne.HTTP = &nodes.HTTPPolicy{Allow: []nodes.AllowRule{{Prefix: netip.MustParsePrefix("127.0.0.0/8")}}}
	}
	ne.Cache = store.NewCache(r)
	reg := nodes.NewRegistry(ne)
	e := engine.New(r, reg, engine.Options{Logger: testLogger(t)})
	sub := e.NewSubflows()
	ne.Subflows = sub
	return &env{t: t, r: r, reg: reg, e: e}, ne, sub
}

// startWorker runs a worker for flows until stop is called (or the test ends).
func startWorker(t *testing.T, e *engine.Engine, grace time.Duration, flows ...string) (*engine.Worker, func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	w := e.NewWorker(engine.WorkerOptions{Flows: flows, Block: 100 * time.Millisecond, Grace: grace})
	done := make(chan struct{})
	go func() { _ = w.Run(ctx); close(done) }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				t.Error("worker did not stop within 10s")
			}
		})
	}
	t.Cleanup(stop)
	return w, stop
}

// A worker stops in the middle of an agent's tool loop; the step is taken over and the
// agent resumes from its saved turns: the finished model turn and tool call are not
// repeated, only the unfinished tool call and what follows.
func TestAgentResumesMidLoopAfterItsWorkerStops(t *testing.T) {
	storetest.Each(t, func(t *testing.T, r *store.Redis) {
		srv := llmtest.New(t)
		srv.Reply(
			llmtest.Calls(llmtest.Call("a", "lookup", `{"id": "u1"}`), llmtest.Call("b", "lookup", `{"id": "u2"}`)),
			llmtest.Text("Ada and Bob."),
		)
		var mu sync.Mutex
		lookups := map[string]int{}
		blocking := make(chan struct{}, 1)
		var crashed atomic.Bool
		api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			id := strings.TrimPrefix(req.URL.Path, "/users/")
			mu.Lock()
			lookups[id]++
			mu.Unlock()
			if id == "u2" && !crashed.Load() {
				blocking <- struct{}{}
				<-req.Context().Done() // hangs until the worker goes away
				return
			}
			fmt.Fprintf(w, `{"name": %q}`, map[string]string{"u1": "Ada", "u2": "Bob"}[id])
		}))
		t.Cleanup(api.Close)

		v, _, _ := componentEnv(t, r, srv)
		p := v.compile(`{"sluice": 1, "id": "FLOW", "settings": {"claim_after": "1s", "max_attempts": 3},
		 "nodes": [
		  {"id": "in", "type": "input"},
		  {"id": "agent", "type": "agent", "params": {"model": "m", "user": "Who ordered?"}},
		  {"id": "lookup", "type": "http", "params": {"url": "` + api.URL + `/users/{{.id}}", "tool_name": "lookup"}},
		  {"id": "out", "type": "output", "params": {"value": "{answer}"}}
		 ],
		 "edges": [{"from": "in", "to": "agent"}, {"from": "lookup", "port": "tool", "to": "agent", "to_port": "tools"}, {"from": "agent", "to": "out"}]}`)
		_, stop1 := startWorker(t, v.e, 100*time.Millisecond, p.Flow)
		id := v.start(p, `{}`)
		select {
		case <-blocking:
		case <-time.After(20 * time.Second):
			t.Fatal("the agent never reached its second tool call")
		}
		crashed.Store(true)
		stop1() // the step is abandoned mid-loop, left pending
		startWorker(t, v.e, time.Second, p.Flow)
		run := v.wait(p, id)
		mustStatus(t, run, store.StatusSucceeded)
		if got := string(run.Output()); got != `{"answer":"Ada and Bob."}` {
			t.Errorf("output %s", got)
		}
		if srv.Calls() != 2 {
			t.Errorf("%d model calls, want 2: the first turn must not be repeated", srv.Calls())
		}
		mu.Lock()
		defer mu.Unlock()
		if lookups["u1"] != 1 || lookups["u2"] != 2 {
			t.Errorf("lookups %v; want u1 once (it finished) and u2 twice (it did not)", lookups)
		}
		turns := 0
		for _, c := range v.checkpoints(p, id) {
			if c.Kind == "turn" {
				turns++
			}
		}
		if turns != 4 {
			t.Errorf("%d turn entries in the history, want 4 (model, tool a, tool b, model)", turns)
		}
	})
}

// An agent's last turns — a data tool's result and the model's final reply — go with
// the agent's commit instead of one write each: the run's history shows every turn in
// order before the agent's step, as when each was saved alone. When the step fails on
// the reply (its output mapping refuses it), the turns are saved anyway, so the history
// shows what it failed on.
func TestAnAgentsLastTurnsGoWithItsCommitAndStayInItsHistory(t *testing.T) {
	storetest.Each(t, func(t *testing.T, r *store.Redis) {
		for _, c := range []struct {
			name, output, status string
		}{{"committed", "", store.StatusSucceeded}, {"failed", `, "output": "1"`, store.StatusFailed}} {
			t.Run(c.name, func(t *testing.T) {
				srv := llmtest.New(t)
				srv.Reply(llmtest.Calls(llmtest.Call("q1", "query", `{"query": ".n"}`)), llmtest.Text("It is 7."))
				v, _, _ := componentEnv(t, r, srv)
				p := v.compile(`{"sluice": 1, "id": "FLOW", "settings": {"max_attempts": 1},
				 "nodes": [
				  {"id": "in", "type": "input"},
				  {"id": "agent", "type": "agent", "params": {"model": "m", "user": "What is n?"}` + c.output + `},
				  {"id": "query", "type": "data", "params": {"tool_name": "query"}},
				  {"id": "out", "type": "output", "params": {"value": "{answer}"}}
				 ],
				 "edges": [{"from": "in", "to": "agent"}, {"from": "query", "port": "tool", "to": "agent", "to_port": "tools"}, {"from": "agent", "to": "out"}]}`)
				v.work(p)
				run := v.run(p, `{"n": 7}`)
				mustStatus(t, run, c.status)
				var got []string
				for _, cp := range v.checkpoints(p, run.ID) {
					if cp.Kind != "turn" {
						got = append(got, cp.Kind+":"+cp.Node)
						continue
					}
					var turn struct {
						Kind    string
						Content string
						Message *struct{ Content string }
					}
					if err := json.Unmarshal(cp.Update, &turn); err != nil {
						t.Fatal(err)
					}
					what := turn.Content
					if turn.Message != nil {
						what = turn.Message.Content
					}
					got = append(got, "turn:"+turn.Kind+":"+what)
				}
				want := "input: step:in turn:model: turn:tool:7 turn:model:It is 7. step:agent step:out"
				if c.status == store.StatusFailed {
					want = "input: step:in turn:model: turn:tool:7 turn:model:It is 7. error:agent"
				}
				if strings.Join(got, " ") != want {
					t.Errorf("history %q, want %q", strings.Join(got, " "), want)
				}
				if srv.Calls() != 2 {
					t.Errorf("%d model calls, want 2", srv.Calls())
				}
			})
		}
	})
}

// Three parallel branches ask for the same expensive request: the upstream is called once.
func TestParallelBranchesShareOneCachedToolCall(t *testing.T) {
	storetest.Each(t, func(t *testing.T, r *store.Redis) {
		var hits atomic.Int32
		api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			hits.Add(1)
			time.Sleep(50 * time.Millisecond) // an expensive conversion
			w.Write([]byte(`{"pages": 12}`))
		}))
		t.Cleanup(api.Close)
		v, ne, _ := componentEnv(t, r, nil)
		p := v.compile(`{"sluice": 1, "id": "FLOW", "state": {"results": {"reducer": "append", "default": []}},
		 "nodes": [
		  {"id": "in", "type": "input"},
		  {"id": "each", "type": "fanout", "params": {"items": ".agents", "as": "agent"}},
		  {"id": "convert", "type": "http", "cache": {"ttl": "1h"}, "params": {"method": "POST", "url": "` + api.URL + `/pdf-to-json", "body": "{{.document}}"},
		   "output": "{results: [{agent: $state.agent, pages: .body.pages}]}"},
		  {"id": "merge", "type": "join"},
		  {"id": "out", "type": "output", "params": {"value": "{results}"}}
		 ],
		 "edges": [{"from": "in", "to": "each"}, {"from": "each", "to": "convert"}, {"from": "convert", "to": "merge"}, {"from": "merge", "to": "out"}]}`)
		v.work(p)
		run := v.run(p, `{"document": "label.pdf", "agents": ["fda", "eu", "images"]}`)
		mustStatus(t, run, store.StatusSucceeded)
		if got := string(run.Output()); got != `{"results":[{"agent":"fda","pages":12},{"agent":"eu","pages":12},{"agent":"images","pages":12}]}` {
			t.Errorf("output %s", got)
		}
		if hits.Load() != 1 {
			t.Errorf("the upstream was called %d times by three branches, want once", hits.Load())
		}
		if st := ne.CacheStats(); st.Hits != 2 || st.Misses != 1 {
			t.Errorf("cache stats %+v, want 2 hits and 1 miss", st)
		}
		// A second run of the same version finds the result in Redis.
		mustStatus(t, v.run(p, `{"document": "label.pdf", "agents": ["fda"]}`), store.StatusSucceeded)
		if hits.Load() != 1 {
			t.Errorf("a later run called the upstream again (%d calls)", hits.Load())
		}
	})
}

func TestJQBombFailsItsRunAtTheDeadlineAndTheWorkerLivesOn(t *testing.T) {
	v, _, _ := componentEnv(t, storetest.Real(t), nil)
	bomb := v.compile(`{"sluice": 1, "id": "FLOW", "nodes": [{"id": "in", "type": "input"}, {"id": "q", "type": "data", "params": {"query": "def f: f; f"}}, {"id": "out", "type": "output"}],
	 "edges": [{"from": "in", "to": "q"}, {"from": "q", "to": "out"}]}`)
	fine := v.compile(`{"sluice": 1, "id": "FLOW", "nodes": [{"id": "in", "type": "input"}, {"id": "q", "type": "data", "params": {"query": ".n + 1", "as": "m"}}, {"id": "out", "type": "output", "params": {"value": "{m}"}}],
	 "edges": [{"from": "in", "to": "q"}, {"from": "q", "to": "out"}]}`)
	v.work(bomb, fine)
	run := v.run(bomb, `{}`)
	mustStatus(t, run, store.StatusFailed)
	if !strings.Contains(run.Error, "ran past its deadline") || run.ErrorNode != "q" {
		t.Errorf("error %q at %q", run.Error, run.ErrorNode)
	}
	ok := v.run(fine, `{"n": 1}`)
	mustStatus(t, ok, store.StatusSucceeded)
	if got := string(ok.Output()); got != `{"m":2}` {
		t.Errorf("output %s", got)
	}
}

// A subflow node runs another flow; the child run is linked through the parent's
// checkpoint history, and a retried step finds the child it started.
func TestSubflowRunsAnotherFlowAndLinksItsRun(t *testing.T) {
	storetest.Conformance(t, func(t *testing.T, r *store.Redis) {
		v, _, sub := componentEnv(t, r, nil)
		child := v.compile(`{"sluice": 1, "id": "FLOW", "nodes": [{"id": "in", "type": "input"},
		  {"id": "greet", "type": "template", "params": {"template": "hello, {{.name}}", "as": "greeting"}}, {"id": "out", "type": "output", "params": {"value": ".greeting"}}],
		 "edges": [{"from": "in", "to": "greet"}, {"from": "greet", "to": "out"}]}`)
		parent := v.compile(`{"sluice": 1, "id": "FLOW", "nodes": [{"id": "in", "type": "input"},
		  {"id": "sub", "type": "subflow", "params": {"flow": "` + child.Flow + `", "input": "{name: .who}", "as": "greeting"}},
		  {"id": "out", "type": "output", "params": {"value": "{greeting}"}}],
		 "edges": [{"from": "in", "to": "sub"}, {"from": "sub", "to": "out"}]}`)
		w, _ := startWorker(t, v.e, time.Second, parent.Flow)
		sub.Bind(context.Background(), nil, w)
		run := v.run(parent, `{"who": "Ada"}`)
		mustStatus(t, run, store.StatusSucceeded)
		if got := string(run.Output()); got != `{"greeting":"hello, Ada"}` {
			t.Fatalf("output %s", got)
		}
		var link struct {
			Subflow struct{ Flow, Run string } `json:"subflow"`
		}
		for _, c := range v.checkpoints(parent, run.ID) {
			if c.Kind == "turn" && c.Node == "sub" {
				json.Unmarshal(c.Update, &link)
			}
		}
		if link.Subflow.Flow != child.Flow || link.Subflow.Run == "" {
			t.Fatalf("the parent's history does not link the child run: %+v", link)
		}
		cr, err := v.e.Get(context.Background(), child.Flow, link.Subflow.Run)
		if err != nil || cr.Status != store.StatusSucceeded || string(cr.Output()) != `"hello, Ada"` {
			t.Fatalf("the linked child run: %+v %v", cr, err)
		}
		if c := cr.Caller; c == nil || c.Flow != parent.Flow || c.Run != run.ID || c.Node != "sub" {
			t.Errorf("the child run's caller %+v, want the parent's step", c)
		}

		// A retried step whose earlier attempt started that child waits for it instead
		// of starting another.
		turn, _ := json.Marshal(map[string]any{"subflow": map[string]string{"flow": child.Flow, "run": link.Subflow.Run}})
		before, _ := r.Client.ZCard(context.Background(), store.FlowKeys(child.Flow).Runs()).Result()
		res, err := sub.RunSubflow(context.Background(), stepWithTurns(parent.Flow, "r-retried", turn), child.Flow, json.RawMessage(`{"name": "someone else"}`))
		if err != nil || string(res.Output) != `"hello, Ada"` || res.Run != link.Subflow.Run {
			t.Fatalf("retried step: %+v %v; want the first child's result", res, err)
		}
		if after, _ := r.Client.ZCard(context.Background(), store.FlowKeys(child.Flow).Runs()).Result(); after != before {
			t.Errorf("a retried step started another child run (%d runs, was %d)", after, before)
		}

		// An unknown flow is a clear, permanent error.
		_, err = sub.RunSubflow(context.Background(), stepWithTurns(parent.Flow, "r2", nil), "no-such-flow", json.RawMessage(`{}`))
		if err == nil || !strings.Contains(err.Error(), `no flow "no-such-flow"`) {
			t.Errorf("unknown flow: %v", err)
		}
	})
}

func stepWithTurns(flow, run string, turn []byte) *flows.Step {
	s := &flows.Step{Flow: flow, Run: run, Node: "sub", Attempt: 2, State: map[string]any{}}
	if turn != nil {
		s.Turns = []json.RawMessage{turn}
	}
	return s
}

func TestCancellingAParentRunCancelsItsSubflowRuns(t *testing.T) {
	storetest.Conformance(t, func(t *testing.T, r *store.Redis) {
		v, _, sub := componentEnv(t, r, nil)
		child := v.compile(`{"sluice": 1, "id": "FLOW", "nodes": [{"id": "in", "type": "input"},
		  {"id": "wait", "type": "delay", "params": {"for": "1h"}}, {"id": "out", "type": "output"}],
		 "edges": [{"from": "in", "to": "wait"}, {"from": "wait", "to": "out"}]}`)
		parent := v.compile(`{"sluice": 1, "id": "FLOW", "nodes": [{"id": "in", "type": "input"},
		  {"id": "sub", "type": "subflow", "params": {"flow": "` + child.Flow + `"}},
		  {"id": "out", "type": "output"}],
		 "edges": [{"from": "in", "to": "sub"}, {"from": "sub", "to": "out"}]}`)
		w, _ := startWorker(t, v.e, time.Second, parent.Flow, child.Flow)
		sub.Bind(context.Background(), nil, w)
		id := v.start(parent, `{}`)
		var childRun string
		waitFor(t, "the child run to start", 10*time.Second, func() bool {
			for _, c := range v.checkpoints(parent, id) {
				var link struct {
					Subflow struct{ Flow, Run string } `json:"subflow"`
				}
				if c.Kind == "turn" && json.Unmarshal(c.Update, &link) == nil && link.Subflow.Run != "" {
					childRun = link.Subflow.Run
					if _, err := v.e.Get(context.Background(), child.Flow, childRun); err == nil {
						return true
					}
				}
			}
			return false
		})
		if err := v.e.Cancel(context.Background(), parent.Flow, id); err != nil {
			t.Fatal(err)
		}
		cr, err := v.e.Get(context.Background(), child.Flow, childRun)
		if err != nil || cr.Status != store.StatusCancelled {
			t.Errorf("child run after cancelling its parent: %+v %v, want cancelled", cr, err)
		}
	})
}
