package server

import (
	"fmt"
	"log/slog"
	"runtime/debug"

	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"
	"github.com/sluicehq/sluice/flows"
)

// recoverPanics turns a panic in a handler into a logged Internal error: the user sees
// a 500 with no internals, the log has the stack.
func (s *Server) recoverPanics(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) (err error) {
		defer func() {
			if r := recover(); r != nil {
				s.log.Error("panic in handler", "method", c.Request().Method, "path", c.Path(),
					"panic", fmt.Sprint(r), "stack", string(debug.Stack()))
				err = &flows.Error{Code: flows.Internal, Message: "internal error", Err: fmt.Errorf("panic: %v", r)}
			}
		}()
		return next(c)
	}
}

// requestLog logs one line per request with log/slog.
func (s *Server) requestLog() echo.MiddlewareFunc {
	return middleware.RequestLoggerWithConfig(middleware.RequestLoggerConfig{
		LogMethod: true, LogURIPath: true, LogStatus: true, LogLatency: true, LogError: true, LogRemoteIP: true,
		HandleError: true, // the logged status is the one the error handler chose
		LogValuesFunc: func(c echo.Context, v middleware.RequestLoggerValues) error {
			level := slog.LevelInfo
			if v.Status >= 500 {
				level = slog.LevelError
			}
			attrs := []slog.Attr{
				slog.String("method", v.Method), slog.String("path", v.URIPath),
				slog.Int("status", v.Status), slog.Duration("latency", v.Latency),
				slog.String("remote", v.RemoteIP),
			}
			if v.Error != nil && v.Status >= 500 {
				attrs = append(attrs, slog.String("error", v.Error.Error()))
			}
			s.log.LogAttrs(c.Request().Context(), level, "request", attrs...)
			return nil
		},
	})
}
