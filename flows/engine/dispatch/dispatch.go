// Package dispatch delivers result webhooks, at least once, from the flows' results
// streams, signed as Standard Webhooks. It is a client of the engine (which says where a
// run's result goes) and of the store; it holds no rule of the runtime.
package dispatch

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"

	"github.com/sluicehq/sluice/flows"
	"github.com/sluicehq/sluice/flows/engine"
	"github.com/sluicehq/sluice/flows/nodes"
	"github.com/sluicehq/sluice/observe"
	"github.com/sluicehq/sluice/store"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	"go.opentelemetry.io/otel/trace"
)

// Options configure the delivery of result webhooks.
type Options struct {
	// Flows returns the flows whose results to deliver; nil means every flow that has
	// data in Redis.
	Flows func(ctx context.Context) ([]string, error)
	// HTTP is where webhooks may connect: the http component's policy, so that the same
	// --http-allow list applies, checked when each connection is dialled (nil refuses
	// every loopback, private, link-local and other internal address). A refused
	// webhook goes to the delivery dead letters at once: retrying cannot help.
	HTTP *nodes.HTTPPolicy
	// Timeout bounds one attempt (default 10s).
	Timeout time.Duration
	// MaxAttempts is how often one webhook is tried before it goes to the delivery dead
	// letters (default 8).
	MaxAttempts int
	// Backoff is the wait before the second attempt, doubled for each further one up to
	// MaxBackoff (defaults 1s and 5m).
	Backoff, MaxBackoff time.Duration
	// ClaimAfter is how long a delivery may go untouched (its dispatcher crashed) before
	// another dispatcher takes it over (default 1m).
	ClaimAfter time.Duration
	// Block is how long one read of the results streams waits (default 1s); Refresh is
	// how often the list of flows is read again (default 2s).
	Block, Refresh time.Duration
	// Concurrency bounds the deliveries in flight (default 16).
	Concurrency int
	// Secret returns the key that signs a flow's webhooks (X-Sluice-Signature), or nil.
	Secret func(flow string) []byte
	// Outcome, when set, is told about every attempt: "delivered", "retry" or "dead".
	Outcome func(flow, outcome string)
	// Finished, when set, is told once about each finished run whose result this
	// dispatcher takes (for metrics: runs by status, their duration and spend). The
	// results stream holds one entry per finish and its group hands each to one
	// dispatcher, so summed over the processes that dispatch a flow, every finish counts
	// once (a delivery taken over from a dispatcher that died is not counted again).
	Finished func(run *store.Run, status string)
}

// Dispatcher delivers result webhooks at least once from the flows' results streams
// (consumer group "dispatch"). An entry is acknowledged, and only then deleted, once
// every webhook of its run was delivered or moved to the delivery dead letters; a
// dispatcher that crashes leaves its entries pending for another to claim.
type Dispatcher struct {
	e        *engine.Engine
	rdb      *store.Redis
	log      *slog.Logger
	opts     Options
	client   *http.Client
	consumer string
	slots    chan struct{}
	wg       sync.WaitGroup
	results  *store.ResultsReader // set by Run
}

// New returns a dispatcher of e's runs' results; it does nothing until Run.
func New(e *engine.Engine, opts Options) *Dispatcher {
	if opts.HTTP == nil {
		opts.HTTP = &nodes.HTTPPolicy{}
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 10 * time.Second
	}
	if opts.MaxAttempts <= 0 {
		opts.MaxAttempts = 8
	}
	if opts.Backoff <= 0 {
		opts.Backoff = time.Second
	}
	if opts.MaxBackoff <= 0 {
		opts.MaxBackoff = 5 * time.Minute
	}
	if opts.ClaimAfter <= 0 {
		opts.ClaimAfter = time.Minute
	}
	if opts.Block <= 0 {
		opts.Block = time.Second
	}
	if opts.Refresh <= 0 {
		opts.Refresh = 2 * time.Second
	}
	if opts.Concurrency <= 0 {
		opts.Concurrency = 16
	}
	if opts.Flows == nil {
		opts.Flows = e.Redis().Flows
	}
	return &Dispatcher{e: e, rdb: e.Redis(), log: e.Logger(), opts: opts, client: opts.HTTP.Client(opts.Timeout), consumer: "dispatch-" + e.ConsumerName(), slots: make(chan struct{}, opts.Concurrency)}
}

