package nodes

import (
	"context"
	"encoding/json"
	"time"

	"github.com/sluicehq/sluice/flows"
	"github.com/sluicehq/sluice/observe"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// Observer hears what components do, for metrics (server.Metrics implements it). Its
// labels are bounded: flow, node and model ids, never a run id.
type Observer interface {
	// ModelCall is one call a provider answered (or failed): not a cached reply.
	ModelCall(c ModelCall)
	// CacheLookup is one cached call (tool, HTTP request, model call): hit when this
	// caller got a result it did not compute.
	CacheLookup(flow, node string, hit bool)
}

// ModelCall is what a model call cost and took.
type ModelCall struct {
	Flow, Node string
	Provider   string
	Model      string
	Duration   time.Duration
	// Usage is what the provider reported, with its cost at the provider's prices.
	Usage flows.Usage
	// Failed says the call did not answer.
	Failed bool
}

// genAISystem is the GenAI semantic conventions' name for a provider's API.
func genAISystem(p *Provider) string {
	if p.kind() == ProviderAnthropic {
		return "anthropic"
	}
	return "openai"
}

// modelSpan starts the span of a model call, following the OpenTelemetry GenAI semantic
// conventions ("chat MODEL", kind client). Prompts are recorded only when the operator
// opted in (observe.CaptureContent); secret values never leave the process either way.
func modelSpan(ctx context.Context, step *flows.Step, p *Provider, req *chatRequest) (context.Context, trace.Span) {
	if !observe.Enabled() {
		return ctx, nil
	}
	sys := genAISystem(p)
	attrs := []attribute.KeyValue{
		attribute.String("gen_ai.operation.name", "chat"),
		attribute.String("gen_ai.system", sys),
		attribute.String("gen_ai.provider.name", sys),
		attribute.String("gen_ai.request.model", req.Model),
		attribute.String("sluice.provider", p.Name),
		attribute.String("sluice.node", step.Node),
	}
	if req.Temperature != nil {
		attrs = append(attrs, attribute.Float64("gen_ai.request.temperature", *req.Temperature))
	}
	if req.MaxTokens > 0 {
		attrs = append(attrs, attribute.Int64("gen_ai.request.max_tokens", req.MaxTokens))
	}
	if observe.CaptureContent() {
		if b, err := json.Marshal(req.Messages); err == nil {
			attrs = append(attrs, attribute.String("gen_ai.input.messages", flows.RedactString(string(b))))
		}
	}
	return observe.Tracer().Start(ctx, "chat "+req.Model, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs...))
}

// endModelSpan records a model call's answer (or failure) on its span.
func endModelSpan(span trace.Span, reply *chatReply, err error) {
	if span == nil {
		return
	}
	if err != nil {
		span.SetStatus(codes.Error, truncateText(flows.RedactString(err.Error()), 1000))
		span.SetAttributes(attribute.String("error.type", errorType(err)))
		span.End()
		return
	}
	u := reply.Usage
	span.SetAttributes(
		attribute.Int64("gen_ai.usage.input_tokens", u.InputTokens),
		attribute.Int64("gen_ai.usage.output_tokens", u.OutputTokens),
		attribute.Int64("gen_ai.usage.cache_read.input_tokens", u.CacheReadTokens),
		attribute.Int64("gen_ai.usage.cache_creation.input_tokens", u.CacheWriteTokens),
	)
	if reply.FinishReason != "" {
		span.SetAttributes(attribute.StringSlice("gen_ai.response.finish_reasons", []string{reply.FinishReason}))
	}
	if u.CostUSD > 0 {
		span.SetAttributes(attribute.Float64("sluice.cost_usd", u.CostUSD))
	}
	if observe.CaptureContent() {
		if b, err := json.Marshal([]chatMessage{reply.Message}); err == nil {
			span.SetAttributes(attribute.String("gen_ai.output.messages", flows.RedactString(string(b))))
		}
	}
	span.End()
}

// errorType is a failed call's error.type: its flows error code, or "error".
func errorType(err error) string {
	if c := flows.ErrorCode(err); c != "" {
		return string(c)
	}
	return "error"
}

// observeModel tells the observer about a model call.
func (e *Env) observeModel(step *flows.Step, p *Provider, model string, took time.Duration, reply *chatReply, err error) {
	if e.Observer == nil {
		return
	}
	c := ModelCall{Flow: step.Flow, Node: step.Node, Provider: p.Name, Model: model, Duration: took, Failed: err != nil}
	if reply != nil {
		c.Usage = reply.Usage
	}
	e.Observer.ModelCall(c)
}

// toolSpan starts the span of one tool call an agent's model asked for.
func toolSpan(ctx context.Context, call toolCall) (context.Context, trace.Span) {
	if !observe.Enabled() {
		return ctx, nil
	}
	attrs := []attribute.KeyValue{
		attribute.String("gen_ai.operation.name", "execute_tool"),
		attribute.String("gen_ai.tool.name", call.Name),
		attribute.String("gen_ai.tool.call.id", call.ID),
		attribute.String("gen_ai.tool.type", "function"),
	}
	if observe.CaptureContent() {
		attrs = append(attrs, attribute.String("gen_ai.tool.call.arguments", flows.RedactString(call.Arguments)))
	}
	return observe.Tracer().Start(ctx, "execute_tool "+call.Name, trace.WithSpanKind(trace.SpanKindInternal), trace.WithAttributes(attrs...))
}

// endToolSpan records a tool call's result: its error goes back to the model, so it is
// not the span's failure unless the step fails (stepErr).
func endToolSpan(span trace.Span, content string, stepErr error) {
	if span == nil {
		return
	}
	if stepErr != nil {
		span.SetStatus(codes.Error, truncateText(flows.RedactString(stepErr.Error()), 1000))
	}
	if observe.CaptureContent() && stepErr == nil {
		span.SetAttributes(attribute.String("gen_ai.tool.call.result", truncateText(flows.RedactString(content), 4000)))
	}
	span.End()
}

// cacheSpan starts the span of a cached call: the lookup, the single-flight wait or
// the computation under it.
func cacheSpan(ctx context.Context, step *flows.Step, key string) (context.Context, trace.Span) {
	if !observe.Enabled() {
		return ctx, nil
	}
	kind := key
	if i := indexByte(key, ':'); i >= 0 {
		kind = key[:i]
	}
	return observe.Tracer().Start(ctx, "cache "+kind, trace.WithAttributes(attribute.String("sluice.node", step.Node), attribute.String("sluice.cache.component", kind)))
}

func endCacheSpan(span trace.Span, hit, waited bool, err error) {
	if span == nil {
		return
	}
	span.SetAttributes(attribute.Bool("sluice.cache.hit", hit), attribute.Bool("sluice.cache.singleflight_wait", waited))
	if err != nil {
		span.SetStatus(codes.Error, truncateText(flows.RedactString(err.Error()), 1000))
	}
	span.End()
}

func indexByte(s string, c byte) int {
	for i := 0; i < len(s); i++ {
		if s[i] == c {
			return i
		}
	}
	return -1
}
