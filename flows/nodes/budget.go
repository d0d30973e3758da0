package nodes

import (
	"context"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/sluicehq/sluice/flows"
)

// Price is what a model costs, in US dollars per million tokens. Cached input tokens
// cost CacheRead and tokens written to the cache CacheWrite (both default to Input).
type Price struct {
	Input      float64  `json:"input"`
	Output     float64  `json:"output"`
	CacheRead  *float64 `json:"cache_read,omitempty"`
	CacheWrite *float64 `json:"cache_write,omitempty"`
}

func (p *Price) check() error {
	if p == nil {
		return fmt.Errorf("is null")
	}
	for _, v := range []*float64{&p.Input, &p.Output, p.CacheRead, p.CacheWrite} {
		if v != nil && (*v < 0 || math.IsNaN(*v) || math.IsInf(*v, 0)) {
			return fmt.Errorf("prices are dollars per million tokens, not negative")
		}
	}
	return nil
}

// cost is what usage of model costs at the provider's prices, and whether it has any.
func (p *Provider) cost(model string, u flows.Usage) (float64, bool) {
	price, ok := p.Prices[model]
	if !ok {
		price, ok = p.Prices["*"]
	}
	if !ok || price == nil {
		return 0, false
	}
	read, write := price.Input, price.Input
	if price.CacheRead != nil {
		read = *price.CacheRead
	}
	if price.CacheWrite != nil {
		write = *price.CacheWrite
	}
	plain := max(u.InputTokens-u.CacheReadTokens-u.CacheWriteTokens, 0)
	usd := float64(plain)*price.Input + float64(u.CacheReadTokens)*read + float64(u.CacheWriteTokens)*write + float64(u.OutputTokens)*price.Output
	return usd / 1e6, true
}

// SpendLedger keeps what model calls spent per run and per flow per UTC day
// (store.Ledger): Spend adds one call's spend and returns the new totals. The flow's day
// total is read only with sumDay (on Redis it is a sum over the flow's partitions); it
// is zero without.
type SpendLedger interface {
	Spend(ctx context.Context, flow, run, day string, s flows.Spend, sumDay bool) (runTotal, dayTotal flows.Spend, err error)
	Spent(ctx context.Context, flow, run, day string, sumDay bool) (runTotal, dayTotal flows.Spend, err error)
}

// memoryLedger is the ledger of a process without Redis.
type memoryLedger struct {
	mu   sync.Mutex
	runs map[string]flows.Spend
	days map[string]flows.Spend
}

func (m *memoryLedger) Spend(_ context.Context, flow, run, day string, s flows.Spend, _ bool) (flows.Spend, flows.Spend, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.runs == nil {
		m.runs, m.days = map[string]flows.Spend{}, map[string]flows.Spend{}
	}
	rk, dk := flow+"\x00"+run, flow+"\x00"+day
	r, d := m.runs[rk], m.days[dk]
	r.Tokens, r.USD = r.Tokens+s.Tokens, r.USD+s.USD
	d.Tokens, d.USD = d.Tokens+s.Tokens, d.USD+s.USD
	m.runs[rk], m.days[dk] = r, d
	return r, d, nil
}

func (m *memoryLedger) Spent(_ context.Context, flow, run, day string, _ bool) (flows.Spend, flows.Spend, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.runs[flow+"\x00"+run], m.days[flow+"\x00"+day], nil
}

// budget is a flow's budget as a model-calling node enforces it.
type budget struct {
	b *flows.Budget
}

// newBudget reads the flow's budget at compile time.
func newBudget(b *flows.Build) budget {
	if b.Flow == nil {
		return budget{}
	}
	return budget{b: b.Flow.Settings.Budget}
}

func (b budget) on() bool {
	return b.b != nil && (b.b.RunTokens > 0 || b.b.RunUSD > 0 || b.b.DayTokens > 0 || b.b.DayUSD > 0)
}