// Run delivers until ctx ends, then waits for deliveries in flight (each ends at its
// next attempt or backoff) and returns.
func (d *Dispatcher) Run(ctx context.Context) error {
	var parts []store.PartRef
	known := map[string]bool{}
	refresh := func() {
		ids, err := d.opts.Flows(ctx)
		if err != nil {
			if ctx.Err() == nil {
				d.log.Warn("dispatch: cannot list flows", "error", err)
			}
			return
		}
		for _, f := range ids {
			if !known[f] {
				if err := d.rdb.EnsureGroups(ctx, f, nil); err != nil {
					continue
				}
				known[f] = true
			}
		}
		parts = parts[:0]
		for _, f := range ids {
			if known[f] {
				ps, err := d.rdb.Parts(ctx, f)
				if err != nil {
					continue
				}
				parts = append(parts, ps...)
			}
		}
	}
	// One blocking read per cluster slot of the partitions (one for all on one server),
	// each taking no more than the free delivery slots allow.
	d.results = d.rdb.TailResults(ctx, store.ResultsOptions{Consumer: d.consumer, Block: d.opts.Block, Count: cap(d.slots),
		Room: func() int { return cap(d.slots) - len(d.slots) },
		Errors: func(err error, backoff time.Duration) {
			d.log.Warn("dispatch: read failed; backing off", "error", err, "backoff", backoff)
		}})
	defer d.results.Close()
	refresh()
	d.results.Set(parts)
	refreshes, sweeps := time.NewTicker(d.opts.Refresh), time.NewTicker(max(d.opts.ClaimAfter/2, time.Millisecond))
	defer refreshes.Stop()
	defer sweeps.Stop()
	for ctx.Err() == nil {
		select {
		case <-ctx.Done():
		case <-refreshes.C:
			refresh()
			d.results.Set(parts)
		case <-sweeps.C:
			d.sweep(ctx, parts)
		case results := <-d.results.C():
			for _, r := range results {
				d.start(ctx, r)
			}
		}
	}
	d.wg.Wait()
	return nil
}

// sweep takes over deliveries that other dispatchers left pending.
func (d *Dispatcher) sweep(ctx context.Context, parts []store.PartRef) {
	for _, pr := range parts {
		free := cap(d.slots) - len(d.slots)
		if free == 0 || ctx.Err() != nil {
			return
		}
		results, err := d.rdb.ClaimResults(ctx, pr, d.consumer, d.opts.ClaimAfter, free)
		if err != nil {
			if ctx.Err() == nil {
				d.log.Warn("dispatch: claim failed", "flow", pr.Flow, "partition", pr.Part, "error", err)
			}
			continue
		}
		for _, r := range results {
			d.log.Info("dispatch: took over a pending delivery", "flow", pr.Flow, "run", r.Run, "delivery", r.Deliveries)
			d.start(ctx, r)
		}
	}
}

func (d *Dispatcher) start(ctx context.Context, r store.Result) {
	d.slots <- struct{}{}
	d.wg.Add(1)
	go func() {
		defer func() { <-d.slots; d.results.Poke(); d.wg.Done() }()
		d.deliver(ctx, r)
	}()
}

// ResultPayload is the JSON body of a result webhook.
type ResultPayload struct {
	Flow       string          `json:"flow"`
	Run        string          `json:"run"`
	Version    string          `json:"version,omitempty"`
	Status     string          `json:"status"`
	Output     json.RawMessage `json:"output"`
	Error      string          `json:"error,omitempty"`
	ErrorNode  string          `json:"error_node,omitempty"`
	FinishedAt *time.Time      `json:"finished_at,omitempty"`
	Delivery   string          `json:"delivery"` // the same for every attempt: deduplicate on it
}

