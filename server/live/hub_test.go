package live_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/sluicehq/sluice/server/live"
	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/storetest"
)

// TestResumingWhileEventsFlowLosesAndRepeatsNothing subscribes with a last event id
// while another writer keeps appending: the client must get every event after that id,
// once, in order — the replay and the live feed meet without a gap or a duplicate.
func TestResumingWhileEventsFlowLosesAndRepeatsNothing(t *testing.T) {
	storetest.Each(t, func(t *testing.T, r *store.Redis) {
		flow := storetest.FlowID(t)
		storetest.DeleteFlowKeys(t, r, flow)
		key := store.FlowKeys(flow).Events()
		ctx := context.Background()
		add := func(i int) string {
			id, err := r.Client.XAdd(ctx, &redis.XAddArgs{Stream: key, Values: []any{"type", "step", "run", "r1", "node", fmt.Sprint("n", i), "data", "{}"}}).Result()
			if err != nil {
				t.Fatal(err)
			}
			return id
		}
		var resumeAfter string
		for i := 0; i < 100; i++ {
			id := add(i)
			if i == 49 {
				resumeAfter = id
			}
		}
		// Small replay pages, so that resuming takes several.
		h := live.NewHubWith(r, nil, live.Options{QueueEvery: time.Hour, Block: 50 * time.Millisecond, Replay: 7})
		defer h.Close()
		// Someone else watches already, so the feed is running when we join.
		other := h.NewClient(4096)
		if err := h.Subscribe(other, flow, "", ""); err != nil {
			t.Fatal(err)
		}
		const total = 400
		done := make(chan struct{})
		go func() {
			defer close(done)
			for i := 100; i < total; i++ {
				add(i)
				if i%50 == 0 {
					time.Sleep(5 * time.Millisecond) // pacing, so that the client is likely to join mid-way
				}
			}
		}()
		c := h.NewClient(4096)
		// Join once the writer is under way; whether it has finished by then or not, the
		// client must get the same events.
		waitForLen(t, r, key, 150)
		if err := h.Subscribe(c, flow, "", resumeAfter); err != nil {
			t.Fatal(err)
		}
		<-done
		if _, err := r.Client.XAdd(ctx, &redis.XAddArgs{Stream: key, Values: []any{"type", "step", "run", "r1", "node", "end", "data", "{}"}}).Result(); err != nil {
			t.Fatal(err)
		}
		// Every event after the resumed one, once, in order, up to "end": a duplicate
		// would come before it, since the feed delivers the stream in order.
		var got []string
		timeout := time.After(20 * time.Second)
		for len(got) == 0 || got[len(got)-1] != "end" {
			select {
			case m := <-c.Messages():
				var env live.Envelope
				if err := json.Unmarshal(m.Data, &env); err != nil {
					t.Fatal(err)
				}
				if env.Type == "event" {
					got = append(got, env.Event.Node)
				}
			case <-c.Dropped():
				t.Fatal("client dropped")
			case <-timeout:
				t.Fatalf("got %d events of %d and no end", len(got), total-50)
			}
		}
		got = got[:len(got)-1]
		if len(got) != total-50 {
			t.Errorf("got %d events before the end, want %d", len(got), total-50)
		}
		for i, n := range got {
			if want := fmt.Sprint("n", 50+i); n != want {
				t.Fatalf("event %d is %s, want %s (a gap or a duplicate)", i, n, want)
			}
		}
	})
}

// waitForLen waits until the stream has at least n entries.
func waitForLen(t *testing.T, r *store.Redis, key string, n int64) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		l, err := r.Client.XLen(context.Background(), key).Result()
		if err != nil {
			t.Fatal(err)
		}
		if l >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the stream has %d entries after 20s, want %d", l, n)
		}
		time.Sleep(time.Millisecond)
	}
}
