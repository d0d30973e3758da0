package nodes

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math"
	mrand "math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/sluice/flows"
)

// RateLimit is a provider's rate limit: at most Requests requests and Tokens tokens (input
// and output) in any window of Per (default one minute), shared by every process on the
// same Redis. Models may have limits of their own, checked as well as the provider's.
type RateLimit struct {
	Requests int64                 `json:"requests,omitempty"`
	Tokens   int64                 `json:"tokens,omitempty"`
	Per      flows.Duration        `json:"per,omitzero"`
	Models   map[string]*RateLimit `json:"models,omitempty"`
}

func (l *RateLimit) check() error {
	if l == nil {
		return nil
	}
	var one func(path string, l *RateLimit, nested bool) error
	one = func(path string, l *RateLimit, nested bool) error {
		if l == nil {
			return fmt.Errorf("%s is null", path)
		}
		if l.Requests < 0 || l.Tokens < 0 {
			return fmt.Errorf("%s: requests and tokens must not be negative", path)
		}
		if l.Per != 0 && (l.Per.D() < 100*time.Millisecond || l.Per.D() > 24*time.Hour) {
			return fmt.Errorf("%s.per: %s is not between 100ms and 24h", path, l.Per.D())
		}
		if nested && len(l.Models) > 0 {
			return fmt.Errorf("%s: a model's limit has no models of its own", path)
		}
		if nested && l.Requests == 0 && l.Tokens == 0 {
			return fmt.Errorf("%s: give requests, tokens or both", path)
		}
		for m, ml := range l.Models {
			if m == "" {
				return fmt.Errorf("%s.models: a model name is empty", path)
			}
			if err := one(fmt.Sprintf("%s.models[%q]", path, m), ml, true); err != nil {
				return err
			}
		}
		return nil
	}
	if err := one("", l, false); err != nil {
		return err
	}
	if l.Requests == 0 && l.Tokens == 0 && len(l.Models) == 0 {
		return fmt.Errorf(": give requests, tokens or models")
	}
	return nil
}

func (l *RateLimit) window(parent time.Duration) time.Duration {
	if l.Per > 0 {
		return l.Per.D()
	}
	if parent > 0 {
		return parent
	}
	return time.Minute
}

// LimitScope is one limit a request must fit: the provider's own (Model "") or a model's.
type LimitScope struct {
	Model    string
	Window   time.Duration
	Requests int64
	Tokens   int64
}

// scopes are the limits a request for model must fit.
func (l *RateLimit) scopes(model string) []LimitScope {
	var out []LimitScope
	w := l.window(0)
	if l.Requests > 0 || l.Tokens > 0 {
		out = append(out, LimitScope{Window: w, Requests: l.Requests, Tokens: l.Tokens})
	}
	if ml, ok := l.Models[model]; ok && model != "" {
		out = append(out, LimitScope{Model: model, Window: ml.window(w), Requests: ml.Requests, Tokens: ml.Tokens})
	}
	return out
}

// RateLimiter shares providers' rate limits between processes (store.Limiter behind an
// adapter). Take takes a slot or says how long to wait (poll: the wait is a guess, a
// request in flight must answer first); Mark records that a slot's request began to be
// answered and, with tokens >= 0, what it took; Pause stops a model of a provider for
// everyone (a 429's Retry-After).
type RateLimiter interface {
	Take(ctx context.Context, provider, model string, scopes []LimitScope, id string, tokens int64, lease time.Duration) (wait time.Duration, poll bool, err error)
	Mark(ctx context.Context, provider string, scopes []LimitScope, id string, began bool, tokens int64) error
	Pause(ctx context.Context, provider, model string, d time.Duration) error
}

// limitCall is what a model call tells the rate-limited transport through its context:
// the step (for the waiting events) and, back, the slot its answer came in.
type limitCall struct {
	step   *flows.Step
	model  string
	slot   string
	scopes []LimitScope
}

type limitCallKey struct{}

// defaultOutputEstimate is how many output tokens a request without max_tokens is
// reckoned to take until its usage is known.
const defaultOutputEstimate = 1000

// limitedTransport makes every request to a rate-limited provider — the SDK's own
// retries too — take a slot first, waiting for its turn as long as the step's deadline
// allows. A 429 pauses the model for every process for its Retry-After, and the request
// waits and goes again: the SDK never sees it, so the step neither fails nor uses up its
// attempts.
type limitedTransport struct {
	env  *Env
	p    *Provider
	next http.RoundTripper
}

