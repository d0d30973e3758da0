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
//
// Both are kept on the run's partition (Keys.Spend, Keys.SpendDay): a call writes only
// to its run's slot, so on a Redis Cluster a busy flow's spend is spread over its
// partitions' masters instead of going to one key per flow and day. The flow's day is
// the sum over its partitions, read when a day cap needs it.
type Ledger struct{ r *Redis }

// NewLedger returns the ledger on r.
func NewLedger(r *Redis) *Ledger { return &Ledger{r: r} }

func toMicro(usd float64) int64 {
	if usd <= 0 || math.IsNaN(usd) || math.IsInf(usd, 0) {
		return 0
	}
	return int64(math.Round(usd * 1e6))
}

func spendFields(h map[string]string) (tokens, micro int64) {
	tokens, _ = strconv.ParseInt(h["tokens"], 10, 64)
	micro, _ = strconv.ParseInt(h["micro_usd"], 10, 64)
	return tokens, micro
}

func spendOf(h map[string]string) flows.Spend {
	tok, micro := spendFields(h)
	return flows.Spend{Tokens: tok, USD: float64(micro) / 1e6}
}

// Spend adds what one call spent to run's total and to the day's (2006-01-02) on the
// run's partition, in one MULTI on the run's slot, and returns the run's new total and,
// with sumDay, the flow's total of the day over all its partitions (zero without). The
// other partitions are read after the write: of two calls on two partitions that take
// the day over its cap together, the one that reads last sees both.
func (l *Ledger) Spend(ctx context.Context, flow, run, day string, s flows.Spend, sumDay bool) (runTotal, dayTotal flows.Spend, err error) {
	k, err := l.r.RunPartKeys(ctx, flow, run)
	if err != nil {
		return flows.Spend{}, flows.Spend{}, fmt.Errorf("budget: %w", err)
	}
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
	runTotal = flows.Spend{Tokens: rt.Val(), USD: float64(rm.Val()) / 1e6}
	if k.Part() > 0 && rt.Val() == s.Tokens && rm.Val() == micro && (s.Tokens != 0 || micro != 0) {
		// The run's first call since the ledger was partitioned: what it spent before
		// is moved over from the flow's key, by whichever call takes it from there.
		if runTotal, err = l.moveLegacy(ctx, k, run, runTotal); err != nil {
			return flows.Spend{}, flows.Spend{}, err
		}
	}
	if !sumDay {
		return runTotal, flows.Spend{}, nil
	}
	tokens, micro, err := l.daySum(ctx, flow, day, k.Part())
	if err != nil {
		return flows.Spend{}, flows.Spend{}, err
	}
	tokens, micro = tokens+dt.Val(), micro+dm.Val()
	return runTotal, flows.Spend{Tokens: tokens, USD: float64(micro) / 1e6}, nil
}

// moveLegacy adds what run spent under the ledger's old key (the flow's tag) to its
// partition's, and deletes the old one; it returns the run's total with it.
func (l *Ledger) moveLegacy(ctx context.Context, k Keys, run string, total flows.Spend) (flows.Spend, error) {
	pipe := l.r.Client.TxPipeline()
	old := pipe.HGetAll(ctx, k.LegacySpend(run))
	pipe.Del(ctx, k.LegacySpend(run))
	if _, err := pipe.Exec(ctx); err != nil {
		return total, fmt.Errorf("budget: %w", err)
	}
	tok, micro := spendFields(old.Val())
	if tok == 0 && micro == 0 {
		return total, nil
	}
	pipe = l.r.Client.TxPipeline()
	rt := pipe.HIncrBy(ctx, k.Spend(run), "tokens", tok)
	rm := pipe.HIncrBy(ctx, k.Spend(run), "micro_usd", micro)
	pipe.Expire(ctx, k.Spend(run), spendTTL)
	if _, err := pipe.Exec(ctx); err != nil {
		return total, fmt.Errorf("budget: %w", err)
	}
	return flows.Spend{Tokens: rt.Val(), USD: float64(rm.Val()) / 1e6}, nil
}

// dayParts are the partitions whose day totals make up flow's: every partition its runs
// may be on, and partition 0 always (the flow's own key, where all of a day's spend went
// before the ledger was partitioned).
func (l *Ledger) dayParts(ctx context.Context, flow string) ([]int, error) {
	refs, err := l.r.Parts(ctx, flow)
	if err != nil {
		return nil, fmt.Errorf("budget: %w", err)
	}
	parts := []int{0}
	for _, p := range refs {
		if p.Part != 0 {
			parts = append(parts, p.Part)
		}
	}
	return parts, nil
}

// daySum reads flow's day totals of every partition but skip (-1: none) and adds them
// up, in tokens and micro-dollars (integers: dollars added as floats would drift): one
// pipeline, on a cluster one round trip per master, sent at once.
func (l *Ledger) daySum(ctx context.Context, flow, day string, skip int) (tokens, micro int64, err error) {
	parts, err := l.dayParts(ctx, flow)
	if err != nil {
		return 0, 0, err
	}
	pipe := l.r.Client.Pipeline()
	cmds := make([]*redis.MapStringStringCmd, 0, len(parts))
	for _, p := range parts {
		if p != skip {
			cmds = append(cmds, pipe.HGetAll(ctx, PartKeys(flow, p).SpendDay(day)))
		}
	}
	if len(cmds) == 0 {
		return 0, 0, nil
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return 0, 0, fmt.Errorf("budget: %w", err)
	}
	for _, c := range cmds {
		t, m := spendFields(c.Val())
		tokens, micro = tokens+t, micro+m
	}
	return tokens, micro, nil
}

// Spent returns run's total so far and, with sumDay, the flow's total of day over all
// its partitions (zero without).
func (l *Ledger) Spent(ctx context.Context, flow, run, day string, sumDay bool) (runTotal, dayTotal flows.Spend, err error) {
	if runTotal, err = l.r.RunSpend(ctx, flow, run); err != nil {
		return flows.Spend{}, flows.Spend{}, fmt.Errorf("budget: %w", err)
	}
	if !sumDay {
		return runTotal, flows.Spend{}, nil
	}
	tokens, micro, err := l.daySum(ctx, flow, day, -1)
	return runTotal, flows.Spend{Tokens: tokens, USD: float64(micro) / 1e6}, err
}

// RunSpend returns what run has spent on models (zero when nothing is recorded). A run
// on a partition ≥ 1 with nothing on its partition yet is looked for under the key the
// ledger used before it was partitioned.
func (r *Redis) RunSpend(ctx context.Context, flow, run string) (flows.Spend, error) {
	k, err := r.RunPartKeys(ctx, flow, run)
	if err != nil {
		return flows.Spend{}, err
	}
	h, err := r.Client.HGetAll(ctx, k.Spend(run)).Result()
	if err != nil {
		return flows.Spend{}, err
	}
	if len(h) == 0 && k.Part() > 0 {
		if h, err = r.Client.HGetAll(ctx, k.LegacySpend(run)).Result(); err != nil {
			return flows.Spend{}, err
		}
	}
	return spendOf(h), nil
}
