package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/sluicehq/sluice/flows"
	"github.com/sluicehq/sluice/flows/engine"
	"github.com/sluicehq/sluice/server"
	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/teams"
)

// loadPlan reads and compiles a flow file, printing its problems on failure.
func loadPlan(e *engine.Engine, path string, stderr io.Writer) (*flows.Plan, error) {
	return loadPlanIn(e, path, "", stderr)
}

// loadPlanIn compiles a flow file as a flow of workspace ws ("": the file's own id;
// docs/teams.md): its id becomes "ws.id".
func loadPlanIn(e *engine.Engine, path, ws string, stderr io.Writer) (*flows.Plan, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, &exitError{code: 2, err: err}
	}
	return compileFile(e, path, ws, data, stderr)
}

// compileFile is loadPlanIn of a file's data read elsewhere (a git ref).
func compileFile(e *engine.Engine, path, ws string, data []byte, stderr io.Writer) (*flows.Plan, error) {
	if ws != "" {
		data = teams.QualifyDocument(ws, data)
	}
	plan, probs, err := e.Compile(data)
	if err != nil {
		for _, p := range probs {
			fmt.Fprintf(stderr, "%s: %s\n", path, p)
		}
		return nil, &exitError{code: 1, err: fmt.Errorf("%s: the flow has %d problem(s)", path, len(probs.Errors()))}
	}
	return plan, nil
}

func cmdRun(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	fs.SetOutput(stderr)
	input := fs.String("input", "{}", "the run's input as JSON (@FILE reads a file, - reads stdin)")
	redisURL := fs.String("redis", envOr("REDIS_URL", ""), "Redis URL; empty starts the embedded Redis (env REDIS_URL)")
	timeout := fs.Duration("timeout", 0, "give up after this long (0: no limit)")
	logLevel := fs.String("log-level", envOr("SLUICE_LOG_LEVEL", "warn"), "debug, info, warn or error")
	cf := addComponentFlags(fs)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "Usage: sluice run [flags] FLOW.json\n\nRuns the flow once with in-process workers and prints its output as JSON.\n"+
			"Exits 1 when the run fails, 3 when it waits for an approval (resume it with 'sluice resume').\n\nFlags:")
		fs.PrintDefaults()
	}
	files, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if len(files) != 1 {
		fs.Usage()
		return &exitError{code: 2, err: errors.New("run takes one flow file")}
	}
	in, err := readInput(*input)
	if err != nil {
		return &exitError{code: 2, err: err}
	}
	log, err := newLogger(stderr, *logLevel)
	if err != nil {
		return err
	}
	env, err := cf.env(log)
	if err != nil {
		return err
	}
	defer env.Close()
	stopTracing, err := startTracing(ctx, log)
	if err != nil {
		return err
	}
	defer stopTracing()
	rdb, err := store.Open(ctx, store.Options{URL: *redisURL})
	if err != nil {
		return err
	}
	defer rdb.Close()
	e := newEngine(rdb, env, engine.Options{Logger: log, Partitions: envPartitions()})
	plan, err := loadPlan(e, files[0], stderr)
	if err != nil {
		return err
	}
	// Subflows are found next to the flow file.
	attach(ctx, env, rdb, e, &store.Library{Dir: filepath.Dir(files[0])})
	if *timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, *timeout)
		defer cancel()
	}
	id, err := e.Start(ctx, plan, in, engine.StartOptions{})
	if err != nil {
		return err
	}
	return runUntilSettled(ctx, e, plan, files[0], id, rdb.Embedded(), stdout, stderr)
}

// cliBlock is how long a read of the worker of `sluice run` and `sluice test` blocks:
// the command stops its worker when its runs are done, and a worker stops once its
// blocking read returns (the default second was the longest part of a short test).
const cliBlock = 100 * time.Millisecond

