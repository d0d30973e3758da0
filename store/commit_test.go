package store_test

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/storetest"
)

// A commit whose transitions the script cannot carry out is refused before it writes
// anything: Redis does not roll back a script that stops with an error, so a check in
// the middle would leave half a commit (a checkpoint, an activation) behind, and the
// entry, still pending, would be committed again on top of it.
func TestACommitWithAMalformedTransitionWritesNothing(t *testing.T) {
	for _, tc := range []struct {
		name  string
		trans []store.Transition
		want  string // in the error
	}{
		{"an unknown op after a good one",
			[]store.Transition{store.Activate{Node: "b"}, store.RawTransition{Code: "Z"}}, "unknown transition Z"},
		{"an op short of arguments at the end",
			[]store.Transition{store.Activate{Node: "b"}, store.RawTransition{Code: "A", Key: "b", Args: []string{"KEY", "0"}}}, "transition A"},
		{"an op short of an argument before another",
			[]store.Transition{store.RawTransition{Code: "G", Args: []string{"frame"}}, store.Activate{Node: "b"}}, "transition"},
		{"an op naming a stream the commit does not have",
			[]store.Transition{store.Activate{Node: "b"}, store.RawTransition{Code: "A", Args: []string{"99", "0", ""}}}, "KEYS"},
		{"an op reading a seed the commit does not have",
			[]store.Transition{store.Activate{Node: "b"}, store.Activate{Node: "b", From: 2}}, "seed"},
		{"a join reading a branch the commit does not have",
			[]store.Transition{store.Joined{Steps: []store.CommitStep{{Node: "b", State: []byte("{}"), Event: []byte("{}"),
				Checkpoint: store.Checkpoint{Node: "b", Kind: "join"}}}, Arrivals: []store.Ref{0, 1}}}, "seed"},
		{"a join without its state",
			[]store.Transition{store.Joined{Steps: []store.CommitStep{{Node: "b", Event: []byte("{}"),
				Checkpoint: store.Checkpoint{Node: "b", Kind: "join"}}}, Arrivals: []store.Ref{0}}}, "transition J needs its branches, its state"},
		{"a join reading a branch named other than plainly",
			[]store.Transition{store.RawTransition{Code: "J", Args: []string{"b", "1", `{"k":"join"}`, "[]", "{}", "00"}}}, "reads checkpoint 00"},
		{"an activation reading a seed named other than plainly",
			[]store.Transition{store.RawTransition{Code: "A", Key: "b", Args: []string{"KEY", "00", ""}}}, "reads checkpoint 00"},
		{"a turn after another op",
			[]store.Transition{store.Activate{Node: "b"}, store.RawTransition{Code: "U", Args: []string{`{"k":"turn"}`, "{}"}}}, "a turn (U) after another op"},
		{"a fork whose branch count is not a number",
			[]store.Transition{store.RawTransition{Code: "P", Args: []string{"frame", "many"}}}, "number"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			storetest.Each(t, func(t *testing.T, r *store.Redis) {
				ctx := context.Background()
				flow := storetest.FlowID(t)
				storetest.DeleteFlowKeys(t, r, flow)
				if err := r.StoreVersion(ctx, flow, "v1", []byte("{}"), []string{"a", "b"}); err != nil {
					t.Fatal(err)
				}
				if err := r.EnsureGroups(ctx, flow, []string{"a", "b"}); err != nil {
					t.Fatal(err)
				}
				if _, err := r.StartRun(ctx, store.StartArgs{Flow: flow, Run: "r1", Version: "v1", State: []byte("{}"),
					Checkpoint: store.Checkpoint{Kind: "input"}, Entries: []string{"a"}}); err != nil {
					t.Fatal(err)
				}
				acts, err := r.ReadNodes(ctx, "w-1", []store.NodeRef{{Flow: flow, Node: "a"}}, 1, 0)
				if err != nil || len(acts) != 1 {
					t.Fatalf("read: %v %v", acts, err)
				}
				before := snapshot(t, r, flow)
				c := &store.Commit{Act: acts[0], Consumer: "w-1", MaxSteps: 100,
					Steps: []store.CommitStep{{Node: "a", State: []byte(`{"x":1}`), Event: []byte(`{"status":"done"}`),
						Checkpoint: store.Checkpoint{Node: "a", Kind: "step", Attempt: 1, Worker: "w-1"}}},
					Transitions: tc.trans}
				_, errs := r.CommitBatch(ctx, []*store.Commit{c})
				if errs[0] == nil || !strings.Contains(errs[0].Error(), tc.want) {
					t.Errorf("commit error %v, want one that mentions %q", errs[0], tc.want)
				}
				if after := snapshot(t, r, flow); after != before {
					t.Errorf("the refused commit wrote to Redis:\nbefore:\n%s\nafter:\n%s", before, after)
				}
			})
		})
	}
}

