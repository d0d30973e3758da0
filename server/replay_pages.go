package server

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/sluicehq/sluice/flows/engine"
	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/templ/pages"
)

// replayView is what the run page shows of a run's moves, replays and dead letters
// (best effort: what cannot be read is left out). compare names a run to compare with;
// "" compares a replay with the run it replays.
func (s *Server) replayView(ctx context.Context, run *store.Run, compare, ckpt string) *pages.Replay {
	r := &pages.Replay{ReplayOf: run.ReplayOf, ReplayCkpt: run.ReplayOfCkpt, ReplayedAs: run.ReplayedAs}
	for _, m := range run.Moves {
		r.Moves = append(r.Moves, pages.MoveLine{From: m.From, To: m.To, Node: m.Node, By: m.By, Attempt: m.Attempt, Waiting: m.Waiting,
			At: time.UnixMilli(m.At).UTC().Format(time.RFC3339)})
	}
	if s.rdb != nil && run.Dead > 0 {
		if ds, err := s.rdb.RunDeadLetters(ctx, run.Flow, run.ID); err == nil {
			for _, d := range ds {
				r.Dead = append(r.Dead, pages.DeadLine{ID: d.ID, Node: d.Node, Version: d.Version})
			}
		}
	}
	if p, err := s.planFor(ctx, run.Flow, ""); err == nil {
		r.Current = p.Version
	}
	r.Version = run.Version
	r.MoveWaiting = run.Status == store.StatusWaiting && r.Current != "" && r.Current != run.Version
	if store.Finished(run.Status) || run.Status == store.StatusWaiting {
		r.Form = &pages.ReplayForm{Version: run.Version, Current: r.Current, Checkpoint: ckpt, Node: ckpt}
	}
	if compare == "" {
		compare = run.ReplayOf
	}
	if compare != "" {
		r.Compare = s.compareView(ctx, run.Flow, compare, run.ID)
	}
	return r
}

// compareView is the comparison the run page shows: run b against run a (nil when it
// cannot be made).
func (s *Server) compareView(ctx context.Context, flow, a, b string) *pages.CompareView {
	c, err := s.replays().Compare(ctx, flow, a, b)
	if err != nil {
		return nil
	}
	v := &pages.CompareView{Other: a, Summary: c.Summary}
	side := func(o *engine.NodeOutcome) string {
		switch {
		case o == nil:
			return "not run"
		case o.Reused:
			return o.Status + " (reused)"
		}
		return o.Status
	}
	pair := func(a, b string) string {
		if a == b {
			return b
		}
		return a + " → " + b
	}
	for _, n := range c.Nodes {
		row := pages.CompareRow{Node: n.Node, Verdict: strings.ReplaceAll(n.Verdict, "_", " "), Before: side(n.Before), After: side(n.After)}
		var ta, tb int64
		var ca, cb, da, db float64
		if n.Before != nil {
			ta, ca, da = n.Before.Tokens, n.Before.CostUSD, n.Before.DurationMS
		}
		if n.After != nil {
			tb, cb, db = n.After.Tokens, n.After.CostUSD, n.After.DurationMS
		}
		row.Tokens = pair(fmt.Sprint(ta), fmt.Sprint(tb))
		row.Cost = pair(costText(ca), costText(cb))
		row.Duration = pair(durationText(da), durationText(db))
		for _, ch := range n.Changes {
			row.Changes = append(row.Changes, pages.Change{Path: ch.Path, Op: ch.Op, From: compact(ch.From), To: compact(ch.To)})
		}
		v.Rows = append(v.Rows, row)
	}
	return v
}

// bulkPanel is the runs page's bulk replay of the runs its filters choose, and the
// flow's latest jobs.
func (s *Server) bulkPanel(ctx context.Context, r pages.RunsPage) *pages.BulkPanel {
	b := &pages.BulkPanel{Flow: r.Flow, Status: r.Status, Version: r.Version, Trigger: r.Trigger}
	if p, err := s.planFor(ctx, r.Flow, ""); err == nil {
		b.Current = p.Version
	}
	if s.rdb == nil {
		return b
	}
	jobs, err := s.rdb.BulkJobs(ctx, r.Flow, 10)
	if err != nil {
		return b
	}
	for _, j := range jobs {
		var spec engine.BulkSpec
		_ = json.Unmarshal(j.Spec, &spec)
		target := spec.Target
		if target == "" {
			target = "own"
		}
		b.Jobs = append(b.Jobs, pages.BulkJobLine{ID: j.ID, Status: j.Status, Created: j.Created.Format(time.RFC3339), Target: target,
			Done: j.Done, Failed: j.Failed, Skipped: j.Skipped, Total: j.Total})
	}
	return b
}