// runUntilSettled works on the plan's flow until run id finishes or waits, then reports.
func runUntilSettled(ctx context.Context, e *engine.Engine, plan *flows.Plan, flowFile, id string, embedded bool, stdout, stderr io.Writer) error {
	wctx, stopWorker := context.WithCancel(ctx)
	w := e.NewWorker(engine.WorkerOptions{Flows: []string{plan.Flow}, Grace: 5 * time.Second, Block: cliBlock})
	done := make(chan error, 1)
	go func() { done <- w.Run(wctx) }()
	run, err := e.Wait(ctx, plan.Flow, id)
	stopWorker()
	<-done
	if err == nil && embedded && store.Finished(run.Status) {
		// Nobody else dispatches the embedded Redis's results: the run's span is ours.
		e.TraceFinished(ctx, run)
	}
	if err != nil {
		if run != nil && ctx.Err() != nil {
			return &exitError{code: 1, err: fmt.Errorf("run %s is still %s: %v", id, run.Status, err)}
		}
		return err
	}
	switch run.Status {
	case store.StatusSucceeded:
		out := run.Output()
		if out == nil {
			out = json.RawMessage("null")
		}
		fmt.Fprintln(stdout, string(out))
		return nil
	case store.StatusWaiting:
		nodes := make([]string, 0, len(run.Waits))
		for n := range run.Waits {
			nodes = append(nodes, n)
		}
		sort.Strings(nodes)
		for _, n := range nodes {
			var w struct {
				Prompt string `json:"prompt"`
				Data   any    `json:"data"`
			}
			_ = json.Unmarshal(run.Waits[n], &w)
			data, _ := json.Marshal(w.Data)
			fmt.Fprintf(stderr, "run %s waits for approval at node %q: %s\n  data: %s\n", id, n, w.Prompt, data)
		}
		if embedded {
			fmt.Fprintln(stderr, "the embedded Redis goes away with this process: set REDIS_URL to resume a run later")
		} else {
			fmt.Fprintf(stderr, "resume with: sluice resume %s %s --node %s --input '{\"decision\": \"approve\"}'\n", flowFile, id, nodes[0])
		}
		fmt.Fprintln(stdout, `{"run": "`+id+`", "status": "waiting"}`)
		return &exitError{code: 3}
	default:
		where := ""
		if run.ErrorNode != "" {
			where = fmt.Sprintf(" at node %q", run.ErrorNode)
		}
		return &exitError{code: 1, err: fmt.Errorf("run %s %s%s: %s", id, run.Status, where, run.Error)}
	}
}

// readInput reads --input: JSON text, @FILE, or - for stdin.
func readInput(s string) (json.RawMessage, error) {
	var b []byte
	var err error
	switch {
	case s == "-":
		b, err = io.ReadAll(os.Stdin)
	case strings.HasPrefix(s, "@"):
		b, err = os.ReadFile(s[1:])
	default:
		b = []byte(s)
	}
	if err != nil {
		return nil, fmt.Errorf("--input: %w", err)
	}
	if !json.Valid(b) {
		return nil, fmt.Errorf("--input is not valid JSON")
	}
	return b, nil
}

