package store

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
)

// BenchmarkCommitOneStep measures one step of a linear run against the Redis at
// REDIS_URL: one read and one commit, a round trip each. Under callgrind
// (valgrind --tool=callgrind redis-server ...) it gives Redis's instructions per step.
func BenchmarkCommitOneStep(b *testing.B) {
	ctx := context.Background()
	url := os.Getenv("REDIS_URL")
	if url == "" {
		url = "redis://127.0.0.1:6379/15"
	}
	r, err := Open(ctx, Options{URL: url})
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	flow := fmt.Sprintf("bench-commit-%d", b.N)
	k := FlowKeys(flow)
	defer func() {
		keys, _ := r.Client.Keys(ctx, k.Prefix()+"*").Result()
		if len(keys) > 0 {
			r.Client.Del(ctx, keys...)
		}
	}()
	if err := r.StoreVersion(ctx, flow, "v1", []byte("{}"), []string{"a", "b"}); err != nil {
		b.Fatal(err)
	}
	state := []byte(`{"pad":"` + strings.Repeat("x", 240) + `"}`)
	if _, err := r.StartRun(ctx, StartArgs{Flow: flow, Run: "r1", Version: "v1", State: state, Checkpoint: Checkpoint{Kind: "input"}, Entries: []string{"a"}}); err != nil {
		b.Fatal(err)
	}
	cons := "bench-1"
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		node := "a"
		if i%2 == 1 {
			node = "b"
		}
		acts, err := r.ReadNodes(ctx, cons, []NodeRef{{Flow: flow, Node: node}}, 1, 0)
		if err != nil || len(acts) != 1 {
			b.Fatalf("read: %v %d", err, len(acts))
		}
		next := "b"
		if node == "b" {
			next = "a"
		}
		c := &Commit{Act: acts[0], Consumer: cons, MaxSteps: 1 << 30,
			Steps: []CommitStep{{Node: node, State: state, Event: []byte(`{"status":"done"}`),
				Checkpoint: Checkpoint{Node: node, Kind: "step", Attempt: 1, Worker: cons}}},
			Transitions: []Transition{Activate{Node: next}}}
		res, errs := r.CommitBatch(ctx, []*Commit{c})
		if errs[0] != nil || res[0].Status != "ok" {
			b.Fatalf("commit: %v %+v", errs[0], res[0])
		}
	}
}
