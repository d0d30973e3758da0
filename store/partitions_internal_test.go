package store

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
)

// The partition tags are part of the key format: changing one strands the runs of
// every flow on that partition. These are the values keys were written with.
func TestPartitionTagsNeverChange(t *testing.T) {
	want := map[int]string{1: "p:1:437", 2: "p:2:718", 3: "p:3:163", 16: "p:16:538"}
	for p, tag := range want {
		if got := partTag(p); got != tag {
			t.Errorf("partTag(%d) = %q, want %q", p, got, tag)
		}
	}
	if k := PartKeys("f", 1).Run("r"); k != "sluice:{"+want[1]+"}:f:run:r" {
		t.Errorf("partition 1 run key = %q", k)
	}
	if k := PartKeys("f", 0).Run("r"); k != "sluice:{f:f}:run:r" {
		t.Errorf("partition 0 run key = %q", k)
	}
}

// A Redis Cluster made by `redis-cli --cluster create` gives its masters equal,
// contiguous slot ranges. Partitions 1..P must spread over them evenly, for any P a
// person is likely to pick, so that one flow's traffic does too.
func TestPartitionsSpreadOverMasters(t *testing.T) {
	for _, masters := range []int{3, 4, 6} {
		for _, parts := range []int{8, 16, 32, 64, 256} {
			if parts < 2*masters {
				continue
			}
			count := make([]int, masters)
			for p := 1; p <= parts; p++ {
				s := int(slotOf(partTag(p)))
				count[s*masters/16384]++
			}
			lo, hi := count[0], count[0]
			for _, c := range count {
				lo, hi = min(lo, c), max(hi, c)
			}
			if float64(hi) > 1.5*float64(lo) {
				t.Errorf("%d partitions over %d masters: %v per master", parts, masters, count)
			}
		}
	}
}

func TestSlotOfMatchesRedis(t *testing.T) {
	// CLUSTER KEYSLOT values from a real server.
	for tag, slot := range map[string]uint16{"foo": 12182, "bar": 5061, "user1000": 3443, "": 0} {
		if got := slotOf(tag); got != slot {
			t.Errorf("slotOf(%q) = %d, want %d", tag, got, slot)
		}
	}
}

func TestPartOf(t *testing.T) {
	if PartOf("any", 1) != 0 || PartOf("any", 0) != 0 {
		t.Fatal("one partition is partition 0")
	}
	seen := map[int]int{}
	for i := range 4000 {
		p := PartOf("run-"+strings.Repeat("x", i%7)+string(rune('a'+i%26))+string(rune('a'+i/26%26))+string(rune('a'+i/676)), 16)
		if p < 1 || p > 16 {
			t.Fatalf("PartOf(_, 16) = %d", p)
		}
		seen[p]++
	}
	if len(seen) != 16 {
		t.Errorf("4000 runs landed on %d of 16 partitions", len(seen))
	}
}

func TestPartsOf(t *testing.T) {
	got := func(counts ...int) []int {
		var out []int
		for _, p := range partsOf("f", counts) {
			out = append(out, p.Part)
		}
		return out
	}
	if g := got(1); len(g) != 1 || g[0] != 0 {
		t.Errorf("[1] -> %v", g)
	}
	if g := got(4); len(g) != 4 || g[0] != 1 || g[3] != 4 {
		t.Errorf("[4] -> %v", g)
	}
	if g := got(1, 2, 4); len(g) != 5 || g[0] != 0 || g[4] != 4 {
		t.Errorf("[1 2 4] -> %v", g)
	}
}

// A failed read of the partition counts (a master down) answers what was read before,
// with the error: a worker that reloads then must not fall back to partition 0 alone and
// stop reading the partitions its flow's runs are on.
func TestPartitionsReadBeforeOutliveAFailedRead(t *testing.T) {
	ctx := context.Background()
	m := miniredis.RunT(t)
	r, err := Open(ctx, Options{URL: "redis://" + m.Addr()})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if err := r.UsePartitions(ctx, "f", 4, []string{"n"}); err != nil {
		t.Fatal(err)
	}
	r.parts.mu.Lock()
	r.parts.at = time.Time{} // what this process read is old: the next call reads Redis
	r.parts.mu.Unlock()
	m.Close()
	ps, err := r.FreshParts(ctx, "f")
	if err == nil {
		t.Fatal("reading the partitions of a stopped Redis gave no error")
	}
	if len(ps) != 4 || ps[0].Part != 1 {
		t.Errorf("after a failed read the flow has partitions %v, want the 1..4 read before", ps)
	}
}

