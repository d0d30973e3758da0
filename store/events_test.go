package store_test

import (
	"context"
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