// snapshot renders every key of a flow (one partition) with its contents, and the
// pending entries of its node streams, so two snapshots differ when anything was written.
func snapshot(t *testing.T, r *store.Redis, flow string) string {
	t.Helper()
	ctx := context.Background()
	keys, err := r.Client.Keys(ctx, store.FlowKeys(flow).Prefix()+"*").Result()
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		typ := r.Client.Type(ctx, k).Val()
		var v any
		switch typ {
		case "string":
			v = r.Client.Get(ctx, k).Val()
		case "hash":
			v = r.Client.HGetAll(ctx, k).Val()
		case "set":
			m := r.Client.SMembers(ctx, k).Val()
			sort.Strings(m)
			v = m
		case "zset":
			v = r.Client.ZRangeWithScores(ctx, k, 0, -1).Val()
		case "stream":
			v = r.Client.XRange(ctx, k, "-", "+").Val()
			if p, err := r.Client.XPendingExt(ctx, &redis.XPendingExtArgs{Stream: k, Group: store.Group, Start: "-", End: "+", Count: 100}).Result(); err == nil {
				var ids []string
				for _, e := range p {
					ids = append(ids, e.ID+"@"+e.Consumer)
				}
				v = fmt.Sprintf("%v pending %v", v, ids)
			}
		}
		fmt.Fprintf(&b, "%s %s %v\n", k, typ, v)
	}
	return b.String()
}

// The commits of one stream sent in one call are fenced each on its own: the fence is
// checked for all of them at once (one XPENDING over their entries), and a step whose
// entry another worker claimed meanwhile, or the same entry sent twice, is refused as
// stale while the others commit, whatever order they come in.
func TestACallOfOneStreamsCommitsFencesEachCommit(t *testing.T) {
	storetest.Each(t, func(t *testing.T, r *store.Redis) {
		ctx := context.Background()
		flow := costFlow(t, r, "a")
		startRunsAtA(t, r, flow, 5)
		acts, err := r.ReadNodes(ctx, "w-1", []store.NodeRef{{Flow: flow, Node: "a"}}, 16, 0)
		if err != nil || len(acts) != 5 {
			t.Fatalf("read: %v %v", acts, err)
		}
		// w-2's sweeper takes the third entry: w-1 must not commit it.
		in := store.FlowKeys(flow).In("a")
		if err := r.Client.XClaim(ctx, &redis.XClaimArgs{Stream: in, Group: store.Group, Consumer: "w-2", Messages: []string{acts[2].ID}}).Err(); err != nil {
			t.Fatal(err)
		}
		// Out of entry order, and the first entry twice.
		order := []int{4, 2, 0, 3, 1, 0}
		var cs []*store.Commit
		for _, i := range order {
			cs = append(cs, stepOfA(acts[i], "w-1"))
		}
		res, errs := r.CommitBatch(ctx, cs)
		okFor := map[int]int{}
		for j, i := range order {
			if errs[j] != nil {
				t.Fatalf("commit %d: %v", j, errs[j])
			}
			switch res[j].Status {
			case store.CommitOK:
				okFor[i]++
			case store.CommitStale:
			default:
				t.Errorf("commit of entry %d: %+v", i, res[j])
			}
		}
		if okFor[2] != 0 || okFor[0] != 1 || okFor[1] != 1 || okFor[3] != 1 || okFor[4] != 1 {
			t.Errorf("commits that went through, by entry: %v; want each entry once but the claimed one (2)", okFor)
		}
		p, err := r.Client.XPendingExt(ctx, &redis.XPendingExtArgs{Stream: in, Group: store.Group, Start: "-", End: "+", Count: 10}).Result()
		if err != nil || len(p) != 1 || p[0].ID != acts[2].ID || p[0].Consumer != "w-2" {
			t.Errorf("pending after the call: %+v %v; want only the claimed entry, w-2's", p, err)
		}
	})
}

// Commits of two consumers sent in one batch are each fenced against their own
// consumer: the script takes the consumer once per call, so the store must not put
// them in one call (each would be refused as stale against the other's name).
func TestABatchOfTwoConsumersCommitsBoth(t *testing.T) {
	storetest.Each(t, func(t *testing.T, r *store.Redis) {
		ctx := context.Background()
		flow := costFlow(t, r, "a")
		startRunsAtA(t, r, flow, 2)
		var cs []*store.Commit
		for _, w := range []string{"w-1", "w-2"} {
			acts, err := r.ReadNodes(ctx, w, []store.NodeRef{{Flow: flow, Node: "a"}}, 1, 0)
			if err != nil || len(acts) != 1 {
				t.Fatalf("read of %s: %v %v", w, acts, err)
			}
			cs = append(cs, stepOfA(acts[0], w))
		}
		res, errs := r.CommitBatch(ctx, cs)
		for j := range cs {
			if errs[j] != nil || res[j].Status != store.CommitOK {
				t.Errorf("commit of %s: %v %+v; want ok", cs[j].Consumer, errs[j], res[j])
			}
		}
	})
}

// startRunsAtA starts n runs of flow (r0, r1, ...), each with an activation of node a.
func startRunsAtA(t *testing.T, r *store.Redis, flow string, n int) {
	t.Helper()
	for i := range n {
		if _, err := r.StartRun(context.Background(), store.StartArgs{Flow: flow, Run: fmt.Sprintf("r%d", i), Version: "v1", State: []byte("{}"),
			Checkpoint: store.Checkpoint{Kind: "input"}, Entries: []string{"a"}}); err != nil {
			t.Fatal(err)
		}
	}
}

// stepOfA is consumer's commit of one step of node a that ends its run.
func stepOfA(a store.Activation, consumer string) *store.Commit {
	return &store.Commit{Act: a, Consumer: consumer, MaxSteps: 100, TTL: time.Hour,
		Steps: []store.CommitStep{{Node: "a", State: []byte(`{"x":1}`), Event: []byte(`{"status":"done"}`),
			Checkpoint: store.Checkpoint{Node: "a", Kind: "step", Attempt: 1, Worker: consumer}}}}
}