// deliver sends one result entry's webhooks, then acknowledges the entry.
func (d *Dispatcher) deliver(ctx context.Context, res store.Result) {
	run, err := d.rdb.GetRun(ctx, res.Flow, res.Run)
	if err != nil {
		if flows.ErrorCode(err) == flows.NotFound {
			// The run expired before its result was delivered: nothing to send.
			d.ack(res)
			return
		}
		if ctx.Err() == nil {
			d.log.Warn("dispatch: cannot read the run; the delivery stays pending", "flow", res.Flow, "run", res.Run, "error", err)
		}
		return
	}
	if res.Deliveries <= 1 {
		d.finished(ctx, res, run)
	}
	// The webhook's request is part of the run's trace: it carries a traceparent.
	ctx = observe.ContextWithTraceparent(ctx, run.Trace)
	targets := d.targets(ctx, run)
	if len(targets) == 0 {
		d.ack(res)
		return
	}
	status := res.Status
	if status == "" {
		status = run.Status
	}
	body, _ := json.Marshal(ResultPayload{Flow: run.Flow, Run: run.ID, Version: run.Version, Status: status, Output: nullIfEmpty(run.Output()),
		Error: run.Error, ErrorNode: run.ErrorNode, FinishedAt: run.Finished, Delivery: res.ID})
	for _, target := range targets {
		if !d.deliverTo(ctx, res, target, body) {
			return // stopping: the entry stays pending for the next dispatcher
		}
	}
	d.ack(res)
}

// finished reports a finished run once: its span, and to Options.Finished.
func (d *Dispatcher) finished(ctx context.Context, res store.Result, run *store.Run) {
	if d.opts.Finished == nil && (!observe.Enabled() || run.Trace == "") {
		return
	}
	status := res.Status
	if status == "" {
		status = run.Status
	}
	if observe.Enabled() && run.Trace != "" {
		spend, _ := d.rdb.RunSpend(ctx, run.Flow, run.ID)
		engine.TraceRunEnd(ctx, run, status, spend.USD)
	}
	if d.opts.Finished != nil {
		d.opts.Finished(run, status)
	}
}

func nullIfEmpty(b json.RawMessage) json.RawMessage {
	if len(b) == 0 {
		return json.RawMessage("null")
	}
	return b
}

func (d *Dispatcher) ack(res store.Result) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := d.rdb.AckResult(ctx, res); err != nil {
		d.log.Warn("dispatch: cannot acknowledge a delivery; it will be sent again", "flow", res.Flow, "run", res.Run, "error", err)
	}
}

// targets are the webhooks of a finished run: the one given when it started, and those
// of its output nodes that produced a value.
func (d *Dispatcher) targets(ctx context.Context, run *store.Run) []string {
	return d.e.WebhookTargets(ctx, run, true)
}

// deliverTo tries one webhook until it is delivered or dead-lettered (true), or ctx
// ends (false).
func (d *Dispatcher) deliverTo(ctx context.Context, res store.Result, target string, body []byte) bool {
	shown := redactURL(target)
	var lastErr error
	for attempt := 1; attempt <= d.opts.MaxAttempts; attempt++ {
		if res.Deliveries > 3 {
			// Claimed again and again: its dispatchers keep dying while sending it.
			lastErr = fmt.Errorf("delivery taken over %d times; last dispatcher did not finish", res.Deliveries-1)
			break
		}
		lastErr = d.post(ctx, res, target, body, attempt)
		if lastErr == nil {
			d.outcome(res.Flow, "delivered")
			return true
		}
		if ctx.Err() != nil {
			return false
		}
		if attempt == d.opts.MaxAttempts || errors.Is(lastErr, nodes.ErrForbiddenAddress) {
			break
		}
		d.outcome(res.Flow, "retry")
		d.log.Info("dispatch: webhook failed; will retry", "flow", res.Flow, "run", res.Run, "target", shown, "attempt", attempt, "error", lastErr)
		if !d.wait(ctx, res, d.backoff(attempt)) {
			return false
		}
	}
	ctx2, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	id, err := d.rdb.DeadDelivery(ctx2, res, shown, lastErr.Error(), d.opts.MaxAttempts)
	if err != nil {
		d.log.Warn("dispatch: cannot record a failed delivery; it stays pending", "flow", res.Flow, "run", res.Run, "error", err)
		return false
	}
	d.outcome(res.Flow, "dead")
	d.log.Warn("dispatch: webhook moved to the delivery dead letters", "flow", res.Flow, "run", res.Run, "target", shown, "dead", id, "error", lastErr)
	d.e.Emit(store.RunRef{Flow: res.Flow, Run: res.Run, Part: res.Part}, "", "delivery_dead", map[string]any{"target": shown, "error": lastErr.Error(), "dead": id})
	return true
}

func (d *Dispatcher) backoff(attempt int) time.Duration {
	b := d.opts.Backoff << min(attempt-1, 20)
	if b > d.opts.MaxBackoff || b <= 0 {
		b = d.opts.MaxBackoff
	}
	return b
}