func cmdWorker(ctx context.Context, args []string, _, stderr io.Writer) error {
	fs := flag.NewFlagSet("worker", flag.ContinueOnError)
	fs.SetOutput(stderr)
	redisURL := fs.String("redis", envOr("REDIS_URL", ""), "Redis URL (required; env REDIS_URL)")
	grace := fs.Duration("grace", 10*time.Second, "how long in-flight steps may finish after SIGTERM")
	metricsAddr := fs.String("metrics-addr", envOr("SLUICE_METRICS_ADDR", ""), "serve /metrics, /healthz and /readyz on this address, e.g. :9090 (env SLUICE_METRICS_ADDR); empty: none")
	nodesFlag := fs.String("nodes", envOr("SLUICE_NODES", ""), "serve only these node ids, comma-separated (a worker pool; env SLUICE_NODES): other processes serve the rest; a listed node a flow lacks is ignored for that flow")
	partitions := addPartitionsFlag(fs)
	dispatch := fs.Bool("dispatch", true, "also deliver the flows' result webhooks (several workers may: each result is delivered once per webhook, at least once)")
	schedule := fs.Bool("schedule", true, "also start the runs of the flows' schedules (several workers may: each tick runs once)")
	logLevel := fs.String("log-level", envOr("SLUICE_LOG_LEVEL", "info"), "debug, info, warn or error")
	workspace := fs.String("workspace", envOr("SLUICE_WORKSPACE", ""), "the workspace the flow files belong to (docs/teams.md; env SLUICE_WORKSPACE); empty: the default workspace, or the workspace a file's id names")
	gitRef := fs.String("git-ref", envOr("SLUICE_GIT_REF", ""), "read the flow files as they are at this git ref (a branch, tag or commit) of the repository they are in, not from the disk (env SLUICE_GIT_REF)")
	cf := addComponentFlags(fs)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "Usage: sluice worker [flags] FLOW.json...\n\nRuns headless workers for the flows until SIGTERM or SIGINT. Start as many as you\n"+
			"need, on any hosts: they share the work through Redis.\n\nFlags:")
		fs.PrintDefaults()
	}
	files, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if len(files) == 0 {
		fs.Usage()
		return &exitError{code: 2, err: errors.New("worker takes one or more flow files")}
	}
	if *redisURL == "" {
		return &exitError{code: 2, err: errors.New("worker needs a shared Redis: set REDIS_URL or --redis (the embedded Redis lives only in one process)")}
	}
	if err := checkPartitions(*partitions); err != nil {
		return err
	}
	poolNodes := splitList(*nodesFlag)
	log, err := newLogger(stderr, *logLevel)
	if err != nil {
		return err
	}
	if *dispatch && *metricsAddr == "" {
		// Runs are counted by the process whose dispatcher takes their results; one
		// without a metrics port takes its share and counts it nowhere.
		log.Warn("this worker dispatches results without --metrics-addr: the runs it takes are missing from sluice_runs_finished_total and sluice_run_duration_seconds; set --metrics-addr or --dispatch=false")
	}
	// Each reader holds a connection for its whole block time.
	rdb, err := store.Open(ctx, store.Options{URL: *redisURL, PoolSize: 32 + 2*len(files)})
	if err != nil {
		return err
	}
	defer rdb.Close()
	env, err := cf.env(log)
	if err != nil {
		return err
	}
	defer env.Close()
	stopTracing, err := startTracing(ctx, log)
	if err != nil {
		return err
	}
	defer stopTracing()
	var metrics *server.Metrics
	opts := engine.Options{Logger: log, Partitions: *partitions}
	if *metricsAddr != "" {
		metrics = server.NewMetrics()
		metrics.SetCacheStats(func() (int64, int64) { st := env.CacheStats(); return st.Hits, st.Misses })
		env.Observer, opts.Observer = metrics, metrics
	}
	e := newEngine(rdb, env, opts)
	var ids []string
	unknown := map[string]bool{}
	for _, n := range poolNodes {
		unknown[n] = true
	}
	if *workspace != "" && !teams.ValidWorkspace(*workspace) {
		return &exitError{code: 2, err: fmt.Errorf("--workspace %q: use lower-case letters, digits, '-' and '_'", *workspace)}
	}
	libDir := filepath.Dir(files[0]) // subflows are found next to the first flow file
	for i, path := range files {
		var plan *flows.Plan
		if *gitRef != "" {
			data, dir, err := readAtRef(ctx, path, *gitRef, i == 0, log)
			if err != nil {
				return err
			}
			if dir != "" {
				defer os.RemoveAll(dir)
				libDir = dir
			}
			plan, err = compileFile(e, path+"@"+*gitRef, *workspace, data, stderr)
			if err != nil {
				return err
			}
		} else if plan, err = loadPlanIn(e, path, *workspace, stderr); err != nil {
			return err
		}
		for n := range plan.Nodes {
			delete(unknown, n)
		}
		if err := e.Publish(ctx, plan); err != nil {
			return err
		}
		ids = append(ids, plan.Flow)
		log.Info("serving flow", "flow", plan.Flow, "version", plan.Version[:12], "file", path)
	}
	if len(unknown) > 0 {
		return &exitError{code: 2, err: fmt.Errorf("--nodes: no flow given has node(s) %s", strings.Join(sortedSet(unknown), ", "))}
	}
	if len(poolNodes) > 0 {
		log.Info("serving only some nodes (a worker pool)", "nodes", poolNodes)
	}
	start := time.Now()
	w := e.NewWorker(engine.WorkerOptions{Flows: ids, Grace: *grace, Nodes: poolNodes})
	// Subflows are found next to the first flow file (at the ref); the worker serves them too.
	attach(ctx, env, rdb, e, &store.Library{Dir: libDir}, w)
	var served chan error
	if metrics != nil {
		metrics.SetStateCache(e.StateCacheStats)
		metrics.WatchQueues(rdb)
		ln, err := listenMetrics(*metricsAddr)
		if err != nil {
			return err
		}
		served = make(chan error, 1)
		go func() { served <- serveMetrics(ctx, ln, metrics, rdb, ids, log) }()
	}
	var dispatched chan error
	if *dispatch {
		dispatched = make(chan error, 1)
		d := newDispatcher(e, env, func(context.Context) ([]string, error) { return ids, nil }, metrics)
		go func() { dispatched <- d.Run(ctx) }()
	}
	var scheduled chan error
	if *schedule {
		scheduled = make(chan error, 1)
		so := engine.SchedulerOptions{Flows: func(context.Context) ([]string, error) { return ids, nil }}
		if metrics != nil {
			so.Started = metrics.ScheduleRun // as serve's: sluice_schedule_runs_total
		}
		sch := e.NewScheduler(so)
		go func() { scheduled <- sch.Run(ctx) }()
	}
	err = w.Run(ctx)
	if dispatched != nil {
		<-dispatched
	}
	if served != nil {
		if serr := <-served; err == nil {
			err = serr
		}
	}
	if scheduled != nil {
		<-scheduled
	}
	log.Info("worker stopped", "after", time.Since(start).Round(time.Millisecond))
	return err
}

