package engine

// Bulk replay: many runs replayed as one job, rate limited, cancellable, with progress,
// resumed by whichever process takes its lease after a crash or restart, ending with a
// report of each run's comparison with its replay. Each replay's run id is derived from
// the job and the original, so a run is never replayed twice by one job, whatever
// crashes in between (starting a run whose id exists is refused).

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/sluicehq/sluice/flows"
	"github.com/sluicehq/sluice/store"
)

// BulkQuery chooses runs of a flow. Empty fields choose everything.
type BulkQuery struct {
	Status  string    `json:"status,omitempty"`
	Version string    `json:"version,omitempty"` // the runs' version: a hash or a prefix
	Node    string    `json:"node,omitempty"`    // a failed run's failed node, a waiting run's approval
	Error   string    `json:"error,omitempty"`   // text in the run's error (case-insensitive)
	Trigger string    `json:"trigger,omitempty"` // what started it ("schedule" for any schedule)
	Since   time.Time `json:"since,omitzero"`
	Until   time.Time `json:"until,omitzero"`
}

// BulkSpec is what a bulk replay job does.
type BulkSpec struct {
	Query BulkQuery `json:"query"`
	// Target is the version the replays run on (a full hash); "" each run's own.
	Target string `json:"target,omitempty"`
	// Environment names the environment whose version Target is, when the job was made
	// on "current" through one: each replay records it, as a single replay does.
	Environment string `json:"environment,omitempty"`
	Reuse       bool   `json:"reuse,omitempty"`
	// SameKeys sends each original's idempotency keys with its replay's calls.
	SameKeys bool `json:"same_keys,omitempty"`
	// Rate is how many replays start per second at most (default 10); Concurrency how
	// many run at once (default 8).
	Rate        float64 `json:"rate,omitempty"`
	Concurrency int     `json:"concurrency,omitempty"`
	By          string  `json:"by,omitempty"`
}

// BulkEstimate is what a bulk replay would replay, before it is made.
type BulkEstimate struct {
	Runs int `json:"runs"`
	// Tokens and CostUSD are what the chosen runs spent on models: what replaying them
	// all without reuse costs again, about.
	Tokens  int64    `json:"tokens"`
	CostUSD float64  `json:"cost_usd"`
	Sample  []string `json:"sample"` // the first few run ids
}

// BulkResult is what replaying one run gave.
type BulkResult struct {
	Run     string `json:"run"`
	Replay  string `json:"replay,omitempty"`
	Outcome string `json:"outcome"`          // done (the replay finished), failed (it failed) or skipped
	Status  string `json:"status,omitempty"` // the replay's status
	Summary string `json:"summary,omitempty"`
	Reason  string `json:"reason,omitempty"` // why it was skipped
}

// BulkReport is a job with what each of its runs gave so far.
type BulkReport struct {
	*store.BulkJob
	Results []BulkResult `json:"results"`
}

const maxBulkRuns = 10000

// SelectRuns returns the runs of flow q chooses, newest first (at most 10,000).
func (e *Engine) SelectRuns(ctx context.Context, flow string, q BulkQuery) ([]*store.Run, error) {
	var out []*store.Run
	lq := ListQuery{Status: q.Status, Version: q.Version, Trigger: q.Trigger, Since: q.Since, Until: q.Until, Limit: 500}
	for len(out) < maxBulkRuns {
		runs, _, err := e.List(ctx, flow, lq)
		if err != nil {
			return nil, err
		}
		for _, r := range runs {
			if q.matches(r) {
				out = append(out, r)
			}
		}
		if len(runs) < lq.Limit {
			break
		}
		lq.Offset += len(runs)
	}
	if len(out) > maxBulkRuns {
		out = out[:maxBulkRuns]
	}
	return out, nil
}

func (q BulkQuery) matches(r *store.Run) bool {
	if q.Node != "" && r.ErrorNode != q.Node && r.Waits[q.Node] == nil {
		return false
	}
	if q.Error != "" && !strings.Contains(strings.ToLower(r.Error), strings.ToLower(q.Error)) {
		return false
	}
	return r.Trigger != "replay" || q.Trigger == "replay" // a replay is not replayed again unless asked
}

// EstimateBulk says how many runs q chooses and what they spent.
func (e *Engine) EstimateBulk(ctx context.Context, flow string, q BulkQuery) (*BulkEstimate, []*store.Run, error) {
	runs, err := e.SelectRuns(ctx, flow, q)
	if err != nil {
		return nil, nil, err
	}
	est := &BulkEstimate{Runs: len(runs), Sample: []string{}}
	for i, r := range runs {
		if i < 5 {
			est.Sample = append(est.Sample, r.ID)
		}
		if sp, err := e.rdb.RunSpend(ctx, flow, r.ID); err == nil && sp.Tokens > 0 {
			est.Tokens += sp.Tokens
			est.CostUSD += sp.USD
		} else {
			est.Tokens += r.Usage.InputTokens + r.Usage.OutputTokens
		}
	}
	return est, runs, nil
}

