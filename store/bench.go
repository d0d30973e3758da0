package store

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// Latencies collects durations and reports percentiles.
type Latencies struct {
	mu sync.Mutex
	d  []time.Duration
}

// Add records one duration.
func (l *Latencies) Add(d time.Duration) {
	l.mu.Lock()
	l.d = append(l.d, d)
	l.mu.Unlock()
}

// Percentiles are latency figures in milliseconds.
type Percentiles struct {
	N   int     `json:"n"`
	P50 float64 `json:"p50_ms"`
	P99 float64 `json:"p99_ms"`
}

// Percentiles returns p50 and p99.
func (l *Latencies) Percentiles() Percentiles {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.d) == 0 {
		return Percentiles{}
	}
	s := append([]time.Duration(nil), l.d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	at := func(q float64) float64 {
		i := int(math.Ceil(q*float64(len(s)))) - 1
		return float64(s[max(i, 0)].Microseconds()) / 1000
	}
	return Percentiles{N: len(s), P50: at(0.50), P99: at(0.99)}
}

// Figure is a measured number that may be missing (NaN), written as null in JSON.
type Figure float64

// MarshalJSON writes NaN as null.
func (f Figure) MarshalJSON() ([]byte, error) {
	if math.IsNaN(float64(f)) || math.IsInf(float64(f), 0) {
		return []byte("null"), nil
	}
	return json.Marshal(float64(f))
}

// ServerStats are the Redis figures a benchmark compares before and after: on a cluster,
// summed over its masters, with each master's commands.
type ServerStats struct {
	CPU      float64          // used_cpu_sys + used_cpu_user, seconds; NaN when not reported
	Memory   int64            // used_memory, bytes; -1 when not reported
	Commands map[string]int64 // total_commands_processed by master address (a cluster's)
}

// Stats reads CPU and memory use from INFO. The embedded Redis reports neither.
func (r *Redis) Stats(ctx context.Context) ServerStats {
	cc, ok := r.Client.(*redis.ClusterClient)
	if !ok {
		st, _ := serverStats(ctx, r.Client)
		return st
	}
	var mu sync.Mutex
	total := ServerStats{Memory: 0, Commands: map[string]int64{}}
	err := cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error {
		st, n := serverStats(ctx, c)
		mu.Lock()
		defer mu.Unlock()
		total.CPU += st.CPU
		if st.Memory < 0 || total.Memory < 0 {
			total.Memory = -1
		} else {
			total.Memory += st.Memory
		}
		total.Commands[c.Options().Addr] = n
		return nil
	})
	if err != nil {
		return ServerStats{CPU: math.NaN(), Memory: -1}
	}
	return total
}

// serverStats reads one server's INFO: CPU, memory and commands processed.
func serverStats(ctx context.Context, c redis.Cmdable) (ServerStats, int64) {
	st := ServerStats{CPU: math.NaN(), Memory: -1}
	info, err := c.Info(ctx, "cpu", "memory", "stats").Result()
	if err != nil {
		return st, 0
	}
	var cpu float64
	var cmds int64
	cpuSeen := 0
	for _, line := range strings.Split(info, "\r\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		switch k {
		case "used_cpu_sys", "used_cpu_user":
			f, err := strconv.ParseFloat(v, 64)
			if err == nil {
				cpu += f
				cpuSeen++
			}
		case "used_memory":
			n, err := strconv.ParseInt(v, 10, 64)
			if err == nil {
				st.Memory = n
			}
		case "total_commands_processed":
			cmds, _ = strconv.ParseInt(v, 10, 64)
		}
	}
	if cpuSeen == 2 {
		st.CPU = cpu
	}
	return st, cmds
}

// Spread is how unevenly a benchmark's commands fell on a cluster's masters: the busiest
// master's commands over the quietest's between two readings (NaN off a cluster).
func Spread(before, after ServerStats) float64 {
	if len(after.Commands) < 2 {
		return math.NaN()
	}
	lo, hi := math.Inf(1), 0.0
	for addr, n := range after.Commands {
		d := float64(n - before.Commands[addr])
		lo, hi = math.Min(lo, d), math.Max(hi, d)
	}
	if lo <= 0 {
		return math.Inf(1)
	}
	return hi / lo
}

