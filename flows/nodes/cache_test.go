package nodes

import (
	"context"
	"errors"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicehq/sluice/flows"
	"github.com/sluicehq/sluice/observe"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// A cached call cancelled while the call it started is still running returns the
// context's error at once, and its span's bookkeeping does not race the single-flight
// goroutine that runs the call (go test -race flags it if it does).
func TestACancelledCachedCallDoesNotRaceItsLeader(t *testing.T) {
	e := &Env{Cache: &memoryCache{}}
	step := &flows.Step{Flow: "cache-cancel", Node: "n"}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	release, finished := make(chan struct{}), make(chan struct{})
	_, hit, err := e.cached(ctx, step, "llm:k", time.Minute, func(context.Context) ([]byte, error) {
		defer close(finished)
		<-release
		return []byte("v"), nil
	})
	if !errors.Is(err, context.Canceled) || hit {
		t.Errorf("cancelled call: hit %v, err %v; want the context's error", hit, err)
	}
	close(release)
	<-finished
}

// cacheSpans returns the hit and singleflight_wait attributes of the cache spans
// recorded, in the order they ended.
func cacheSpans(t *testing.T, mem *tracetest.InMemoryExporter) []string {
	t.Helper()
	var got []string
	for _, s := range mem.GetSpans() {
		if s.Name != "cache llm" {
			t.Errorf("span %q, want only cache spans", s.Name)
			continue
		}
		a := map[string]string{}
		for _, kv := range s.Attributes {
			a[string(kv.Key)] = kv.Value.String()
		}
		got = append(got, "hit="+a["sluice.cache.hit"]+" wait="+a["sluice.cache.singleflight_wait"])
	}
	return got
}

// A cached call is a span that says whether it was a hit: the first call computes, the
// same call again is answered from the cache.
func TestACachedCallsSpanSaysWhetherItWasAHit(t *testing.T) {
	mem := tracetest.NewInMemoryExporter()
	observe.UseProvider(observe.NewTestProvider(mem), false)
	t.Cleanup(func() { observe.UseProvider(nil, false) })
	e := &Env{Cache: &memoryCache{}}
	step := &flows.Step{Flow: "cache-hit", Node: "n"}
	computed := 0
	for range 2 {
		v, _, err := e.cached(context.Background(), step, "llm:k", time.Minute, func(context.Context) ([]byte, error) {
			computed++
			return []byte("v"), nil
		})
		if err != nil || string(v) != "v" {
			t.Fatalf("cached call: %q %v", v, err)
		}
	}
	if got := strings.Join(cacheSpans(t, mem), ", "); computed != 1 || got != "hit=false wait=false, hit=true wait=false" {
		t.Errorf("computed %d times; spans %s, want a miss then a hit", computed, got)
	}
}

// Two identical calls at once run one computation: the second waits for the first's
// result, and its span says it did (singleflight_wait) and that it was a hit.
func TestAnIdenticalCallInFlightIsASingleFlightWaitInItsSpan(t *testing.T) {
	mem := tracetest.NewInMemoryExporter()
	observe.UseProvider(observe.NewTestProvider(mem), false)
	t.Cleanup(func() { observe.UseProvider(nil, false) })
	synctest.Test(t, func(t *testing.T) {
		e := &Env{Cache: &memoryCache{}}
		step := &flows.Step{Flow: "cache-flight", Node: "n"}
		release := make(chan struct{})
		var computed atomic.Int32
		compute := func(context.Context) ([]byte, error) {
			computed.Add(1)
			<-release
			return []byte("v"), nil
		}
		var wg sync.WaitGroup
		call := func() {
			defer wg.Done()
			if v, _, err := e.cached(context.Background(), step, "llm:k", time.Minute, compute); err != nil || string(v) != "v" {
				t.Errorf("cached call: %q %v", v, err)
			}
		}
		wg.Add(2)
		go call()
		synctest.Wait() // the first call computes, blocked until released
		go call()
		synctest.Wait() // the second waits for the first's result
		close(release)
		wg.Wait()
		if n := computed.Load(); n != 1 {
			t.Errorf("computed %d times, want once", n)
		}
	})
	got := cacheSpans(t, mem)
	sort.Strings(got)
	if strings.Join(got, ", ") != "hit=false wait=false, hit=true wait=true" {
		t.Errorf("spans %v, want the computing call's and the waiting call's", got)
	}
}
