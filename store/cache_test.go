package store_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/storetest"
)

// Processes are simulated by separate Cache values (separate clients too), which share
// nothing but Redis.
func processes(t *testing.T, r *store.Redis, n int) []*store.Cache {
	t.Helper()
	var cs []*store.Cache
	for i := 0; i < n; i++ {
		url := storetest.URL()
		if r.Embedded() {
			url = r.URL()
		}
		c, err := store.Open(context.Background(), store.Options{URL: url})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		cache := store.NewCache(c)
		cache.LockTTL, cache.Poll = 3*time.Second, 10*time.Millisecond
		cs = append(cs, cache)
	}
	return cs
}

func TestCacheComputesOnceAcrossProcessesAndWaitersGetTheResult(t *testing.T) {
	storetest.Each(t, func(t *testing.T, r *store.Redis) {
		flow := storetest.FlowID(t)
		storetest.DeleteFlowKeys(t, r, flow)
		cs := processes(t, r, 5)
		var calls atomic.Int32
		release := make(chan struct{})
		started := make(chan struct{})
		var once sync.Once
		compute := func(context.Context) ([]byte, error) {
			calls.Add(1)
			once.Do(func() { close(started) })
			<-release // every other caller arrives while this one computes
			return []byte(`{"pages": 12}`), nil
		}
		type result struct {
			v        string
			computed bool
			err      error
		}
		results := make(chan result, len(cs))
		var wg sync.WaitGroup
		for _, c := range cs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				v, computed, err := c.Do(context.Background(), flow, "pdf", time.Minute, compute)
				results <- result{string(v), computed, err}
			}()
		}
		<-started
		close(release)
		wg.Wait()
		close(results)
		computedBy := 0
		for res := range results {
			if res.err != nil || res.v != `{"pages": 12}` {
				t.Fatalf("a caller got %q, %v", res.v, res.err)
			}
			if res.computed {
				computedBy++
			}
		}
		if calls.Load() != 1 || computedBy != 1 {
			t.Errorf("compute ran %d times, %d callers say they computed; want 1 and 1", calls.Load(), computedBy)
		}
		var hits, misses int64
		for _, c := range cs {
			s := c.Stats()
			hits, misses = hits+s.Hits, misses+s.Misses
		}
		if hits != 4 || misses != 1 {
			t.Errorf("stats: %d hits, %d misses; want 4 and 1", hits, misses)
		}
		// Later callers get the stored result without computing.
		v, computed, err := cs[0].Do(context.Background(), flow, "pdf", time.Minute, func(context.Context) ([]byte, error) {
			return nil, errors.New("must not be called")
		})
		if err != nil || computed || string(v) != `{"pages": 12}` {
			t.Errorf("later call: %q computed=%v %v", v, computed, err)
		}
		if ttl := r.Client.PTTL(context.Background(), store.FlowKeys(flow).Cache("pdf")).Val(); ttl <= 0 || ttl > time.Minute {
			t.Errorf("cached result's TTL is %s, want at most the 1m asked for", ttl)
		}
		if n := r.Client.Exists(context.Background(), store.FlowKeys(flow).Lock("pdf")).Val(); n != 0 {
			t.Errorf("the lock is still there after the result was stored")
		}
	})
}

func TestCacheDoesNotStoreAFailureAndTheNextCallerComputes(t *testing.T) {
	storetest.Each(t, func(t *testing.T, r *store.Redis) {
		flow := storetest.FlowID(t)
		storetest.DeleteFlowKeys(t, r, flow)
		c := processes(t, r, 1)[0]
		_, _, err := c.Do(context.Background(), flow, "k", time.Minute, func(context.Context) ([]byte, error) {
			return nil, errors.New("upstream down")
		})
		if err == nil || err.Error() != "upstream down" {
			t.Fatalf("got %v, want the computation's error", err)
		}
		if n := r.Client.Exists(context.Background(), store.FlowKeys(flow).Lock("k"), store.FlowKeys(flow).Cache("k")).Val(); n != 0 {
			t.Fatalf("a failed computation left %d keys (lock or result)", n)
		}
		v, computed, err := c.Do(context.Background(), flow, "k", time.Minute, func(context.Context) ([]byte, error) { return []byte("ok"), nil })
		if err != nil || !computed || string(v) != "ok" {
			t.Errorf("after a failure: %q computed=%v %v; want a fresh computation", v, computed, err)
		}
	})
}

func TestCacheLockIsReleasedOnlyByItsOwner(t *testing.T) {
	storetest.Each(t, func(t *testing.T, r *store.Redis) {
		ctx := context.Background()
		flow := storetest.FlowID(t)
		storetest.DeleteFlowKeys(t, r, flow)
		c := store.NewCache(r)
		lk := store.FlowKeys(flow).Lock("k")
		r.Client.Set(ctx, lk, "owner-token", time.Minute)
		if ok, err := c.Release(ctx, flow, "k", "someone-else"); err != nil || ok {
			t.Fatalf("a stranger released the lock: %v %v", ok, err)
		}
		if r.Client.Get(ctx, lk).Val() != "owner-token" {
			t.Fatal("the owner's lock is gone after a stranger's release")
		}
		if ok, err := c.Release(ctx, flow, "k", "owner-token"); err != nil || !ok {
			t.Fatalf("the owner could not release its lock: %v %v", ok, err)
		}
		if r.Client.Exists(ctx, lk).Val() != 0 {
			t.Fatal("the lock is still there after its owner released it")
		}
	})
}