// BareOptions shape the bare go-redis loop the benchmark compares Sluice against.
type BareOptions struct {
	Prefix     string // key prefix, unique per benchmark
	Hops       int    // stream hops per run: as many as Sluice's commits per run
	Runs       int
	Submitters int
	Rate       float64 // runs per second; 0 submits as fast as possible
	Payload    []byte  // the checkpoint each hop writes
}

// BareFigures are what the bare loop measured.
type BareFigures struct {
	Seconds     float64     `json:"seconds"`
	RunsPerSec  float64     `json:"runs_per_sec"`
	EndToEnd    Percentiles `json:"end_to_end"`
	Step        Percentiles `json:"step"`
	Commit      Percentiles `json:"commit"`
	CPUPerStep  Figure      `json:"redis_cpu_us_per_step"`
	BytesPerRun Figure      `json:"redis_bytes_per_run"`
}

// bareInFlight bounds the transactions one stage's reader has in flight while it reads on.
const bareInFlight = 4

// BenchBare drives opts.Runs runs through opts.Hops streams with the least a durable
// pipeline must do, as fast as go-redis can: every stage has its own reader, which reads
// a batch and sends one MULTI/EXEC for all of it — per entry the checkpoint SET, the
// next XADD and the XACK — and reads on while up to bareInFlight of them are in flight.
// Consumed entries are trimmed with XTRIM MINID below the oldest entry still pending,
// every few batches, instead of an XDEL each.
func (r *Redis) BenchBare(ctx context.Context, o BareOptions) (*BareFigures, error) {
	c := r.Client
	stream := func(i int) string { return fmt.Sprintf("%s{b}:s%d", o.Prefix, i) }
	done := o.Prefix + "{b}:done"
	for i := 0; i < o.Hops; i++ {
		if err := c.XGroupCreateMkStream(ctx, stream(i), "g", "0").Err(); err != nil && !strings.HasPrefix(err.Error(), "BUSYGROUP") {
			return nil, err
		}
	}
	defer r.DeleteKeys(context.Background(), o.Prefix+"{b}:*")
	before := r.Stats(ctx)
	var e2e, step, commit Latencies
	submitted := make([]time.Time, o.Runs)
	var smu sync.Mutex

	wctx, stop := context.WithCancel(ctx)
	defer stop()
	var wg sync.WaitGroup
	for i := 0; i < o.Hops; i++ {
		next := done
		if i+1 < o.Hops {
			next = stream(i + 1)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			bareStage(wctx, c, stream(i), next, fmt.Sprintf("%s{b}:ckpt:%d:", o.Prefix, i), o.Payload, &step, &commit)
		}()
	}
	// The observer: when each run reaches the end.
	finished := make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		last, n := "0", 0
		for n < o.Runs && wctx.Err() == nil {
			res, err := c.XRead(wctx, &redis.XReadArgs{Streams: []string{done, last}, Count: 1000, Block: time.Second}).Result()
			if err != nil {
				continue
			}
			now := time.Now()
			for _, m := range res[0].Messages {
				last = m.ID
				i, _ := strconv.Atoi(m.Values["run"].(string))
				smu.Lock()
				e2e.Add(now.Sub(submitted[i]))
				smu.Unlock()
				n++
			}
		}
		close(finished)
	}()
	start := time.Now()
	submit(ctx, o.Runs, o.Submitters, o.Rate, func(i int) error {
		smu.Lock()
		submitted[i] = time.Now()
		smu.Unlock()
		return c.XAdd(ctx, &redis.XAddArgs{Stream: stream(0), Values: []any{"run", strconv.Itoa(i)}}).Err()
	})
	select {
	case <-finished:
	case <-ctx.Done():
		stop()
		wg.Wait()
		return nil, ctx.Err()
	}
	elapsed := time.Since(start)
	after := r.Stats(ctx)
	stop()
	wg.Wait()
	f := &BareFigures{Seconds: elapsed.Seconds(), RunsPerSec: float64(o.Runs) / elapsed.Seconds(),
		EndToEnd: e2e.Percentiles(), Step: step.Percentiles(), Commit: commit.Percentiles(), CPUPerStep: Figure(math.NaN()), BytesPerRun: Figure(math.NaN())}
	if !math.IsNaN(before.CPU) && !math.IsNaN(after.CPU) {
		f.CPUPerStep = Figure((after.CPU - before.CPU) * 1e6 / float64(o.Runs*o.Hops))
	}
	if before.Memory >= 0 && after.Memory >= 0 {
		f.BytesPerRun = Figure(float64(after.Memory-before.Memory) / float64(o.Runs))
	}
	return f, nil
}

