package nodes_test

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/flows/nodes"
	"github.com/sluicehq/sluice/flows/nodes/llmtest"
	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/storetest"
)

// storeLimiter is store.Limiter as the components see it (cmd/sluice wires the same).
type storeLimiter struct{ l *store.Limiter }

func scopesOf(in []nodes.LimitScope) []store.LimitScope {
	out := make([]store.LimitScope, len(in))
	for i, s := range in {
		out[i] = store.LimitScope{Model: s.Model, Window: s.Window, Requests: s.Requests, Tokens: s.Tokens}
	}
	return out
}

func (a storeLimiter) Take(ctx context.Context, p, m string, s []nodes.LimitScope, id string, tok int64, lease time.Duration) (time.Duration, bool, error) {
	return a.l.Take(ctx, p, m, scopesOf(s), id, tok, lease)
}

func (a storeLimiter) Mark(ctx context.Context, p string, s []nodes.LimitScope, id string, began bool, tok int64) error {
	return a.l.Mark(ctx, p, scopesOf(s), id, began, tok)
}

func (a storeLimiter) Pause(ctx context.Context, p, m string, d time.Duration) error {
	return a.l.Pause(ctx, p, m, d)
}

// A 429 with Retry-After pauses the model for every process, and the step waits and
// asks again instead of failing: with max_retries 0 the SDK would have given up.
func TestRateLimitedProviderHonoursRetryAfterWithoutFailingTheStep(t *testing.T) {
	r := storetest.Real(t)
	srv := llmtest.New(t)
	var mu sync.Mutex
	var arrivals []time.Time
	srv.Respond(func(llmtest.Request) llmtest.Reply {
		mu.Lock()
		defer mu.Unlock()
		arrivals = append(arrivals, time.Now())
		if len(arrivals) == 1 {
			return llmtest.Reply{Status: http.StatusTooManyRequests, Content: "slow down", Header: map[string]string{"Retry-After-Ms": "300"}}
		}
		return llmtest.Text("fine")
	})
	provider := "rl-" + storetest.FlowID(t)[2:20]
	t.Cleanup(func() {
		r.Client.Del(context.Background(), store.ProviderLimitKeys(provider).Pause("m"), store.ProviderLimitKeys(provider).Slots(""), store.ProviderLimitKeys(provider).Tokens(""))
	})
	env := srv.Env(0)
	env.Providers[provider] = srv.Provider(provider, 0)
	env.Providers[provider].RateLimit = &nodes.RateLimit{Requests: 1000}
	env.Limiter = storeLimiter{store.NewLimiter(r)}
	l := buildIn(t, env, "llm", `{"provider": "`+provider+`", "model": "m", "user": "hi"}`)
	s, rec := newStep(state(t, `{}`))
	res, err := l.Run(context.Background(), s)
	if err != nil || res.Output != "fine" {
		t.Fatalf("after a 429: %v, %v; want the step to wait and succeed", res, err)
	}
	if srv.Calls() != 2 {
		t.Errorf("%d requests, want the refused one and one after the pause", srv.Calls())
	}
	var kinds []string
	for _, ev := range rec.events {
		if ev.kind == "rate_limit" {
			kinds = append(kinds, map[bool]string{true: "waiting", false: "going on"}[ev.data["waiting"] == true])
		}
	}
	if strings.Join(kinds, ",") != "waiting,going on" {
		t.Errorf("rate_limit events %v, want the step to say it waits, then that it goes on", kinds)
	}
	mu.Lock()
	defer mu.Unlock()
	if gap := arrivals[1].Sub(arrivals[0]); gap < 300*time.Millisecond {
		t.Errorf("the request after the 429 came %s after it, before its Retry-After of 300ms", gap)
	}
}
