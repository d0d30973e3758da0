package server_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/sluicehq/sluice/flows/engine/dispatch"
	"github.com/sluicehq/sluice/flows/nodes/llmtest"
	"github.com/sluicehq/sluice/observe"
	"github.com/sluicehq/sluice/server"
	"github.com/sluicehq/sluice/store/storetest"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// traceInMemory turns tracing on as observe.Setup does for a process (the global tracer
// provider and W3C propagator otelhttp uses, and Sluice's own tracer), keeping the spans
// in memory. Call it before newAPI: the server adds its tracing middleware only while
// tracing is on.
func traceInMemory(t *testing.T) *tracetest.InMemoryExporter {
	t.Helper()
	mem := tracetest.NewInMemoryExporter()
	tp := observe.NewTestProvider(mem)
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(propagation.TraceContext{})
	observe.UseProvider(tp, false)
	t.Cleanup(func() {
		observe.UseProvider(nil, false)
		otel.SetTracerProvider(noop.NewTracerProvider())
		otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator())
	})
	return mem
}

// An incoming traceparent on the webhook ingress (a signed delivery) and on the
// OpenAI-compatible gateway makes the run it starts part of the caller's trace: the run
// span is a child of the request's server span, itself a child of the caller's span.
func TestAnIncomingTraceparentBecomesTheParentOfTheRunItStarts(t *testing.T) {
	mem := traceInMemory(t)
	model := llmtest.New(t)
	model.Respond(func(llmtest.Request) llmtest.Reply {
		return llmtest.Reply{Content: "Your order ships today.", PromptTokens: 12, CompletionTokens: 5}
	})
	const secret = "trace-hook-secret-5be1"
	a := newAPIWith(t, storetest.Real(t), model.Env(0), func(c *server.Config, _ *server.Deps) {
		c.HookSecret = func(string) string { return secret }
	})
	hooked := a.saveFlow("linear", nil)
	chat := a.saveFlow(chatFlow, nil)

	hookBody := `{"name": "Trace"}`
	chatBody := `{"model": "` + chat + `", "messages": [{"role": "user", "content": "Where is my order?"}]}`
	for _, c := range []struct {
		name, flow, path, body string
		header                 []string
		status                 int
		caller                 string
	}{
		{"webhook ingress", hooked, "/hooks/" + hooked, hookBody,
			[]string{"Authorization", "", "X-Sluice-Signature", dispatch.Sign([]byte(secret), []byte(hookBody))},
			http.StatusAccepted, "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"},
		{"chat completions", chat, "/v1/chat/completions", chatBody, nil,
			http.StatusOK, "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"},
	} {
		caller, ok := observe.ParseTraceparent(c.caller)
		if !ok {
			t.Fatalf("%s: the caller's traceparent %q does not parse", c.name, c.caller)
		}
		a.must(c.status, "POST", c.path, c.body, append([]string{"traceparent", c.caller}, c.header...)...)
		var list server.RunList
		a.must(http.StatusOK, "GET", "/api/flows/"+c.flow+"/runs", nil).into(t, &list)
		if len(list.Runs) != 1 {
			t.Fatalf("%s: %d runs of %s, want 1", c.name, len(list.Runs), c.flow)
		}
		run, err := a.r.GetRun(context.Background(), c.flow, list.Runs[0].ID)
		if err != nil {
			t.Fatal(err)
		}
		runSpan, ok := observe.ParseTraceparent(run.Trace)
		if !ok || runSpan.TraceID() != caller.TraceID() {
			t.Errorf("%s: the run's traceparent %q is not in the caller's trace %s", c.name, run.Trace, caller.TraceID())
			continue
		}
		// The request's server span ends when its handler returns, which may be after
		// the client has the answer.
		var req *tracetest.SpanStub
		eventually(t, 10*time.Second, func() string {
			for _, s := range mem.GetSpans() {
				if s.SpanContext.SpanID().String() == run.TraceParent {
					req = &s
					return ""
				}
			}
			return c.name + ": no span is the run span's parent " + run.TraceParent
		})
		if req.SpanKind != trace.SpanKindServer || req.SpanContext.TraceID() != caller.TraceID() || req.Parent.SpanID() != caller.SpanID() || !req.Parent.IsRemote() {
			t.Errorf("%s: the run's parent is span %q (kind %s, trace %s, parent %s), want the request's server span, a child of the caller's %s",
				c.name, req.Name, req.SpanKind, req.SpanContext.TraceID(), req.Parent.SpanID(), caller.SpanID())
		}
	}
}

// A request's server span has the stable HTTP semantic conventions, as the client spans
// of the http component and the model calls have (otelecho mixed in the old names:
// http.method, http.status_code, http.target), with the route Echo matched in its name
// and as http.route.
func TestServerSpansUseTheStableHTTPConventions(t *testing.T) {
	mem := traceInMemory(t)
	a := newAPI(t, storetest.Embedded(t))
	flow := a.saveFlow("linear", nil)
	a.must(http.StatusNotFound, "GET", "/api/flows/"+flow+"/runs/rnope", nil)
	var span *tracetest.SpanStub
	eventually(t, 10*time.Second, func() string {
		for _, s := range mem.GetSpans() {
			if s.Name == "GET /api/flows/:flow/runs/:run" {
				span = &s
				return ""
			}
		}
		return "no span named GET /api/flows/:flow/runs/:run"
	})
	attrs := map[string]string{}
	for _, kv := range span.Attributes {
		attrs[string(kv.Key)] = kv.Value.String()
	}
	if attrs["http.request.method"] != "GET" || attrs["http.response.status_code"] != "404" || attrs["http.route"] != "/api/flows/:flow/runs/:run" {
		t.Errorf("span attributes %v; want http.request.method, http.response.status_code 404 and http.route", attrs)
	}
	for _, old := range []string{"http.method", "http.status_code", "http.target", "net.host.name", "http.scheme"} {
		if _, ok := attrs[old]; ok {
			t.Errorf("span attribute %s (the old conventions) is there: %v", old, attrs)
		}
	}
}