// daily says whether the budget caps the flow's day: only then is the day's spend summed
// over the flow's partitions.
func (b budget) daily() bool { return b.b != nil && (b.b.DayTokens > 0 || b.b.DayUSD > 0) }

func today() string { return time.Now().UTC().Format("2006-01-02") }

// over returns the budget error when a run's or the day's spend passes its cap.
// crossed says whether a call just took it there (else it was there before the call).
func (b budget) over(step *flows.Step, run, day flows.Spend, crossed bool) error {
	if !b.on() {
		return nil
	}
	type cap struct {
		path     string
		what     string
		tokens   bool
		limit    float64
		spent    float64
		exceeded bool
	}
	caps := []cap{
		{"settings.budget.run_tokens", "the run", true, float64(b.b.RunTokens), float64(run.Tokens), b.b.RunTokens > 0 && run.Tokens > b.b.RunTokens},
		{"settings.budget.run_usd", "the run", false, b.b.RunUSD, run.USD, b.b.RunUSD > 0 && run.USD > b.b.RunUSD},
		{"settings.budget.day_tokens", "the flow today (UTC)", true, float64(b.b.DayTokens), float64(day.Tokens), b.b.DayTokens > 0 && day.Tokens > b.b.DayTokens},
		{"settings.budget.day_usd", "the flow today (UTC)", false, b.b.DayUSD, day.USD, b.b.DayUSD > 0 && day.USD > b.b.DayUSD},
	}
	if !crossed {
		// Before a call, a spend that reached its cap already leaves nothing to spend.
		caps[0].exceeded = b.b.RunTokens > 0 && run.Tokens >= b.b.RunTokens
		caps[1].exceeded = b.b.RunUSD > 0 && run.USD >= b.b.RunUSD
		caps[2].exceeded = b.b.DayTokens > 0 && day.Tokens >= b.b.DayTokens
		caps[3].exceeded = b.b.DayUSD > 0 && day.USD >= b.b.DayUSD
	}
	for _, c := range caps {
		if !c.exceeded {
			continue
		}
		var msg string
		if c.tokens {
			msg = fmt.Sprintf("over budget: %s spent %d tokens, its budget is %d tokens", c.what, int64(c.spent), int64(c.limit))
		} else {
			msg = fmt.Sprintf("over budget: %s spent $%.4f, its budget is $%.4f", c.what, c.spent, c.limit)
		}
		if crossed {
			msg += " (this step's model call crossed it)"
		} else {
			msg += " (reached before this step's model call)"
		}
		return flows.Permanent(&flows.Error{Code: flows.Forbidden, Node: step.Node, Path: c.path, Message: msg})
	}
	return nil
}

// check fails a step whose run or flow has no budget left, before a model call.
func (e *Env) checkBudget(ctx context.Context, step *flows.Step, b budget) error {
	if !b.on() {
		return nil
	}
	run, day, err := e.Ledger.Spent(ctx, step.Flow, step.Run, today(), b.daily())
	if err != nil {
		return &flows.Error{Code: flows.Unavailable, Node: step.Node, Message: "reading the budget's spend", Err: err}
	}
	return b.over(step, run, day, false)
}

// spend records what a model call spent (always, for the run page) and fails the step
// when it took the run or the flow's day over budget.
func (e *Env) spend(ctx context.Context, step *flows.Step, b budget, p *Provider, model string, u flows.Usage) error {
	if u.Total() == 0 {
		return nil
	}
	s := flows.Spend{Tokens: u.Total()}
	s.USD, _ = p.cost(model, u)
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	run, day, err := e.Ledger.Spend(sctx, step.Flow, step.Run, today(), s, b.daily())
	if err != nil {
		if b.on() {
			return &flows.Error{Code: flows.Unavailable, Node: step.Node, Message: "recording the budget's spend", Err: err}
		}
		e.Logger.Warn("cannot record a model call's spend", "flow", step.Flow, "run", step.Run, "error", err)
		return nil
	}
	return b.over(step, run, day, true)
}
