package store

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"math/bits"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/sluicehq/sluice/flows"
)

// A flow's runs are spread over its partitions (see keys.go). A run's partition is a
// function of its id and of the number of partitions it was placed with: PartOf. The
// counts a flow's runs were ever placed with are kept in the flow's Partitions set, so
// that a run is found again after the count changed (it is where one of the counts put
// it) and readers read every partition one of the counts can place a run on.

// MaxPartitions bounds the partitions setting.
const MaxPartitions = 256

// PartOf is the partition a run id is placed on among n: 0 (the flow's home) when n is
// 1, one of 1..n otherwise.
func PartOf(run string, n int) int {
	if n <= 1 {
		return 0
	}
	h := fnv.New32a()
	_, _ = h.Write([]byte(run))
	return 1 + int(h.Sum32()%uint32(n))
}

// partTag is the hash tag of partition p ≥ 1, shared by every flow. The tags are chosen
// so that partitions 1..P land on slots spread evenly over a cluster's 16384 hash
// slots, whatever P: partition p's slot is within 16 slots above the bit reversal of
// p-1 (the van der Corput sequence), so any first 2^k partitions are evenly spaced and
// a cluster whose masters own equal slot ranges gets an equal share of them. The tag
// is "p:<p>" or, when that lands elsewhere, "p:<p>:<n>" for the smallest n that lands
// right. The choice is part of the key format: it never changes.
func partTag(p int) string {
	if p < len(partTags) {
		if t := partTags[p].Load(); t != nil {
			return *t
		}
	}
	target := int(bits.Reverse16(uint16(p-1)) >> 2) // 14 bits: a slot
	base := "p:" + strconv.Itoa(p)
	t := base
	for n := 1; ; n++ {
		if d := (int(slotOf(t)) - target + 16384) % 16384; d < 16 {
			break
		}
		t = base + ":" + strconv.Itoa(n)
	}
	if p < len(partTags) {
		partTags[p].Store(&t)
	}
	return t
}

var partTags [MaxPartitions + 1]atomic.Pointer[string]

