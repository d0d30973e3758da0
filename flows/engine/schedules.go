package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/sluicehq/sluice/flows"
	"github.com/sluicehq/sluice/store"
)

// SchedulerOptions configure a scheduler.
type SchedulerOptions struct {
	// Flows lists the flows this process serves; a scheduler starts runs only of those
	// (nil: every flow with schedules in Redis).
	Flows func(context.Context) ([]string, error)
	// Poll is how often schedule changes (a new version, a pause) are looked for
	// between ticks (default 2s).
	Poll time.Duration
	// BeforeStart, when set, is called when a tick is due and claimed, just before its
	// run is created: tests use it to stop a scheduler in the middle of a tick.
	BeforeStart func(flow string, schedule int, tick time.Time)
	// Started, when set, is told about every run this scheduler started (for metrics).
	Started func(flow string, schedule int)
}

// Scheduler starts the runs of flows' schedules. Any number of schedulers may run, in
// any number of processes: a tick's run has an id made of the schedule and the tick
// time, the first scheduler to claim the tick fixes the partition it is placed on
// (store.ClaimTick: processes may count a flow's partitions differently), and creating
// a run is atomic and refuses an id that exists there, so each tick starts exactly one
// run. A scheduler that dies before creating it holds nothing; another one creates it
// (see docs/schedules.md for the missed-tick policy).
type Scheduler struct {
	e    *Engine
	opts SchedulerOptions
	log  *slog.Logger

	mu    sync.Mutex
	crons map[string]*flows.Cron // "cron\x00timezone" -> parsed
}

// NewScheduler returns a scheduler; call Run.
func (e *Engine) NewScheduler(o SchedulerOptions) *Scheduler {
	if o.Poll <= 0 {
		o.Poll = 2 * time.Second
	}
	return &Scheduler{e: e, opts: o, log: e.log, crons: map[string]*flows.Cron{}}
}

