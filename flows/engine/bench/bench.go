// Package bench drives runs through flows of no-op nodes and measures them: what
// `sluice bench` reports. It is a client of the engine like any other and holds no rule
// of the runtime.
package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/sluicehq/sluice/flows"
	"github.com/sluicehq/sluice/flows/engine"
	"github.com/sluicehq/sluice/flows/nodes"
	"github.com/sluicehq/sluice/store"
)

// Options shape a benchmark run.
type Options struct {
	Runs       int
	Nodes      int           // no-op nodes in a row (shape "linear")
	Branches   int           // parallel no-op branches between a fork and a join (shape "fork")
	Shape      string        // "linear", "fork" or "agent" (an agent calling a tool once: two model calls)
	Submitters int           // goroutines starting runs
	Rate       float64       // runs per second; 0 starts them as fast as the submitters can
	StateBytes int           // size of the run state (a padding string in the input)
	Procs      int           // worker processes to start; 0 runs the workers in this process
	Binary     string        // the sluice binary for Procs
	RedisURL   string        // the Redis the worker processes use
	Keep       bool          // keep the benchmark's keys afterwards
	Sleep      time.Duration // each node waits this long (a delay node) instead of doing nothing
	Poison     float64       // fraction of runs whose first node fails (a poison pill)
	NoFuse     bool          // every step through its node's stream (see Options.NoFuse)
	Partitions int           // partitions the runs are spread over (0: the backend's default)
}

// Figures are what Sluice measured.
type Figures struct {
	Seconds      float64           `json:"seconds"`
	RunsPerSec   float64           `json:"runs_per_sec"`
	EndToEnd     store.Percentiles `json:"end_to_end"`
	Step         store.Percentiles `json:"step"`
	Commit       store.Percentiles `json:"commit"`
	CPUPerStep   store.Figure      `json:"redis_cpu_us_per_step"`
	BytesPerRun  store.Figure      `json:"redis_bytes_per_run"`
	BytesPerCkpt store.Figure      `json:"redis_bytes_per_checkpoint"`
	// Spread is, on a Redis Cluster, the busiest master's commands over the quietest's.
	Spread store.Figure `json:"master_spread"`
	// GoCPUPerRun is this process's CPU time (user and system, every goroutine: the
	// starters, the worker, the bench's own result reader) per run, in µs; with --procs
	// the starters and the result reader only.
	GoCPUPerRun store.Figure `json:"go_cpu_us_per_run"`
	// WorkerCPUPerRun is, with --procs, the worker processes' CPU time per run, in µs:
	// their whole lives, start-up and the warm-up run included; NaN without --procs.
	WorkerCPUPerRun store.Figure `json:"worker_cpu_us_per_run"`
	// GoAllocsPerRun and GoBytesPerRun are the heap allocations of this process per run
	// (objects and bytes; NaN with --procs): unlike CPU time they do not move with the
	// machine's load, and every one of them is garbage to collect.
	GoAllocsPerRun store.Figure `json:"go_allocs_per_run"`
	GoBytesPerRun  store.Figure `json:"go_alloc_bytes_per_run"`
	Steps          int          `json:"steps"`
	Failed         int          `json:"failed_runs"`
	Drained        bool         `json:"drained"`
	MaxPending     int64        `json:"max_pending"` // the largest pending list seen while running
	DeadLetters    int64        `json:"dead_letters"`
	Leftover       string       `json:"leftover,omitempty"`
}

