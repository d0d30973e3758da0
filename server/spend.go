package server

import (
	"context"
	"time"

	"github.com/sluicehq/sluice/flows"
	"github.com/sluicehq/sluice/store"
)

// DaySpend is what all runs of a flow spent on models in one UTC day, against the
// flow's day_tokens and day_usd.
type DaySpend struct {
	Day string `json:"day"` // 2006-01-02, UTC
	flows.Spend
}

// runSpend is what a run spent, what its flow spent on the run's day, and the flow's
// budget (of the run's version).
type runSpend struct {
	run    flows.Spend
	day    DaySpend
	budget *flows.Budget
}

// spendDay is the UTC day whose spend a run's budget counts now: today while the run
// goes on (its next model call counts against today), else the day it finished.
func spendDay(run *store.Run, now time.Time) string {
	if run.Finished != nil && store.Finished(run.Status) {
		return run.Finished.UTC().Format(time.DateOnly)
	}
	return now.UTC().Format(time.DateOnly)
}

// spendOf reads what run and its flow's day spent (see Ledger.Spent), and the budget.
func (s *Server) spendOf(ctx context.Context, flow string, run *store.Run) (runSpend, error) {
	var out runSpend
	if s.rdb == nil {
		return out, nil
	}
	out.day.Day = spendDay(run, time.Now())
	var err error
	out.run, out.day.Spend, err = store.NewLedger(s.rdb).Spent(ctx, flow, run.ID, out.day.Day, true)
	if err != nil {
		return out, err
	}
	if p, err := s.runs().Plan(ctx, flow, run.Version); err == nil {
		out.budget = p.Settings.Budget
	}
	return out, nil
}

// hasDay says whether the flow's day is worth showing: it has a day cap, or spent.
func (r runSpend) hasDay() bool {
	return r.day.Tokens > 0 || r.day.USD > 0 || (r.budget != nil && (r.budget.DayTokens > 0 || r.budget.DayUSD > 0))
}
