package nodes

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/flows"
)

// Cache shares the results of expensive calls (HTTP requests, LLM replies) between the
// processes of a deployment. store.Cache implements it on Redis: the value under key if
// there is one; otherwise one caller in the whole deployment, the holder of a lock, runs
// compute and stores its result for ttl, while the others wait for that result.
type Cache interface {
	// Do returns the value cached under key in the flow's scope, or computes, stores and
	// returns it. computed says whether this call ran compute. Errors are not cached.
	Do(ctx context.Context, flow, key string, ttl time.Duration, compute func(context.Context) ([]byte, error)) (value []byte, computed bool, err error)
}

// CacheStats counts cached calls in this process: a hit is a result this caller did not
// compute (from the shared cache, or from an identical call in flight here), a miss one
// it computed.
type CacheStats struct {
	Hits   int64 `json:"hits"`
	Misses int64 `json:"misses"`
}

type cacheCounters struct{ hits, misses atomic.Int64 }

// memoryCache is the Cache of a process without a shared one: results live in this
// process only, at most memoryCacheEntries of them.
type memoryCache struct {
	mu      sync.Mutex
	entries map[string]memoryEntry
}

type memoryEntry struct {
	v       []byte
	expires time.Time
}

const memoryCacheEntries = 1024

func (m *memoryCache) Do(ctx context.Context, flow, key string, ttl time.Duration, compute func(context.Context) ([]byte, error)) ([]byte, bool, error) {
	k := flow + "\x00" + key
	now := time.Now()
	m.mu.Lock()
	if e, ok := m.entries[k]; ok && now.Before(e.expires) {
		m.mu.Unlock()
		return e.v, false, nil
	}
	m.mu.Unlock()
	v, err := compute(ctx)
	if err != nil {
		return nil, false, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.entries == nil {
		m.entries = map[string]memoryEntry{}
	}
	if len(m.entries) >= memoryCacheEntries {
		for ek, e := range m.entries {
			if now.After(e.expires) || len(m.entries) >= memoryCacheEntries {
				delete(m.entries, ek)
			}
		}
	}
	m.entries[k] = memoryEntry{v: v, expires: now.Add(ttl)}
	return v, true, nil
}

// CacheStats returns the hits and misses of cached calls so far, for metrics.
func (e *Env) CacheStats() CacheStats {
	return CacheStats{Hits: e.stats.hits.Load(), Misses: e.stats.misses.Load()}
}

// cacheKey hashes what makes two calls the same: the component type, the flow version
// and the call's arguments in canonical JSON (object keys sorted).
func cacheKey(component, version string, args any) string {
	canon, _ := json.Marshal(flows.JSONValue(args))
	h := sha256.New()
	h.Write([]byte(component))
	h.Write([]byte{0})
	h.Write([]byte(version))
	h.Write([]byte{0})
	h.Write(canon)
	return component + ":" + hex.EncodeToString(h.Sum(nil))
}

// cached runs compute once for every identical call: identical calls in flight in this
// process share one execution (singleflight), and with a shared Cache the processes of a
// deployment share one through its lock and its stored result. With ttl 0 it just calls.
// hit is true when this caller got a result it did not compute.
func (e *Env) cached(ctx context.Context, step *flows.Step, key string, ttl time.Duration, compute func(context.Context) ([]byte, error)) (value []byte, hit bool, err error) {
	if ttl <= 0 {
		v, err := compute(ctx)
		return v, false, err
	}
	flow := step.Flow
	ctx, span := cacheSpan(ctx, step, key)
	// leader is written by the single-flight goroutine, which may still be running when
	// a cancelled caller returns and its deferred span end reads it.
	var leader atomic.Bool
	defer func() { endCacheSpan(span, hit, !leader.Load(), err) }()
	type outcome struct {
		v        []byte
		computed bool
	}
	ch := e.flights.DoChan(flow+"\x00"+key, func() (any, error) {
		leader.Store(true)
		v, computed, err := e.Cache.Do(ctx, flow, key, ttl, compute)
		return outcome{v, computed}, err
	})
	select {
	case <-ctx.Done():
		return nil, false, ctx.Err()
	case r := <-ch:
		if r.Err != nil {
			return nil, false, r.Err
		}
		o := r.Val.(outcome)
		hit = !(leader.Load() && o.computed)
		if hit {
			e.stats.hits.Add(1)
		} else {
			e.stats.misses.Add(1)
		}
		if e.Observer != nil {
			e.Observer.CacheLookup(step.Flow, step.Node, hit)
		}
		return o.v, hit, nil
	}
}
