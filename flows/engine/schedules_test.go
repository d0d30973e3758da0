package engine_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"regexp"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sluicehq/sluice/flows"
	"github.com/sluicehq/sluice/flows/engine"
	"github.com/sluicehq/sluice/flows/nodes/nodetest"
	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/storetest"
)

// schedulerMain lets the test binary act as a scheduler process for the flows named in
// SLUICE_TEST_SCHEDULER. With SLUICE_TEST_SCHEDULER_DIE set it dies in the middle of its
// first due tick: after deciding to run it, before creating its run.
func schedulerMain(flowIDs []string) int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	r, err := store.Open(ctx, store.Options{URL: os.Getenv("REDIS_URL")})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer r.Close()
	e := engine.New(r, nodetest.Registry(r.Client), engine.Options{Logger: log})
	o := engine.SchedulerOptions{Flows: func(context.Context) ([]string, error) { return flowIDs, nil }, Poll: 100 * time.Millisecond}
	if os.Getenv("SLUICE_TEST_SCHEDULER_DIE") != "" {
		o.BeforeStart = func(flow string, _ int, tick time.Time) {
			log.Info("dying mid-tick", "flow", flow, "tick", tick.UnixMilli())
			os.Exit(7)
		}
	}
	log.Info("scheduler ready", "pid", os.Getpid())
	if err := e.NewScheduler(o).Run(ctx); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

func startSchedulerChild(t *testing.T, die bool, flows ...string) *child {
	t.Helper()
	c := &child{}
	c.cmd = exec.Command(os.Args[0], "-test.run=^$")
	c.cmd.Env = append(os.Environ(), "SLUICE_TEST_SCHEDULER="+strings.Join(flows, ","), "REDIS_URL="+storetest.URL())
	if die {
		c.cmd.Env = append(c.cmd.Env, "SLUICE_TEST_SCHEDULER_DIE=1")
	}
	c.cmd.Stderr = c
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the scheduler process to start", 10*time.Second, func() bool { return strings.Contains(c.log(), "scheduler ready") })
	t.Cleanup(func() {
		c.cmd.Process.Kill()
		c.cmd.Wait()
	})
	return c
}

// scheduler runs an in-process scheduler with an engine (and so consumers) of its own
// until stop is called or the test ends.
func (v *env) scheduler(p *flows.Plan, o engine.SchedulerOptions) (stop func()) {
	v.t.Helper()
	o.Flows = func(context.Context) ([]string, error) { return []string{p.Flow}, nil }
	if o.Poll == 0 {
		o.Poll = 100 * time.Millisecond
	}
	e := engine.New(v.r, v.reg, engine.Options{Logger: testLogger(v.t)})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = e.NewScheduler(o).Run(ctx) }()
	stopped := false
	stop = func() {
		if !stopped {
			stopped = true
			cancel()
			<-done
		}
	}
	v.t.Cleanup(stop)
	return stop
}

// runsByTick lists the flow's runs grouped by the tick they are for.
func (v *env) runsByTick(p *flows.Plan) map[int64][]*store.Run {
	v.t.Helper()
	runs, _, err := v.e.List(context.Background(), p.Flow, engine.ListQuery{Limit: 500})
	if err != nil {
		v.t.Fatal(err)
	}
	out := map[int64][]*store.Run{}
	for _, r := range runs {
		if r.Tick == nil {
			v.t.Errorf("run %s has no tick (trigger %q)", r.ID, r.Trigger)
			continue
		}
		out[r.Tick.UnixMilli()] = append(out[r.Tick.UnixMilli()], r)
	}
	return out
}

const everySecond = `{"sluice": 1, "id": "FLOW",
 "settings": {"schedules": [{"cron": "@every 1s", "input": {"from": "schedule"}}]},
 "nodes": [{"id": "in", "type": "input"}, {"id": "out", "type": "output", "params": {"value": ".from"}}],
 "edges": [{"from": "in", "to": "out"}]}`

