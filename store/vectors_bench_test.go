package store_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/flows"
	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/storetest"
)

// BenchmarkVectorSearch measures the vector store's search as a worker runs it: a
// collection of 10,000 or 100,000 chunks of 1,536 dimensions (random unit vectors, a
// 200-byte text and a source each) upserted into the real Redis, then searched for the
// 4 nearest, the worker's index caught up (one round trip reads the version) before every
// search, as in production. It reports the search latency's p50 and p99, the index's memory
// in the worker (and the Go heap it took) and the collection's memory in Redis.
//
//	REDIS_URL=redis://127.0.0.1:6379/15 go test -run '^$' -bench VectorSearch -benchtime 200x -timeout 30m ./store/
func BenchmarkVectorSearch(b *testing.B) {
	for _, n := range []int{10_000, 100_000} {
		b.Run(fmt.Sprintf("chunks=%d", n), func(b *testing.B) { benchSearch(b, n, 1536) })
	}
}

func randomUnit(r *rand.Rand, dims int) []float32 {
	v := make([]float32, dims)
	for i := range v {
		v[i] = float32(r.NormFloat64())
	}
	return v
}

func redisMemory(b *testing.B, r *store.Redis) int64 {
	info := r.Client.Info(context.Background(), "memory").Val()
	for _, l := range strings.Split(info, "\r\n") {
		if v, ok := strings.CutPrefix(l, "used_memory:"); ok {
			n, _ := strconv.ParseInt(v, 10, 64)
			return n
		}
	}
	b.Fatal("no used_memory in INFO")
	return 0
}

func benchSearch(b *testing.B, n, dims int) {
	ctx := context.Background()
	r := storetest.Real(b)
	scope, coll := "f:"+storetest.FlowID(b), "bench"
	vs := store.NewVectors(r)
	b.Cleanup(func() { vs.Drop(context.Background(), scope, coll) })
	rng := rand.New(rand.NewPCG(1, 2))
	text := strings.Repeat("lorem ipsum ", 17)[:200]
	before := redisMemory(b, r)
	const batch = 2000
	for start := 0; start < n; start += batch {
		docs := make([]flows.VectorDoc, 0, batch)
		for i := start; i < min(start+batch, n); i++ {
			docs = append(docs, flows.VectorDoc{ID: strconv.Itoa(i), Text: text, Metadata: map[string]any{"source": fmt.Sprintf("doc-%d.md", i/20)}, Vector: randomUnit(rng, dims)})
		}
		if _, err := vs.Upsert(ctx, scope, coll, "bench", docs); err != nil {
			b.Fatal(err)
		}
	}
	inRedis := redisMemory(b, r) - before

	// A fresh worker loads the whole collection on its first search.
	worker := store.NewVectors(r)
	runtime.GC()
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	loadStart := time.Now()
	st, err := worker.Stats(ctx, scope, coll)
	if err != nil || st.Chunks != n {
		b.Fatalf("stats %+v, %v", st, err)
	}
	load := time.Since(loadStart)
	runtime.GC()
	runtime.ReadMemStats(&m1)

	queries := make([][]float32, 64)
	for i := range queries {
		queries[i] = randomUnit(rng, dims)
	}
	var took []time.Duration
	b.ResetTimer()
	i := 0
	for b.Loop() {
		start := time.Now()
		hits, err := worker.Search(ctx, scope, coll, flows.VectorQuery{Vector: queries[i%len(queries)], K: 4})
		took = append(took, time.Since(start))
		if err != nil || len(hits) != 4 {
			b.Fatalf("search: %d hits, %v", len(hits), err)
		}
		i++
	}
	b.StopTimer()
	slices.Sort(took)
	pct := func(p float64) float64 { return float64(took[int(p*float64(len(took)-1))].Microseconds()) / 1000 }
	b.ReportMetric(pct(0.50), "p50-ms")
	b.ReportMetric(pct(0.99), "p99-ms")
	b.ReportMetric(float64(st.IndexBytes)/(1<<20), "index-MiB")
	b.ReportMetric(float64(int64(m1.HeapAlloc)-int64(m0.HeapAlloc))/(1<<20), "heap-MiB")
	b.ReportMetric(float64(inRedis)/(1<<20), "redis-MiB")
	b.ReportMetric(load.Seconds(), "load-s")
}
