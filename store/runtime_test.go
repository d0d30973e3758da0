package store_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/flows"
	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/storetest"
)

func TestHeartbeatKeepsAStepsDeliveryCount(t *testing.T) {
	storetest.Each(t, func(t *testing.T, r *store.Redis) {
		ctx := context.Background()
		flow := storetest.FlowID(t)
		storetest.DeleteFlowKeys(t, r, flow)
		if err := r.StoreVersion(ctx, flow, "v1", []byte("{}"), []string{"a"}); err != nil {
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
		for i := 0; i < 5; i++ {
			if err := r.Heartbeat(ctx, store.NodeRef{Flow: flow, Node: "a"}, "w-1", []string{acts[0].ID}); err != nil {
				t.Fatal(err)
			}
		}
		// Someone else's heartbeat leaves the entry alone.
		if err := r.Heartbeat(ctx, store.NodeRef{Flow: flow, Node: "a"}, "w-2", []string{acts[0].ID}); err != nil {
			t.Fatal(err)
		}
		p, err := r.Client.XPendingExt(ctx, &redis.XPendingExtArgs{Stream: store.FlowKeys(flow).In("a"), Group: store.Group, Start: "-", End: "+", Count: 10}).Result()
		if err != nil || len(p) != 1 {
			t.Fatalf("pending: %v %v", p, err)
		}
		if p[0].RetryCount != 1 || p[0].Consumer != "w-1" {
			t.Errorf("after heartbeats: delivered %d times to %s, want once to w-1", p[0].RetryCount, p[0].Consumer)
		}
	})
}

func TestPruneConsumersDeletesOnlyIdleOnesWithNothingPending(t *testing.T) {
	r := storetest.Real(t) // the embedded Redis does not report idle times
	ctx := context.Background()
	const window = 250 * time.Millisecond
	// One attempt: gone-1 still holds its entry; gone-2 finished its own and has been idle
	// longer than the window; live finished its own just now. It reports false when the
	// machine stalled so long between live's read and the prune that live was idle for
	// the window too: its outcome then says nothing, and it is tried again.
	attempt := func() bool {
		flow := storetest.FlowID(t)
		storetest.DeleteFlowKeys(t, r, flow)
		if err := r.StoreVersion(ctx, flow, "v1", []byte("{}"), []string{"a"}); err != nil {
			t.Fatal(err)
		}
		for _, run := range []string{"r1", "r2", "r3"} {
			if _, err := r.StartRun(ctx, store.StartArgs{Flow: flow, Run: run, Version: "v1", State: []byte("{}"),
				Checkpoint: store.Checkpoint{Kind: "input"}, Entries: []string{"a"}}); err != nil {
				t.Fatal(err)
			}
		}
		stream := store.FlowKeys(flow).In("a")
		readAndAck := func(consumer string) {
			acts, _ := r.ReadNodes(ctx, consumer, []store.NodeRef{{Flow: flow, Node: "a"}}, 1, 10*time.Millisecond)
			if len(acts) != 1 {
				t.Fatalf("%s read %d entries", consumer, len(acts))
			}
			r.Client.XAck(ctx, stream, store.Group, acts[0].ID)
		}
		r.ReadNodes(ctx, "gone-1", []store.NodeRef{{Flow: flow, Node: "a"}}, 1, 10*time.Millisecond)
		readAndAck("gone-2")
		deadline := time.Now().Add(30 * time.Second)
		for {
			cs, _ := r.Client.XInfoConsumers(ctx, stream, store.Group).Result()
			idle := time.Duration(0)
			for _, c := range cs {
				if c.Name == "gone-2" {
					idle = c.Idle
				}
			}
			if idle > window {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("gone-2 idle %s after 30s, want over %s", idle, window)
			}
			time.Sleep(20 * time.Millisecond)
		}
		liveRead := time.Now()
		readAndAck("live")
		n, err := r.PruneConsumers(ctx, flow, []string{"a"}, window)
		if err != nil {
			t.Fatal(err)
		}
		if time.Since(liveRead) >= window {
			return false
		}
		cs, _ := r.Client.XInfoConsumers(ctx, stream, store.Group).Result()
		var names []string
		for _, c := range cs {
			names = append(names, c.Name)
		}
		if n != 1 || len(names) != 2 || slices.Contains(names, "gone-2") {
			t.Errorf("pruned %d, left %v; want gone-2 deleted, gone-1 (pending) and live (recent) kept", n, names)
		}
		return true
	}
	for i := 0; !attempt(); i++ {
		if i == 10 {
			t.Fatalf("the machine stalled for %s between a read and the next command 10 times in a row", window)
		}
	}
}

func TestDiscardingADeadLetterOfAnExpiredRunLeavesNoStrayKey(t *testing.T) {
	storetest.Each(t, func(t *testing.T, r *store.Redis) {
		ctx := context.Background()
		flow := storetest.FlowID(t)
		storetest.DeleteFlowKeys(t, r, flow)
		k := store.FlowKeys(flow)
		id, err := r.Client.XAdd(ctx, &redis.XAddArgs{Stream: k.Dead(), Values: []any{"node", "a", "run", "gone", "error", "boom"}}).Result()
		if err != nil {
			t.Fatal(err)
		}
		if err := r.DiscardDead(ctx, flow, id); err != nil {
			t.Fatal(err)
		}
		if n, _ := r.Client.XLen(ctx, k.Dead()).Result(); n != 0 {
			t.Errorf("%d dead letters left, want 0", n)
		}
		if n, _ := r.Client.Exists(ctx, k.Run("gone")).Result(); n != 0 {
			t.Error("discarding created a hash for the expired run")
		}
		if err := r.DiscardDead(ctx, flow, id); flows.ErrorCode(err) != flows.NotFound {
			t.Errorf("discarding twice: %v, want not found", err)
		}
	})
}