func TestScheduleStartsExactlyOneRunPerTickAcrossProcesses(t *testing.T) {
	r := storetest.Real(t)
	v := newEnv(t, r)
	p := v.compile(everySecond)
	v.work(p)
	startSchedulerChild(t, false, p.Flow)
	stopA := v.scheduler(p, engine.SchedulerOptions{})
	stopB := v.scheduler(p, engine.SchedulerOptions{})
	const ticks = 6
	waitFor(t, fmt.Sprintf("runs of %d ticks", ticks), 60*time.Second, func() bool { return len(v.runsByTick(p)) >= ticks })
	stopA()
	stopB()
	// The child is still scheduling: take the ticks up to now, then check each of them.
	byTick := v.runsByTick(p)
	var ts []int64
	for tick := range byTick {
		ts = append(ts, tick)
	}
	sort.Slice(ts, func(i, j int) bool { return ts[i] < ts[j] })
	for i, tick := range ts {
		if i > 0 && tick-ts[i-1] != 1000 {
			t.Errorf("no run for the tick(s) between %d and %d", ts[i-1], tick)
		}
		runs := byTick[tick]
		if len(runs) != 1 {
			t.Errorf("tick %d has %d runs, want exactly 1", tick, len(runs))
		}
		for _, run := range runs {
			if run.Trigger != "schedule:0" {
				t.Errorf("run %s: trigger %q, want schedule:0", run.ID, run.Trigger)
			}
			if got := v.wait(p, run.ID); got.Status != store.StatusSucceeded || string(got.Output()) != `"schedule"` {
				t.Errorf("run %s: %s with output %s, want succeeded with the schedule's input", run.ID, got.Status, got.Output())
			}
		}
	}
}

var diedAt = regexp.MustCompile(`msg="dying mid-tick" flow=\S+ tick=(\d+)`)

func TestScheduleTickStillRunsOnceWhenItsSchedulerDiesMidTick(t *testing.T) {
	r := storetest.Real(t)
	v := newEnv(t, r)
	p := v.compile(strings.Replace(everySecond, "@every 1s", "@every 2s", 1))
	v.work(p)
	dying := startSchedulerChild(t, true, p.Flow)
	died := make(chan struct{})
	go func() { dying.cmd.Wait(); close(died) }()
	// The other scheduler runs alongside; it creates a tick's run only once the dying
	// process is gone, so the dying process is always first to the tick.
	v.scheduler(p, engine.SchedulerOptions{BeforeStart: func(string, int, time.Time) { <-died }})
	select {
	case <-died:
	case <-time.After(30 * time.Second):
		t.Fatalf("the scheduler process did not reach a tick:\n%s", dying.log())
	}
	if code := dying.cmd.ProcessState.ExitCode(); code != 7 {
		t.Fatalf("the scheduler process exited with %d, want 7 (died mid-tick):\n%s", code, dying.log())
	}
	m := diedAt.FindStringSubmatch(dying.log())
	if m == nil {
		t.Fatalf("the dying process did not log its tick:\n%s", dying.log())
	}
	var tick int64
	fmt.Sscan(m[1], &tick)
	waitFor(t, "the tick's run", 30*time.Second, func() bool { return len(v.runsByTick(p)[tick]) > 0 })
	runs := v.runsByTick(p)[tick]
	if len(runs) != 1 {
		t.Fatalf("tick %d has %d runs, want exactly 1", tick, len(runs))
	}
	if got := v.wait(p, runs[0].ID); got.Status != store.StatusSucceeded {
		t.Errorf("the tick's run is %s, want succeeded", got.Status)
	}
}

