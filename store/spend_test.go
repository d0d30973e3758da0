package store_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/flows"
	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/storetest"
)

func TestLedgerAddsUpPerRunAndPerDay(t *testing.T) {
	storetest.Each(t, func(t *testing.T, r *store.Redis) {
		ctx := context.Background()
		flow := storetest.FlowID(t)
		storetest.DeleteFlowKeys(t, r, flow)
		l := store.NewLedger(r)
		if _, _, err := l.Spend(ctx, flow, "a", "2030-01-02", flows.Spend{Tokens: 100, USD: 0.25}, true); err != nil {
			t.Fatal(err)
		}
		run, day, err := l.Spend(ctx, flow, "b", "2030-01-02", flows.Spend{Tokens: 50, USD: 0.000001}, true)
		if err != nil {
			t.Fatal(err)
		}
		if run != (flows.Spend{Tokens: 50, USD: 0.000001}) || day != (flows.Spend{Tokens: 150, USD: 0.250001}) {
			t.Errorf("run b %+v, day %+v", run, day)
		}
		run, day, err = l.Spent(ctx, flow, "a", "2030-01-03", true)
		if err != nil || run != (flows.Spend{Tokens: 100, USD: 0.25}) || day != (flows.Spend{}) {
			t.Errorf("run a %+v, another day %+v, %v", run, day, err)
		}
		if s, err := r.RunSpend(ctx, flow, "b"); err != nil || s.Tokens != 50 {
			t.Errorf("RunSpend %+v %v", s, err)
		}
	})
}

// runsOnParts returns run ids of flow placed (over n partitions) on n different
// partitions, one each.
func runsOnParts(t *testing.T, r *store.Redis, flow string, n int) []string {
	t.Helper()
	ctx := context.Background()
	seen := map[int]bool{}
	var runs []string
	for i := 0; len(runs) < n && i < 10000; i++ {
		id := fmt.Sprintf("run-%d", i)
		ref, err := r.FindRun(ctx, flow, id)
		if err != nil {
			t.Fatal(err)
		}
		if !seen[ref.Part] {
			seen[ref.Part] = true
			runs = append(runs, id)
		}
	}
	if len(runs) < n {
		t.Fatalf("found runs on %d partitions, want %d", len(runs), n)
	}
	return runs
}

// hashTag is the part of a key Redis Cluster hashes: between its first { and the next }.
func hashTag(key string) string {
	i := strings.IndexByte(key, '{')
	if i < 0 {
		return key
	}
	j := strings.IndexByte(key[i+1:], '}')
	if j <= 0 {
		return key
	}
	return key[i+1 : i+1+j]
}

// A model call's spend is written to its run's slot only (one MULTI there): on a
// cluster a flow's spend is spread over its partitions' masters, not sent to one key
// of the flow per day.
func TestASpendWritesOnlyToItsRunsSlot(t *testing.T) {
	storetest.Each(t, func(t *testing.T, r *store.Redis) {
		ctx := context.Background()
		flow := storetest.FlowID(t)
		storetest.DeleteFlowKeys(t, r, flow)
		if err := r.UsePartitions(ctx, flow, 4, nil); err != nil {
			t.Fatal(err)
		}
		l := store.NewLedger(r)
		trips := storetest.CountRoundTrips(r)
		for _, run := range runsOnParts(t, r, flow, 4) {
			// The run's first spend moves what it spent before the ledger was
			// partitioned: spend once so that only the steady state is counted.
			if _, _, err := l.Spend(ctx, flow, run, "2030-01-02", flows.Spend{Tokens: 1}, false); err != nil {
				t.Fatal(err)
			}
			k, err := r.RunPartKeys(ctx, flow, run)
			if err != nil {
				t.Fatal(err)
			}
			before, _ := trips.N()
			if _, _, err := l.Spend(ctx, flow, run, "2030-01-02", flows.Spend{Tokens: 10, USD: 0.01}, false); err != nil {
				t.Fatal(err)
			}
			n, sent := trips.N()
			n, sent = n-before, sent[before:]
			if n != 1 {
				t.Errorf("run %s (partition %d): %d round trips %q, want 1", run, k.Part(), n, sent)
			}
			want := hashTag(k.Run(run))
			for _, trip := range sent {
				for _, cmd := range strings.Split(trip, "; ") {
					name, key, _ := strings.Cut(cmd, " ")
					if name == "multi" || name == "exec" {
						continue
					}
					if hashTag(key) != want {
						t.Errorf("run %s on partition %d: %s %s is not in the run's slot {%s}", run, k.Part(), name, key, want)
					}
				}
			}
		}
	})
}

// A flow's day is the sum of its partitions' days, with what the flow spent that day
// before the ledger was partitioned (its own key): a day cap sees every run's spend
// whichever partition the run is on, on one Redis and on a cluster.
func TestTheDayIsTheSumOverTheFlowsPartitions(t *testing.T) {
	storetest.Conformance(t, func(t *testing.T, r *store.Redis) {
		ctx := context.Background()
		flow := storetest.FlowID(t)
		storetest.DeleteFlowKeys(t, r, flow)
		const day = "2030-01-02"
		// Spent before the ledger was partitioned, under the flow's own tag: 12 tokens
		// and $0.00007 that day, of which one run's 7 tokens and $0.00007.
		if err := r.Client.HSet(ctx, "sluice:{f:"+flow+"}:spend-day:"+day, "tokens", 12, "micro_usd", 70).Err(); err != nil {
			t.Fatal(err)
		}
		if err := r.UsePartitions(ctx, flow, 4, nil); err != nil {
			t.Fatal(err)
		}
		runs := runsOnParts(t, r, flow, 4)
		if err := r.Client.HSet(ctx, "sluice:{f:"+flow+"}:spend:"+runs[0], "tokens", 7, "micro_usd", 70).Err(); err != nil {
			t.Fatal(err)
		}
		if s, err := r.RunSpend(ctx, flow, runs[0]); err != nil || s.Tokens != 7 {
			t.Errorf("a run that spent before the ledger was partitioned: %+v %v, want 7 tokens", s, err)
		}
		l := store.NewLedger(r)
		var run, total flows.Spend
		for i, id := range runs {
			var err error
			run, total, err = l.Spend(ctx, flow, id, day, flows.Spend{Tokens: 10, USD: 0.001}, true)
			if err != nil {
				t.Fatal(err)
			}
			if want := int64(12 + 10*(i+1)); total.Tokens != want {
				t.Errorf("after the spend of run %d of 4 (each on a partition of its own) the day has %d tokens, want %d", i+1, total.Tokens, want)
			}
			if i == 0 && (run.Tokens != 17 || run.USD != 0.00107) {
				t.Errorf("the first run, which spent 7 tokens and $0.00007 before: %+v, want 17 tokens and $0.00107", run)
			}
		}
		if total.USD != 0.00407 {
			t.Errorf("the day spent $%v, want $0.00407", total.USD)
		}
		if n, err := r.Client.Exists(ctx, "sluice:{f:"+flow+"}:spend:"+runs[0]).Result(); err != nil || n != 0 {
			t.Errorf("the run's old total is still there (%d, %v): it would be counted twice", n, err)
		}
		run, day2, err := l.Spent(ctx, flow, runs[0], day, true)
		if err != nil || run.Tokens != 17 || day2 != total {
			t.Errorf("Spent: run %+v, day %+v (%v); want 17 tokens and %+v", run, day2, err, total)
		}
		if _, none, err := l.Spent(ctx, flow, runs[1], day, false); err != nil || none != (flows.Spend{}) {
			t.Errorf("Spent without the day: %+v %v", none, err)
		}
	})
}
