package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"runtime"
	"runtime/pprof"
	"strings"

	"github.com/sluicehq/sluice/flows/engine"
	"github.com/sluicehq/sluice/flows/engine/bench"
	"github.com/sluicehq/sluice/store"
)

// benchReport is what `sluice bench --json` prints.
type benchReport struct {
	Options bench.Options           `json:"options"`
	Redis   string                  `json:"redis"`
	Sluice  *bench.Figures          `json:"sluice"`
	Bare    *store.BareFigures      `json:"bare"`
	Ratio   map[string]store.Figure `json:"ratio"` // sluice / bare
}

func cmdBench(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o bench.Options
	fs.IntVar(&o.Runs, "runs", 20000, "runs to drive through each side")
	fs.IntVar(&o.Nodes, "nodes", 3, "no-op nodes in a row")
	fs.StringVar(&o.Shape, "shape", "linear", "linear (--nodes in a row), fork (--branches between a fork and a join) or agent (an agent calling a tool: two model calls to a no-op model on loopback)")
	fs.IntVar(&o.Branches, "branches", 3, "parallel branches for --shape fork")
	fs.IntVar(&o.Submitters, "concurrency", 16, "concurrent submitters")
	fs.Float64Var(&o.Rate, "rate", 0, "runs per second to pace submissions at, for latency figures (0: as fast as possible)")
	fs.IntVar(&o.StateBytes, "state-bytes", 256, "size of the run state; every checkpoint stores it")
	fs.IntVar(&o.Procs, "procs", 0, "worker processes to start (0: workers in this process)")
	fs.BoolVar(&o.Keep, "keep", false, "keep the benchmark's keys in Redis afterwards")
	fs.DurationVar(&o.Sleep, "sleep", 0, "each node waits this long instead of doing nothing (try --shape fork --sleep 1s --runs 1)")
	fs.BoolVar(&o.NoFuse, "no-fuse", false, "do not fuse pure steps: every step goes through its node's stream")
	fs.IntVar(&o.Partitions, "partitions", 0, "partitions the runs are spread over (0: 1 on one Redis; on a cluster as many as spread evenly over its masters, 16 on 2 to 5)")
	fs.Float64Var(&o.Poison, "poison", 0, "fraction of runs that fail at their first node (a poison pill), e.g. 0.01")
	skipBare := fs.Bool("sluice-only", false, "skip the bare go-redis loop")
	asJSON := fs.Bool("json", false, "print the figures as JSON")
	cpuProfile := fs.String("cpuprofile", "", "write a Go CPU profile of the Sluice side to this file")
	memProfile := fs.String("memprofile", "", "write a Go allocation profile (go tool pprof -sample_index=alloc_space) to this file after the Sluice side")
	redisURL := fs.String("redis", envOr("REDIS_URL", ""), "Redis URL; empty starts the embedded Redis (env REDIS_URL)")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "Usage: sluice bench [flags]\n\nDrives runs through a flow of no-op nodes and, in the same process against the same\n"+
			"Redis, the same runs through the fastest correct bare go-redis loop with as many stages\n"+
			"as the flow (a reader per stage, one MULTI of SET, XADD and XACK per read batch),\nand prints both and their ratio.\n\nFlags:")
		fs.PrintDefaults()
	}
	if _, err := parseArgs(fs, args); err != nil {
		return err
	}
	if o.Runs < 1 || o.Nodes < 1 || o.Branches < 1 || (o.Shape != "linear" && o.Shape != "fork" && o.Shape != "agent") {
		return &exitError{code: 2, err: errors.New("bench: --runs, --nodes and --branches must be positive and --shape linear, fork or agent")}
	}
	if o.Procs > 0 {
		if *redisURL == "" {
			return &exitError{code: 2, err: errors.New("bench --procs needs a shared Redis: set REDIS_URL or --redis")}
		}
		exe, err := os.Executable()
		if err != nil {
			return err
		}
		o.Binary, o.RedisURL = exe, *redisURL
	}
	// With OTEL_* set, the Sluice side exports traces (docs/benchmarks.md: what that costs).
	stopTracing, err := startTracing(ctx, slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	if err != nil {
		return err
	}
	defer stopTracing()
	rdb, err := store.Open(ctx, store.Options{URL: *redisURL, PoolSize: 64})
	if err != nil {
		return err
	}
	defer rdb.Close()
	rep := benchReport{Options: o, Redis: "embedded", Ratio: map[string]store.Figure{}}
	if !rdb.Embedded() {
		rep.Redis = rdb.Addr()
	}
	if !*asJSON {
		fmt.Fprintf(stderr, "sluice bench: %d runs, %s, %d submitters, rate %s, state %d B, Redis %s\n",
			o.Runs, shapeName(o), o.Submitters, rateName(o.Rate), o.StateBytes, rep.Redis)
	}
	if !*skipBare {
		pad := []byte(strings.Repeat("x", o.StateBytes))
		rep.Bare, err = rdb.BenchBare(ctx, store.BareOptions{Prefix: "sluicebench:" + engine.NewRunID(), Hops: bench.Stages(o), Runs: o.Runs,
			Submitters: o.Submitters, Rate: o.Rate, Payload: pad})
		if err != nil {
			return fmt.Errorf("bare loop: %w", err)
		}
	}
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
	}
	if *memProfile != "" {
		runtime.MemProfileRate = 4096 // every allocation path of a run shows
	}
	rep.Sluice, err = bench.Run(ctx, rdb, o)
	if *cpuProfile != "" {
		pprof.StopCPUProfile()
	}
	if *memProfile != "" && err == nil {
		if err := writeAllocs(*memProfile); err != nil {
			return err
		}
	}
	if err != nil {
		return fmt.Errorf("sluice: %w", err)
	}
	if rep.Bare != nil {
		ratio := func(a, b store.Figure) store.Figure {
			if b == 0 || math.IsNaN(float64(a)) || math.IsNaN(float64(b)) {
				return store.Figure(math.NaN())
			}
			return store.Figure(math.Round(float64(a/b)*100) / 100)
		}
		rep.Ratio["throughput"] = ratio(store.Figure(rep.Sluice.RunsPerSec), store.Figure(rep.Bare.RunsPerSec))
		rep.Ratio["end_to_end_p50"] = ratio(store.Figure(rep.Sluice.EndToEnd.P50), store.Figure(rep.Bare.EndToEnd.P50))
		rep.Ratio["end_to_end_p99"] = ratio(store.Figure(rep.Sluice.EndToEnd.P99), store.Figure(rep.Bare.EndToEnd.P99))
		rep.Ratio["step_p50"] = ratio(store.Figure(rep.Sluice.Step.P50), store.Figure(rep.Bare.Step.P50))
		rep.Ratio["commit_p50"] = ratio(store.Figure(rep.Sluice.Commit.P50), store.Figure(rep.Bare.Commit.P50))
		rep.Ratio["redis_cpu_per_step"] = ratio(rep.Sluice.CPUPerStep, rep.Bare.CPUPerStep)
		rep.Ratio["redis_bytes_per_run"] = ratio(rep.Sluice.BytesPerRun, rep.Bare.BytesPerRun)
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rep); err != nil {
			return err
		}
		if !rep.Sluice.Drained {
			return &exitError{code: 1, err: fmt.Errorf("streams did not drain: %s", rep.Sluice.Leftover)}
		}
		return nil
	}
	printBench(stdout, rep)
	if !rep.Sluice.Drained {
		return &exitError{code: 1, err: fmt.Errorf("streams did not drain: %s", rep.Sluice.Leftover)}
	}
	return nil
}

