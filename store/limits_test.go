package store_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/storetest"
)

// limitProvider is a provider name unique to the test, with its keys deleted after.
func limitProvider(t *testing.T, r *store.Redis) string {
	t.Helper()
	p := storetest.FlowID(t)
	t.Cleanup(func() {
		ctx := context.Background()
		iter := r.Client.Scan(ctx, 0, "sluice:{rl:"+p+"}:*", 100).Iterator()
		for iter.Next(ctx) {
			r.Client.Del(ctx, iter.Val())
		}
	})
	return p
}

func TestLimiterGivesAtMostTheLimitPerWindowAndCountsFromTheAnswer(t *testing.T) {
	storetest.Each(t, func(t *testing.T, r *store.Redis) {
		ctx := context.Background()
		l := store.NewLimiter(r)
		p := limitProvider(t, r)
		scopes := []store.LimitScope{{Window: time.Hour, Requests: 3}}
		for i := range 3 {
			wait, _, err := l.Take(ctx, p, "m", scopes, fmt.Sprint(i), 0, time.Minute)
			if err != nil || wait != 0 {
				t.Fatalf("slot %d: wait %s, %v", i, wait, err)
			}
		}
		// All three are in flight: the fourth waits for an answer (poll).
		wait, poll, err := l.Take(ctx, p, "m", scopes, "3", 0, time.Minute)
		if err != nil || wait == 0 || !poll {
			t.Fatalf("a fourth slot while three are in flight: wait %s poll %v, %v", wait, poll, err)
		}
		// The first answer began: the fourth waits for a window after it, exactly.
		if err := l.Mark(ctx, p, scopes, "0", true, -1); err != nil {
			t.Fatal(err)
		}
		wait, poll, err = l.Take(ctx, p, "m", scopes, "3", 0, time.Minute)
		if err != nil || poll || wait <= 59*time.Minute || wait > time.Hour {
			t.Fatalf("after an answer began: wait %s poll %v, %v; want about an hour, exact", wait, poll, err)
		}
	})
}

