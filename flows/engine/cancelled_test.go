package engine

import (
	"strconv"
	"testing"
)

// The memory of cancelled runs is bounded: beyond maxCancelledRuns the oldest go first.
func TestCancelledRunsForgetsTheOldestBeyondItsBound(t *testing.T) {
	c := newCancelledRuns()
	for i := 0; i <= maxCancelledRuns; i++ {
		c.add("f", "r"+strconv.Itoa(i))
	}
	c.add("f", "r1") // again: no new entry
	if c.has("f", "r0") {
		t.Error("the oldest run is still remembered past the bound")
	}
	for _, r := range []string{"r1", "r" + strconv.Itoa(maxCancelledRuns)} {
		if !c.has("f", r) {
			t.Errorf("run %s was forgotten", r)
		}
	}
	if c.has("g", "r1") {
		t.Error("a run of another flow with the same id counts as cancelled")
	}
	if len(c.set) != maxCancelledRuns {
		t.Errorf("%d runs remembered, want %d", len(c.set), maxCancelledRuns)
	}
}