func (t *limitedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx := req.Context()
	var body []byte
	if req.Body != nil {
		b, err := io.ReadAll(req.Body)
		req.Body.Close()
		if err != nil {
			return nil, err
		}
		body = b
	}
	var head struct {
		Model     string `json:"model"`
		MaxTokens int64  `json:"max_tokens"`
		MaxCompl  int64  `json:"max_completion_tokens"`
	}
	_ = json.Unmarshal(body, &head)
	out := max(head.MaxTokens, head.MaxCompl)
	if out == 0 {
		out = defaultOutputEstimate
	}
	estimate := int64(len(body))/4 + out
	scopes := t.p.RateLimit.scopes(head.Model)
	call, _ := ctx.Value(limitCallKey{}).(*limitCall)
	waited := false
	defer func() {
		if waited {
			t.emit(call, head.Model, false, 0, "")
		}
	}()
	for {
		id := newSlotID()
		if err := t.take(ctx, call, head.Model, scopes, id, estimate, &waited); err != nil {
			return nil, err
		}
		r := req.Clone(ctx)
		r.Body = io.NopCloser(bytes.NewReader(body))
		r.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
		r.ContentLength = int64(len(body))
		res, err := t.next.RoundTrip(r)
		mctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		if err != nil || res.StatusCode >= 400 {
			// Refused or failed: it spent no tokens.
			_ = t.env.Limiter.Mark(mctx, t.p.Name, scopes, id, true, 0)
		} else {
			_ = t.env.Limiter.Mark(mctx, t.p.Name, scopes, id, true, -1)
		}
		if err == nil && res.StatusCode == http.StatusTooManyRequests {
			d := retryAfter(res.Header)
			_ = t.env.Limiter.Pause(mctx, t.p.Name, head.Model, d)
			t.env.Logger.Info("LLM provider answered 429: every process waits", "provider", t.p.Name, "model", head.Model, "retry_after", d)
			cancel()
			io.Copy(io.Discard, io.LimitReader(res.Body, 64<<10))
			res.Body.Close()
			continue
		}
		cancel()
		if err == nil && res.StatusCode < 400 && call != nil {
			call.slot, call.scopes, call.model = id, scopes, head.Model
		}
		return res, err
	}
}

// take waits until the limiter gives slot id, publishing that the step waits.
func (t *limitedTransport) take(ctx context.Context, call *limitCall, model string, scopes []LimitScope, id string, estimate int64, waited *bool) error {
	lease := 10 * time.Minute
	if dl, ok := ctx.Deadline(); ok {
		lease = min(max(time.Until(dl), time.Second), time.Hour)
	}
	for {
		wait, poll, err := t.env.Limiter.Take(ctx, t.p.Name, model, scopes, id, estimate, lease)
		if err != nil {
			return &flows.Error{Code: flows.Unavailable, Message: fmt.Sprintf("LLM provider %q: %v", t.p.Name, err)}
		}
		if wait == 0 {
			return nil
		}
		if !*waited {
			*waited = true
			reason := "rate limit"
			if poll {
				reason = "rate limit, requests in flight"
			}
			t.emit(call, model, true, wait, reason)
		}
		if poll {
			wait = min(wait, 250*time.Millisecond)
		}
		// A little jitter keeps waiters of several processes from asking all at once.
		wait += time.Duration(mrand.Int64N(int64(10 * time.Millisecond)))
		timer := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			timer.Stop()
			return ctx.Err()
		case <-timer.C:
		}
	}
}

// emit publishes a "rate_limit" event: the step waits for its turn (waiting true) or
// goes on.
func (t *limitedTransport) emit(call *limitCall, model string, waiting bool, wait time.Duration, reason string) {
	if call == nil || call.step == nil || call.step.Emit == nil {
		return
	}
	ev := map[string]any{"waiting": waiting, "provider": t.p.Name, "model": model}
	if waiting {
		ev["wait_ms"] = wait.Milliseconds()
		ev["reason"] = reason
	}
	call.step.Emit("rate_limit", ev)
}

// retryAfter reads how long a 429 asks to wait: Retry-After-Ms, Retry-After in seconds
// or as a date; one second when it says nothing. At most ten minutes.
func retryAfter(h http.Header) time.Duration {
	d := time.Second
	if v := h.Get("Retry-After-Ms"); v != "" {
		if ms, err := strconv.ParseFloat(v, 64); err == nil && ms >= 0 && !math.IsInf(ms, 0) {
			d = time.Duration(ms * float64(time.Millisecond))
		}
	} else if v := strings.TrimSpace(h.Get("Retry-After")); v != "" {
		if s, err := strconv.ParseFloat(v, 64); err == nil && s >= 0 && !math.IsInf(s, 0) {
			d = time.Duration(s * float64(time.Second))
		} else if at, err := http.ParseTime(v); err == nil {
			d = time.Until(at)
		}
	}
	return min(max(d, time.Millisecond), 10*time.Minute)
}

func newSlotID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// limited returns ctx carrying a limitCall for step when p is rate limited here.
func (e *Env) limited(ctx context.Context, step *flows.Step, p *Provider) (context.Context, *limitCall) {
	if p.RateLimit == nil || e.Limiter == nil {
		return ctx, nil
	}
	c := &limitCall{step: step}
	return context.WithValue(ctx, limitCallKey{}, c), c
}

// settle records what a rate-limited call spent, so the window counts its real tokens.
func (e *Env) settle(ctx context.Context, p *Provider, c *limitCall, u flows.Usage) {
	if c == nil || c.slot == "" {
		return
	}
	mctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := e.Limiter.Mark(mctx, p.Name, c.scopes, c.slot, false, u.Total()); err != nil {
		e.Logger.Warn("cannot record a call's tokens in the rate limit", "provider", p.Name, "error", err)
	}
}

// providerClient is the provider's HTTP client, through the shared rate limit when it has
// one and this process has a limiter.
func (e *Env) providerClient(p *Provider) *http.Client {
	hc := p.HTTPClient
	if hc == nil {
		hc = &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}
	}
	if p.RateLimit == nil || e.Limiter == nil {
		return hc
	}
	next := hc.Transport
	if next == nil {
		next = http.DefaultTransport
	}
	c := *hc
	c.Transport = &limitedTransport{env: e, p: p, next: next}
	return &c
}
