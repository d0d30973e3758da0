package server

import (
	"context"
	"net/http"
	"sync"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/sluicehq/sluice/flows"
	"github.com/sluicehq/sluice/flows/engine"
	"github.com/sluicehq/sluice/flows/nodes"
	"github.com/sluicehq/sluice/store"
)

// Metrics are Sluice's Prometheus metrics. Step metrics come from the engine of this
// process (Metrics is its Observer), so they count the steps the in-process workers
// ran; queue figures are read from Redis at each scrape, so they cover every worker.
type Metrics struct {
	reg *prometheus.Registry

	steps      *prometheus.CounterVec
	failures   *prometheus.CounterVec
	dead       *prometheus.CounterVec
	stepTime   *prometheus.HistogramVec
	commitTime prometheus.Histogram
	tokens     *prometheus.CounterVec
	hookRuns   *prometheus.CounterVec
	schedRuns  *prometheus.CounterVec
	deliveries *prometheus.CounterVec
	// gitFailures counts changes saved but not committed (serve --git-commit).
	gitFailures prometheus.Counter

	// Runs, models and caches (docs/metrics.md).
	runsDone    *prometheus.CounterVec
	runTime     *prometheus.HistogramVec
	modelCalls  *prometheus.CounterVec
	modelTime   *prometheus.HistogramVec
	modelTokens *prometheus.CounterVec
	modelCost   *prometheus.CounterVec
	cacheByNode *prometheus.CounterVec

	mu         sync.Mutex
	cacheStats func() (hits, misses int64)
	queues     bool
}

// NewMetrics registers Sluice's metrics in a registry of their own (with Go and process
// metrics).
func NewMetrics() *Metrics {
	m := &Metrics{reg: prometheus.NewRegistry()}
	m.steps = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sluice_steps_total", Help: "Steps committed, by flow and node."}, []string{"flow", "node"})
	m.failures = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sluice_step_failures_total", Help: "Failed step attempts (retried or dead-lettered), by flow and node."}, []string{"flow", "node"})
	m.dead = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sluice_dead_letters_total", Help: "Activations moved to the dead letters, by flow and node."}, []string{"flow", "node"})
	m.stepTime = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "sluice_step_duration_seconds", Help: "Time from a worker receiving an activation to its commit's reply, by flow, node and component.",
		Buckets: prometheus.ExponentialBuckets(0.0005, 2.5, 14)}, []string{"flow", "node", "component"})
	m.commitTime = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "sluice_commit_duration_seconds", Help: "Round trip of a step's atomic commit (batching included).",
		Buckets: prometheus.ExponentialBuckets(0.0002, 2, 14)})
	m.tokens = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sluice_tokens_total", Help: "LLM tokens spent by steps, by flow and kind (input, output)."}, []string{"flow", "kind"})
	m.hookRuns = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sluice_hook_runs_total", Help: "Runs started through the webhook ingress, by flow."}, []string{"flow"})
	m.schedRuns = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sluice_schedule_runs_total", Help: "Runs this process's scheduler started, by flow."}, []string{"flow"})
	m.deliveries = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sluice_webhook_deliveries_total", Help: "Result webhook attempts, by flow and outcome (delivered, retry, dead)."}, []string{"flow", "outcome"})
	m.runsDone = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sluice_runs_finished_total", Help: "Runs finished, by flow and status (succeeded, failed, cancelled); counted by the process that dispatched the run's result."}, []string{"flow", "status"})
	m.runTime = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "sluice_run_duration_seconds", Help: "Time from a run's creation to its end, by flow and status.",
		Buckets: prometheus.ExponentialBuckets(0.005, 2.5, 16)}, []string{"flow", "status"})
	m.modelCalls = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sluice_model_calls_total", Help: "Model calls a provider answered (ok) or failed (error), by flow, node and model; cached replies are not calls."}, []string{"flow", "node", "model", "outcome"})
	m.modelTime = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "sluice_model_call_duration_seconds", Help: "Latency of model calls (rate-limit waits and the client's retries included), by flow, node and model.",
		Buckets: prometheus.ExponentialBuckets(0.05, 2, 12)}, []string{"flow", "node", "model"})
	m.modelTokens = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sluice_model_tokens_total", Help: "Tokens of model calls, by flow, node, model and kind: input (all prompt tokens), output, cached (prompt tokens read from the provider's cache)."}, []string{"flow", "node", "model", "kind"})
	m.modelCost = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sluice_model_cost_usd_total", Help: "Estimated cost of model calls in US dollars at the providers' prices, by flow, node and model."}, []string{"flow", "node", "model"})
	m.cacheByNode = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sluice_cache_lookups_total", Help: "Cached calls (model, HTTP, MCP), by flow, node and result: hit (answered without computing) or miss."}, []string{"flow", "node", "result"})
	m.gitFailures = prometheus.NewCounter(prometheus.CounterOpts{Name: "sluice_git_commit_failures_total", Help: "Changes of flows saved but not committed to git (serve --git-commit); the log says why."})
	m.reg.MustRegister(m.gitFailures)
	m.reg.MustRegister(m.steps, m.failures, m.dead, m.stepTime, m.commitTime, m.tokens, m.hookRuns, m.schedRuns, m.deliveries,
		m.runsDone, m.runTime, m.modelCalls, m.modelTime, m.modelTokens, m.modelCost, m.cacheByNode,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m.reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "sluice_cache_hits_total", Help: "Cached tool and LLM calls answered without computing."},
		func() float64 { h, _ := m.cache(); return float64(h) }))
	m.reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "sluice_cache_misses_total", Help: "Cached tool and LLM calls that computed their result."},
		func() float64 { _, n := m.cache(); return float64(n) }))
	return m
}

