package engine

import (
	"fmt"
	"runtime"
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
			const copies = 200
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
			measured := float64(after.HeapAlloc-before.HeapAlloc) / copies
			est := float64(heapSize(keep[0]))
			runtime.KeepAlive(keep)
			t.Logf("estimate %.0f B, measured %.0f B", est, measured)
			if est < 0.7*measured || est > 2*measured {
				t.Errorf("estimate %.0f B, measured %.0f B (JSON %d B): want within 0.7–2×", est, measured, len(doc))
			}
		})
	}
}

func TestStateCacheStaysWithinItsBound(t *testing.T) {
	c := newStateCache(1 << 20)
	s, _ := flows.DecodeState([]byte(`{"messages": [` + strings.Repeat(`{"role": "user", "content": "hello there"},`, 100) + `{}]}`))
	for i := 0; i < 1000; i++ {
		c.put("r", fmt.Sprint(i), s)
	}
	n, size := c.stats()
	if size > 1<<20 || n == 0 || n == 1000 {
		t.Errorf("%d entries, %d bytes: want some evicted and at most 1 MiB", n, size)
	}
	if _, ok := c.get("r", "999"); !ok {
		t.Error("the newest entry was evicted")
	}
}
