// Package observe holds Sluice's OpenTelemetry tracing: the tracer provider set up from
// the standard OTEL_* environment variables, the W3C trace context that travels with a
// run (in its hash and in each of its activations), and the span helpers the engine, the
// components and the server share.
//
// Tracing is off unless the environment asks for it, and then it costs nothing: Enabled
// is one atomic load, and every helper returns before it allocates. It imports no
// project package.
package observe

import (
	"context"
	"encoding/hex"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// ScopeName is the instrumentation scope of Sluice's own spans.
const ScopeName = "github.com/sluicehq/sluice"

var (
	enabled atomic.Bool
	capture atomic.Bool
	tracer  atomic.Pointer[tracerBox]
)

type tracerBox struct{ t trace.Tracer }

// Enabled reports whether this process exports traces.
func Enabled() bool { return enabled.Load() }

// CaptureContent reports whether the operator opted in to recording prompts and replies
// in model call spans (OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true). Even
// then, secret values are redacted from every span.
func CaptureContent() bool { return capture.Load() }

// Tracer is Sluice's tracer (a no-op one while tracing is off).
func Tracer() trace.Tracer {
	if b := tracer.Load(); b != nil {
		return b.t
	}
	return noop.NewTracerProvider().Tracer(ScopeName)
}

// Config configures Setup.
type Config struct {
	// Version is Sluice's version (service.version).
	Version string
	// Redact replaces secret values in text; every span's name, attributes, events and
	// status pass through it before they leave the process.
	Redact func(string) string
	// Logger receives export errors (nil: slog.Default()).
	Logger *slog.Logger
}

// Tracing settings read from the environment.
const (
	envExporter        = "OTEL_TRACES_EXPORTER"
	envEndpoint        = "OTEL_EXPORTER_OTLP_ENDPOINT"
	envTracesEndpoint  = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
	envProtocol        = "OTEL_EXPORTER_OTLP_PROTOCOL"
	envTracesProtocol  = "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"
	envSDKDisabled     = "OTEL_SDK_DISABLED"
	envCaptureContent  = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
	defaultServiceName = "sluice"
)

// Wanted reports whether the environment asks for traces, and explains a setting Sluice
// cannot honour: OTEL_TRACES_EXPORTER other than otlp or none, or OTLP over gRPC.
func Wanted(getenv func(string) string) (bool, error) {
	if strings.EqualFold(getenv(envSDKDisabled), "true") {
		return false, nil
	}
	exp := strings.ToLower(strings.TrimSpace(getenv(envExporter)))
	switch exp {
	case "none":
		return false, nil
	case "", "otlp":
	default:
		return false, fmt.Errorf("%s=%q: Sluice exports traces with otlp (or none)", envExporter, exp)
	}
	if exp == "" && getenv(envEndpoint) == "" && getenv(envTracesEndpoint) == "" {
		return false, nil
	}
	proto := getenv(envTracesProtocol)
	if proto == "" {
		proto = getenv(envProtocol)
	}
	if proto != "" && proto != "http/protobuf" {
		return false, fmt.Errorf("%s=%q: Sluice sends OTLP over HTTP (http/protobuf, usually port 4318)", envProtocol, proto)
	}
	return true, nil
}

// Setup starts exporting traces when the environment asks for it (see Wanted) and
// returns the function that flushes and stops the exporter. Without OTEL_* settings it
// does nothing and returns a no-op.
func Setup(ctx context.Context, cfg Config) (shutdown func(context.Context) error, err error) {
	noop := func(context.Context) error { return nil }
	on, err := Wanted(os.Getenv)
	if err != nil || !on {
		return noop, err
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	exp, err := otlptracehttp.New(ctx)
	if err != nil {
		return noop, fmt.Errorf("OTLP trace exporter: %w", err)
	}
	res, err := resource.New(ctx,
		resource.WithAttributes(attribute.String("service.name", defaultServiceName), attribute.String("service.version", cfg.Version)),
		resource.WithFromEnv(), resource.WithTelemetrySDK(), resource.WithHost())
	if err != nil && res == nil {
		return noop, fmt.Errorf("trace resource: %w", err)
	}
	var out sdktrace.SpanExporter = exp
	if cfg.Redact != nil {
		out = &redactingExporter{next: exp, redact: cfg.Redact}
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(out), sdktrace.WithResource(res), sdktrace.WithIDGenerator(idGenerator{}))
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) { log.Warn("tracing", "error", err) }))
	tracer.Store(&tracerBox{t: tp.Tracer(ScopeName)})
	capture.Store(strings.EqualFold(os.Getenv(envCaptureContent), "true"))
	enabled.Store(true)
	return func(ctx context.Context) error {
		enabled.Store(false)
		return tp.Shutdown(ctx)
	}, nil
}