// Run starts scheduled runs until ctx ends.
func (s *Scheduler) Run(ctx context.Context) error {
	failing := false
	for {
		next, err := s.Tick(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if err != nil && !failing {
			s.log.Warn("schedules: cannot read or start scheduled runs; retrying", "error", err)
		}
		failing = err != nil
		wait := s.opts.Poll
		if !next.IsZero() {
			// Wake just after the tick, so that it is due when looked at.
			wait = min(wait, time.Until(next)+time.Millisecond)
		}
		t := time.NewTimer(max(wait, time.Millisecond))
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
	}
}

// Tick starts the runs of every tick that is due, and returns when the next one is
// (zero when no schedule has one).
func (s *Scheduler) Tick(ctx context.Context) (time.Time, error) {
	ids, err := s.e.rdb.ScheduledFlows(ctx)
	if err != nil {
		return time.Time{}, err
	}
	if s.opts.Flows != nil {
		mine, err := s.opts.Flows(ctx)
		if err != nil {
			return time.Time{}, err
		}
		served := make(map[string]bool, len(mine))
		for _, f := range mine {
			served[f] = true
		}
		kept := ids[:0]
		for _, f := range ids {
			if served[f] {
				kept = append(kept, f)
			}
		}
		ids = kept
	}
	var next time.Time
	var firstErr error
	for _, flow := range ids {
		n, err := s.tickFlow(ctx, flow)
		if err != nil && firstErr == nil {
			firstErr = fmt.Errorf("flow %s: %w", flow, err)
		}
		if !n.IsZero() && (next.IsZero() || n.Before(next)) {
			next = n
		}
	}
	return next, firstErr
}

func (s *Scheduler) cron(sc flows.Schedule) (*flows.Cron, error) {
	key := sc.Cron + "\x00" + sc.Timezone
	s.mu.Lock()
	defer s.mu.Unlock()
	if c, ok := s.crons[key]; ok {
		return c, nil
	}
	c, err := flows.ParseCron(sc.Cron, sc.Timezone)
	if err != nil {
		return nil, err
	}
	if len(s.crons) > 1000 {
		clear(s.crons)
	}
	s.crons[key] = c
	return c, nil
}

func (s *Scheduler) tickFlow(ctx context.Context, flow string) (time.Time, error) {
	// The schedules of the last environment with a version run (docs/environments.md).
	plan, env, err := s.e.SchedulePlan(ctx, flow)
	if err != nil {
		return time.Time{}, err
	}
	scheds := plan.Settings.Schedules
	keys := make([]string, len(scheds))
	for i, sc := range scheds {
		keys[i] = sc.Key()
	}
	st, err := s.e.rdb.ScheduleStates(ctx, flow, keys)
	if err != nil {
		return time.Time{}, err
	}
	now := time.Now()
	var next time.Time
	var firstErr error
	for i, sc := range scheds {
		c, err := s.cron(sc)
		if err != nil {
			continue // validation refused it already; a version in Redis is valid
		}
		key := keys[i]
		last, seen := st.Last[key]
		if !seen {
			// A schedule no scheduler has seen: its ticks count from now.
			if err := s.e.rdb.SeeSchedule(ctx, flow, key, now); err != nil {
				return time.Time{}, err
			}
			last = now
		}
		if n := c.Next(now); !n.IsZero() && (next.IsZero() || n.Before(next)) {
			next = n
		}
		prev := c.Prev(now)
		if prev.IsZero() || !prev.After(last) {
			continue
		}
		_, paused := st.Paused[key]
		if !sc.IsEnabled() || paused {
			// The tick passes without a run.
			if err := s.e.rdb.MarkTick(ctx, flow, key, prev); err != nil && firstErr == nil {
				firstErr = err
			}
			continue
		}
		for _, tick := range dueTicks(c, last, prev, now) {
			if err := s.fire(ctx, plan, env, i, sc, c, key, tick); err != nil {
				if firstErr == nil {
					firstErr = err
				}
				break // the later ticks wait, so that the marker does not pass this one
			}
		}
	}
	return next, firstErr
}

// LateTickGrace is how late a tick may be and still run. A scheduler that wakes late
// (a stalled process, a slow Redis) runs every tick due in the last LateTickGrace, in
// order; ticks missed for longer (every process down) are folded into the latest due
// one (docs/schedules.md).
const LateTickGrace = 10 * time.Second

// dueTicks lists the ticks to run, oldest first: those after the marker last that are
// late by less than LateTickGrace, or else only the latest due tick, prev.
func dueTicks(c *flows.Cron, last, prev, now time.Time) []time.Time {
	from := now.Add(-LateTickGrace)
	if last.After(from) {
		from = last
	}
	var due []time.Time
	for t := c.Next(from); !t.IsZero() && !t.After(prev); t = c.Next(t) {
		due = append(due, t)
	}
	if len(due) == 0 {
		due = append(due, prev)
	}
	return due
}

// ScheduleRunID is the id of the run of a schedule's tick: the same in every process.
func ScheduleRunID(key string, tick time.Time) string {
	return "s-" + key + "-" + strconv.FormatInt(tick.Unix(), 10)
}

// claimFor is how long a tick's claim is kept: while schedulers may still try the tick
// (until it is neither the latest due tick nor late by less than LateTickGrace), with
// room for slow ones.
func claimFor(c *flows.Cron, tick time.Time) time.Duration {
	ttl := 10 * time.Minute
	if n := c.Next(tick); !n.IsZero() {
		ttl = max(ttl, 2*n.Sub(tick))
	}
	return ttl
}

func (s *Scheduler) fire(ctx context.Context, plan *flows.Plan, env string, i int, sc flows.Schedule, c *flows.Cron, key string, tick time.Time) error {
	// The first scheduler to claim the tick says how many partitions its run is placed
	// over; every other one places it there too, so the start script sees them all.
	parts, err := s.e.rdb.ClaimTick(ctx, plan.Flow, key, tick, s.e.partitions(plan), claimFor(c, tick))
	if err != nil {
		return err // the tick stays due: the next pass tries again
	}
	if s.opts.BeforeStart != nil {
		s.opts.BeforeStart(plan.Flow, i, tick)
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
	id := ScheduleRunID(key, tick)
	input := sc.Input
	if len(input) == 0 {
		input = json.RawMessage("{}")
	}
	_, err = s.e.Start(ctx, plan, input, StartOptions{RunID: id, Trigger: fmt.Sprintf("schedule:%d", i), Tick: tick, Partitions: parts, Environment: env})
	switch {
	case err == nil:
		s.log.Info("schedule started a run", "flow", plan.Flow, "schedule", i, "cron", sc.Cron, "tick", tick.Format(time.RFC3339), "run", id)
		if s.opts.Started != nil {
			s.opts.Started(plan.Flow, i)
		}
	case flows.ErrorCode(err) == flows.Conflict:
		// Another scheduler started it first.
	case flows.ErrorCode(err) == flows.Invalid:
		// The input does not fit the flow (its input schema): the tick cannot run, now or
		// later. Say so and pass it over.
		s.log.Warn("schedule cannot start its run", "flow", plan.Flow, "schedule", i, "tick", tick.Format(time.RFC3339), "error", err)
		return s.e.rdb.MarkTick(ctx, plan.Flow, key, tick)
	default:
		return err // the tick stays due: the next pass tries again
	}
	if err := s.e.rdb.NoteScheduledRun(ctx, plan.Flow, key, id, tick); err != nil {
		return err
	}
	return s.e.rdb.MarkTick(ctx, plan.Flow, key, tick)
}

// ScheduleView is one schedule of a flow's current version as the API shows it.
type ScheduleView struct {
	Index    int             `json:"index"`
	Key      string          `json:"key"`
	Cron     string          `json:"cron"`
	Timezone string          `json:"timezone,omitempty"`
	Input    json.RawMessage `json:"input,omitempty"`
	Enabled  bool            `json:"enabled"`
	Paused   bool            `json:"paused"`
	// PausedAt is when it was paused.
	PausedAt *time.Time `json:"paused_at,omitempty"`
	// LastTick is the last tick that ran or was passed over.
	LastTick *time.Time `json:"last_tick,omitempty"`
	// Next are the next fire times (none while disabled or paused).
	Next []time.Time `json:"next"`
	// Runs are the runs it started, newest first.
	Runs []*store.Run `json:"runs"`
}

// Schedules describes the schedules that run for a flow (those of SchedulePlan's
// version): next fire times, pause and recent runs.
func (e *Engine) Schedules(ctx context.Context, flow string, nextN, runsN int) (version string, out []ScheduleView, err error) {
	if !flows.ValidFlowID(flow) {
		return "", nil, &flows.Error{Code: flows.NotFound, Flow: flow, Message: "no such flow"}
	}
	plan, _, err := e.SchedulePlan(ctx, flow)
	if err != nil {
		return "", nil, err
	}
	keys := make([]string, len(plan.Settings.Schedules))
	for i, sc := range plan.Settings.Schedules {
		keys[i] = sc.Key()
	}
	st, err := e.rdb.ScheduleStates(ctx, flow, keys)
	if err != nil {
		return "", nil, err
	}
	now := time.Now()
	out = make([]ScheduleView, 0, len(keys))
	for i, sc := range plan.Settings.Schedules {
		v := ScheduleView{Index: i, Key: keys[i], Cron: sc.Cron, Timezone: sc.Timezone, Input: sc.Input, Enabled: sc.IsEnabled(), Next: []time.Time{}, Runs: []*store.Run{}}
		if t, ok := st.Paused[keys[i]]; ok {
			v.Paused, v.PausedAt = true, &t
		}
		if t, ok := st.Last[keys[i]]; ok {
			v.LastTick = &t
		}
		if c, err := flows.ParseCron(sc.Cron, sc.Timezone); err == nil && v.Enabled && !v.Paused {
			v.Next = c.NextN(now, nextN)
		}
		if runsN > 0 {
			ids, err := e.rdb.ScheduledRuns(ctx, flow, keys[i], int64(runsN))
			if err != nil {
				return "", nil, err
			}
			refs, err := e.rdb.RunRefs(ctx, flow, ids)
			if err != nil {
				return "", nil, err
			}
			runs, err := e.rdb.GetRuns(ctx, refs)
			if err != nil {
				return "", nil, err
			}
			v.Runs = append(v.Runs, runs...)
		}
		out = append(out, v)
	}
	return plan.Version, out, nil
}

// scheduleKey finds schedule n of the version whose schedules run.
func (e *Engine) scheduleKey(ctx context.Context, flow string, n int) (string, error) {
	if !flows.ValidFlowID(flow) {
		return "", &flows.Error{Code: flows.NotFound, Flow: flow, Message: "no such flow"}
	}
	plan, _, err := e.SchedulePlan(ctx, flow)
	if err != nil {
		return "", err
	}
	if n < 0 || n >= len(plan.Settings.Schedules) {
		return "", &flows.Error{Code: flows.NotFound, Flow: flow, Path: fmt.Sprintf("settings.schedules[%d]", n),
			Message: fmt.Sprintf("the version whose schedules run has %d schedule(s); there is no schedule %d", len(plan.Settings.Schedules), n)}
	}
	return plan.Settings.Schedules[n].Key(), nil
}

// PauseSchedule pauses schedule n of the flow's current version, for every process:
// its ticks pass without runs until it is resumed. The pause stays with the schedule
// (its cron, time zone and input) across versions that keep it.
func (e *Engine) PauseSchedule(ctx context.Context, flow string, n int) error {
	key, err := e.scheduleKey(ctx, flow, n)
	if err != nil {
		return err
	}
	return e.rdb.PauseSchedule(ctx, flow, key)
}

// ResumeSchedule lifts a pause; ticks that passed meanwhile are not run.
func (e *Engine) ResumeSchedule(ctx context.Context, flow string, n int) error {
	key, err := e.scheduleKey(ctx, flow, n)
	if err != nil {
		return err
	}
	return e.rdb.ResumeSchedule(ctx, flow, key)
}
