package server

import (
	"strings"

	"github.com/labstack/echo/v4"
	"go.opentelemetry.io/contrib/instrumentation/github.com/labstack/echo/otelecho"
)

// traceRequests makes each API, webhook ingress, MCP and OpenAI-compatible request a
// server span, a child of the request's traceparent when it has one: a run started by
// the request is then part of the caller's trace (docs/tracing.md). Pages, assets,
// health, metrics and the live socket are not traced. routes adds it only while
// tracing is on.
func (s *Server) traceRequests() echo.MiddlewareFunc {
	return otelecho.Middleware("sluice", otelecho.WithSkipper(func(c echo.Context) bool {
		p := c.Request().URL.Path
		return !(strings.HasPrefix(p, "/api/") || strings.HasPrefix(p, "/hooks/") || strings.HasPrefix(p, "/v1/") || p == "/mcp")
	}))
}