// SetStateCache gives the metrics the engine's state cache figures.
func (m *Metrics) SetStateCache(stats func() (entries, bytes int)) {
	m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "sluice_state_cache_bytes", Help: "Estimated heap taken by the decoded states this process keeps."},
		func() float64 { _, b := stats(); return float64(b) }))
	m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "sluice_state_cache_entries", Help: "Decoded states this process keeps."},
		func() float64 { n, _ := stats(); return float64(n) }))
}

// SetCacheStats gives the metrics the components' cache counters.
func (m *Metrics) SetCacheStats(f func() (hits, misses int64)) {
	m.mu.Lock()
	m.cacheStats = f
	m.mu.Unlock()
}

func (m *Metrics) cache() (int64, int64) {
	m.mu.Lock()
	f := m.cacheStats
	m.mu.Unlock()
	if f == nil {
		return 0, 0
	}
	return f()
}

// StepDone records a committed step (engine.Observer).
func (m *Metrics) StepDone(flow, node string, t engine.StepTiming, usage flows.Usage) {
	m.steps.WithLabelValues(flow, node).Inc()
	m.stepTime.WithLabelValues(flow, node, t.Component).Observe(t.Total.Seconds())
	m.commitTime.Observe(t.Commit.Seconds())
	if usage.InputTokens > 0 {
		m.tokens.WithLabelValues(flow, "input").Add(float64(usage.InputTokens))
	}
	if usage.OutputTokens > 0 {
		m.tokens.WithLabelValues(flow, "output").Add(float64(usage.OutputTokens))
	}
}

// StepFailed records a failed step attempt (engine.Observer).
func (m *Metrics) StepFailed(flow, node string, dead bool) {
	m.failures.WithLabelValues(flow, node).Inc()
	if dead {
		m.dead.WithLabelValues(flow, node).Inc()
	}
}

// Delivery records a result webhook attempt (dispatch.Options.Outcome).
func (m *Metrics) Delivery(flow, outcome string) {
	m.deliveries.WithLabelValues(flow, outcome).Inc()
}

// ScheduleRun records a run a schedule started (engine.SchedulerOptions.Started).
// Metrics carry no version label: every save makes a version, so the label would grow
// without bound; figures per version come from GET /api/flows/FLOW/versions.
func (m *Metrics) ScheduleRun(flow string, _ int) {
	m.schedRuns.WithLabelValues(flow).Inc()
}

// RunFinished records a finished run (dispatch.Options.Finished).
func (m *Metrics) RunFinished(run *store.Run, status string) {
	m.runsDone.WithLabelValues(run.Flow, status).Inc()
	end := time.Now()
	if run.Finished != nil {
		end = *run.Finished
	}
	if !run.Created.IsZero() && !end.Before(run.Created) {
		m.runTime.WithLabelValues(run.Flow, status).Observe(end.Sub(run.Created).Seconds())
	}
}