// CreateBulk makes a bulk replay job of the runs spec.Query chooses (fixed now: runs
// that come later are not in it) and returns its id. target is the version the replays
// run on (nil: each run's own); it is stored so that any process can load it.
func (e *Engine) CreateBulk(ctx context.Context, flow string, spec BulkSpec, target *flows.Plan) (string, *BulkEstimate, error) {
	est, runs, err := e.EstimateBulk(ctx, flow, spec.Query)
	if err != nil {
		return "", nil, err
	}
	if target != nil {
		if err := e.StoreVersion(ctx, target); err != nil {
			return "", nil, err
		}
		spec.Target = target.Version
	}
	if spec.Rate <= 0 {
		spec.Rate = 10
	}
	if spec.Concurrency <= 0 {
		spec.Concurrency = 8
	}
	ids := make([]string, len(runs))
	for i, r := range runs {
		ids[i] = r.ID
	}
	slices.Reverse(ids) // oldest first
	job := "bj" + NewRunID()[1:]
	b, _ := json.Marshal(spec)
	if err := e.rdb.CreateBulkJob(ctx, flow, job, b, ids); err != nil {
		return "", nil, err
	}
	return job, est, nil
}

// BulkReport returns a job and what each of its runs gave, in the job's order.
func (e *Engine) BulkReport(ctx context.Context, flow, job string) (*BulkReport, error) {
	j, err := e.rdb.GetBulkJob(ctx, flow, job)
	if err != nil {
		return nil, err
	}
	runs, err := e.rdb.BulkJobRuns(ctx, flow, job)
	if err != nil {
		return nil, err
	}
	res, err := e.rdb.BulkJobResults(ctx, flow, job)
	if err != nil {
		return nil, err
	}
	rep := &BulkReport{BulkJob: j, Results: []BulkResult{}}
	for _, r := range runs {
		if raw, ok := res[r]; ok {
			var br BulkResult
			if json.Unmarshal(raw, &br) == nil {
				rep.Results = append(rep.Results, br)
			}
		}
	}
	return rep, nil
}

// CancelBulk stops a job: no further run is replayed (replays started go on).
func (e *Engine) CancelBulk(ctx context.Context, flow, job string) error {
	return e.rdb.CancelBulkJob(ctx, flow, job)
}

// bulkRunID is the replay of run by job: the same whichever process makes it.
func bulkRunID(job, run string) string {
	h := sha256.Sum256([]byte(job + "\x00" + run))
	return "rp" + hex.EncodeToString(h[:12])
}

const bulkLease = 15 * time.Second

// RunBulk works on a job until it is done, cancelled or ctx ends; false when another
// process holds its lease (or it is not running). A process that dies leaves the job to
// whichever takes the lease next: runs with a result are not replayed again, and a
// replay started but not recorded is found by its id.
func (e *Engine) RunBulk(ctx context.Context, flow, job string) (bool, error) {
	token := rand.Text()
	got, err := e.rdb.TakeBulkLease(ctx, flow, job, token, bulkLease)
	if err != nil || got != 1 {
		return false, err
	}
	parent := ctx
	ctx, cancel := context.WithCancel(ctx)
	renewed := make(chan struct{})
	defer func() {
		cancel()
		<-renewed
		if parent.Err() != nil { // stopping: leave the job to the next taker at once
			_ = e.rdb.ReleaseBulkLease(context.WithoutCancel(parent), flow, job, token)
		}
	}()
	go func() { // keep the lease while working; lose it, stop
		defer close(renewed)
		t := time.NewTicker(bulkLease / 3)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				if n, err := e.rdb.TakeBulkLease(ctx, flow, job, token, bulkLease); err == nil && n != 1 {
					cancel()
					return
				}
			}
		}
	}()
	j, err := e.rdb.GetBulkJob(ctx, flow, job)
	if err != nil {
		return true, err
	}
	var spec BulkSpec
	if err := json.Unmarshal(j.Spec, &spec); err != nil {
		return true, fmt.Errorf("bulk job %s: %w", job, err)
	}
	var target *flows.Plan
	if spec.Target != "" {
		if target, err = e.Plan(ctx, flow, spec.Target); err != nil {
			_ = e.rdb.SetBulkStatus(context.WithoutCancel(ctx), flow, job, store.JobDone, "the target version is gone: "+err.Error())
			return true, err
		}
	}
	runs, err := e.rdb.BulkJobRuns(ctx, flow, job)
	if err != nil {
		return true, err
	}
	done, err := e.rdb.BulkJobResults(ctx, flow, job)
	if err != nil {
		return true, err
	}
	every := time.Duration(float64(time.Second) / max(spec.Rate, 0.01))
	tick := time.NewTicker(every)
	defer tick.Stop()
	sem := make(chan struct{}, max(spec.Concurrency, 1))
	var wg sync.WaitGroup
	stopped := false
	for _, run := range runs {
		if _, ok := done[run]; ok {
			continue
		}
		if st, err := e.rdb.BulkJobStatus(ctx, flow, job); err != nil || st != store.JobRunning {
			stopped = true
			break
		}
		select {
		case <-ctx.Done():
		case <-tick.C:
		}
		select {
		case <-ctx.Done():
		case sem <- struct{}{}:
		}
		if ctx.Err() != nil {
			stopped = true
			break
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			res := e.replayOne(ctx, flow, job, run, spec, target)
			if ctx.Err() != nil && res.Outcome != "skipped" && res.Status == "" {
				return // stopping: the next taker finds the replay by its id
			}
			b, _ := json.Marshal(res)
			if _, err := e.rdb.RecordBulkResult(context.WithoutCancel(ctx), flow, job, run, b, res.Outcome); err != nil {
				e.log.Warn("bulk replay: cannot record a result", "flow", flow, "job", job, "run", run, "error", err)
			}
		}()
	}
	wg.Wait()
	if stopped || ctx.Err() != nil {
		return true, ctx.Err()
	}
	return true, e.rdb.SetBulkStatus(context.WithoutCancel(ctx), flow, job, store.JobDone, "")
}