// A holder that died leaves its lock to expire; a waiter then computes.
func TestCacheWaiterTakesOverWhenTheHolderDies(t *testing.T) {
	storetest.Each(t, func(t *testing.T, r *store.Redis) {
		ctx := context.Background()
		flow := storetest.FlowID(t)
		storetest.DeleteFlowKeys(t, r, flow)
		c := processes(t, r, 1)[0]
		r.Client.Set(ctx, store.FlowKeys(flow).Lock("k"), "dead-holder", 200*time.Millisecond)
		v, computed, err := c.Do(ctx, flow, "k", time.Minute, func(context.Context) ([]byte, error) { return []byte("mine"), nil })
		if err != nil || !computed || string(v) != "mine" {
			t.Fatalf("%q computed=%v %v; want the waiter to compute after the dead holder's lock expired", v, computed, err)
		}
		if s := c.Stats(); s.Misses != 1 {
			t.Errorf("stats %+v, want one miss", s)
		}
	})
}

// A computation longer than the lock's TTL keeps its lock: a process waiting for the
// result does not compute it too.
func TestCacheHolderExtendsItsLockWhileComputing(t *testing.T) {
	r := storetest.Real(t)
	ctx := context.Background()
	flow := storetest.FlowID(t)
	storetest.DeleteFlowKeys(t, r, flow)
	lock := store.FlowKeys(flow).Lock("k")
	// The second process's client says when its lock attempt found the lock taken, that
	// is when it is waiting: the holder outlasts its lock's TTL only after that, so the
	// two overlap however late the machine schedules the second.
	waiting := make(chan struct{})
	var once sync.Once
	var cs []*store.Cache
	for i := range 2 {
		c, err := store.Open(ctx, store.Options{URL: storetest.URL()})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		if i == 1 {
			c.Client.AddHook(lockWatch{key: lock, taken: func() { once.Do(func() { close(waiting) }) }})
		}
		cache := store.NewCache(c)
		cache.Poll = 10 * time.Millisecond
		cs = append(cs, cache)
	}
	const ttl = 1500 * time.Millisecond // extended every 500 ms: only a stall of the holder over 1 s lets it expire
	for _, c := range cs {
		c.LockTTL = ttl
	}
	var calls atomic.Int32
	compute := func(ctx context.Context) ([]byte, error) {
		calls.Add(1)
		// Outlast the lock's TTL by half, counted from when the other process waits:
		// this length is the behaviour under test.
		select {
		case <-waiting:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		select {
		case <-time.After(ttl + ttl/2):
		case <-ctx.Done():
		}
		return []byte("slow"), nil
	}
	errs := make(chan error, 2)
	do := func(c *store.Cache) {
		v, _, err := c.Do(ctx, flow, "k", time.Minute, compute)
		if err == nil && string(v) != "slow" {
			err = fmt.Errorf("got %q", v)
		}
		errs <- err
	}
	go do(cs[0])
	// The second process asks only once the first holds the lock, so that it waits.
	deadline := time.Now().Add(30 * time.Second)
	for r.Client.Exists(ctx, lock).Val() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the first process took no lock within 30s")
		}
		time.Sleep(5 * time.Millisecond)
	}
	go do(cs[1])
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if calls.Load() != 1 {
		t.Errorf("computed %d times; the holder's lock expired under it", calls.Load())
	}
	if s := cs[1].Stats(); s.Waited != 1 {
		t.Errorf("the second process's stats %+v: want it to have waited for the first's result", s)
	}
}

// lockWatch is a client hook calling taken when a SET NX of key finds it taken.
type lockWatch struct {
	key   string
	taken func()
}

func (lockWatch) DialHook(next redis.DialHook) redis.DialHook { return next }

func (lockWatch) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func (w lockWatch) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		args := cmd.Args()
		if b, ok := cmd.(*redis.BoolCmd); ok && cmd.Name() == "set" && len(args) > 1 && args[1] == w.key && !b.Val() {
			w.taken()
		}
		return err
	}
}

func TestCacheWaiterStopsWithItsContext(t *testing.T) {
	r := storetest.Embedded(t)
	flow := storetest.FlowID(t)
	c := store.NewCache(r)
	r.Client.Set(context.Background(), store.FlowKeys(flow).Lock("k"), "busy", time.Minute)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, _, err := c.Do(ctx, flow, "k", time.Minute, func(context.Context) ([]byte, error) { return []byte("x"), nil })
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("got %v, want the waiter to give up with its context", err)
	}
}