// UseProvider makes tp Sluice's tracer provider (tests: an in-memory exporter); nil
// turns tracing off again.
func UseProvider(tp trace.TracerProvider, captureContent bool) {
	if tp == nil {
		enabled.Store(false)
		tracer.Store(nil)
		capture.Store(false)
		return
	}
	tracer.Store(&tracerBox{t: tp.Tracer(ScopeName)})
	capture.Store(captureContent)
	enabled.Store(true)
}

// NewTestProvider is a tracer provider for tests that sends spans to exp as they end,
// with Sluice's id generator (which EndRun needs).
func NewTestProvider(exp sdktrace.SpanExporter) *sdktrace.TracerProvider {
	return sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp), sdktrace.WithIDGenerator(idGenerator{}))
}

// Transport wraps an HTTP transport so that each request is a client span and carries
// the traceparent header; while tracing is off it returns rt itself.
func Transport(rt http.RoundTripper) http.RoundTripper {
	if !Enabled() {
		return rt
	}
	return otelhttp.NewTransport(rt, otelhttp.WithTracerProvider(otel.GetTracerProvider()))
}

// Traceparent formats a span context as a W3C traceparent ("" when it is not valid).
func Traceparent(sc trace.SpanContext) string {
	if !sc.IsValid() {
		return ""
	}
	var b [55]byte
	b[0], b[1], b[2] = '0', '0', '-'
	tid, sid := sc.TraceID(), sc.SpanID()
	hex.Encode(b[3:35], tid[:])
	b[35] = '-'
	hex.Encode(b[36:52], sid[:])
	b[52] = '-'
	hex.Encode(b[53:55], []byte{byte(sc.TraceFlags())})
	return string(b[:])
}

// ParseTraceparent reads a W3C traceparent (version 00, or a later one's first fields).
func ParseTraceparent(s string) (trace.SpanContext, bool) {
	if len(s) < 55 || s[2] != '-' || s[35] != '-' || s[52] != '-' || (len(s) > 55 && s[55] != '-') || s[:2] == "ff" {
		return trace.SpanContext{}, false
	}
	var tid trace.TraceID
	var sid trace.SpanID
	var flags [1]byte
	if _, err := hex.Decode(tid[:], []byte(s[3:35])); err != nil {
		return trace.SpanContext{}, false
	}
	if _, err := hex.Decode(sid[:], []byte(s[36:52])); err != nil {
		return trace.SpanContext{}, false
	}
	if _, err := hex.Decode(flags[:], []byte(s[53:55])); err != nil {
		return trace.SpanContext{}, false
	}
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.TraceFlags(flags[0]) & trace.FlagsSampled, Remote: true})
	return sc, sc.IsValid()
}

// ContextWithTraceparent returns ctx with the remote span context tp names as its
// parent (ctx itself when tp is empty or not valid).
func ContextWithTraceparent(ctx context.Context, tp string) context.Context {
	if tp == "" {
		return ctx
	}
	sc, ok := ParseTraceparent(tp)
	if !ok {
		return ctx
	}
	return trace.ContextWithRemoteSpanContext(ctx, sc)
}

// RunTrace is where a run sits in its trace: Traceparent names the run span (the
// parent of every step span; activations carry it), Parent the span the run span is a
// child of ("" for a trace's root).
type RunTrace struct {
	Traceparent string
	Parent      string // hex span id
}

// BeginRun draws the ids of a new run's span, a child of the span in ctx (an API
// request's, a webhook's, a subflow step's) or a new trace's root, and the sampling
// decision. The span is not ended here: a run outlives the process that starts it, so
// EndRun, in whichever process sees the run finish, records it with these ids and the
// run's real start and end. The zero RunTrace (tracing off) adds nothing to the run.
func BeginRun(ctx context.Context, flow string) RunTrace {
	if !Enabled() {
		return RunTrace{}
	}
	_, span := Tracer().Start(ctx, "run "+flow, trace.WithSpanKind(trace.SpanKindInternal))
	rt := RunTrace{Traceparent: Traceparent(span.SpanContext())}
	if p := trace.SpanContextFromContext(ctx); p.IsValid() && p.TraceID() == span.SpanContext().TraceID() {
		rt.Parent = p.SpanID().String()
	}
	return rt
}

