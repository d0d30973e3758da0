package store_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/storetest"
)

// On a cluster the results streams of a flow's partitions are in different slots, which
// one XREADGROUP cannot read together: a reader per slot blocks on its own, so a
// result written to any partition is read as soon as it is written. The reads wait an
// hour: a reader that polled the partitions instead would see the result an hour late.
func TestAResultOnAClustersSecondPartitionIsReadAtOnce(t *testing.T) {
	ctx := context.Background()
	r := storetest.Open(t, storetest.KindCluster)
	flow := storetest.FlowID(t)
	if err := r.UsePartitions(ctx, flow, 4, nil); err != nil {
		t.Fatal(err)
	}
	parts, err := r.Parts(ctx, flow)
	if err != nil {
		t.Fatal(err)
	}
	if len(parts) < 2 {
		t.Fatalf("partitions %v: want several", parts)
	}
	// The second partition's stream is written once a read of it was sent (a blocking
	// one) or done (one in a pipeline), so the result comes after that read.
	second := store.PartKeys(flow, parts[1].Part).Results()
	sent := make(chan struct{})
	var once sync.Once
	r.Client.AddHook(readsOf{stream: second, seen: func() { once.Do(func() { close(sent) }) }})
	tail := r.TailResults(ctx, store.ResultsOptions{Consumer: "c", Block: time.Hour})
	t.Cleanup(tail.Close)
	tail.Set(parts)
	select {
	case <-sent:
	case <-time.After(30 * time.Second):
		t.Fatal("the second partition's results stream was never read")
	}
	id, err := r.Client.XAdd(ctx, &redis.XAddArgs{Stream: second, Values: []any{"run", "r1", "status", store.StatusSucceeded}}).Result()
	if err != nil {
		t.Fatal(err)
	}
	select {
	case res := <-tail.C():
		want := store.Result{Flow: flow, Part: parts[1].Part, ID: id, Run: "r1", Status: store.StatusSucceeded, Deliveries: 1}
		if len(res) != 1 || res[0] != want {
			t.Fatalf("read %+v, want %+v", res, want)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the result was not read within 30s")
	}
}

// readsOf is a go-redis hook that calls seen when an XREADGROUP of stream is sent, or,
// in a pipeline, done.
type readsOf struct {
	stream string
	seen   func()
}

func (h readsOf) reads(cmd redis.Cmder) bool {
	if cmd.Name() != "xreadgroup" {
		return false
	}
	for _, a := range cmd.Args() {
		if a == h.stream {
			return true
		}
	}
	return false
}

func (h readsOf) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h readsOf) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if h.reads(cmd) {
			h.seen()
		}
		return next(ctx, cmd)
	}
}

func (h readsOf) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		for _, c := range cmds {
			if h.reads(c) {
				h.seen()
			}
		}
		return err
	}
}