func shapeName(o bench.Options) string {
	if o.Shape == "agent" {
		return "an agent calling a tool (two model calls)"
	}
	if o.Shape == "fork" {
		return fmt.Sprintf("fork of %d branches into a join", o.Branches)
	}
	return fmt.Sprintf("%d no-op nodes", o.Nodes)
}

func rateName(r float64) string {
	if r == 0 {
		return "unpaced"
	}
	return fmt.Sprintf("%g/s", r)
}

func printBench(w io.Writer, r benchReport) {
	s, b := r.Sluice, r.Bare
	num := func(v store.Figure, unit string) string {
		if math.IsNaN(float64(v)) {
			return "n/a"
		}
		return fmt.Sprintf("%.4g%s", float64(v), unit)
	}
	row := func(name string, sv, bv, ratio string) {
		fmt.Fprintf(w, "%-26s %14s %14s %8s\n", name, sv, bv, ratio)
	}
	row("", "sluice", "bare go-redis", "ratio")
	if b == nil {
		b = &store.BareFigures{CPUPerStep: store.Figure(math.NaN()), BytesPerRun: store.Figure(math.NaN())}
	}
	rt := func(k string) string { return num(r.Ratio[k], "×") }
	if len(r.Ratio) == 0 {
		rt = func(string) string { return "" }
	}
	row("throughput (runs/s)", num(store.Figure(s.RunsPerSec), ""), num(store.Figure(b.RunsPerSec), ""), rt("throughput"))
	row("end-to-end p50 / p99 (ms)", fmt.Sprintf("%.2f / %.2f", s.EndToEnd.P50, s.EndToEnd.P99), fmt.Sprintf("%.2f / %.2f", b.EndToEnd.P50, b.EndToEnd.P99), rt("end_to_end_p50"))
	row("step p50 / p99 (ms)", fmt.Sprintf("%.2f / %.2f", s.Step.P50, s.Step.P99), fmt.Sprintf("%.2f / %.2f", b.Step.P50, b.Step.P99), rt("step_p50"))
	row("commit p50 / p99 (ms)", fmt.Sprintf("%.2f / %.2f", s.Commit.P50, s.Commit.P99), fmt.Sprintf("%.2f / %.2f", b.Commit.P50, b.Commit.P99), rt("commit_p50"))
	row("Redis CPU per step (µs)", num(s.CPUPerStep, ""), num(b.CPUPerStep, ""), rt("redis_cpu_per_step"))
	row("Redis bytes per run", num(s.BytesPerRun, ""), num(b.BytesPerRun, ""), rt("redis_bytes_per_run"))
	row("Redis bytes per checkpoint", num(s.BytesPerCkpt, ""), "", "")
	if math.IsNaN(float64(s.WorkerCPUPerRun)) {
		row("Go CPU per run (µs)", num(s.GoCPUPerRun, ""), "", "")
	} else {
		row("Go CPU per run, starter (µs)", num(s.GoCPUPerRun, ""), "", "")
		row("Go CPU per run, workers (µs)", num(s.WorkerCPUPerRun, ""), "", "")
	}
	row("Go allocations per run", num(s.GoAllocsPerRun, ""), "", "")
	row("Go bytes allocated per run", num(s.GoBytesPerRun, ""), "", "")
	if !math.IsNaN(float64(s.Spread)) {
		row("busiest / quietest master", num(s.Spread, "×"), "", "")
	}
	fmt.Fprintf(w, "steps: %d, failed runs: %d, dead letters: %d, largest pending list: %d, streams drained: %v\n", s.Steps, s.Failed, s.DeadLetters, s.MaxPending, s.Drained)
}

// writeAllocs writes the allocation profile to path.
func writeAllocs(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	return pprof.Lookup("allocs").WriteTo(f, 0)
}
