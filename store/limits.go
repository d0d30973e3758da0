package store

import (
	"context"
	"fmt"
	"strconv"
	"time"
)

// The scripts of the shared rate limits; each file's header documents its KEYS and ARGV.
var (
	limitTakeScript  = mustScript("limit_take")
	limitMarkScript  = mustScript("limit_mark")
	limitPauseScript = mustScript("limit_pause")
)

// Limiter shares LLM providers' rate limits between every process on one Redis: a
// sliding window log per scope (a provider, or one of its models) in which a request's
// slot counts from when it is taken until one window after its answer began. Waiting is
// the caller's business: Take only says how long.
type Limiter struct{ r *Redis }

// NewLimiter returns the limiter on r.
func NewLimiter(r *Redis) *Limiter { return &Limiter{r: r} }

// LimitScope is one limit a request must fit: "" for the provider's own, else a model's.
type LimitScope struct {
	Model    string
	Window   time.Duration
	Requests int64 // most requests per window; 0: no limit
	Tokens   int64 // most tokens per window; 0: no limit
}

func scopeKeys(k LimitKeys, scopes []LimitScope) []string {
	keys := make([]string, 0, 2*len(scopes))
	for _, s := range scopes {
		keys = append(keys, k.Slots(s.Model), k.Tokens(s.Model))
	}
	return keys
}

// Take takes slot id in every scope of provider for a request estimated at tokens, held
// at most lease while in flight, unless model is paused or a scope is full. It returns 0
// when the slot is taken, else how long to wait before trying again; poll is true when
// the wait ends only when a request still in flight answers, so the time is a guess.
func (l *Limiter) Take(ctx context.Context, provider, model string, scopes []LimitScope, id string, tokens int64, lease time.Duration) (wait time.Duration, poll bool, err error) {
	k := ProviderLimitKeys(provider)
	keys := append([]string{k.Pause(model)}, scopeKeys(k, scopes)...)
	args := []any{id, tokens, max(lease.Milliseconds(), 1)}
	for _, s := range scopes {
		args = append(args, max(s.Window.Milliseconds(), 1), s.Requests, s.Tokens)
	}
	res, err := limitTakeScript.Run(ctx, l.r.Client, keys, args...).Int64Slice()
	if err != nil {
		return 0, false, fmt.Errorf("rate limit of %s: %w", provider, err)
	}
	if len(res) == 0 || res[0] == 1 {
		return 0, false, nil
	}
	if len(res) < 3 {
		return 0, false, fmt.Errorf("rate limit of %s: unexpected reply %v", provider, res)
	}
	return time.Duration(max(res[1], 1)) * time.Millisecond, res[2] == 1, nil
}

// Mark records that slot id's request began to be answered (began) and, when tokens is
// not negative, how many tokens it took.
func (l *Limiter) Mark(ctx context.Context, provider string, scopes []LimitScope, id string, began bool, tokens int64) error {
	b, t := "0", ""
	if began {
		b = "1"
	}
	if tokens >= 0 {
		t = strconv.FormatInt(tokens, 10)
	}
	args := []any{id, b, t}
	for _, s := range scopes {
		args = append(args, max(s.Window.Milliseconds(), 1))
	}
	if err := limitMarkScript.Run(ctx, l.r.Client, scopeKeys(ProviderLimitKeys(provider), scopes), args...).Err(); err != nil {
		return fmt.Errorf("rate limit of %s: %w", provider, err)
	}
	return nil
}

// Pause stops every process from calling model of provider for d (a 429's Retry-After).
func (l *Limiter) Pause(ctx context.Context, provider, model string, d time.Duration) error {
	if err := limitPauseScript.Run(ctx, l.r.Client, []string{ProviderLimitKeys(provider).Pause(model)}, max(d.Milliseconds(), 1)).Err(); err != nil {
		return fmt.Errorf("rate limit of %s: %w", provider, err)
	}
	return nil
}