// A reload of the counts whose read reached Redis before this process recorded a count
// (another goroutine's, racing a run's start) must not drop that count: the run just
// placed on the new partitions would not be found ("no run", seen on a loaded cluster).
func TestARaceyReloadKeepsTheCountsThisProcessRecorded(t *testing.T) {
	ctx := context.Background()
	m := miniredis.RunT(t)
	r, err := Open(ctx, Options{URL: "redis://" + m.Addr()})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if err := r.UsePartitions(ctx, "f", 4, []string{"n"}); err != nil {
		t.Fatal(err)
	}
	// What the racing reload read: Redis before the count was written.
	m.HDel(partitionsKey, "f:4")
	r.parts.mu.Lock()
	r.parts.at = time.Time{}
	r.parts.mu.Unlock()
	ps, err := r.FreshParts(ctx, "f")
	if err != nil {
		t.Fatal(err)
	}
	if len(ps) != 4 || ps[0].Part != 1 {
		t.Errorf("after a reload that read Redis too early the flow has partitions %v, want 1..4", ps)
	}
}

// The default partition count on a cluster spreads the partitions about evenly over the
// masters (the quietest has at least 3/4 of the busiest's), with few partitions: with
// masters owning equal slot ranges, a fixed 16 partitions on 12 masters would leave
// eight masters with one and four with two.
func TestClusterPartitionsPutAsManyOnEveryMaster(t *testing.T) {
	for _, masters := range []int{1, 2, 3, 4, 5, 6, 12} {
		owner := make([]int, 16384)
		for s := range owner {
			owner[s] = s*masters/16384 + 1
		}
		p := PartitionsForMasters(masters, 16)
		count := make([]int, masters+1)
		for i := 1; i <= p; i++ {
			count[owner[slotOf(partTag(i))]]++
		}
		lo, hi := p, 0
		for m := 1; m <= masters; m++ {
			lo, hi = min(lo, count[m]), max(hi, count[m])
		}
		t.Logf("%d masters: %d partitions, %d to %d per master", masters, p, lo, hi)
		if p < 16 || p > 64 || 4*lo < 3*hi {
			t.Errorf("%d masters: %d partitions, %d to %d per master; want 16 to 64, the quietest ≥ 3/4 of the busiest", masters, p, lo, hi)
		}
	}
}

// The default on 3, 5 and 12 masters: 16 on few masters, as before; on 12 masters 64
// (5 or 6 a master), where 16 left eight masters with one partition and four with two.
func TestClusterPartitionsOnThreeFiveAndTwelveMasters(t *testing.T) {
	for _, c := range []struct{ masters, want, lo, hi int }{
		{3, 16, 5, 6}, {5, 16, 3, 4}, {12, 64, 5, 6},
	} {
		p := PartitionsForMasters(c.masters, 16)
		count := make([]int, c.masters)
		for i := 1; i <= p; i++ {
			count[int(slotOf(partTag(i)))*c.masters/16384]++
		}
		if p != c.want || slices.Min(count) != c.lo || slices.Max(count) != c.hi {
			t.Errorf("%d masters: %d partitions, %v a master; want %d, %d to %d a master", c.masters, p, count, c.want, c.lo, c.hi)
		}
	}
	// What a fixed 16 did on 12 masters.
	count := make([]int, 12)
	for i := 1; i <= 16; i++ {
		count[int(slotOf(partTag(i)))*12/16384]++
	}
	if slices.Min(count) != 1 || slices.Max(count) != 2 {
		t.Errorf("16 partitions on 12 masters: %v a master, want 1 to 2", count)
	}
}
