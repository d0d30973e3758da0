package engine_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/storetest"
)

// A fork of three branches, one of which routes itself away before the join: the join
// still fires exactly once and merges the two that arrived, in branch order.
const forkWithEarlyExit = `{"sluice": 1, "id": "FLOW",
 "state": {"seen": {"reducer": "append"}},
 "nodes": [
  {"id": "in", "type": "input"},
  {"id": "a", "type": "transform", "params": {"expr": "{seen: [\"a\"]}"}},
  {"id": "b", "type": "transform", "params": {"expr": "{seen: [\"b\"]}"}},
  {"id": "c", "type": "router", "params": {"routes": {"stay": ".stay == true"}}},
  {"id": "c2", "type": "transform", "params": {"expr": "{seen: [\"c\"]}"}},
  {"id": "elsewhere", "type": "output", "params": {"value": "\"left early\""}},
  {"id": "j", "type": "join"},
  {"id": "out", "type": "output", "params": {"value": ".seen"}}
 ],
 "edges": [
  {"from": "in", "to": "a"}, {"from": "in", "to": "b"}, {"from": "in", "to": "c"},
  {"from": "a", "to": "j"}, {"from": "b", "to": "j"},
  {"from": "c", "port": "stay", "to": "c2"}, {"from": "c2", "to": "j"},
  {"from": "c", "port": "default", "to": "elsewhere"},
  {"from": "j", "to": "out"}
 ]}`

func TestForkJoinMergesArrivingBranchesOnceInBranchOrder(t *testing.T) {
	storetest.Conformance(t, func(t *testing.T, r *store.Redis) {
		v := newEnv(t, r)
		p := v.compile(forkWithEarlyExit)
		v.work(p)

		run := v.run(p, `{"stay": true}`)
		mustStatus(t, run, store.StatusSucceeded)
		if got := string(run.Outputs["out"]); got != `["a","b","c"]` {
			t.Errorf("all branches arrive: join output %s, want [\"a\",\"b\",\"c\"] (branch order)", got)
		}

		run = v.run(p, `{"stay": false}`)
		mustStatus(t, run, store.StatusSucceeded)
		if got := string(run.Outputs["out"]); got != `["a","b"]` {
			t.Errorf("branch c left early: join output %s, want [\"a\",\"b\"]", got)
		}
		if got := string(run.Outputs["elsewhere"]); got != `"left early"` {
			t.Errorf("the early branch's own output = %s", got)
		}
		joins := 0
		for _, c := range v.checkpoints(p, run.ID) {
			if c.Node == "j" {
				joins++
				if len(c.Branches) != 2 {
					t.Errorf("join checkpoint lists %d arrivals, want 2", len(c.Branches))
				}
			}
		}
		if joins != 1 {
			t.Errorf("join ran %d times, want once", joins)
		}
		v.drained(p)
	})
}

// Nested forks: the outer fork's second branch forks again into its own join; the
// inner join's merged result travels on to the outer join.
const nestedForks = `{"sluice": 1, "id": "FLOW",
 "state": {"seen": {"reducer": "append"}},
 "nodes": [
  {"id": "in", "type": "input"},
  {"id": "a", "type": "transform", "params": {"expr": "{seen: [\"a\"]}"}},
  {"id": "b", "type": "transform", "params": {"expr": "{seen: [\"b\"]}"}},
  {"id": "b1", "type": "transform", "params": {"expr": "{seen: [\"b1\"]}"}},
  {"id": "b2", "type": "transform", "params": {"expr": "{seen: [\"b2\"]}"}},
  {"id": "bj", "type": "join"},
  {"id": "j", "type": "join"},
  {"id": "out", "type": "output", "params": {"value": ".seen"}}
 ],
 "edges": [
  {"from": "in", "to": "a"}, {"from": "in", "to": "b"},
  {"from": "b", "to": "b1"}, {"from": "b", "to": "b2"},
  {"from": "b1", "to": "bj"}, {"from": "b2", "to": "bj"},
  {"from": "a", "to": "j"}, {"from": "bj", "to": "j"},
  {"from": "j", "to": "out"}
 ]}`

func TestNestedForksEachMeetAtTheirOwnJoin(t *testing.T) {
	storetest.Each(t, func(t *testing.T, r *store.Redis) {
		v := newEnv(t, r)
		p := v.compile(nestedForks)
		if p.Nodes["in"].Join != "j" || p.Nodes["b"].Join != "bj" {
			t.Fatalf("joins: in→%q b→%q, want j and bj", p.Nodes["in"].Join, p.Nodes["b"].Join)
		}
		v.work(p)
		for i := 0; i < 5; i++ {
			run := v.run(p, `{}`)
			mustStatus(t, run, store.StatusSucceeded)
			if got := string(run.Outputs["out"]); got != `["a","b","b1","b2"]` {
				t.Fatalf("output %s, want [\"a\",\"b\",\"b1\",\"b2\"]", got)
			}
		}
		v.drained(p)
	})
}

