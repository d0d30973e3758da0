package engine

import (
	"fmt"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/flows"
)

// heapSize must track what decoded states really take, or the cache's bound means
// nothing (counting JSON bytes, a 64 MiB cache took about 860 MB).
func TestHeapSizeTracksTheHeapOfDecodedStates(t *testing.T) {
	shapes := map[string]string{
		"many small keys": func() string {
			var b strings.Builder
			b.WriteString("{")
			for i := 0; i < 400; i++ {
				fmt.Fprintf(&b, `"k%d": %d,`, i, i)
			}
			b.WriteString(`"end": true}`)
			return b.String()
		}(),
		"messages":       `{"messages": [` + strings.Repeat(`{"role": "user", "content": "please summarise the ticket about the failing build"},`, 200) + `{"role": "system", "content": "x"}]}`,
		"long text":      `{"doc": "` + strings.Repeat("lorem ipsum ", 5000) + `"}`,
		"numbers":        `{"xs": [` + strings.Repeat("1.5, 2, 300000, ", 1000) + `4]}`,
		"nested objects": `{"a": ` + strings.Repeat(`{"b": [1, {"c": "d"}], "e": `, 100) + `null` + strings.Repeat("}", 100) + `}`,
	}
	for name, doc := range shapes {
		t.Run(name, func(t *testing.T) {
			// The heap is the whole process's: goroutines that earlier tests left ending
			// can grow or shrink it during a round, so the median of five rounds is
			// compared, which one disturbed round cannot move.
			const copies, rounds = 200, 5
			var measured []float64
			for range rounds {
				keep := make([]map[string]any, copies)
				var before, after runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&before)
				for i := range keep {
					s, err := flows.DecodeState([]byte(doc))
					if err != nil {
						t.Fatal(err)
					}
					keep[i] = s
				}
				runtime.GC()
				runtime.ReadMemStats(&after)
				measured = append(measured, (float64(after.HeapAlloc)-float64(before.HeapAlloc))/copies)
				runtime.KeepAlive(keep)
			}
			slices.Sort(measured)
			median := measured[rounds/2]
			s, _ := flows.DecodeState([]byte(doc))
			est := float64(heapSize(s))
			t.Logf("estimate %.0f B, measured %.0f B (rounds %.0f)", est, median, measured)
			if est < 0.7*median || est > 2*median {
				t.Errorf("estimate %.0f B, measured %.0f B (median of %.0f; JSON %d B): want within 0.7–2×", est, median, measured, len(doc))
			}
		})
	}
}

func TestStateCacheStaysWithinItsBound(t *testing.T) {
	c := newStateCache(1 << 20)
	s, _ := flows.DecodeState([]byte(`{"messages": [` + strings.Repeat(`{"role": "user", "content": "hello there"},`, 100) + `{}]}`))
	for i := 0; i < 1000; i++ {
		c.put("f", "r", fmt.Sprint(i), s)
	}
	n, size := c.stats()
	if size > 1<<20 || n == 0 || n == 1000 {
		t.Errorf("%d entries, %d bytes: want some evicted and at most 1 MiB", n, size)
	}
	if _, _, ok := c.get("f", "r", "999"); !ok {
		t.Error("the newest entry was evicted")
	}
}

// BenchmarkStateCacheGet is a cached state's lookup on the hot path of every step (a
// flow id of 40 bytes, a run id and a checkpoint id as Sluice makes them).
func BenchmarkStateCacheGet(b *testing.B) {
	c := newStateCache(64 << 20)
	flow, run, ckpt := "t-some-flow-id-of-forty-characters-abcd", "r06h3c6bwqza594p5n2v2g", "1796203460002-0"
	c.put(flow, run, ckpt, map[string]any{"a": 1})
	b.ReportAllocs()
	for b.Loop() {
		if _, _, ok := c.get(flow, run, ckpt); !ok {
			b.Fatal("not cached")
		}
	}
}