func TestLimiterSlotLeavesAWindowAfterItsAnswer(t *testing.T) {
	storetest.Each(t, func(t *testing.T, r *store.Redis) {
		ctx := context.Background()
		l := store.NewLimiter(r)
		p := limitProvider(t, r)
		scopes := []store.LimitScope{{Window: 300 * time.Millisecond, Requests: 1}}
		if wait, _, err := l.Take(ctx, p, "", scopes, "a", 0, time.Minute); err != nil || wait != 0 {
			t.Fatalf("first: %s %v", wait, err)
		}
		if err := l.Mark(ctx, p, scopes, "a", true, -1); err != nil {
			t.Fatal(err)
		}
		for {
			wait, _, err := l.Take(ctx, p, "", scopes, "b", 0, time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			if wait == 0 {
				break
			}
			time.Sleep(wait) // what a caller does: wait as long as the limiter says
		}
	})
}

func TestLimiterLetsThousandsOfSlotsLeaveAtOnce(t *testing.T) {
	// After a quiet spell, every slot of a busy limit leaves on the next take: more than
	// one Lua unpack holds (8000 values on Redis, fewer on the embedded server).
	storetest.Each(t, func(t *testing.T, r *store.Redis) {
		ctx := context.Background()
		l := store.NewLimiter(r)
		p := limitProvider(t, r)
		k := store.ProviderLimitKeys(p)
		const old = 9000
		zs := make([]redis.Z, old)
		toks := make([]any, 0, 2*old)
		for i := range zs {
			id := fmt.Sprint("old-", i)
			zs[i] = redis.Z{Score: 1, Member: id} // taken and answered long ago
			toks = append(toks, id, 1)
		}
		if err := r.Client.ZAdd(ctx, k.Slots(""), zs...).Err(); err != nil {
			t.Fatal(err)
		}
		if err := r.Client.HSet(ctx, k.Tokens(""), toks...).Err(); err != nil {
			t.Fatal(err)
		}
		scopes := []store.LimitScope{{Window: time.Minute, Requests: 10}}
		if wait, _, err := l.Take(ctx, p, "", scopes, "new", 1, time.Minute); err != nil || wait != 0 {
			t.Fatalf("a take after %d slots left: wait %s, %v", old, wait, err)
		}
		if n, err := r.Client.HLen(ctx, k.Tokens("")).Result(); err != nil || n != 1 {
			t.Fatalf("token counts left: %d, %v; want only the new slot's", n, err)
		}
	})
}

func TestLimiterCountsTokensAndSettlesThemToWhatWasSpent(t *testing.T) {
	storetest.Each(t, func(t *testing.T, r *store.Redis) {
		ctx := context.Background()
		l := store.NewLimiter(r)
		p := limitProvider(t, r)
		scopes := []store.LimitScope{{Window: time.Hour, Tokens: 1000}}
		if wait, _, _ := l.Take(ctx, p, "m", scopes, "a", 800, time.Minute); wait != 0 {
			t.Fatalf("800 of 1000 tokens: wait %s", wait)
		}
		if wait, _, _ := l.Take(ctx, p, "m", scopes, "b", 300, time.Minute); wait == 0 {
			t.Fatal("1100 of 1000 tokens were given")
		}
		// The first request took only 100 tokens after all.
		if err := l.Mark(ctx, p, scopes, "a", true, 100); err != nil {
			t.Fatal(err)
		}
		if wait, _, _ := l.Take(ctx, p, "m", scopes, "b", 300, time.Minute); wait != 0 {
			t.Fatalf("400 of 1000 tokens after settling: wait %s", wait)
		}
		// A request larger than the whole limit still goes, alone, once the window is empty.
		q := limitProvider(t, r)
		if wait, _, _ := l.Take(ctx, q, "m", scopes, "big", 5000, time.Minute); wait != 0 {
			t.Fatalf("a request larger than the limit in an empty window: wait %s", wait)
		}
	})
}

func TestLimiterChecksTheProviderAndTheModelTogether(t *testing.T) {
	storetest.Each(t, func(t *testing.T, r *store.Redis) {
		ctx := context.Background()
		l := store.NewLimiter(r)
		p := limitProvider(t, r)
		provider := store.LimitScope{Window: time.Hour, Requests: 2}
		small := store.LimitScope{Model: "small", Window: time.Hour, Requests: 1}
		if wait, _, _ := l.Take(ctx, p, "small", []store.LimitScope{provider, small}, "a", 0, time.Minute); wait != 0 {
			t.Fatalf("first small: wait %s", wait)
		}
		if wait, _, _ := l.Take(ctx, p, "small", []store.LimitScope{provider, small}, "b", 0, time.Minute); wait == 0 {
			t.Fatal("the model's limit of 1 gave a second slot")
		}
		// The refused slot was taken in no scope: another model still has the provider's second.
		if wait, _, _ := l.Take(ctx, p, "big", []store.LimitScope{provider}, "c", 0, time.Minute); wait != 0 {
			t.Fatalf("another model under the provider's limit: wait %s", wait)
		}
		if wait, _, _ := l.Take(ctx, p, "big", []store.LimitScope{provider}, "d", 0, time.Minute); wait == 0 {
			t.Fatal("the provider's limit of 2 gave a third slot")
		}
	})
}

func TestLimiterPauseStopsEveryCallerAndOnlyGrows(t *testing.T) {
	storetest.Each(t, func(t *testing.T, r *store.Redis) {
		ctx := context.Background()
		l := store.NewLimiter(r)
		p := limitProvider(t, r)
		scopes := []store.LimitScope{{Window: time.Second, Requests: 100}}
		if err := l.Pause(ctx, p, "m", time.Hour); err != nil {
			t.Fatal(err)
		}
		if err := l.Pause(ctx, p, "m", time.Second); err != nil {
			t.Fatal(err)
		}
		wait, _, err := l.Take(ctx, p, "m", scopes, "a", 0, time.Minute)
		if err != nil || wait <= 59*time.Minute {
			t.Fatalf("while paused for an hour: wait %s, %v", wait, err)
		}
		if wait, _, _ := l.Take(ctx, p, "other", scopes, "b", 0, time.Minute); wait != 0 {
			t.Fatalf("another model is not paused: wait %s", wait)
		}
	})
}
