package store_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/storetest"
)

// A run's recent events are those of that run only, oldest first, written since the
// time asked (its creation), each with the time it was written.
func TestRecentRunEventsAreTheRunsOwnSinceItsCreation(t *testing.T) {
	storetest.Each(t, func(t *testing.T, r *store.Redis) {
		ctx := context.Background()
		flow := storetest.FlowID(t)
		storetest.DeleteFlowKeys(t, r, flow)
		add := func(run, node, typ string) {
			t.Helper()
			if err := r.AppendEvents(ctx, []store.LiveEvent{{Flow: flow, Run: run, Node: node, Type: typ, Data: []byte(`{}`)}}); err != nil {
				t.Fatal(err)
			}
		}
		add("a", "x", "start")
		add("b", "y", "start")
		add("a", "x", "rate_limit")
		evs, err := r.RecentRunEvents(ctx, store.RunRef{Flow: flow, Run: "a"}, time.Time{}, 100)
		if err != nil {
			t.Fatal(err)
		}
		if len(evs) != 2 || evs[0].Node != "x" || evs[0].Type != "start" || evs[1].Type != "rate_limit" {
			t.Fatalf("events %+v, want run a's start and rate_limit of x", evs)
		}
		at := store.EventTime(evs[0].ID)
		if at.IsZero() || time.Since(at) > time.Hour || time.Until(at) > time.Hour {
			t.Errorf("event time %v, want about now", at)
		}
		if evs, err := r.RecentRunEvents(ctx, store.RunRef{Flow: flow, Run: "a"}, at.Add(time.Hour), 100); err != nil || len(evs) != 0 {
			t.Errorf("events since an hour after them: %+v %v, want none", evs, err)
		}
		if evs, err := r.RecentRunEvents(ctx, store.RunRef{Flow: flow, Run: "a"}, at, 1); err != nil || len(evs) != 1 || evs[0].Type != "rate_limit" {
			t.Errorf("the newest entry only: %+v %v, want the rate_limit", evs, err)
		}
	})
}

// A committed step's live event reads back as the engine wrote it, byte for byte, from
// a commit's own events entry and from a batch's; the events stream keeps the common
// event ({"duration_ms", "kind", "status":"done"}) without its names and its status.
func TestAStepsEventReadsBackAsWrittenAndIsKeptShort(t *testing.T) {
	storetest.Each(t, func(t *testing.T, r *store.Redis) {
		ctx := context.Background()
		flow := costFlow(t, r, "a", "b", "c")
		plain := []byte(`{"duration_ms":0.125,"kind":"step","status":"done"}`)
		join := []byte(`{"duration_ms":3,"kind":"join","status":"done"}`)
		other := []byte(`{"duration_ms":1,"kind":"step","ports":["yes"],"status":"done"}`)
		for _, run := range []string{"r1", "r2", "r3"} {
			if _, err := r.StartRun(ctx, store.StartArgs{Flow: flow, Run: run, Version: "v1", State: []byte(`{}`), Fresh: true,
				Checkpoint: store.Checkpoint{Kind: "input"}, Entries: []string{"a"}}); err != nil {
				t.Fatal(err)
			}
		}
		from, err := r.LastEventID(ctx, flow)
		if err != nil {
			t.Fatal(err)
		}
		acts, err := r.ReadNodes(ctx, "w-1", []store.NodeRef{{Flow: flow, Node: "a"}}, 1, 0)
		if err != nil || len(acts) != 1 {
			t.Fatalf("read: %v %v", acts, err)
		}
		commit := func(acts []store.Activation, evs ...[]byte) {
			t.Helper()
			var cs []*store.Commit
			for i, a := range acts {
				cs = append(cs, &store.Commit{Act: a, Consumer: "w-1", MaxSteps: 100, TTL: time.Hour,
					Steps: []store.CommitStep{{Node: "a", State: []byte(`{}`), Event: evs[i], Checkpoint: store.Checkpoint{Kind: "step"}}}})
			}
			res, errs := r.CommitBatch(ctx, cs)
			for i := range cs {
				if errs[i] != nil || res[i].Status != store.CommitOK {
					t.Fatalf("commit %d: %v %+v", i, errs[i], res[i])
				}
			}
		}
		commit(acts, plain) // alone: a "steps" entry
		rest, err := r.ReadNodes(ctx, "w-1", []store.NodeRef{{Flow: flow, Node: "a"}}, 16, 0)
		if err != nil || len(rest) != 2 {
			t.Fatalf("read: %v %v", rest, err)
		}
		commit(rest, join, other) // together: a "batch" entry
		evs, err := r.EventsAfter(ctx, flow, from, 100)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, e := range evs {
			if e.Type == "step" {
				got = append(got, string(e.Data))
			}
		}
		if want := []string{string(plain), string(join), string(other)}; strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("step events read back as\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
		raw, err := r.Client.XRange(ctx, store.FlowKeys(flow).Events(), "-", "+").Result()
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range raw {
			if d, _ := m.Values["data"].(string); strings.Contains(d, `"status":"done"}`) && !strings.Contains(d, `"ports"`) {
				t.Errorf("events entry %s keeps a common step event whole: %s", m.ID, d)
			}
		}
	})
}
