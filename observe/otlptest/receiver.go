// Package otlptest is an OTLP/HTTP trace receiver for tests: it decodes what exporters
// send with the official OTLP protobuf types and keeps every span, and the raw bodies
// (so a test can look for a string anywhere in what left a process).
package otlptest

import (
	"bytes"
	"compress/gzip"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	collpb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// Span is one received span, flattened.
type Span struct {
	Service  string // the resource's service.name
	TraceID  string // hex
	SpanID   string
	ParentID string // "" for a root
	Name     string
	Kind     tracepb.Span_SpanKind
	Start    time.Time
	End      time.Time
	Attrs    map[string]any // string, int64, float64, bool or []any
	Status   tracepb.Status_StatusCode
	Message  string // the status message
	Links    []string
}

// Str is a string attribute ("" when missing).
func (s Span) Str(key string) string { v, _ := s.Attrs[key].(string); return v }

// Int is an integer attribute (0 when missing).
func (s Span) Int(key string) int64 { v, _ := s.Attrs[key].(int64); return v }

// Receiver collects spans sent to URL + "/v1/traces".
type Receiver struct {
	URL string

	mu    sync.Mutex
	spans []Span
	raw   bytes.Buffer
}

// New starts a receiver that stops with the test.
func New(t testing.TB) *Receiver {
	r := &Receiver{}
	srv := httptest.NewServer(http.HandlerFunc(r.serve))
	t.Cleanup(srv.Close)
	r.URL = srv.URL
	return r
}

func (r *Receiver) serve(w http.ResponseWriter, req *http.Request) {
	if req.URL.Path != "/v1/traces" || req.Method != http.MethodPost {
		http.NotFound(w, req)
		return
	}
	var body io.Reader = req.Body
	if req.Header.Get("Content-Encoding") == "gzip" {
		gz, err := gzip.NewReader(req.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		body = gz
	}
	b, err := io.ReadAll(body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var msg collpb.ExportTraceServiceRequest
	if err := proto.Unmarshal(b, &msg); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	r.mu.Lock()
	r.raw.Write(b)
	for _, rs := range msg.ResourceSpans {
		service := ""
		for _, kv := range rs.GetResource().GetAttributes() {
			if kv.Key == "service.name" {
				service = kv.Value.GetStringValue()
			}
		}
		for _, ss := range rs.ScopeSpans {
			for _, s := range ss.Spans {
				r.spans = append(r.spans, flatten(service, s))
			}
		}
	}
	r.mu.Unlock()
	out, _ := proto.Marshal(&collpb.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	w.Write(out)
}

func flatten(service string, s *tracepb.Span) Span {
	out := Span{Service: service, TraceID: hex.EncodeToString(s.TraceId), SpanID: hex.EncodeToString(s.SpanId), Name: s.Name, Kind: s.Kind,
		Start: time.Unix(0, int64(s.StartTimeUnixNano)), End: time.Unix(0, int64(s.EndTimeUnixNano)), Attrs: map[string]any{},
		Status: s.GetStatus().GetCode(), Message: s.GetStatus().GetMessage()}
	if len(s.ParentSpanId) > 0 {
		out.ParentID = hex.EncodeToString(s.ParentSpanId)
	}
	for _, kv := range s.Attributes {
		out.Attrs[kv.Key] = value(kv.Value)
	}
	for _, l := range s.Links {
		out.Links = append(out.Links, hex.EncodeToString(l.SpanId))
	}
	return out
}

func value(v *commonpb.AnyValue) any {
	switch x := v.GetValue().(type) {
	case *commonpb.AnyValue_StringValue:
		return x.StringValue
	case *commonpb.AnyValue_IntValue:
		return x.IntValue
	case *commonpb.AnyValue_DoubleValue:
		return x.DoubleValue
	case *commonpb.AnyValue_BoolValue:
		return x.BoolValue
	case *commonpb.AnyValue_ArrayValue:
		var out []any
		for _, e := range x.ArrayValue.Values {
			out = append(out, value(e))
		}
		return out
	}
	return nil
}

// Spans returns the spans received so far.
func (r *Receiver) Spans() []Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Span(nil), r.spans...)
}

// Raw returns every request body received so far, decoded from gzip: the protobuf
// bytes, in which strings appear as they are.
func (r *Receiver) Raw() []byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]byte(nil), r.raw.Bytes()...)
}

// Wait returns the spans once cond holds for them, or fails the test after d.
func (r *Receiver) Wait(t testing.TB, what string, d time.Duration, cond func([]Span) bool) []Span {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		spans := r.Spans()
		if cond(spans) {
			return spans
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s; %d spans received", d, what, len(spans))
		}
		time.Sleep(10 * time.Millisecond)
	}
}
