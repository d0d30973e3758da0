package store

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// The scripts of the result cache; each file's header documents its KEYS and ARGV.
var (
	cacheStoreScript   = mustScript("cache_store")
	cacheReleaseScript = mustScript("cache_release")
	cacheExtendScript  = mustScript("cache_extend")
)

// Cache is the result cache shared by every process on one Redis: a result is computed
// once per key however many workers ask for it at the same time. Do looks for the
// result; without one it takes the key's lock (SET NX PX with a random token), computes,
// stores the result with its TTL and releases the lock in one script; callers that find
// the lock taken wait for the result instead of computing it. A holder keeps its lock
// alive while it computes; a crashed holder's lock expires within LockTTL and a waiter
// takes over. Only the holder of a lock (its token) can release or extend it.
type Cache struct {
	r *Redis
	// LockTTL is how long a lock outlives a silent holder (default 10s); holders extend
	// it every third of that while they compute.
	LockTTL time.Duration
	// Poll is the longest pause between a waiter's looks for the result (default 100ms).
	Poll time.Duration

	hits, misses, waits atomic.Int64
}

// CacheStats counts what Do did in this process: Hits found a stored result (Waited of
// them after waiting for another process's computation), Misses computed one.
type CacheStats struct {
	Hits   int64 `json:"hits"`
	Misses int64 `json:"misses"`
	Waited int64 `json:"waited"`
}

// NewCache returns the cache on r.
func NewCache(r *Redis) *Cache { return &Cache{r: r} }

// Stats returns the counters so far, for metrics.
func (c *Cache) Stats() CacheStats {
	return CacheStats{Hits: c.hits.Load(), Misses: c.misses.Load(), Waited: c.waits.Load()}
}

func (c *Cache) lockTTL() time.Duration {
	if c.LockTTL > 0 {
		return c.LockTTL
	}
	return 10 * time.Second
}

func (c *Cache) poll() time.Duration {
	if c.Poll > 0 {
		return c.Poll
	}
	return 100 * time.Millisecond
}

// MaxCachedValue bounds one cached result.
const MaxCachedValue = 64 << 20

// Do returns the result cached under key in flow's keys, or computes it once across
// every process and caches it for ttl. computed reports whether this call ran compute.
// A failed computation is not cached: its lock is released and the next caller tries.
func (c *Cache) Do(ctx context.Context, flow, key string, ttl time.Duration, compute func(context.Context) ([]byte, error)) ([]byte, bool, error) {
	if ttl <= 0 {
		return nil, false, errors.New("cache: ttl must be positive")
	}
	k := FlowKeys(flow)
	ck, lk := k.Cache(key), k.Lock(key)
	waited := false
	delay := 5 * time.Millisecond
	for {
		v, err := c.r.Client.Get(ctx, ck).Bytes()
		if err == nil {
			c.hits.Add(1)
			if waited {
				c.waits.Add(1)
			}
			return v, false, nil
		}
		if !errors.Is(err, redis.Nil) {
			return nil, false, fmt.Errorf("cache: %w", err)
		}
		token := newToken()
		ok, err := c.r.Client.SetNX(ctx, lk, token, c.lockTTL()).Result()
		if err != nil {
			return nil, false, fmt.Errorf("cache: lock: %w", err)
		}
		if ok {
			// The result may have been stored between the look and the lock.
			if v, err := c.r.Client.Get(ctx, ck).Bytes(); err == nil {
				c.release(lk, token)
				c.hits.Add(1)
				if waited {
					// It waited for the holder, who stored the result and let go of
					// its lock between this caller's look and its lock.
					c.waits.Add(1)
				}
				return v, false, nil
			}
			v, err := c.computeHolding(ctx, lk, token, compute)
			if err != nil {
				c.release(lk, token)
				return nil, false, err
			}
			c.misses.Add(1)
			if len(v) > MaxCachedValue {
				c.release(lk, token)
				return v, true, nil
			}
			sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			// A failure to share the result leaves the lock to expire; this caller has it.
			_, _ = cacheStoreScript.Run(sctx, c.r.Client, []string{ck, lk}, token, v, ttl.Milliseconds()).Result()
			cancel()
			return v, true, nil
		}
		// Another process computes: wait for its result, or for its lock to go (it
		// failed or died), then look again.
		waited = true
		select {
		case <-ctx.Done():
			return nil, false, ctx.Err()
		case <-time.After(delay):
		}
		delay = min(2*delay, c.poll())
	}
}

// computeHolding runs compute while extending the lock every third of its TTL.
func (c *Cache) computeHolding(ctx context.Context, lk, token string, compute func(context.Context) ([]byte, error)) ([]byte, error) {
	done := make(chan struct{})
	defer close(done)
	go func() {
		t := time.NewTicker(c.lockTTL() / 3)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-t.C:
				ectx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
				_, _ = cacheExtendScript.Run(ectx, c.r.Client, []string{lk}, token, c.lockTTL().Milliseconds()).Result()
				cancel()
			}
		}
	}()
	return compute(ctx)
}

// release deletes the lock if it is still token's.
func (c *Cache) release(lk, token string) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_, _ = cacheReleaseScript.Run(ctx, c.r.Client, []string{lk}, token).Result()
}

// Release deletes a lock only if token holds it, and reports whether it did.
func (c *Cache) Release(ctx context.Context, flow, key, token string) (bool, error) {
	n, err := cacheReleaseScript.Run(ctx, c.r.Client, []string{FlowKeys(flow).Lock(key)}, token).Int()
	return n == 1, err
}

func newToken() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