// Flow returns the benchmark's flow document: k no-op transforms in a row, a fork of k
// no-op branches into a join, or an agent that calls a tool once (shape "agent"). With sleep, the nodes are delays; with poison,
// the first node fails runs whose input says so.
func Flow(id, shape string, k int, sleep time.Duration, poison bool) []byte {
	type node = map[string]any
	nodes := []node{{"id": "in", "type": "input"}}
	var edges []node
	first := true
	noop := func(id string) node {
		defer func() { first = false }()
		if sleep > 0 {
			return node{"id": id, "type": "delay", "params": map[string]any{"for": sleep.String()}}
		}
		if poison && first {
			return node{"id": id, "type": "transform", "params": map[string]any{"expr": `if .poison then error("poison pill") else {} end`}}
		}
		return node{"id": id, "type": "transform", "params": map[string]any{"expr": "{}"}}
	}
	switch shape {
	case "agent":
		nodes = append(nodes,
			node{"id": "agent", "type": "agent", "params": map[string]any{"model": "bench", "user": "Look it up."}},
			node{"id": agentTool, "type": "data", "params": map[string]any{"tool_name": agentTool}},
			node{"id": "out", "type": "output", "params": map[string]any{"value": "null"}})
		edges = append(edges, node{"from": "in", "to": "agent"}, node{"from": agentTool, "port": "tool", "to": "agent", "to_port": "tools"},
			node{"from": "agent", "to": "out"})
	case "fork":
		nodes = append(nodes, node{"id": "j", "type": "join"}, node{"id": "out", "type": "output", "params": map[string]any{"value": "null"}})
		for i := 1; i <= k; i++ {
			id := "b" + strconv.Itoa(i)
			nodes = append(nodes, noop(id))
			edges = append(edges, node{"from": "in", "to": id}, node{"from": id, "to": "j"})
		}
		edges = append(edges, node{"from": "j", "to": "out"})
	default:
		prev := "in"
		for i := 1; i <= k; i++ {
			id := "n" + strconv.Itoa(i)
			nodes = append(nodes, noop(id))
			edges = append(edges, node{"from": prev, "to": id})
			prev = id
		}
		nodes = append(nodes, node{"id": "out", "type": "output", "params": map[string]any{"value": "null"}})
		edges = append(edges, node{"from": prev, "to": "out"})
	}
	b, _ := json.MarshalIndent(map[string]any{"sluice": 1, "id": id, "name": "bench", "nodes": nodes, "edges": edges}, "", " ")
	return b
}

// benchObserver records step and commit latencies of in-process workers.
type benchObserver struct {
	step, commit store.Latencies
	mu           sync.Mutex
	steps        int
}

func (o *benchObserver) StepDone(_, _ string, t engine.StepTiming, _ flows.Usage) {
	o.step.Add(t.Total)
	o.commit.Add(t.Commit)
	o.mu.Lock()
	o.steps++
	o.mu.Unlock()
}

func (o *benchObserver) StepFailed(string, string, bool) {}

