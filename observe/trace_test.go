package observe

import (
	"context"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

func TestTraceparentRoundTrips(t *testing.T) {
	for _, tp := range []string{
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00",
	} {
		sc, ok := ParseTraceparent(tp)
		if !ok || Traceparent(sc) != tp || !sc.IsRemote() {
			t.Errorf("%s: parsed %v (ok %v), formatted %q", tp, sc, ok, Traceparent(sc))
		}
	}
	for _, bad := range []string{"", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7", "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
		"00-00000000000000000000000000000000-00f067aa0ba902b7-01", "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
		"00-4bf92f3577b34da6a3ce929d0e0e473x-00f067aa0ba902b7-01", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01x"} {
		if _, ok := ParseTraceparent(bad); ok {
			t.Errorf("%q parsed as a traceparent", bad)
		}
	}
}

func TestTracingIsWantedOnlyWhenTheEnvironmentAsks(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  map[string]string
		want bool
		err  string
	}{
		{"nothing set: off", nil, false, ""},
		{"an OTLP endpoint: on", map[string]string{envEndpoint: "http://localhost:4318"}, true, ""},
		{"a traces endpoint: on", map[string]string{envTracesEndpoint: "http://localhost:4318/v1/traces"}, true, ""},
		{"exporter otlp: on", map[string]string{envExporter: "otlp"}, true, ""},
		{"exporter none wins over an endpoint", map[string]string{envExporter: "none", envEndpoint: "http://x:4318"}, false, ""},
		{"the SDK disabled", map[string]string{envSDKDisabled: "true", envEndpoint: "http://x:4318"}, false, ""},
		{"an exporter Sluice does not have", map[string]string{envExporter: "zipkin"}, false, "otlp"},
		{"OTLP over gRPC is explained", map[string]string{envEndpoint: "http://x:4317", envProtocol: "grpc"}, false, "http/protobuf"},
		{"http/protobuf: on", map[string]string{envEndpoint: "http://x:4318", envTracesProtocol: "http/protobuf"}, true, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Wanted(func(k string) string { return tc.env[k] })
			if got != tc.want || (err == nil) != (tc.err == "") || (err != nil && !strings.Contains(err.Error(), tc.err)) {
				t.Errorf("Wanted = %v, %v; want %v and an error mentioning %q", got, err, tc.want, tc.err)
			}
		})
	}
}

// useMemory makes tracing go to an in-memory exporter for the test.
func useMemory(t *testing.T, redact func(string) string) *tracetest.InMemoryExporter {
	mem := tracetest.NewInMemoryExporter()
	var exp sdktrace.SpanExporter = mem
	if redact != nil {
		exp = &redactingExporter{next: mem, redact: redact}
	}
	UseProvider(NewTestProvider(exp), false)
	t.Cleanup(func() { UseProvider(nil, false) })
	return mem
}