func TestPausedScheduleLetsTicksPassAndResumeDoesNotCatchUp(t *testing.T) {
	storetest.Each(t, func(t *testing.T, r *store.Redis) {
		ctx := context.Background()
		v := newEnv(t, r)
		p := v.compile(everySecond)
		if err := v.e.PauseSchedule(ctx, p.Flow, 0); err != nil {
			t.Fatal(err)
		}
		if err := v.e.PauseSchedule(ctx, p.Flow, 1); flows.ErrorCode(err) != flows.NotFound {
			t.Errorf("pausing a schedule the flow does not have: %v, want not found", err)
		}
		view := func() engine.ScheduleView {
			t.Helper()
			_, views, err := v.e.Schedules(ctx, p.Flow, 3, 5)
			if err != nil {
				t.Fatal(err)
			}
			return views[0]
		}
		v.scheduler(p, engine.SchedulerOptions{})
		var first time.Time
		waitFor(t, "a tick to pass", 30*time.Second, func() bool {
			lt := view().LastTick
			if lt != nil && first.IsZero() && lt.After(time.Now().Add(-time.Minute)) {
				first = *lt
			}
			return !first.IsZero()
		})
		waitFor(t, "two more ticks to pass", 30*time.Second, func() bool { return !view().LastTick.Before(first.Add(2 * time.Second)) })
		if vw := view(); !vw.Paused || len(vw.Next) != 0 {
			t.Errorf("schedule view %+v: want paused with no next fire times", vw)
		}
		if runs := v.runsByTick(p); len(runs) != 0 {
			t.Fatalf("a paused schedule started runs for %d ticks", len(runs))
		}
		resumed := time.Now()
		if err := v.e.ResumeSchedule(ctx, p.Flow, 0); err != nil {
			t.Fatal(err)
		}
		if vw := view(); vw.Paused || len(vw.Next) != 3 {
			t.Errorf("after resume: %+v, want not paused with 3 next fire times", vw)
		}
		waitFor(t, "a run after the resume", 30*time.Second, func() bool { return len(v.runsByTick(p)) > 0 })
		for tick := range v.runsByTick(p) {
			if tick <= resumed.UnixMilli() {
				t.Errorf("resuming ran tick %d, which passed while the schedule was paused", tick)
			}
		}
	})
}

func TestMissedTicksRunOnceOnStartUp(t *testing.T) {
	storetest.Each(t, func(t *testing.T, r *store.Redis) {
		ctx := context.Background()
		v := newEnv(t, r)
		p := v.compile(strings.Replace(everySecond, "@every 1s", "@every 1h", 1))
		key := p.Settings.Schedules[0].Key()
		// Every scheduler was down for the last three hourly ticks.
		now := time.Now()
		if err := r.SeeSchedule(ctx, p.Flow, key, now.Add(-3*time.Hour-time.Minute)); err != nil {
			t.Fatal(err)
		}
		s := engine.New(r, v.reg, engine.Options{Logger: testLogger(t)}).NewScheduler(engine.SchedulerOptions{
			Flows: func(context.Context) ([]string, error) { return []string{p.Flow}, nil }})
		for range 2 { // a second pass (or process) starts nothing more
			if _, err := s.Tick(ctx); err != nil {
				t.Fatal(err)
			}
		}
		runs := v.runsByTick(p)
		latest := now.Truncate(time.Hour)
		if len(runs) != 1 || len(runs[latest.UnixMilli()]) != 1 {
			t.Fatalf("runs by tick %v, want one run, of the latest missed tick %s", runs, latest)
		}
		if id := runs[latest.UnixMilli()][0].ID; id != engine.ScheduleRunID(key, latest) {
			t.Errorf("run id %s, want %s", id, engine.ScheduleRunID(key, latest))
		}
	})
}