// A branch that forks again towards the same join: the new branches count in the same
// fork, and the shared prefix (b) is merged once.
const forkAgainSameJoin = `{"sluice": 1, "id": "FLOW",
 "state": {"seen": {"reducer": "append"}},
 "nodes": [
  {"id": "in", "type": "input"},
  {"id": "a", "type": "transform", "params": {"expr": "{seen: [\"a\"]}"}},
  {"id": "b", "type": "transform", "params": {"expr": "{seen: [\"b\"]}"}},
  {"id": "b1", "type": "transform", "params": {"expr": "{seen: [\"b1\"]}"}},
  {"id": "b2", "type": "transform", "params": {"expr": "{seen: [\"b2\"]}"}},
  {"id": "j", "type": "join"},
  {"id": "out", "type": "output", "params": {"value": ".seen"}}
 ],
 "edges": [
  {"from": "in", "to": "a"}, {"from": "in", "to": "b"},
  {"from": "b", "to": "b1"}, {"from": "b", "to": "b2"},
  {"from": "a", "to": "j"}, {"from": "b1", "to": "j"}, {"from": "b2", "to": "j"},
  {"from": "j", "to": "out"}
 ]}`

func TestBranchThatForksAgainCountsInTheSameJoin(t *testing.T) {
	storetest.Each(t, func(t *testing.T, r *store.Redis) {
		v := newEnv(t, r)
		p := v.compile(forkAgainSameJoin)
		v.work(p)
		run := v.run(p, `{}`)
		mustStatus(t, run, store.StatusSucceeded)
		if got := string(run.Outputs["out"]); got != `["a","b","b1","b2"]` {
			t.Errorf("output %s, want [\"a\",\"b\",\"b1\",\"b2\"] (b merged once)", got)
		}
		v.drained(p)
	})
}

const loopWithExit = `{"sluice": 1, "id": "FLOW",
 "settings": {"max_steps": MAX},
 "nodes": [
  {"id": "in", "type": "input"},
  {"id": "inc", "type": "transform", "params": {"expr": "{n: ((.n // 0) + 1)}"}},
  {"id": "check", "type": "router", "params": {"routes": {"again": ".n < .until"}}},
  {"id": "out", "type": "output", "params": {"value": ".n"}}
 ],
 "edges": [
  {"from": "in", "to": "inc"}, {"from": "inc", "to": "check"},
  {"from": "check", "port": "again", "to": "inc"},
  {"from": "check", "port": "default", "to": "out"}
 ]}`

func TestLoopRunsUntilItsExitAndMaxStepsStopsASpinningRun(t *testing.T) {
	storetest.Conformance(t, func(t *testing.T, r *store.Redis) {
		v := newEnv(t, r)
		p := v.compile(strings.Replace(loopWithExit, "MAX", "50", 1))
		v.work(p)
		run := v.run(p, `{"until": 10}`)
		mustStatus(t, run, store.StatusSucceeded)
		if got := string(run.Output()); got != "10" {
			t.Errorf("loop output %s, want 10", got)
		}
		run = v.run(p, `{"until": 1000}`)
		mustStatus(t, run, store.StatusFailed)
		if !strings.Contains(run.Error, "max_steps (50)") {
			t.Errorf("error %q, want it to name max_steps (50)", run.Error)
		}
		if run.Steps > 51 {
			t.Errorf("steps = %d: the run went on past max_steps", run.Steps)
		}
		v.drained(p)
	})
}

func TestFanoutBranchesForkingWithoutJoinRunIndependently(t *testing.T) {
	storetest.Each(t, func(t *testing.T, r *store.Redis) {
		v := newEnv(t, r)
		p := v.compile(`{"sluice": 1, "id": "FLOW",
		 "nodes": [
		  {"id": "in", "type": "input"},
		  {"id": "x", "type": "output", "params": {"value": "\"x\""}},
		  {"id": "y", "type": "output", "params": {"value": "\"y\""}}
		 ],
		 "edges": [{"from": "in", "to": "x"}, {"from": "in", "to": "y"}]}`)
		v.work(p)
		run := v.run(p, `{}`)
		mustStatus(t, run, store.StatusSucceeded)
		if got := string(run.Output()); got != `{"x":"x","y":"y"}` {
			t.Errorf("two outputs: %s, want an object keyed by output node", got)
		}
		v.drained(p)
	})
}

var _ = fmt.Sprint
