package store

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/sluicehq/sluice/flows"
)

// spendTTL is how long what a run spent is kept after its last model call: longer than
// any run's default retention, so the run page can show it.
const spendTTL = 7 * 24 * time.Hour

// spendDayTTL keeps a day's totals a day past its end.
const spendDayTTL = 48 * time.Hour

// Ledger keeps what model calls spent, per run and per flow per UTC day, for budgets:
// hashes of tokens and micro-dollars, added to as each call answers (spent is spent,
// whether or not its step commits).
type Ledger struct{ r *Redis }

// NewLedger returns the ledger on r.
func NewLedger(r *Redis) *Ledger { return &Ledger{r: r} }

func toMicro(usd float64) int64 {
	if usd <= 0 || math.IsNaN(usd) || math.IsInf(usd, 0) {
		return 0
	}
	return int64(math.Round(usd * 1e6))
}

func spendOf(h map[string]string) flows.Spend {
	tok, _ := strconv.ParseInt(h["tokens"], 10, 64)
	micro, _ := strconv.ParseInt(h["micro_usd"], 10, 64)
	return flows.Spend{Tokens: tok, USD: float64(micro) / 1e6}
}

// Spend adds what one call spent to run's and the flow's totals of day (2006-01-02) and
// returns the new totals.
func (l *Ledger) Spend(ctx context.Context, flow, run, day string, s flows.Spend) (runTotal, dayTotal flows.Spend, err error) {
	k := FlowKeys(flow)
	micro := toMicro(s.USD)
	pipe := l.r.Client.TxPipeline()
	rt := pipe.HIncrBy(ctx, k.Spend(run), "tokens", s.Tokens)
	rm := pipe.HIncrBy(ctx, k.Spend(run), "micro_usd", micro)
	pipe.Expire(ctx, k.Spend(run), spendTTL)
	dt := pipe.HIncrBy(ctx, k.SpendDay(day), "tokens", s.Tokens)
	dm := pipe.HIncrBy(ctx, k.SpendDay(day), "micro_usd", micro)
	pipe.Expire(ctx, k.SpendDay(day), spendDayTTL)
	if _, err := pipe.Exec(ctx); err != nil {
		return flows.Spend{}, flows.Spend{}, fmt.Errorf("budget: %w", err)
	}
	return flows.Spend{Tokens: rt.Val(), USD: float64(rm.Val()) / 1e6}, flows.Spend{Tokens: dt.Val(), USD: float64(dm.Val()) / 1e6}, nil
}

// Spent returns run's and the flow's day totals so far.
func (l *Ledger) Spent(ctx context.Context, flow, run, day string) (runTotal, dayTotal flows.Spend, err error) {
	k := FlowKeys(flow)
	pipe := l.r.Client.Pipeline()
	r := pipe.HGetAll(ctx, k.Spend(run))
	d := pipe.HGetAll(ctx, k.SpendDay(day))
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return flows.Spend{}, flows.Spend{}, fmt.Errorf("budget: %w", err)
	}
	return spendOf(r.Val()), spendOf(d.Val()), nil
}

// RunSpend returns what run has spent on models (zero when nothing is recorded).
func (r *Redis) RunSpend(ctx context.Context, flow, run string) (flows.Spend, error) {
	h, err := r.Client.HGetAll(ctx, FlowKeys(flow).Spend(run)).Result()
	if err != nil {
		return flows.Spend{}, err
	}
	return spendOf(h), nil
}
