package store_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/storetest"
)

// The last turns of a long step go with its commit (Commit.Turns): the run's history
// and live events show them as if each had been saved alone (SaveTurn) — after the
// turns saved before, before the step's checkpoint — and a retried attempt finds them
// all. A commit whose fence fails writes none of them.
func TestTurnsSavedWithTheStepsCommitLookLikeTurnsSavedAlone(t *testing.T) {
	storetest.Each(t, func(t *testing.T, r *store.Redis) {
		for _, keep := range []int{0, 3} { // keep_last set: every step's state is an argument
			t.Run(fmt.Sprintf("keep_last %d", keep), func(t *testing.T) { turnsWithTheCommit(t, r, keep) })
		}
	})
}

func turnsWithTheCommit(t *testing.T, r *store.Redis, keep int) {
	{
		ctx := context.Background()
		flow := costFlow(t, r, "a", "b")
		startRunsAtA(t, r, flow, 2)
		acts := costRead(t, r, flow, "a", "a")
		first, err := r.LastEventID(ctx, flow)
		if err != nil {
			t.Fatal(err)
		}
		// Run r0: one turn saved alone, two with the commit.
		a := acts[0]
		if _, err := r.SaveTurn(ctx, a, "w-1", []byte(`{"kind":"model","n":1}`)); err != nil {
			t.Fatal(err)
		}
		step := func(a store.Activation) store.CommitStep {
			return store.CommitStep{Node: "a", State: []byte(`{"x":1}`), Event: []byte(`{"status":"done"}`),
				Checkpoint: store.Checkpoint{Node: "a", Kind: "step", Attempt: 1, Worker: "w-1"}}
		}
		c := &store.Commit{Act: a, Consumer: "w-1", MaxSteps: 100, TTL: time.Hour, KeepLast: keep, Steps: []store.CommitStep{step(a)},
			Transitions: []store.Transition{store.Activate{Node: "b"}},
			Turns:       [][]byte{[]byte(`{"kind":"tool","n":2}`), []byte(`{"kind":"model","n":3}`)}}
		// Run r1's step was taken over by w-2: its commit, turns and all, is stale.
		b := acts[1]
		if err := r.Client.XClaim(ctx, &redis.XClaimArgs{Stream: store.FlowKeys(flow).In("a"), Group: store.Group, Consumer: "w-2", Messages: []string{b.ID}}).Err(); err != nil {
			t.Fatal(err)
		}
		stale := &store.Commit{Act: b, Consumer: "w-1", MaxSteps: 100, TTL: time.Hour, Steps: []store.CommitStep{step(b)},
			Transitions: []store.Transition{store.Activate{Node: "b"}}, Turns: [][]byte{[]byte(`{"kind":"model","n":9}`)}}
		res, errs := r.CommitBatch(ctx, []*store.Commit{c, stale})
		if errs[0] != nil || res[0].Status != store.CommitOK || errs[1] != nil || res[1].Status != store.CommitStale {
			t.Fatalf("commits: %v %+v, %v %+v", errs[0], res[0], errs[1], res[1])
		}

		// A retry of the step sees the three turns in order.
		turns, err := r.Turns(ctx, a)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, t := range turns {
			got = append(got, string(t))
		}
		if strings.Join(got, " ") != `{"kind":"model","n":1} {"kind":"tool","n":2} {"kind":"model","n":3}` {
			t.Errorf("turns %v, want the one saved alone, then the two of the commit", got)
		}
		// The history: the input, the three turns, then the step, whose checkpoint is the
		// run's last.
		cps, err := r.Checkpoints(ctx, store.RunRef{Flow: flow, Run: a.Run}, "-", 0)
		if err != nil {
			t.Fatal(err)
		}
		var kinds []string
		for _, cp := range cps {
			kinds = append(kinds, cp.Kind)
			if cp.Kind == "turn" && (cp.Node != "a" || cp.Parent != a.Ckpt || cp.Entry != a.ID || cp.Worker != "w-1") {
				t.Errorf("turn checkpoint %+v, want node a, parent %s, entry %s, worker w-1", cp, a.Ckpt, a.ID)
			}
		}
		if strings.Join(kinds, ",") != "input,turn,turn,turn,step" || cps[len(cps)-1].ID != res[0].Ckpt {
			t.Errorf("history %v (last %s), want input, three turns, then the step %s", kinds, cps[len(cps)-1].ID, res[0].Ckpt)
		}
		// The live events: each turn, with its checkpoint, before the step's event.
		evs, err := r.EventsAfter(ctx, flow, first, 100)
		if err != nil {
			t.Fatal(err)
		}
		var seen []string
		for _, ev := range evs {
			if ev.Run != a.Run && ev.Run != b.Run {
				continue
			}
			if ev.Run == b.Run {
				t.Errorf("the stale commit's run has event %+v", ev)
			}
			if ev.Type == "turn" {
				var turn struct{ N int }
				json.Unmarshal(ev.Data, &turn)
				if ev.Ckpt == "" || ev.Node != "a" {
					t.Errorf("turn event %+v has no checkpoint or node", ev)
				}
				seen = append(seen, "turn"+string(rune('0'+turn.N)))
				continue
			}
			seen = append(seen, ev.Type)
		}
		if strings.Join(seen, ",") != "turn1,turn2,turn3,step,run" {
			t.Errorf("events %v, want turn1,turn2,turn3,step,run (it is running now)", seen)
		}
		// Run r1's history holds no turn.
		cps, err = r.Checkpoints(ctx, store.RunRef{Flow: flow, Run: b.Run}, "-", 0)
		if err != nil || len(cps) != 1 {
			t.Errorf("the stale commit's run has history %+v (%v), want its input only", cps, err)
		}
	}
}