// Run drives o.Runs runs through the benchmark flow on rdb and measures them. The
// engine must not run other workers for the flow meanwhile.
func Run(ctx context.Context, rdb *store.Redis, o Options) (*Figures, error) {
	id := "bench-" + strings.ToLower(engine.NewRunID()[len(engine.NewRunID())-8:])
	env := &nodes.Env{}
	var modelURL string
	if o.Shape == "agent" {
		url, stop, err := startModel()
		if err != nil {
			return nil, fmt.Errorf("the agent's model: %w", err)
		}
		defer stop()
		retries := 0
		modelURL = url
		env.Providers = map[string]*nodes.Provider{nodes.DefaultProvider: {Name: nodes.DefaultProvider, BaseURL: url, MaxRetries: &retries}}
	}
	reg := nodes.NewRegistry(env)
	k := o.Nodes
	if o.Shape == "fork" {
		k = o.Branches
	}
	doc := Flow(id, o.Shape, k, o.Sleep, o.Poison > 0)
	obs := &benchObserver{}
	e := engine.New(rdb, reg, engine.Options{Observer: obs, Logger: slog.New(slog.DiscardHandler), NoFuse: o.NoFuse, Partitions: o.Partitions})
	plan, _, err := e.Compile(doc)
	if err != nil {
		return nil, err
	}
	if err := e.Publish(ctx, plan); err != nil {
		return nil, err
	}
	keys := store.FlowKeys(id)
	if !o.Keep {
		defer rdb.DeleteKeys(context.Background(), keys.Prefix()+"*")
	}

	wctx, stopWorkers := context.WithCancel(ctx)
	defer stopWorkers()
	var wg sync.WaitGroup
	var procs []*exec.Cmd
	if o.Procs == 0 {
		w := e.NewWorker(engine.WorkerOptions{Flows: []string{id}, Grace: time.Second})
		wg.Add(1)
		go func() { defer wg.Done(); _ = w.Run(wctx) }()
	} else {
		dir, err := os.MkdirTemp("", "sluice-bench-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(dir)
		path := filepath.Join(dir, id+".json")
		if err := os.WriteFile(path, doc, 0o644); err != nil {
			return nil, err
		}
		for i := 0; i < o.Procs; i++ {
			// No result dispatcher: it would take the results the benchmark reads.
			args := []string{"worker", "--log-level", "error", "--dispatch=false", "--redis", o.RedisURL}
			if o.Partitions > 0 {
				args = append(args, "--partitions", strconv.Itoa(o.Partitions))
			}
			cmd := exec.CommandContext(wctx, o.Binary, append(args, path)...)
			cmd.Stderr = os.Stderr
			if modelURL != "" {
				cmd.Env = append(os.Environ(), "OPENAI_BASE_URL="+modelURL, "OPENAI_API_KEY=bench")
			}
			if err := cmd.Start(); err != nil {
				return nil, err
			}
			procs = append(procs, cmd)
			wg.Add(1)
			go func() { defer wg.Done(); _ = cmd.Wait() }()
		}
	}
	pad := strings.Repeat("x", max(o.StateBytes-12, 0))
	input, _ := json.Marshal(map[string]any{"pad": pad})
	poisoned, _ := json.Marshal(map[string]any{"pad": pad, "poison": true})

	// Warm up: one run end to end, so the workers have started and loaded the plan.
	warm, err := e.Start(ctx, plan, input, engine.StartOptions{})
	if err != nil {
		return nil, err
	} else {
		wc, cancel := context.WithTimeout(ctx, 30*time.Second)
		_, err := e.Wait(wc, id, warm)
		cancel()
		if err != nil {
			return nil, fmt.Errorf("warm-up run did not finish: %w", err)
		}
	}
	obs.step, obs.commit = store.Latencies{}, store.Latencies{}
	obs.steps = 0

	before := rdb.Stats(ctx)
	cpuBefore := processCPU()
	var memBefore runtime.MemStats
	runtime.ReadMemStats(&memBefore)
	var e2e store.Latencies
	var mu sync.Mutex
	submitted := map[string]time.Time{}
	ended := map[string]time.Time{}
	failed := 0
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		// The results are taken as a result dispatcher takes them (the group, then
		// acknowledged and deleted), so the stream stays as short as in production.
		// One blocking read per cluster slot of the flow's partitions (one on one server),
		// given the partitions again every second: workers may add some.
		tail := rdb.TailResults(ctx, store.ResultsOptions{Consumer: "bench", Block: time.Second, Count: 1000})
		defer tail.Close()
		every := time.NewTicker(time.Second)
		defer every.Stop()
		if parts, err := rdb.Parts(ctx, id); err == nil {
			tail.Set(parts)
		}
		n := 0
		for n < o.Runs && ctx.Err() == nil {
			var res []store.Result
			select {
			case <-ctx.Done():
				continue
			case <-every.C:
				if parts, err := rdb.Parts(ctx, id); err == nil {
					tail.Set(parts)
				}
				continue
			case res = <-tail.C():
			}
			// The time the results arrived, before acknowledging them: the bare loop's
			// observer acknowledges nothing, and an end-to-end figure is up to arrival.
			now := time.Now()
			_ = rdb.AckResults(ctx, res)
			mu.Lock()
			for _, m := range res {
				run := m.Run
				if run == warm {
					continue
				}
				if m.Status != store.StatusSucceeded {
					failed++
				}
				if t, ok := submitted[run]; ok {
					e2e.Add(now.Sub(t))
				} else {
					ended[run] = now
				}
				n++
			}
			mu.Unlock()
		}
	}()
	start := time.Now()
	var startErr error
	// The pending lists, sampled while the runs go through.
	var maxPending int64
	sampleCtx, stopSampling := context.WithCancel(ctx)
	defer stopSampling()
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for sampleCtx.Err() == nil {
			var total int64
			_, pending := rdb.NodeBacklog(sampleCtx, id, plan.NodeIDs())
			for _, p := range pending {
				total += p
			}
			maxPending = max(maxPending, total)
			select {
			case <-sampleCtx.Done():
			case <-time.After(50 * time.Millisecond):
			}
		}
	}()
	every := 0
	if o.Poison > 0 {
		every = int(1 / o.Poison)
	}
	store.Submit(ctx, o.Runs, max(o.Submitters, 1), o.Rate, func(i int) error {
		t := time.Now()
		in := input
		if every > 0 && i%every == every-1 {
			in = poisoned
		}
		run, err := e.Start(ctx, plan, in, engine.StartOptions{})
		if err != nil {
			mu.Lock()
			startErr = err
			mu.Unlock()
			return err
		}
		mu.Lock()
		if end, ok := ended[run]; ok {
			e2e.Add(end.Sub(t))
		} else {
			submitted[run] = t
		}
		mu.Unlock()
		return nil
	})
	if startErr != nil {
		return nil, startErr
	}
	<-finished
	stopSampling()
	<-sampled
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	elapsed := time.Since(start)
	cpuUsed := processCPU() - cpuBefore
	var memAfter runtime.MemStats
	runtime.ReadMemStats(&memAfter)
	after := rdb.Stats(ctx)
	stopWorkers()
	wg.Wait()

	stepsPerRun := len(plan.Nodes)
	f := &Figures{Seconds: elapsed.Seconds(), RunsPerSec: float64(o.Runs) / elapsed.Seconds(), EndToEnd: e2e.Percentiles(),
		Step: obs.step.Percentiles(), Commit: obs.commit.Percentiles(), Steps: o.Runs * stepsPerRun, Failed: failed,
		CPUPerStep: store.Figure(math.NaN()), BytesPerRun: store.Figure(math.NaN()), BytesPerCkpt: store.Figure(math.NaN()),
		Spread: store.Figure(store.Spread(before, after)), WorkerCPUPerRun: store.Figure(math.NaN()),
		GoAllocsPerRun: store.Figure(math.NaN()), GoBytesPerRun: store.Figure(math.NaN())}
	f.GoCPUPerRun = store.Figure(float64(cpuUsed.Microseconds()) / float64(o.Runs))
	if len(procs) > 0 {
		var used time.Duration
		for _, cmd := range procs {
			if cmd.ProcessState == nil {
				continue
			}
			if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
				used += time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
			}
		}
		f.WorkerCPUPerRun = store.Figure(float64(used.Microseconds()) / float64(o.Runs))
	}
	if o.Procs == 0 {
		f.GoAllocsPerRun = store.Figure(float64(memAfter.Mallocs-memBefore.Mallocs) / float64(o.Runs))
		f.GoBytesPerRun = store.Figure(float64(memAfter.TotalAlloc-memBefore.TotalAlloc) / float64(o.Runs))
	}
	if !math.IsNaN(before.CPU) && !math.IsNaN(after.CPU) {
		f.CPUPerStep = store.Figure((after.CPU - before.CPU) * 1e6 / float64(f.Steps))
	}
	if before.Memory >= 0 && after.Memory >= 0 {
		f.BytesPerRun = store.Figure(float64(after.Memory-before.Memory) / float64(o.Runs))
		f.BytesPerCkpt = f.BytesPerRun / store.Figure(stepsPerRun+1)
	}
	f.Drained, f.Leftover = drained(ctx, rdb, id, plan.NodeIDs())
	f.MaxPending = maxPending
	f.DeadLetters = rdb.DeadLetterCount(ctx, id)
	return f, nil
}

// processCPU is the CPU time this process has used, user and system.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// drained reports whether every node stream is empty with nothing pending.
func drained(ctx context.Context, rdb *store.Redis, flow string, nodes []string) (bool, string) {
	length, pending := rdb.NodeBacklog(ctx, flow, nodes)
	var left []string
	for i, n := range nodes {
		if length[i] != 0 || pending[i] != 0 {
			left = append(left, fmt.Sprintf("%s: length %d, pending %d", n, length[i], pending[i]))
		}
	}
	return len(left) == 0, strings.Join(left, "; ")
}

// Stages is the number of stages of the independent raw loop a run of the benchmark
// flow is compared with (issue 29): one per no-op node of a linear flow, fused or not
// (the input and output nodes are Sluice's own); a fork of k branches into a join has
// k+3 (the step before the fork, the branches, the join, the output); the agent loop
// has 3 (the agent's two model calls and the tool between them).
func Stages(o Options) int {
	switch o.Shape {
	case "fork":
		return o.Branches + 3
	case "agent":
		return 3
	}
	return o.Nodes
}