func cmdResume(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("resume", flag.ContinueOnError)
	fs.SetOutput(stderr)
	input := fs.String("input", `{"decision": "approve"}`, `the decision as JSON: {"decision": "approve"|"reject", "value": {...}, "comment": "..."} (@FILE, - for stdin)`)
	node := fs.String("node", "", "the approval node (needed only when the run waits at several)")
	redisURL := fs.String("redis", envOr("REDIS_URL", ""), "Redis URL (required; env REDIS_URL)")
	logLevel := fs.String("log-level", envOr("SLUICE_LOG_LEVEL", "warn"), "debug, info, warn or error")
	cf := addComponentFlags(fs)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "Usage: sluice resume [flags] FLOW.json RUN\n\nAnswers the approval a run waits at, then works on the run like 'sluice run' until it\n"+
			"finishes or waits again, and prints its output.\n\nFlags:")
		fs.PrintDefaults()
	}
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 2 {
		fs.Usage()
		return &exitError{code: 2, err: errors.New("resume takes a flow file and a run id")}
	}
	if *redisURL == "" {
		return &exitError{code: 2, err: errors.New("resume needs the Redis the run lives in: set REDIS_URL or --redis")}
	}
	decision, err := readInput(*input)
	if err != nil {
		return &exitError{code: 2, err: err}
	}
	log, err := newLogger(stderr, *logLevel)
	if err != nil {
		return err
	}
	rdb, err := store.Open(ctx, store.Options{URL: *redisURL})
	if err != nil {
		return err
	}
	defer rdb.Close()
	env, err := cf.env(log)
	if err != nil {
		return err
	}
	defer env.Close()
	stopTracing, err := startTracing(ctx, log)
	if err != nil {
		return err
	}
	defer stopTracing()
	e := newEngine(rdb, env, engine.Options{Logger: log, Partitions: envPartitions()})
	plan, err := loadPlan(e, pos[0], stderr)
	if err != nil {
		return err
	}
	// Subflows are found next to the flow file, as for run.
	attach(ctx, env, rdb, e, &store.Library{Dir: filepath.Dir(pos[0])})
	if err := e.Resume(ctx, plan.Flow, pos[1], *node, decision); err != nil {
		return err
	}
	return runUntilSettled(ctx, e, plan, pos[0], pos[1], false, stdout, stderr)
}

// sortedSet returns a set's members, sorted.
func sortedSet(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// readAtRef reads a flow file as git ref has it, in the repository the file's folder is
// in. With snapshot, it also writes the folder's flows at the ref into a new directory
// (subflows are looked for there), returned for the caller to remove.
func readAtRef(_ context.Context, path, ref string, snapshot bool, log *slog.Logger) (data []byte, dir string, err error) {
	repo, err := store.OpenGitRepo(filepath.Dir(path))
	if err != nil {
		return nil, "", &exitError{code: 2, err: err}
	}
	commit, err := repo.Resolve(ref)
	if err != nil {
		return nil, "", &exitError{code: 2, err: err}
	}
	if data, err = repo.ReadAt(commit, filepath.Base(path)); err != nil {
		return nil, "", &exitError{code: 2, err: err}
	}
	log.Info("git: reading the flow at a ref", "file", path, "ref", ref, "commit", commit[:12])
	if snapshot {
		if dir, err = os.MkdirTemp("", "sluice-flows-"); err != nil {
			return nil, "", err
		}
		if err := repo.Snapshot(commit, dir); err != nil {
			os.RemoveAll(dir)
			return nil, "", err
		}
	}
	return data, dir, nil
}