// A start's commit has no step of a worker's to save turns of: one with turns is refused
// before it writes anything.
func TestACommitThatStartsARunWithTurnsIsRefusedAndWritesNothing(t *testing.T) {
	storetest.Each(t, func(t *testing.T, r *store.Redis) {
		ctx := context.Background()
		flow := costFlow(t, r, "in", "n1", "n2", "n3", "out")
		c := foldedStart(flow, "r1", []byte(`{}`))
		c.Turns = [][]byte{[]byte(`{"kind":"model"}`)}
		before := snapshot(t, r, flow)
		_, errs := r.CommitBatch(ctx, []*store.Commit{c})
		if errs[0] == nil || !strings.Contains(errs[0].Error(), "a turn (U)") {
			t.Errorf("commit error %v, want one about the turn", errs[0])
		}
		if after := snapshot(t, r, flow); after != before {
			t.Errorf("the refused commit wrote to Redis:\nbefore:\n%s\nafter:\n%s", before, after)
		}
	})
}

// A commit with two turns costs the same script call as one without, and four commands
// more inside it (each turn's checkpoint and live event): where saving each alone cost a
// script call each (turn.lua: its fence, checkpoint and event).
func TestTurnsSavedWithTheCommitCostNoScriptCallOfTheirOwn(t *testing.T) {
	r := storetest.Real(t)
	flow := costFlow(t, r, "a", "b", "c")
	state := []byte(`{"pad":"` + strings.Repeat("x", 240) + `"}`)
	costStart(t, r, flow, costRun, "a", state)
	costCommit(t, r, state, store.StatusRunning, costRead(t, r, flow, "a"), []store.Transition{store.Activate{Node: "b"}})
	acts := costRead(t, r, flow, "b")
	got := monitorRun(t, flow, func() {
		c := &store.Commit{Act: acts[0], Consumer: "w-1", MaxSteps: 100, TTL: 24 * time.Hour,
			Steps: []store.CommitStep{{Node: "b", State: state, Event: []byte(`{"status":"done","ms":0.01}`),
				Checkpoint: store.Checkpoint{Node: "b", Kind: "step", Attempt: 1, Worker: "w-1", Duration: 10 * time.Microsecond}}},
			Transitions: []store.Transition{store.Activate{Node: "c"}},
			Turns:       [][]byte{[]byte(`{"kind":"tool","content":"1"}`), []byte(`{"kind":"model","message":{"content":"done"}}`)}}
		res, errs := r.CommitBatch(context.Background(), []*store.Commit{c})
		if errs[0] != nil || res[0].Status != store.CommitOK {
			t.Fatalf("commit: %v %+v", errs[0], res[0])
		}
	})
	// TestAnUnfusedHopCostsPinnedRedisCommands's hop, read apart: 1 command, its commit
	// 1 script running 10.
	checkCost(t, "a hop's commit with two turns", got, runCost{Commands: 1, Bytes: 1521, Scripts: 1, InScripts: 14})
}