// EndRun records a finished run's span with the ids BeginRun drew, from start to end.
// Nothing is recorded for a run that was not sampled.
func EndRun(ctx context.Context, rt RunTrace, name string, start, end time.Time, attrs []attribute.KeyValue, failed string) {
	if !Enabled() {
		return
	}
	sc, ok := ParseTraceparent(rt.Traceparent)
	if !ok || !sc.IsSampled() {
		return
	}
	if rt.Parent != "" {
		if psid, err := trace.SpanIDFromHex(rt.Parent); err == nil {
			ctx = trace.ContextWithRemoteSpanContext(ctx, trace.NewSpanContext(trace.SpanContextConfig{
				TraceID: sc.TraceID(), SpanID: psid, TraceFlags: sc.TraceFlags(), Remote: true}))
		}
	}
	opts := []trace.SpanStartOption{trace.WithTimestamp(start), trace.WithSpanKind(trace.SpanKindInternal), trace.WithAttributes(attrs...)}
	if rt.Parent == "" {
		opts = append(opts, trace.WithNewRoot())
	}
	ctx = context.WithValue(ctx, forcedIDs{}, forced{trace: sc.TraceID(), span: sc.SpanID()})
	_, span := Tracer().Start(ctx, name, opts...)
	if failed != "" {
		span.SetStatus(codes.Error, failed)
	}
	span.End(trace.WithTimestamp(end))
}

// RunParent returns the context step spans of a run start from: the run span an
// activation names, or, for a run started where tracing was off, a parent derived from
// the run id, so that its steps still form one trace.
func RunParent(ctx context.Context, tp, flow, run string) context.Context {
	if tp != "" {
		if sc, ok := ParseTraceparent(tp); ok {
			return trace.ContextWithRemoteSpanContext(ctx, sc)
		}
	}
	return trace.ContextWithRemoteSpanContext(ctx, DerivedRunSpan(flow, run))
}

// DerivedRunSpan is the span context of a run that has no trace context of its own: its
// trace id and span id are hashes of the flow and run ids.
func DerivedRunSpan(flow, run string) trace.SpanContext {
	h := fnv128(flow + "/" + run)
	var tid trace.TraceID
	var sid trace.SpanID
	copy(tid[:], h[:])
	copy(sid[:], h[4:12])
	sid[0] |= 1 // never all zero
	tid[0] |= 1
	return trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled, Remote: true})
}

// fnv128 is FNV-1a over s, 128 bits.
func fnv128(s string) [16]byte {
	var a, b uint64 = 0xcbf29ce484222325, 0x84222325cbf29ce4
	for i := 0; i < len(s); i++ {
		a = (a ^ uint64(s[i])) * 0x100000001b3
		b = (b ^ uint64(s[len(s)-1-i])) * 0x100000001b3
	}
	var out [16]byte
	for i := 0; i < 8; i++ {
		out[i] = byte(a >> (8 * i))
		out[8+i] = byte(b >> (8 * i))
	}
	return out
}

// forcedIDs carries the ids EndRun gives the span it records.
type forcedIDs struct{}

type forced struct {
	trace trace.TraceID
	span  trace.SpanID
}

// idGenerator draws random ids, except for a span EndRun records again.
type idGenerator struct{}

func (idGenerator) NewIDs(ctx context.Context) (trace.TraceID, trace.SpanID) {
	if f, ok := ctx.Value(forcedIDs{}).(forced); ok {
		return f.trace, f.span
	}
	var tid trace.TraceID
	var sid trace.SpanID
	for !tid.IsValid() {
		putUint64(tid[:8], rand.Uint64())
		putUint64(tid[8:], rand.Uint64())
	}
	for !sid.IsValid() {
		putUint64(sid[:], rand.Uint64())
	}
	return tid, sid
}

func (idGenerator) NewSpanID(ctx context.Context, tid trace.TraceID) trace.SpanID {
	if f, ok := ctx.Value(forcedIDs{}).(forced); ok && f.trace == tid {
		return f.span
	}
	var sid trace.SpanID
	for !sid.IsValid() {
		putUint64(sid[:], rand.Uint64())
	}
	return sid
}

func putUint64(b []byte, v uint64) {
	for i := 0; i < 8; i++ {
		b[i] = byte(v >> (8 * i))
	}
}
