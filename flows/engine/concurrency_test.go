package engine_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/flows/engine"
	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/storetest"
)

// A node runs as many steps at once as its concurrency, also when they arrive one at a
// time: with a limit of 4 and 3 steps in flight, the fourth activation is read and run.
// (A node was read only once half its limit was free, so the fourth waited until two
// steps had finished: long model calls with concurrency 4 ran three at a time.)
func TestANodeRunsUpToItsConcurrencyWhenStepsArriveOneByOne(t *testing.T) {
	storetest.Each(t, func(t *testing.T, r *store.Redis) {
		v := newEnv(t, r)
		h := &hold{release: make(chan struct{})}
		v.reg.Register(h.spec())
		p := v.compile(strings.Replace(holdFlow, "N", "4", 1))
		v.work(p)
		var runs []string
		for i := 1; i <= 4; i++ {
			runs = append(runs, v.start(p, fmt.Sprintf(`{"n": %d}`, i)))
			waitFor(t, fmt.Sprintf("%d steps of hold at once (concurrency 4)", i), 30*time.Second, func() bool { return h.inflight.Load() >= int32(i) })
		}
		close(h.release)
		for _, id := range runs {
			mustStatus(t, v.wait(p, id), store.StatusSucceeded)
		}
	})
}

// A fork of two pure branches into a join that runs one step at a time; the step after
// the join is pure, so it commits with the join's step and the run ends there.
const forkIntoAJoinOfOne = `{"sluice": 1, "id": "FLOW",
 "nodes": [
  {"id": "in", "type": "input"},
  {"id": "a", "type": "transform", "params": {"expr": "{a: 1}"}},
  {"id": "b", "type": "transform", "params": {"expr": "{b: 2}"}},
  {"id": "j", "type": "join", "concurrency": 1},
  {"id": "out", "type": "output", "params": {"value": ".a + .b"}}
 ],
 "edges": [
  {"from": "in", "to": "a"}, {"from": "in", "to": "b"}, {"from": "a", "to": "j"},
  {"from": "b", "to": "j"}, {"from": "j", "to": "out"}
 ]}`

// Runs waiting at a join whose room is full go on as soon as its step in flight ends,
// also when that step ends its run and so adds nothing to any stream: the reader does
// not sit in a blocking read of the other nodes' streams meanwhile. (It did: with the
// step after a join fused into the join's commit, the fork bench fell from ~5,000 to
// ~400 runs/s, each join step waiting out a 20 ms blocking read.) The worker's reads
// block for an hour, and so does its wait for room: a run that finishes here was
// started by the room its join freed.
func TestRunsWaitingAtAFullJoinGoOnWhenItsStepEndsTheRun(t *testing.T) {
	storetest.Each(t, func(t *testing.T, r *store.Redis) {
		v := newEnv(t, r)
		p := v.compile(forkIntoAJoinOfOne)
		var runs []string
		for i := 0; i < 4; i++ {
			runs = append(runs, v.start(p, `{}`))
		}
		// The runs are queued before the worker starts: after their first read, all
		// that is left is their joins, one at a time.
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		w := v.e.NewWorker(engine.WorkerOptions{Flows: []string{p.Flow}, Block: time.Hour, Grace: 2 * time.Second})
		engine.SetBusyBlock(w, time.Hour)
		go func() { done <- w.Run(ctx) }()
		t.Cleanup(func() {
			cancel()
			v.start(p, `{}`) // its entry ends the worker's read, which blocks for an hour
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				t.Error("worker did not stop within 10s")
			}
		})
		for _, id := range runs {
			run := v.wait(p, id)
			mustStatus(t, run, store.StatusSucceeded)
			if got := string(run.Outputs["out"]); got != "3" {
				t.Errorf("run %s: output %s, want 3", id, got)
			}
		}
		v.drained(p)
	})
}

// twoLimitedNodes has two nodes in a row that run one step at a time: with a reader per
// node, each reader waits for its own node's room.
const twoLimitedNodes = `{"sluice": 1, "id": "FLOW",
 "nodes": [
  {"id": "in", "type": "input"},
  {"id": "x", "type": "hold", "concurrency": 1},
  {"id": "y", "type": "hold", "concurrency": 1},
  {"id": "out", "type": "output", "params": {"value": ".held"}}
 ],
 "edges": [{"from": "in", "to": "x"}, {"from": "x", "to": "y"}, {"from": "y", "to": "out"}]}`

// A worker with a reader per node (as past 256 streams, or with a flow's partitions on
// a cluster's slots) runs a chain of nodes of concurrency 1 to the end, one step of a
// node at a time, while its reads and its waits for room last an hour: each step's end
// wakes the reader of the node it freed (TestAStepsEndWakesEveryReaderWaitingForRoom:
// every reader waiting, not one of them).
func TestAReaderPerNodeRunsAChainOfNodesOfConcurrencyOne(t *testing.T) {
	storetest.Each(t, func(t *testing.T, r *store.Redis) {
		v := newEnv(t, r)
		h := &hold{release: make(chan struct{})}
		close(h.release)
		v.reg.Register(h.spec())
		p := v.compile(twoLimitedNodes)
		var runs []string
		for i := 0; i < 12; i++ {
			runs = append(runs, v.start(p, `{}`))
		}
		ctx, cancel := context.WithCancel(context.Background())
		w := v.e.NewWorker(engine.WorkerOptions{Flows: []string{p.Flow}, Block: time.Hour, Grace: 2 * time.Second})
		engine.SetBusyBlock(w, time.Hour)
		engine.SetMaxReadStreams(w, 1)
		go w.Run(ctx)
		// The readers' reads block for an hour; they end when the store's client closes,
		// after this.
		t.Cleanup(cancel)
		for _, id := range runs {
			run := v.wait(p, id)
			mustStatus(t, run, store.StatusSucceeded)
			if got := string(run.Outputs["out"]); got != "true" {
				t.Errorf("run %s: output %s, want true", id, got)
			}
		}
		if most := h.most.Load(); most > 1 {
			t.Errorf("%d steps of one node at once, want at most 1 (concurrency 1)", most)
		}
		v.drained(p)
	})
}