// ModelCall records a model call (nodes.Observer).
func (m *Metrics) ModelCall(c nodes.ModelCall) {
	if c.Failed {
		m.modelCalls.WithLabelValues(c.Flow, c.Node, c.Model, "error").Inc()
		m.modelTime.WithLabelValues(c.Flow, c.Node, c.Model).Observe(c.Duration.Seconds())
		return
	}
	m.modelCalls.WithLabelValues(c.Flow, c.Node, c.Model, "ok").Inc()
	m.modelTime.WithLabelValues(c.Flow, c.Node, c.Model).Observe(c.Duration.Seconds())
	m.modelTokens.WithLabelValues(c.Flow, c.Node, c.Model, "input").Add(float64(c.Usage.InputTokens))
	m.modelTokens.WithLabelValues(c.Flow, c.Node, c.Model, "output").Add(float64(c.Usage.OutputTokens))
	m.modelTokens.WithLabelValues(c.Flow, c.Node, c.Model, "cached").Add(float64(c.Usage.CacheReadTokens))
	m.modelCost.WithLabelValues(c.Flow, c.Node, c.Model).Add(c.Usage.CostUSD)
}

// CacheLookup records a cached call (nodes.Observer).
func (m *Metrics) CacheLookup(flow, node string, hit bool) {
	r := "miss"
	if hit {
		r = "hit"
	}
	m.cacheByNode.WithLabelValues(flow, node, r).Inc()
}

// Handler serves the metrics in Prometheus's text format (a worker's --metrics-addr).
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
}

// WatchQueues adds the queue figures of every flow in r to each scrape (the server does
// this itself; a worker's metrics port calls it).
func (m *Metrics) WatchQueues(r *store.Redis) { m.watchQueues(r) }

var (
	_ engine.Observer = (*Metrics)(nil)
	_ nodes.Observer  = (*Metrics)(nil)
)

// watchQueues adds the queue figures of every flow in Redis to each scrape.
func (m *Metrics) watchQueues(r *store.Redis) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.queues {
		return
	}
	m.queues = true
	m.reg.MustRegister(&queueCollector{r: r})
}

// fromRedis ends the help of the figures read from Redis at scrape time: every process
// that serves metrics serves the same ones, so they are not summed over instances.
const fromRedis = "Read from Redis at each scrape: every process serves the same figure (take max over instances, not sum)."

var (
	descLength  = prometheus.NewDesc("sluice_queue_length", "Entries in a node's stream (not yet read plus pending). "+fromRedis, []string{"flow", "node"}, nil)
	descPending = prometheus.NewDesc("sluice_queue_pending", "Entries delivered to a worker and not yet committed. "+fromRedis, []string{"flow", "node"}, nil)
	descLag     = prometheus.NewDesc("sluice_queue_lag", "Entries no worker has read yet. "+fromRedis, []string{"flow", "node"}, nil)
	descOldest  = prometheus.NewDesc("sluice_queue_oldest_pending_idle_seconds", "Idle time of the oldest pending entry. "+fromRedis, []string{"flow", "node"}, nil)
	descDead    = prometheus.NewDesc("sluice_dead_letters", "Dead letters waiting for a retry or discard. "+fromRedis, []string{"flow"}, nil)
	descUp      = prometheus.NewDesc("sluice_redis_up", "1 when the queue figures could be read from Redis. "+fromRedis, nil, nil)
)

// queueCollector reads queue figures from Redis at scrape time.
type queueCollector struct{ r *store.Redis }

func (q *queueCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descLength, descPending, descLag, descOldest, descDead, descUp} {
		ch <- d
	}
}

func (q *queueCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	ids, err := q.r.Flows(ctx)
	up := 1.0
	if err != nil {
		up = 0
	}
	for _, f := range ids {
		fq, err := q.r.Queues(ctx, f)
		if err != nil {
			up = 0
			continue
		}
		ch <- prometheus.MustNewConstMetric(descDead, prometheus.GaugeValue, float64(fq.DeadLetters), f)
		for _, n := range fq.Nodes {
			ch <- prometheus.MustNewConstMetric(descLength, prometheus.GaugeValue, float64(n.Length), f, n.Node)
			ch <- prometheus.MustNewConstMetric(descPending, prometheus.GaugeValue, float64(n.Pending), f, n.Node)
			ch <- prometheus.MustNewConstMetric(descLag, prometheus.GaugeValue, float64(n.Lag), f, n.Node)
			ch <- prometheus.MustNewConstMetric(descOldest, prometheus.GaugeValue, float64(n.OldestPendingIdleMS)/1000, f, n.Node)
		}
	}
	ch <- prometheus.MustNewConstMetric(descUp, prometheus.GaugeValue, up)
}

func (s *Server) metricsHandler(c echo.Context) error {
	promhttp.HandlerFor(s.metrics.reg, promhttp.HandlerOpts{ErrorLog: nil}).ServeHTTP(c.Response(), c.Request())
	return nil
}