// bareStage is one stage's reader: read a batch, commit it in one transaction while
// reading on, trim what has been acknowledged.
func bareStage(ctx context.Context, c redis.UniversalClient, in, next, ckpt string, payload []byte, step, commit *Latencies) {
	slots := make(chan struct{}, bareInFlight)
	var mu sync.Mutex
	inflight := map[string]int{} // first id of each batch in flight -> entries
	var lastRead string
	batches := 0
	var wg sync.WaitGroup
	defer wg.Wait()
	for ctx.Err() == nil {
		res, err := c.XReadGroup(ctx, &redis.XReadGroupArgs{Group: "g", Consumer: "bare", Streams: []string{in, ">"}, Count: 64, Block: time.Second}).Result()
		if err != nil || len(res) == 0 || len(res[0].Messages) == 0 {
			continue
		}
		got := time.Now()
		msgs := res[0].Messages
		first := msgs[0].ID
		mu.Lock()
		inflight[first] = len(msgs)
		lastRead = msgs[len(msgs)-1].ID
		mu.Unlock()
		slots <- struct{}{}
		wg.Add(1)
		batches++
		trim := batches%16 == 0
		go func() {
			defer wg.Done()
			defer func() { <-slots }()
			pipe := c.TxPipeline()
			ids := make([]string, len(msgs))
			for k, m := range msgs {
				run, _ := m.Values["run"].(string)
				pipe.Set(ctx, ckpt+run, payload, time.Hour)
				pipe.XAdd(ctx, &redis.XAddArgs{Stream: next, Values: []any{"run", run}})
				ids[k] = m.ID
			}
			pipe.XAck(ctx, in, "g", ids...)
			cs := time.Now()
			if _, err := pipe.Exec(ctx); err != nil {
				return
			}
			now := time.Now()
			for range msgs {
				step.Add(now.Sub(got))
				commit.Add(now.Sub(cs))
			}
			mu.Lock()
			delete(inflight, first)
			oldest := ""
			for id := range inflight {
				if oldest == "" || CompareStreamIDs(id, oldest) < 0 {
					oldest = id
				}
			}
			upTo := lastRead
			mu.Unlock()
			if trim {
				// Everything below the oldest batch still in flight (or up to the last
				// entry read, when none is) has been acknowledged.
				if oldest == "" {
					oldest = nextStreamID(upTo)
				}
				c.XTrimMinID(ctx, in, oldest)
			}
		}()
	}
}

// submit calls fn(0..n-1) from workers goroutines, paced at rate per second if rate > 0.
func submit(ctx context.Context, n, workers int, rate float64, fn func(i int) error) {
	jobs := make(chan int, workers)
	var wg sync.WaitGroup
	for w := 0; w < max(workers, 1); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				_ = fn(i)
			}
		}()
	}
	start := time.Now()
	for i := 0; i < n && ctx.Err() == nil; i++ {
		if rate > 0 {
			if d := time.Until(start.Add(time.Duration(float64(i) / rate * float64(time.Second)))); d > 0 {
				time.Sleep(d)
			}
		}
		jobs <- i
	}
	close(jobs)
	wg.Wait()
}

// Submit is submit for other packages' benchmarks.
func Submit(ctx context.Context, n, workers int, rate float64, fn func(i int) error) {
	submit(ctx, n, workers, rate, fn)
}

// DeleteKeys deletes every key matching pattern (a benchmark's keys), on every master
// of a cluster.
func (r *Redis) DeleteKeys(ctx context.Context, pattern string) {
	del := func(ctx context.Context, c redis.UniversalClient) error {
		iter := c.Scan(ctx, 0, pattern, 1000).Iterator()
		pipe := c.Pipeline()
		n := 0
		for iter.Next(ctx) {
			// A command per key: keys of different tags may not share one on a cluster.
			pipe.Unlink(ctx, iter.Val())
			if n++; n%1000 == 0 {
				_, _ = pipe.Exec(ctx)
			}
		}
		_, _ = pipe.Exec(ctx)
		return iter.Err()
	}
	if cc, ok := r.Client.(*redis.ClusterClient); ok {
		_ = cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error { return del(ctx, c) })
		return
	}
	_ = del(ctx, r.Client)
}

