package engine

import (
	"context"
	"time"

	"github.com/sluicehq/sluice/flows"
	"github.com/sluicehq/sluice/observe"
	"github.com/sluicehq/sluice/store"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// Tracing (docs/tracing.md): one run is one trace. Start draws the run span's ids
// (observe.BeginRun) and keeps its traceparent in the run hash ("tp", with "tpp", the
// span it is a child of); every activation of the run carries it ("tp"), so each step's
// span, in whatever process, is a child of the run span. The run span itself is recorded
// once the run has finished, by the dispatcher that takes its result (runFinished), with
// the run's real start and end. Everything here returns at once while tracing is off.

// runTraceFields are the run hash fields and the traceparent of a new run's trace.
func runTraceFields(ctx context.Context, flow string) ([]string, string) {
	rt := observe.BeginRun(ctx, flow)
	if rt.Traceparent == "" {
		return nil, ""
	}
	f := []string{"tp", rt.Traceparent}
	if rt.Parent != "" {
		f = append(f, "tpp", rt.Parent)
	}
	return f, rt.Traceparent
}

// componentOf is a node's component type, for spans and metrics.
func componentOf(n *flows.PlanNode) string {
	if n == nil {
		return ""
	}
	if n.Spec != nil {
		return n.Spec.Name
	}
	return n.Type
}

// beginStep starts the span of a job's step, from when its activation was received, as
// a child of its run's span; the component runs under it (job.ctx).
func (w *Worker) beginStep(j *job, received time.Time, fused bool) {
	if !observe.Enabled() {
		return
	}
	a := j.a
	parent := observe.RunParent(w.hard, a.Trace, a.Flow, a.Run)
	j.ctx, j.span = observe.Tracer().Start(parent, "step "+a.Node, trace.WithSpanKind(trace.SpanKindConsumer), trace.WithTimestamp(received),
		trace.WithAttributes(
			attribute.String("sluice.flow", a.Flow),
			attribute.String("sluice.run", a.Run),
			attribute.String("sluice.node", a.Node),
			attribute.String("sluice.component", componentOf(j.node)),
			attribute.String("sluice.version", a.Version),
			attribute.Int("sluice.attempt", a.Deliveries),
			attribute.Int("sluice.depth", a.Depth),
			attribute.Int("sluice.partition", a.Part),
			attribute.Bool("sluice.fused", fused),
			attribute.String("sluice.worker", w.consumer),
			attribute.String("messaging.system", "redis"),
			attribute.String("messaging.operation.type", "process"),
			attribute.String("messaging.consumer.group.name", store.Group),
			attribute.String("messaging.message.id", a.ID),
		))
}

// stepCtx is the context a job's component runs in.
func (w *Worker) stepCtx(j *job) context.Context {
	if j.ctx != nil {
		return j.ctx
	}
	return w.hard
}

// endStep ends a job's span with what became of the step.
func endStep(j *job, out stepOutcome, err error, usage flows.Usage) {
	if j.span == nil {
		return
	}
	s := j.span
	s.SetAttributes(attribute.String("sluice.outcome", outcomeNames[out]))
	if usage.InputTokens > 0 || usage.OutputTokens > 0 {
		s.SetAttributes(attribute.Int64("gen_ai.usage.input_tokens", usage.InputTokens), attribute.Int64("gen_ai.usage.output_tokens", usage.OutputTokens))
	}
	if usage.CostUSD > 0 {
		s.SetAttributes(attribute.Float64("sluice.cost_usd", usage.CostUSD))
	}
	if err != nil {
		s.SetStatus(codes.Error, truncate(err.Error(), 1000))
	}
	s.End()
}

// outcomeFusedSpan names a fused step's span: it commits with the step before it.
const outcomeFusedSpan stepOutcome = -1

var outcomeNames = map[stepOutcome]string{outcomeFusedSpan: "fused", outcomeCommitted: "committed", outcomeStale: "stale", outcomeRetry: "retry", outcomeDead: "dead", outcomeLeft: "left"}

// traceCommit starts the span of a step's commit (its wait in the batch and the
// script's round trip) and returns what ends it.
func traceCommit(j *job, steps int) func(stepOutcome) {
	if j.span == nil {
		return func(stepOutcome) {}
	}
	_, s := observe.Tracer().Start(j.ctx, "commit", trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(
		attribute.String("db.system.name", "redis"),
		attribute.String("db.operation.name", "EVALSHA"),
		attribute.String("db.stored_procedure.name", "commit.lua"),
		attribute.Int("sluice.commit.steps", steps),
	))
	return func(out stepOutcome) {
		s.SetAttributes(attribute.String("sluice.outcome", outcomeNames[out]))
		s.End()
	}
}

// TraceRunEnd records a finished run's span (see observe.EndRun): the result dispatcher
// reports each finish once.
func TraceRunEnd(ctx context.Context, run *store.Run, status string, cost float64) {
	if !observe.Enabled() || run.Trace == "" {
		return
	}
	end := time.Now()
	if run.Finished != nil {
		end = *run.Finished
	}
	attrs := []attribute.KeyValue{
		attribute.String("sluice.flow", run.Flow),
		attribute.String("sluice.run", run.ID),
		attribute.String("sluice.version", run.Version),
		attribute.String("sluice.run.status", status),
		attribute.Int("sluice.run.steps", run.Steps),
		attribute.Int64("gen_ai.usage.input_tokens", run.Usage.InputTokens),
		attribute.Int64("gen_ai.usage.output_tokens", run.Usage.OutputTokens),
	}
	if cost > 0 {
		attrs = append(attrs, attribute.Float64("sluice.cost_usd", cost))
	}
	if run.Trigger != "" {
		attrs = append(attrs, attribute.String("sluice.run.trigger", run.Trigger))
	}
	failed := ""
	if status == store.StatusFailed {
		failed = run.Error
		if failed == "" {
			failed = "failed"
		}
	}
	observe.EndRun(ctx, observe.RunTrace{Traceparent: run.Trace, Parent: run.TraceParent}, "run "+run.Flow, run.Created, end, attrs, failed)
}

// TraceFinished records the span of a finished run. Dispatchers do this for each run
// whose result they take; a process that dispatches nothing (sluice run on the embedded
// Redis) calls it for its own run.
func (e *Engine) TraceFinished(ctx context.Context, run *store.Run) {
	if !observe.Enabled() || run.Trace == "" {
		return
	}
	spend, _ := e.rdb.RunSpend(ctx, run.Flow, run.ID)
	TraceRunEnd(ctx, run, run.Status, spend.USD)
}