// A scheduler that wakes late (a stalled process, a slow Redis) still runs every tick
// due in the last LateTickGrace, each once and in order; ticks older than that are
// dropped, as after an outage.
func TestTicksOfAStalledSchedulerStillRunWithinTheGrace(t *testing.T) {
	storetest.Each(t, func(t *testing.T, r *store.Redis) {
		ctx := context.Background()
		for _, c := range []struct {
			name  string
			stall time.Duration
		}{{"three seconds", 3*time.Second + 500*time.Millisecond}, {"an hour", time.Hour}} {
			t.Run(c.name, func(t *testing.T) {
				v := newEnv(t, r)
				p := v.compile(everySecond)
				key := p.Settings.Schedules[0].Key()
				before := time.Now()
				if err := r.SeeSchedule(ctx, p.Flow, key, before.Add(-c.stall)); err != nil {
					t.Fatal(err)
				}
				s := engine.New(r, v.reg, engine.Options{Logger: testLogger(t)}).NewScheduler(engine.SchedulerOptions{
					Flows: func(context.Context) ([]string, error) { return []string{p.Flow}, nil }})
				if _, err := s.Tick(ctx); err != nil {
					t.Fatal(err)
				}
				after := time.Now()
				runs := v.runsByTick(p)
				var ticks []int64
				for tick, rs := range runs {
					ticks = append(ticks, tick)
					if len(rs) != 1 {
						t.Errorf("tick %d has %d runs, want 1", tick, len(rs))
					}
				}
				sort.Slice(ticks, func(i, j int) bool { return ticks[i] < ticks[j] })
				// The oldest tick that may run: after the marker, and late by less than
				// the grace when the scheduler looked (between before and after).
				oldest := max(before.Add(-c.stall).UnixMilli(), before.Add(-engine.LateTickGrace).UnixMilli())
				newest := after.UnixMilli() / 1000 * 1000
				if len(ticks) == 0 || ticks[0] > oldest+1000 || ticks[0] < oldest-1000 || ticks[len(ticks)-1] < before.UnixMilli()/1000*1000 || ticks[len(ticks)-1] > newest {
					t.Fatalf("ran ticks %v (before %d, after %d), want every tick from about %d to now", ticks, before.UnixMilli(), after.UnixMilli(), oldest)
				}
				for i := 1; i < len(ticks); i++ {
					if ticks[i]-ticks[i-1] != 1000 {
						t.Errorf("no run for the tick(s) between %d and %d", ticks[i-1], ticks[i])
					}
				}
				if n := len(ticks); n < 3 || n > int(engine.LateTickGrace/time.Second)+1 {
					t.Errorf("%d ticks ran, want 3 to %d", n, int(engine.LateTickGrace/time.Second)+1)
				}
			})
		}
	})
}

func TestScheduleViewListsTheRunsOfItsRecentTicksNewestFirst(t *testing.T) {
	storetest.Each(t, func(t *testing.T, r *store.Redis) {
		ctx := context.Background()
		v := newEnv(t, r)
		p := v.compile(everySecond)
		v.work(p)
		key := p.Settings.Schedules[0].Key()
		views := func(runsN int) engine.ScheduleView {
			t.Helper()
			_, views, err := v.e.Schedules(ctx, p.Flow, 3, runsN)
			if err != nil {
				t.Fatal(err)
			}
			return views[0]
		}
		if got := views(5).Runs; len(got) != 0 {
			t.Fatalf("before any tick the schedule lists %d runs", len(got))
		}
		stop := v.scheduler(p, engine.SchedulerOptions{})
		const ticks = 3
		waitFor(t, fmt.Sprintf("the runs of %d ticks in the schedule's view", ticks), 30*time.Second, func() bool { return len(views(5).Runs) >= ticks })
		stop()

		byTick := v.runsByTick(p)
		runs := views(20).Runs
		// Every tick's run is listed, up to the newest listed (stopping the scheduler may
		// cut off the note of a run it was starting just then).
		listed := map[string]bool{}
		for _, run := range runs {
			listed[run.ID] = true
		}
		for tick, tr := range byTick {
			if runs[0].Tick != nil && tick <= runs[0].Tick.UnixMilli() && !listed[tr[0].ID] {
				t.Errorf("the run %s of tick %d is not listed", tr[0].ID, tick)
			}
		}
		for i, run := range runs {
			if run.Tick == nil {
				t.Fatalf("listed run %s has no tick", run.ID)
			}
			if want := engine.ScheduleRunID(key, *run.Tick); run.ID != want || run.Trigger != "schedule:0" {
				t.Errorf("listed run %s (trigger %q), want %s started by schedule:0", run.ID, run.Trigger, want)
			}
			if len(byTick[run.Tick.UnixMilli()]) != 1 || byTick[run.Tick.UnixMilli()][0].ID != run.ID {
				t.Errorf("listed run %s is not the run of its tick %s", run.ID, run.Tick)
			}
			if i > 0 && !run.Tick.Before(*runs[i-1].Tick) {
				t.Errorf("runs not newest first: %s listed after %s", run.Tick, runs[i-1].Tick)
			}
			if got := v.wait(p, run.ID); got.Status != store.StatusSucceeded {
				t.Errorf("run %s is %s, want succeeded", run.ID, got.Status)
			}
		}
		if got := views(2).Runs; len(got) != 2 || got[0].ID != runs[0].ID {
			t.Errorf("asking for 2 runs gave %d, want the newest 2", len(got))
		}
		// The view reads each run as it is now.
		if got := views(1).Runs; len(got) != 1 || got[0].Status != store.StatusSucceeded {
			t.Errorf("the newest listed run: %+v, want it succeeded", got)
		}
	})
}

