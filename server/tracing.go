package server

import (
	"context"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"
	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
)

// traceRequests makes each API, webhook ingress, MCP and OpenAI-compatible request a
// server span, a child of the request's traceparent when it has one: a run started by
// the request is then part of the caller's trace (docs/tracing.md). Pages, assets,
// health, metrics and the live socket are not traced. routes adds it only while
// tracing is on.
//
// The span is otelhttp's, the maintained instrumentation (otelecho is deprecated and
// was removed upstream), so server spans carry the stable HTTP semantic conventions like
// the client spans of the http component, with the route Echo matched as http.route
// and in the span's name ("POST /api/flows/:flow/runs").
func (s *Server) traceRequests() echo.MiddlewareFunc {
	type call struct {
		c    echo.Context
		next echo.HandlerFunc
	}
	type callKey struct{}
	h := otelhttp.NewHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		cl := r.Context().Value(callKey{}).(*call)
		cl.c.SetRequest(r)
		cl.c.Response().Writer = w // otelhttp's writer records the status and size
		trace.SpanFromContext(r.Context()).SetAttributes(attribute.String("http.route", cl.c.Path()))
		if err := cl.next(cl.c); err != nil {
			cl.c.Error(err) // the error's answer is written inside the span
		}
	}), "sluice", otelhttp.WithSpanNameFormatter(func(_ string, r *http.Request) string {
		if cl, ok := r.Context().Value(callKey{}).(*call); ok {
			return r.Method + " " + cl.c.Path()
		}
		return r.Method
	}))
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			p := c.Request().URL.Path
			if !(strings.HasPrefix(p, "/api/") || strings.HasPrefix(p, "/hooks/") || strings.HasPrefix(p, "/v1/") || p == "/mcp") {
				return next(c)
			}
			r := c.Request()
			h.ServeHTTP(c.Response().Writer, r.WithContext(context.WithValue(r.Context(), callKey{}, &call{c: c, next: next})))
			return nil
		}
	}
}