// slotOf is the cluster hash slot of a hash tag (CRC16-XMODEM mod 16384, as Redis).
func slotOf(tag string) uint16 {
	var crc uint16
	for i := 0; i < len(tag); i++ {
		crc ^= uint16(tag[i]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return crc % 16384
}

// partRefresh is how long a process trusts what it read of the partition counts; a run
// it does not find makes it read them again at once (at most every partRetry).
const (
	partRefresh = 5 * time.Second
	partRetry   = 250 * time.Millisecond
)

type partCache struct {
	mu     sync.Mutex
	counts map[string][]int // flow -> its recorded counts, sorted
	at     time.Time
	// mine are the counts this process recorded itself: a reload whose read began
	// before one was written must not drop it (a run just placed would not be found).
	mine map[string][]int
}

type partEntry struct {
	counts   []int // sorted, never empty
	recorded bool  // counts were recorded for the flow (else counts is [1])
}

// PartitionCounts returns the partition counts flow's runs were placed with, sorted; a
// flow that never recorded one has [1].
func (r *Redis) PartitionCounts(ctx context.Context, flow string) ([]int, error) {
	e, err := r.partitionCounts(ctx, flow, false)
	return e.counts, err
}

func (r *Redis) partitionCounts(ctx context.Context, flow string, fresh bool) (partEntry, error) {
	c := &r.parts
	c.mu.Lock()
	age := time.Since(c.at)
	stale := c.counts == nil || age >= partRefresh || fresh && age >= partRetry
	c.mu.Unlock()
	var err error
	if stale {
		// On an error what was read before (if anything) is still the best answer.
		err = r.reloadPartitionCounts(ctx)
	}
	c.mu.Lock()
	counts := c.counts[flow]
	c.mu.Unlock()
	if len(counts) == 0 {
		return partEntry{counts: []int{1}}, err
	}
	return partEntry{counts: counts, recorded: true}, err
}

// reloadPartitionCounts reads every flow's counts from Redis into the cache, with the
// counts this process recorded itself.
func (r *Redis) reloadPartitionCounts(ctx context.Context) error {
	all, err := r.Client.HKeys(ctx, partitionsKey).Result()
	if err != nil && !errors.Is(err, redis.Nil) {
		return err
	}
	m := map[string][]int{}
	for _, f := range all {
		id, ns, _ := strings.Cut(f, ":")
		if n, err := strconv.Atoi(ns); err == nil && n >= 1 && n <= MaxPartitions {
			m[id] = withCounts(m[id], n)
		}
	}
	c := &r.parts
	c.mu.Lock()
	defer c.mu.Unlock()
	for id, ns := range c.mine {
		m[id] = withCounts(m[id], ns...)
	}
	c.counts, c.at = m, time.Now()
	return nil
}

// withCounts returns counts with more added, sorted and without repeats; counts itself
// is left as it is.
func withCounts(counts []int, more ...int) []int {
	out := append(slices.Clone(counts), more...)
	slices.Sort(out)
	return slices.Compact(out)
}

// Parts lists the partitions of flow that may hold runs: 0 if some were placed on one
// partition, and 1..n for the largest count n above 1.
func (r *Redis) Parts(ctx context.Context, flow string) ([]PartRef, error) {
	e, err := r.partitionCounts(ctx, flow, false)
	return partsOf(flow, e.counts), err
}

// FreshParts is Parts read from Redis, not from what this process read of it before
// (at most every partRetry): workers call it when versions changed.
func (r *Redis) FreshParts(ctx context.Context, flow string) ([]PartRef, error) {
	e, err := r.partitionCounts(ctx, flow, true)
	return partsOf(flow, e.counts), err
}

func partsOf(flow string, counts []int) []PartRef {
	var out []PartRef
	if counts[0] == 1 {
		out = append(out, PartRef{Flow: flow})
	}
	if n := counts[len(counts)-1]; n > 1 {
		for _, p := range PartitionsOf(n) {
			out = append(out, PartRef{Flow: flow, Part: p})
		}
	}
	return out
}

// PartitionsOf lists the partitions runs placed over n partitions live on: 0 for one
// partition, 1..n for more.
func PartitionsOf(n int) []int {
	if n <= 1 {
		return []int{0}
	}
	out := make([]int, n)
	for i := range out {
		out[i] = i + 1
	}
	return out
}

// UsePartitions records that runs of flow are placed over n partitions from now on, and
// creates the consumer groups of nodes on each of them. It writes to Redis only when n
// is new. When a flow first moves off its home partition and runs live there, 1 is
// recorded with n, so that they are still read.
func (r *Redis) UsePartitions(ctx context.Context, flow string, n int, nodes []string) error {
	if n < 1 || n > MaxPartitions {
		return &flows.Error{Code: flows.Invalid, Flow: flow, Path: "settings.partitions", Message: fmt.Sprintf("partitions must be between 1 and %d", MaxPartitions)}
	}
	e, err := r.partitionCounts(ctx, flow, false)
	if err != nil {
		return err
	}
	if slices.Contains(e.counts, n) && (e.recorded || n == 1) {
		return nil
	}
	add := []int{n}
	if !e.recorded && n > 1 {
		home, err := r.Client.Exists(ctx, FlowKeys(flow).Runs()).Result()
		if err != nil {
			return err
		}
		if home > 0 {
			add = append(add, 1)
		}
	}
	fields := make([]any, 0, 2*len(add))
	for _, n := range add {
		fields = append(fields, flow+":"+strconv.Itoa(n), 1)
	}
	pipe := r.Client.Pipeline()
	pipe.HSet(ctx, partitionsKey, fields...)
	pipe.Incr(ctx, generationKey)
	if _, err := pipe.Exec(ctx); err != nil {
		return err
	}
	c := &r.parts
	c.mu.Lock()
	if c.counts == nil {
		c.counts = map[string][]int{}
	}
	c.counts[flow] = withCounts(c.counts[flow], add...)
	if c.mine == nil {
		c.mine = map[string][]int{}
	}
	c.mine[flow] = c.counts[flow]
	c.mu.Unlock()
	return r.EnsureGroups(ctx, flow, nodes)
}

// RunPartKeys returns the keys of the partition run lives on. When the counts the flow used
// put it on several candidates, the one that has the run's hash is taken (none: the
// newest count's); a run not found makes the counts be read again.
func (r *Redis) RunPartKeys(ctx context.Context, flow, run string) (Keys, error) {
	p, err := r.runPart(ctx, flow, run, false)
	if err != nil {
		return Keys{}, err
	}
	return PartKeys(flow, p), nil
}

func (r *Redis) runPart(ctx context.Context, flow, run string, fresh bool) (int, error) {
	e, err := r.partitionCounts(ctx, flow, fresh)
	if err != nil {
		return 0, err
	}
	counts := e.counts
	cands := make([]int, 0, len(counts))
	for i := len(counts) - 1; i >= 0; i-- {
		if p := PartOf(run, counts[i]); !slices.Contains(cands, p) {
			cands = append(cands, p)
		}
	}
	if len(cands) == 1 {
		return cands[0], nil
	}
	pipe := r.Client.Pipeline()
	cmds := make([]*redis.IntCmd, len(cands))
	for i, p := range cands {
		cmds[i] = pipe.Exists(ctx, PartKeys(flow, p).Run(run))
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return 0, err
	}
	for i, c := range cmds {
		if c.Val() > 0 {
			return cands[i], nil
		}
	}
	return cands[0], nil
}

// findRun is RunPartKeys for reads that need the run to exist: when it is not found
// where the cached counts put it, the counts are read again and the run looked for once
// more.
func (r *Redis) findRun(ctx context.Context, flow, run string, found func(k Keys) (bool, error)) error {
	k, err := r.RunPartKeys(ctx, flow, run)
	if err != nil {
		return err
	}
	ok, err := found(k)
	if err != nil || ok {
		return err
	}
	p, err := r.runPart(ctx, flow, run, true)
	if err != nil {
		return err
	}
	if p == k.Part() {
		return &flows.Error{Code: flows.NotFound, Flow: flow, Message: "no run \"" + run + "\""}
	}
	ok, err = found(PartKeys(flow, p))
	if err == nil && !ok {
		err = &flows.Error{Code: flows.NotFound, Flow: flow, Message: "no run \"" + run + "\""}
	}
	return err
}

// RunRef names a run and the partition it lives on.
type RunRef struct {
	Flow, Run string
	Part      int
}

// keys are the keys of the run's partition.
func (x RunRef) keys() Keys { return PartKeys(x.Flow, x.Part) }

// Ref is the activation's run.
func (a Activation) Ref() RunRef { return RunRef{Flow: a.Flow, Run: a.Run, Part: a.Part} }

// Ref is the run's reference.
func (r *Run) Ref() RunRef { return RunRef{Flow: r.Flow, Run: r.ID, Part: r.Part} }

// FindRun finds the partition a run lives on (see RunPartKeys); it does not check that
// the run exists.
func (r *Redis) FindRun(ctx context.Context, flow, run string) (RunRef, error) {
	k, err := r.RunPartKeys(ctx, flow, run)
	return RunRef{Flow: flow, Run: run, Part: k.Part()}, err
}

// RunRefs finds the partitions of runs of flow (see RunPartKeys).
func (r *Redis) RunRefs(ctx context.Context, flow string, ids []string) ([]RunRef, error) {
	out := make([]RunRef, len(ids))
	for i, id := range ids {
		p, err := r.runPart(ctx, flow, id, false)
		if err != nil {
			return nil, err
		}
		out[i] = RunRef{Flow: flow, Run: id, Part: p}
	}
	return out, nil
}

// ClusterPartitions is the partition count a flow's runs are spread over by default on
// this Redis Cluster: the smallest count of at least minParts whose quietest master
// holds at least 3/4 as many partitions as its busiest (partition p lives on the master
// of slotOf(partTag(p))), else the count up to MaxPartitions closest to that. A fixed 16
// on 12 masters puts two partitions on four masters and one on the other eight: those
// eight half as busy. It is 0 when the client is not a cluster's.
func (r *Redis) ClusterPartitions(ctx context.Context, minParts int) (int, error) {
	cl, ok := r.Client.(*redis.ClusterClient)
	if !ok {
		return 0, nil
	}
	shards, err := cl.ClusterShards(ctx).Result()
	if err != nil {
		return 0, fmt.Errorf("cluster shards: %w", err)
	}
	owner := make([]int, 16384) // slot -> master index + 1
	masters := 0
	for _, sh := range shards {
		if len(sh.Slots) == 0 {
			continue
		}
		masters++
		for _, r := range sh.Slots {
			for slot := r.Start; slot <= r.End && slot < int64(len(owner)); slot++ {
				owner[slot] = masters
			}
		}
	}
	return partitionsFor(owner, masters, minParts), nil
}

// PartitionsForMasters is ClusterPartitions for a cluster of n masters that own equal
// ranges of the slots, in order, as `redis-cli --cluster create` gives them: the choice
// when the cluster cannot be asked (`sluice deploy` writes manifests offline).
func PartitionsForMasters(n, minParts int) int {
	owner := make([]int, 16384)
	for s := range owner {
		owner[s] = s*max(n, 1)/16384 + 1
	}
	return partitionsFor(owner, n, minParts)
}

// partitionsFor chooses the partition count for a cluster whose slots belong to masters
// (owner[slot] = master 1..n, 0 for none): see ClusterPartitions.
func partitionsFor(owner []int, n, minParts int) int {
	if n <= 1 {
		return max(minParts, 1)
	}
	count := make([]int, n+1)
	best, bestRatio := minParts, math.Inf(1)
	for p := 1; p <= MaxPartitions; p++ {
		count[owner[slotOf(partTag(p))]]++
		if p < minParts {
			continue
		}
		lo, hi := p, 0
		for m := 1; m <= n; m++ {
			lo, hi = min(lo, count[m]), max(hi, count[m])
		}
		if 4*lo >= 3*hi {
			return p
		}
		if lo > 0 && float64(hi)/float64(lo) < bestRatio {
			best, bestRatio = p, float64(hi)/float64(lo)
		}
	}
	return best
}