// replayOne replays one run of a job (or finds the replay an earlier taker started),
// waits for it to settle and compares it with the original.
func (e *Engine) replayOne(ctx context.Context, flow, job, run string, spec BulkSpec, target *flows.Plan) BulkResult {
	id := bulkRunID(job, run)
	res := BulkResult{Run: run, Replay: id}
	_, err := e.Replay(ctx, flow, run, ReplayOptions{Target: target, Reuse: spec.Reuse, RunID: id, SameKeys: spec.SameKeys, Environment: spec.Environment, By: spec.By})
	if err != nil {
		if _, gerr := e.Get(ctx, flow, id); gerr != nil { // not started before either
			if ctx.Err() != nil {
				return BulkResult{Run: run}
			}
			return BulkResult{Run: run, Outcome: "skipped", Reason: err.Error()}
		}
		// Started by an earlier taker, which may have stopped before linking it.
		if ref, ferr := e.rdb.FindRun(ctx, flow, run); ferr == nil {
			_ = e.rdb.LinkReplay(ctx, ref, id)
		}
	}
	wctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	r, err := e.Wait(wctx, flow, id)
	cancel()
	if err != nil {
		if ctx.Err() != nil {
			return BulkResult{Run: run}
		}
		if errors.Is(err, context.DeadlineExceeded) && r != nil {
			res.Outcome, res.Status, res.Reason = "skipped", r.Status, "the replay did not finish in 10 minutes; it goes on"
			return res
		}
		return BulkResult{Run: run, Replay: id, Outcome: "skipped", Reason: err.Error()}
	}
	res.Status = r.Status
	res.Outcome = "done"
	if r.Status == store.StatusFailed {
		res.Outcome = "failed"
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second) // a short read: finish it while stopping
	defer cancel()
	if c, err := e.Compare(cctx, flow, run, id); err == nil {
		res.Summary = c.Summary
	}
	return res
}

// BulkRunnerOptions say which flows' jobs a process works on.
type BulkRunnerOptions struct {
	Flows func(context.Context) ([]string, error)
	Every time.Duration // how often it looks for jobs to take over (default 2s)
}

// BulkRunner works on the running bulk replay jobs of some flows, taking over those a
// stopped process left.
type BulkRunner struct {
	e    *Engine
	opts BulkRunnerOptions
	mu   sync.Mutex
	busy map[string]bool
}

// NewBulkRunner returns a runner of bulk replay jobs.
func (e *Engine) NewBulkRunner(o BulkRunnerOptions) *BulkRunner {
	if o.Every <= 0 {
		o.Every = 2 * time.Second
	}
	return &BulkRunner{e: e, opts: o, busy: map[string]bool{}}
}

// Run looks for jobs to work on until ctx ends, then waits for the jobs it works on.
func (b *BulkRunner) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	defer wg.Wait()
	t := time.NewTicker(b.opts.Every)
	defer t.Stop()
	for {
		b.scan(ctx, &wg)
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

func (b *BulkRunner) scan(ctx context.Context, wg *sync.WaitGroup) {
	ids, err := b.opts.Flows(ctx)
	if err != nil {
		return
	}
	for _, flow := range ids {
		jobs, err := b.e.rdb.BulkJobs(ctx, flow, 50)
		if err != nil {
			continue
		}
		for _, j := range jobs {
			key := flow + "/" + j.ID
			b.mu.Lock()
			skip := j.Status != store.JobRunning || b.busy[key]
			if !skip {
				b.busy[key] = true
			}
			b.mu.Unlock()
			if skip {
				continue
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer func() { b.mu.Lock(); delete(b.busy, key); b.mu.Unlock() }()
				if _, err := b.e.RunBulk(ctx, flow, j.ID); err != nil && ctx.Err() == nil {
					b.e.log.Warn("bulk replay job stopped", "flow", flow, "job", j.ID, "error", err)
				}
			}()
		}
	}
}