// wait sleeps for dur, keeping the entry claimed; false when ctx ends first.
func (d *Dispatcher) wait(ctx context.Context, res store.Result, dur time.Duration) bool {
	deadline := time.Now().Add(dur)
	every := max(d.opts.ClaimAfter/3, 10*time.Millisecond)
	for {
		left := time.Until(deadline)
		if left <= 0 {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(min(left, every)):
		}
		tctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		_, _ = d.rdb.TouchResult(tctx, res, d.consumer)
		cancel()
	}
}

func (d *Dispatcher) outcome(flow, what string) {
	if d.opts.Outcome != nil {
		d.opts.Outcome(flow, what)
	}
}

// post sends one attempt. Errors never contain the target's path or query, which may
// hold a secret.
func (d *Dispatcher) post(ctx context.Context, res store.Result, target string, body []byte, attempt int) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target, bytes.NewReader(body))
	if err != nil {
		return errors.New("the webhook URL is not valid")
	}
	// The scheme and a host written as an address are checked before anything is sent;
	// names are checked on the addresses they resolve to, when dialled. Credentials in the
	// URL are a receiver's basic auth, allowed here.
	bare := *req.URL
	bare.User = nil
	if err := d.opts.HTTP.CheckURL(&bare); err != nil {
		return fmt.Errorf("POST %s: %w", redactURL(target), err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "sluice-webhook")
	req.Header.Set("X-Sluice-Flow", res.Flow)
	req.Header.Set("X-Sluice-Run", res.Run)
	req.Header.Set("X-Sluice-Delivery", res.ID)
	req.Header.Set("X-Sluice-Attempt", strconv.Itoa(attempt))
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
		// The HTTP client's own span replaces it with its child when tracing is on here.
		req.Header.Set("traceparent", observe.Traceparent(sc))
	}
	if d.opts.Secret != nil {
		if key := d.opts.Secret(res.Flow); len(key) > 0 {
			if err := signStandard(req.Header, key, res.ID, time.Now(), body); err != nil {
				return fmt.Errorf("signing: %w", err)
			}
			// The signature of earlier releases, without a timestamp: kept for one
			// release so that receivers can move to webhook-signature.
			req.Header.Set("X-Sluice-Signature", Sign(key, body))
		}
	}
	// The touch keeps the entry ours while a slow receiver takes its time.
	stop := make(chan struct{})
	go func() {
		t := time.NewTicker(max(d.opts.ClaimAfter/3, 10*time.Millisecond))
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				tctx, cancel := context.WithTimeout(ctx, 5*time.Second)
				_, _ = d.rdb.TouchResult(tctx, res, d.consumer)
				cancel()
			}
		}
	}()
	resp, err := d.client.Do(req)
	close(stop)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return fmt.Errorf("POST %s: %w", redactURL(target), err)
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return fmt.Errorf("POST %s: status %d", redactURL(target), resp.StatusCode)
	}
	return nil
}

// signStandard signs a delivery as Standard Webhooks do (standardwebhooks.com): the
// message id (the delivery's, the same for every attempt, so a receiver deduplicates on
// it), the attempt's time, and the HMAC-SHA256 of "id.timestamp.body" — a receiver that
// checks the timestamp's age refuses a captured delivery sent again later. The key is
// the secret's bytes (a library that takes "whsec_" secrets takes "whsec_" and their
// base64).
func signStandard(h http.Header, key []byte, id string, at time.Time, body []byte) error {
	wh, err := standardwebhooks.NewWebhookRaw(key)
	if err != nil {
		return err
	}
	sig, err := wh.Sign(id, at, body)
	if err != nil {
		return err
	}
	h.Set(standardwebhooks.HeaderWebhookID, id)
	h.Set(standardwebhooks.HeaderWebhookTimestamp, strconv.FormatInt(at.Unix(), 10))
	h.Set(standardwebhooks.HeaderWebhookSignature, sig)
	return nil
}

// Sign returns the X-Sluice-Signature value of body: "sha256=" and the hex HMAC-SHA256
// of body with key. Deprecated for result webhooks (webhook-signature, signStandard);
// still what the webhook ingress checks.
func Sign(key, body []byte) string {
	m := hmac.New(sha256.New, key)
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

// redactURL keeps a URL's scheme and host: paths and queries of webhooks often carry
// tokens.
func redactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil || u.Host == "" {
		return "(invalid URL)"
	}
	return u.Scheme + "://" + u.Host
}
