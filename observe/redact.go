package observe

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// redactingExporter replaces secret values in every span before it leaves the process:
// its name, attributes, events and status. It is the last line of defence — prompts and
// replies are only recorded on request, errors and outputs are redacted where they leave
// a component — so that no span ever carries a secret, whatever a library records
// (an HTTP client span's URL, an error message).
type redactingExporter struct {
	next   sdktrace.SpanExporter
	redact func(string) string
}

func (r *redactingExporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	out, copied := spans, false
	for i, s := range spans {
		if rs, changed := redactSpan(s, r.redact); changed {
			if !copied {
				out, copied = append([]sdktrace.ReadOnlySpan(nil), spans...), true
			}
			out[i] = rs
		}
	}
	return r.next.ExportSpans(ctx, out)
}

func (r *redactingExporter) Shutdown(ctx context.Context) error { return r.next.Shutdown(ctx) }

// redactedSpan is a span with some of its text replaced.
type redactedSpan struct {
	sdktrace.ReadOnlySpan
	name   string
	attrs  []attribute.KeyValue
	events []sdktrace.Event
	status sdktrace.Status
}

func (s *redactedSpan) Name() string                     { return s.name }
func (s *redactedSpan) Attributes() []attribute.KeyValue { return s.attrs }
func (s *redactedSpan) Events() []sdktrace.Event         { return s.events }
func (s *redactedSpan) Status() sdktrace.Status          { return s.status }

func redactSpan(s sdktrace.ReadOnlySpan, redact func(string) string) (sdktrace.ReadOnlySpan, bool) {
	name := redact(s.Name())
	attrs, ca := redactAttrs(s.Attributes(), redact)
	st := s.Status()
	desc := redact(st.Description)
	events := s.Events()
	changedEvents := false
	for i, e := range events {
		ea, c := redactAttrs(e.Attributes, redact)
		en := redact(e.Name)
		if c || en != e.Name {
			if !changedEvents {
				events = append([]sdktrace.Event(nil), events...)
				changedEvents = true
			}
			events[i].Attributes, events[i].Name = ea, en
		}
	}
	if name == s.Name() && !ca && desc == st.Description && !changedEvents {
		return s, false
	}
	st.Description = desc
	return &redactedSpan{ReadOnlySpan: s, name: name, attrs: attrs, events: events, status: st}, true
}

func redactAttrs(in []attribute.KeyValue, redact func(string) string) ([]attribute.KeyValue, bool) {
	var out []attribute.KeyValue
	for i, kv := range in {
		var nv attribute.Value
		changed := false
		switch kv.Value.Type() {
		case attribute.STRING:
			if v := redact(kv.Value.AsString()); v != kv.Value.AsString() {
				nv, changed = attribute.StringValue(v), true
			}
		case attribute.STRINGSLICE:
			vs := kv.Value.AsStringSlice()
			for j, v := range vs {
				if r := redact(v); r != v {
					vs[j], changed = r, true
				}
			}
			if changed {
				nv = attribute.StringSliceValue(vs)
			}
		}
		if changed {
			if out == nil {
				out = append([]attribute.KeyValue(nil), in...)
			}
			out[i] = attribute.KeyValue{Key: kv.Key, Value: nv}
		}
	}
	if out == nil {
		return in, false
	}
	return out, true
}

var _ sdktrace.SpanExporter = (*redactingExporter)(nil)
