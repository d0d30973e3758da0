package server

import (
	"context"
	"time"

	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/templ/pages"
)

// replayView is what the run page shows of a run's moves, replays and dead letters
// (best effort: what cannot be read is left out). compare names a run to compare with;
// "" compares a replay with the run it replays.
func (s *Server) replayView(ctx context.Context, run *store.Run, compare string) *pages.Replay {
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
	if len(r.Dead) > 0 {
		if p, err := s.planFor(ctx, run.Flow, ""); err == nil {
			r.Current = p.Version
		}
	}
	if compare == "" {
		compare = run.ReplayOf
	}
	if compare != "" {
		r.Compare = s.compareView(ctx, run.Flow, compare, run.ID)
	}
	return r
}

// compareView is the comparison the run page shows (nil until compare exists).
func (s *Server) compareView(ctx context.Context, flow, a, b string) *pages.CompareView { return nil }