// barrier holds each caller of wait(i) until n callers reached i (or a while passed, so
// that a scheduler that never gets there fails the test instead of hanging it).
type barrier struct {
	n     int
	mu    sync.Mutex
	at    map[int]chan struct{}
	count map[int]int
}

func newBarrier(n int) *barrier {
	return &barrier{n: n, at: map[int]chan struct{}{}, count: map[int]int{}}
}

func (b *barrier) wait(i int) {
	b.mu.Lock()
	ch, ok := b.at[i]
	if !ok {
		ch = make(chan struct{})
		b.at[i] = ch
	}
	b.count[i]++
	if b.count[i] == b.n {
		close(ch)
	}
	b.mu.Unlock()
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
	}
}

// schedulesDue compiles a flow with n hourly schedules (each its own input, so its own
// key) whose latest tick every scheduler missed: the next pass of a scheduler runs it.
func (v *env) schedulesDue(n int) *flows.Plan {
	v.t.Helper()
	var scheds []string
	for i := range n {
		scheds = append(scheds, fmt.Sprintf(`{"cron": "@every 1h", "input": {"from": "schedule %d"}}`, i))
	}
	p := v.compile(strings.Replace(everySecond, `[{"cron": "@every 1s", "input": {"from": "schedule"}}]`, "["+strings.Join(scheds, ", ")+"]", 1))
	for _, sc := range p.Settings.Schedules {
		if err := v.r.SeeSchedule(context.Background(), p.Flow, sc.Key(), time.Now().Add(-2*time.Hour)); err != nil {
			v.t.Fatal(err)
		}
	}
	return p
}