func TestARunSpanIsRecordedWithTheIDsDrawnAtItsStart(t *testing.T) {
	mem := useMemory(t, nil)
	// A root run, and a run started under a caller's span.
	root := BeginRun(context.Background(), "f")
	caller, _ := ParseTraceparent("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	child := BeginRun(trace.ContextWithRemoteSpanContext(context.Background(), caller), "f")
	if len(mem.GetSpans()) != 0 {
		t.Fatal("BeginRun recorded a span; the run span is recorded when the run ends")
	}
	if root.Parent != "" || child.Parent != "00f067aa0ba902b7" || !strings.Contains(child.Traceparent, "4bf92f3577b34da6a3ce929d0e0e4736") {
		t.Fatalf("root %+v, child %+v", root, child)
	}
	start, end := time.Unix(100, 0), time.Unix(160, 0)
	EndRun(context.Background(), root, "run f", start, end, []attribute.KeyValue{attribute.String("sluice.run", "r1")}, "")
	EndRun(context.Background(), child, "run f", start, end, nil, "it broke")
	spans := mem.GetSpans()
	if len(spans) != 2 {
		t.Fatalf("%d spans, want 2", len(spans))
	}
	for i, rt := range []RunTrace{root, child} {
		s := spans[i]
		if Traceparent(s.SpanContext) != rt.Traceparent || !s.StartTime.Equal(start) || !s.EndTime.Equal(end) {
			t.Errorf("run span %d: %s from %s to %s, want %s from %s to %s", i, Traceparent(s.SpanContext), s.StartTime, s.EndTime, rt.Traceparent, start, end)
		}
	}
	if spans[0].Parent.IsValid() {
		t.Errorf("the root run's span has a parent %v", spans[0].Parent)
	}
	if spans[1].Parent.SpanID().String() != "00f067aa0ba902b7" || spans[1].Status.Code != codes.Error || spans[1].Status.Description != "it broke" {
		t.Errorf("the child run's span: parent %v, status %v", spans[1].Parent, spans[1].Status)
	}
	// A step of the run is its child, also when the run carries no trace context.
	ctx, step := Tracer().Start(RunParent(context.Background(), root.Traceparent, "f", "r1"), "step a")
	step.End()
	if got := trace.SpanFromContext(ctx).SpanContext(); Traceparent(trace.NewSpanContext(trace.SpanContextConfig{TraceID: got.TraceID(), SpanID: mem.GetSpans()[2].Parent.SpanID(), TraceFlags: 1})) != root.Traceparent {
		t.Errorf("the step's parent is %v, want the run span %s", mem.GetSpans()[2].Parent, root.Traceparent)
	}
	a := trace.SpanContextFromContext(RunParent(context.Background(), "", "f", "r2"))
	b := trace.SpanContextFromContext(RunParent(context.Background(), "", "f", "r2"))
	c := trace.SpanContextFromContext(RunParent(context.Background(), "", "f", "r3"))
	if !a.IsValid() || a.TraceID() != b.TraceID() || a.TraceID() == c.TraceID() {
		t.Errorf("untraced runs' parents: %v %v %v; want one trace per run", a, b, c)
	}
}

func TestAnUnsampledRunRecordsNoRunSpan(t *testing.T) {
	mem := useMemory(t, nil)
	caller, _ := ParseTraceparent("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00")
	rt := BeginRun(trace.ContextWithRemoteSpanContext(context.Background(), caller), "f")
	EndRun(context.Background(), rt, "run f", time.Now(), time.Now(), nil, "")
	if n := len(mem.GetSpans()); n != 0 || !strings.HasSuffix(rt.Traceparent, "-00") {
		t.Errorf("an unsampled run: %d spans, traceparent %s", n, rt.Traceparent)
	}
}

func TestSecretsAreRedactedFromEverySpanOnExport(t *testing.T) {
	redact := func(s string) string { return strings.ReplaceAll(s, "hunter2", "[redacted:PW]") }
	mem := useMemory(t, redact)
	_, s := Tracer().Start(context.Background(), "GET /hunter2", trace.WithAttributes(
		attribute.String("url.full", "https://x/?key=hunter2"), attribute.StringSlice("list", []string{"a", "hunter2"}), attribute.Int("n", 1)))
	s.AddEvent("saw hunter2", trace.WithAttributes(attribute.String("what", "hunter2")))
	s.SetStatus(codes.Error, "denied for hunter2")
	s.End()
	_, clean := Tracer().Start(context.Background(), "clean", trace.WithAttributes(attribute.String("a", "b")))
	clean.End()
	got := mem.GetSpans()
	if len(got) != 2 {
		t.Fatalf("%d spans", len(got))
	}
	text := got[0].Name + " " + got[0].Status.Description
	for _, kv := range got[0].Attributes {
		text += " " + kv.Value.String()
	}
	for _, e := range got[0].Events {
		text += " " + e.Name
		for _, kv := range e.Attributes {
			text += " " + kv.Value.String()
		}
	}
	if strings.Contains(text, "hunter2") || strings.Count(text, "[redacted:PW]") != 6 {
		t.Errorf("the exported span: %s", text)
	}
	if got[1].Name != "clean" || got[1].Attributes[0].Value.AsString() != "b" {
		t.Errorf("a span without secrets changed: %+v", got[1])
	}
}
