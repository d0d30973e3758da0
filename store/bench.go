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

// ServerStats are the Redis figures a benchmark compares before and after.
type ServerStats struct {
	CPU    float64 // used_cpu_sys + used_cpu_user, seconds; NaN when not reported
	Memory int64   // used_memory, bytes; -1 when not reported
}

// Stats reads CPU and memory use from INFO. The embedded Redis reports neither.
func (r *Redis) Stats(ctx context.Context) ServerStats {
	st := ServerStats{CPU: math.NaN(), Memory: -1}
	info, err := r.Client.Info(ctx, "cpu", "memory").Result()
	if err != nil {
		return st
	}
	var cpu float64
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
		}
	}
	if cpuSeen == 2 {
		st.CPU = cpu
	}
	return st
}

// BareOptions shape the bare go-redis loop the benchmark compares Sluice against.
type BareOptions struct {
	Prefix     string // key prefix, unique per benchmark
	Nodes      int
	Runs       int
	Submitters int
	Rate       float64 // runs per second; 0 submits as fast as possible
	Payload    []byte  // the "checkpoint" each step writes
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

// BenchBare drives opts.Runs runs through opts.Nodes streams with the least a durable
// pipeline must do per step: one XREADGROUP batch, then per entry one MULTI with the
// next XADD, a checkpoint SET and the XACK, all entries of a batch in one pipeline.
func (r *Redis) BenchBare(ctx context.Context, o BareOptions) (*BareFigures, error) {
	c := r.Client
	stream := func(i int) string { return fmt.Sprintf("%s{b}:s%d", o.Prefix, i) }
	done := o.Prefix + "{b}:done"
	for i := 0; i < o.Nodes; i++ {
		if err := c.XGroupCreateMkStream(ctx, stream(i), "g", "0").Err(); err != nil && !strings.HasPrefix(err.Error(), "BUSYGROUP") {
			return nil, err
		}
	}
	defer func() {
		keys, _ := c.Keys(context.Background(), o.Prefix+"{b}:*").Result()
		for i := 0; i < len(keys); i += 500 {
			c.Del(context.Background(), keys[i:min(i+500, len(keys))]...)
		}
	}()
	before := r.Stats(ctx)
	var e2e, step, commit Latencies
	submitted := make([]time.Time, o.Runs)
	var smu sync.Mutex

	wctx, stop := context.WithCancel(ctx)
	defer stop()
	// The worker: read a batch from every stream, commit it in one pipeline.
	streams := make([]string, 0, 2*o.Nodes)
	for i := 0; i < o.Nodes; i++ {
		streams = append(streams, stream(i))
	}
	for i := 0; i < o.Nodes; i++ {
		streams = append(streams, ">")
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for wctx.Err() == nil {
			res, err := c.XReadGroup(wctx, &redis.XReadGroupArgs{Group: "g", Consumer: "bare", Streams: streams, Count: 64, Block: time.Second}).Result()
			if err != nil {
				continue
			}
			got := time.Now()
			pipe := c.Pipeline()
			for _, s := range res {
				idx, _ := strconv.Atoi(s.Stream[strings.LastIndexByte(s.Stream, 's')+1:])
				for _, m := range s.Messages {
					run, _ := m.Values["run"].(string)
					// Raw commands: go-redis's typed commands cannot read the QUEUED replies
					// of a MULTI inside a plain pipeline.
					next := done
					if idx+1 < o.Nodes {
						next = stream(idx + 1)
					}
					pipe.Do(wctx, "MULTI")
					pipe.Do(wctx, "XADD", next, "*", "run", run)
					pipe.Do(wctx, "SET", fmt.Sprintf("%s{b}:ckpt:%s:%d", o.Prefix, run, idx), o.Payload, "EX", 3600)
					pipe.Do(wctx, "XACK", s.Stream, "g", m.ID)
					pipe.Do(wctx, "XDEL", s.Stream, m.ID)
					pipe.Do(wctx, "EXEC")
				}
			}
			cs := time.Now()
			if _, err := pipe.Exec(wctx); err != nil && wctx.Err() == nil {
				continue
			}
			now := time.Now()
			for _, s := range res {
				for range s.Messages {
					step.Add(now.Sub(got))
					commit.Add(now.Sub(cs))
				}
			}
		}
	}()
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
		f.CPUPerStep = Figure((after.CPU - before.CPU) * 1e6 / float64(o.Runs*o.Nodes))
	}
	if before.Memory >= 0 && after.Memory >= 0 {
		f.BytesPerRun = Figure(float64(after.Memory-before.Memory) / float64(o.Runs))
	}
	return f, nil
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