// DeleteFlowKeys deletes every key of a flow: its partitions', flow-wide and cached.
func (r *Redis) DeleteFlowKeys(ctx context.Context, flow string) {
	for _, p := range KeyPatterns(flow) {
		r.DeleteKeys(ctx, p)
	}
	r.Client.SRem(ctx, flowsKey, flow)
	if fs, err := r.Client.HKeys(ctx, partitionsKey).Result(); err == nil {
		for _, f := range fs {
			if strings.HasPrefix(f, flow+":") {
				r.Client.HDel(ctx, partitionsKey, f)
			}
		}
	}
}

// NodeBacklog returns, per node of a flow, the entries in its streams not yet
// acknowledged (not yet delivered plus pending) and those pending, summed over its
// partitions. Acknowledged entries a stream still keeps (commits trim whole listpack
// nodes only) are not counted: a drained stream has length 0 here.
func (r *Redis) NodeBacklog(ctx context.Context, flow string, nodes []string) (length, pending []int64) {
	length, pending = make([]int64, len(nodes)), make([]int64, len(nodes))
	parts, _ := r.Parts(ctx, flow)
	var streams []string
	for _, pr := range parts {
		for _, n := range nodes {
			streams = append(streams, pr.keys().In(n))
		}
	}
	backlog := r.groupBacklogs(ctx, streams)
	for j := range parts {
		for i := range nodes {
			b := backlog[j*len(nodes)+i]
			length[i] += b.lag + b.pending
			pending[i] += b.pending
		}
	}
	return length, pending
}

// backlog is what a node stream's group has not acknowledged: entries not yet delivered
// (lag) and delivered ones pending.
type backlog struct{ pending, lag int64 }

// groupBacklogs reads the backlog of each stream's node group: its pending count from
// XINFO GROUPS and its lag from there too where Redis knows it (it has counted the
// entries read); otherwise (miniredis, or a lag Redis cannot say) the entries after the
// group's last delivered entry are counted. The stream's length is no measure: commits
// trim acknowledged entries a listpack node at a time.
func (r *Redis) groupBacklogs(ctx context.Context, streams []string) []backlog {
	out := make([]backlog, len(streams))
	pipe := r.Client.Pipeline()
	lens := make([]*redis.IntCmd, len(streams))
	groups := make([]*redis.XInfoGroupsCmd, len(streams))
	for i, s := range streams {
		lens[i] = pipe.XLen(ctx, s)
		groups[i] = pipe.XInfoGroups(ctx, s)
	}
	_, _ = pipe.Exec(ctx)
	var count []int
	var after []*redis.XMessageSliceCmd
	for i := range streams {
		xlen := lens[i].Val()
		out[i].lag = xlen
		for _, g := range groups[i].Val() {
			if g.Name != Group {
				continue
			}
			out[i].pending = g.Pending
			switch {
			case g.EntriesRead > 0 && g.Lag >= 0:
				out[i].lag = g.Lag
			case g.LastDeliveredID == "0-0" || g.LastDeliveredID == "":
				out[i].lag = xlen
			default:
				count = append(count, i)
				after = append(after, nil)
			}
		}
	}
	if len(count) == 0 {
		return out
	}
	pipe = r.Client.Pipeline()
	for k, i := range count {
		var last string
		for _, g := range groups[i].Val() {
			if g.Name == Group {
				last = g.LastDeliveredID
			}
		}
		after[k] = pipe.XRangeN(ctx, streams[i], "("+last, "+", backlogScan)
	}
	_, _ = pipe.Exec(ctx)
	for k, i := range count {
		out[i].lag = int64(len(after[k].Val()))
	}
	return out
}

// backlogScan bounds the entries counted after a group's last delivered one where Redis
// does not say its lag.
const backlogScan = 100000

// DeadLetterCount is the number of a flow's dead letters.
func (r *Redis) DeadLetterCount(ctx context.Context, flow string) int64 {
	parts, _ := r.Parts(ctx, flow)
	var n int64
	for _, pr := range parts {
		l, _ := r.Client.XLen(ctx, pr.keys().Dead()).Result()
		n += l
	}
	return n
}

// nextStreamID is the smallest stream id after id.
func nextStreamID(id string) string {
	ms, seq, _ := strings.Cut(id, "-")
	n, _ := strconv.ParseUint(seq, 10, 64)
	return ms + "-" + strconv.FormatUint(n+1, 10)
}