// Processes may disagree on a flow's partition count (its --partitions, while a rollout
// changes it): a tick's run is still started once, on the partition the count of the
// first scheduler to claim the tick gives.
func TestScheduleTickRunsOnceWhenSchedulersDisagreeOnThePartitionCount(t *testing.T) {
	ctx := context.Background()
	ra, rb := storetest.Real(t), storetest.Real(t) // two processes: two connections, two caches
	v := newEnv(t, ra)
	const n = 8
	p := v.schedulesDue(n)
	// Process a read the flow's partition count (none recorded: 1) just before process b,
	// started with 4, recorded its own: each places runs as it counts.
	if counts, err := ra.PartitionCounts(ctx, p.Flow); err != nil || len(counts) != 1 || counts[0] != 1 {
		t.Fatalf("partition counts %v, %v; want [1]", counts, err)
	}
	if err := rb.UsePartitions(ctx, p.Flow, 4, []string{"in", "out"}); err != nil {
		t.Fatal(err)
	}
	at := newBarrier(2)
	var mu sync.Mutex
	started := map[int]int{}
	scheduler := func(r *store.Redis, parts int) *engine.Scheduler {
		e := engine.New(r, v.reg, engine.Options{Logger: testLogger(t), Partitions: parts})
		return e.NewScheduler(engine.SchedulerOptions{
			Flows: func(context.Context) ([]string, error) { return []string{p.Flow}, nil },
			// Both schedulers reach each tick together, then both try to start its run.
			BeforeStart: func(_ string, i int, _ time.Time) { at.wait(i) },
			Started:     func(_ string, i int) { mu.Lock(); started[i]++; mu.Unlock() },
		})
	}
	a, b := scheduler(ra, 1), scheduler(rb, 4)
	errs := make(chan error, 2)
	for _, s := range []*engine.Scheduler{a, b} {
		go func() { _, err := s.Tick(ctx); errs <- err }()
	}
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	for i := range n {
		if started[i] != 1 {
			t.Errorf("the tick of schedule %d: %d runs started, want exactly 1", i, started[i])
		}
	}
	// A third process lists the runs: it reads the partition counts afresh.
	v = newEnv(t, storetest.Real(t))
	v.work(p)
	runs, _, err := v.e.List(ctx, p.Flow, engine.ListQuery{Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	bySchedule := map[string][]string{}
	for _, r := range runs {
		bySchedule[r.Trigger] = append(bySchedule[r.Trigger], fmt.Sprintf("%s on partition %d", r.ID, r.Part))
	}
	for i := range n {
		trig := fmt.Sprintf("schedule:%d", i)
		if got := bySchedule[trig]; len(got) != 1 {
			t.Errorf("the tick of schedule %d has %d runs %v, want exactly 1", i, len(got), got)
		}
	}
	for _, r := range runs {
		if got := v.wait(p, r.ID); got.Status != store.StatusSucceeded {
			t.Errorf("run %s on partition %d: %s, want succeeded", r.ID, r.Part, got.Status)
		}
	}
}

// A scheduler that claimed a tick and died before starting its run leaves the tick to
// the others, who place its run as the claim says, whatever their own partition count.
func TestScheduleTickClaimedByADeadSchedulerRunsWithItsPartitionCount(t *testing.T) {
	ctx := context.Background()
	ra, rb := storetest.Real(t), storetest.Real(t)
	v := newEnv(t, ra)
	p := v.schedulesDue(1)
	key := p.Settings.Schedules[0].Key()
	flowsOf := func(context.Context) ([]string, error) { return []string{p.Flow}, nil }
	dctx, die := context.WithCancel(ctx)
	dying := engine.New(ra, v.reg, engine.Options{Logger: testLogger(t), Partitions: 4}).NewScheduler(engine.SchedulerOptions{Flows: flowsOf,
		BeforeStart: func(string, int, time.Time) { die() }})
	var tick time.Time
	dying.Tick(dctx)
	if runs, _, _ := v.e.List(ctx, p.Flow, engine.ListQuery{Limit: 10}); len(runs) != 0 {
		t.Fatalf("the dying scheduler started %d runs", len(runs))
	}
	other := engine.New(rb, v.reg, engine.Options{Logger: testLogger(t), Partitions: 1}).NewScheduler(engine.SchedulerOptions{Flows: flowsOf,
		BeforeStart: func(_ string, _ int, at time.Time) { tick = at }})
	if _, err := other.Tick(ctx); err != nil {
		t.Fatal(err)
	}
	// A third process lists the runs: it reads the partition counts afresh.
	v = newEnv(t, storetest.Real(t))
	v.work(p)
	runs, _, err := v.e.List(ctx, p.Flow, engine.ListQuery{Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 1 || runs[0].ID != engine.ScheduleRunID(key, tick) {
		t.Fatalf("runs %v, want the one run of tick %s", runs, tick)
	}
	if want := store.PartOf(runs[0].ID, 4); runs[0].Part != want {
		t.Errorf("the run is on partition %d, want %d (the claim's 4 partitions)", runs[0].Part, want)
	}
	if got := v.wait(p, runs[0].ID); got.Status != store.StatusSucceeded {
		t.Errorf("the tick's run is %s, want succeeded", got.Status)
	}
}
