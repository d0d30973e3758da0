package server

import (
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net"
	"net/http"
	"net/url"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"time"

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
				if r == http.ErrAbortHandler {
					panic(r)
				}
				s.log.Error("panic in handler", "method", c.Request().Method, "path", c.Path(),
					"panic", fmt.Sprint(r), "stack", string(debug.Stack()))
				err = &flows.Error{Code: flows.Internal, Message: "internal error", Err: fmt.Errorf("panic: %v", r)}
			}
		}()
		return next(c)
	}
}

// requestLog logs one line per request with log/slog. It logs the path, never the
// query (a browser's one-time ?token= is in it) or any header.
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

// securityHeaders are sent with every response.
func securityHeaders(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		h := c.Response().Header()
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Referrer-Policy", "same-origin")
		return next(c)
	}
}

// TokenCookie is the cookie a browser keeps the token in after opening any page with
// ?token=TOKEN once (browsers cannot add a header to page loads, WebSockets or
// EventSource).
const TokenCookie = "sluice_token"

// rateLimited is the 429 of an address that failed authentication too often, or nil.
func (s *Server) rateLimited(c echo.Context, ip string) error {
	if wait := s.limiter.blocked(ip); wait > 0 {
		c.Response().Header().Set("Retry-After", strconv.Itoa(int(wait.Round(time.Second)/time.Second)+1))
		return &flows.Error{Code: codeRateLimited, Message: "too many failed authentications from this address; try again later"}
	}
	return nil
}

func (s *Server) unauthorized(c echo.Context, msg string) error {
	c.Response().Header().Set("WWW-Authenticate", `Bearer realm="sluice"`)
	return &flows.Error{Code: flows.Unauthorized, Message: msg}
}

// tokenOK compares in constant time; hashing first hides the token's length too.
func (s *Server) tokenOK(tok string) bool {
	a := sha256.Sum256([]byte(tok))
	b := sha256.Sum256([]byte(s.cfg.Token))
	return subtle.ConstantTimeCompare(a[:], b[:]) == 1
}

// clientIP is the address the connection comes from. Forwarded headers are ignored:
// anyone can write them, and the failed-auth limit must not be escapable by them.
func clientIP(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

// sameOrigin reports whether an Origin header names the host the request was sent to.
func sameOrigin(origin, host string) bool {
	u, err := url.Parse(origin)
	if err != nil || u.Host == "" {
		return false
	}
	return strings.EqualFold(u.Host, host)
}

// failLimiter counts failed authentications per client address in fixed windows.
type failLimiter struct {
	max    int
	window time.Duration

	mu    sync.Mutex
	seen  map[string]*failCount
	sweep time.Time
}

type failCount struct {
	n     int
	start time.Time
}

func newFailLimiter(max int, window time.Duration) *failLimiter {
	return &failLimiter{max: max, window: window, seen: map[string]*failCount{}}
}

// blocked returns how long ip must wait, 0 when it may try.
func (l *failLimiter) blocked(ip string) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	f := l.seen[ip]
	if f == nil {
		return 0
	}
	left := l.window - time.Since(f.start)
	if left <= 0 {
		delete(l.seen, ip)
		return 0
	}
	if f.n >= l.max {
		return left
	}
	return 0
}

func (l *failLimiter) fail(ip string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := time.Now()
	if now.Sub(l.sweep) > l.window {
		for k, f := range l.seen {
			if now.Sub(f.start) > l.window {
				delete(l.seen, k)
			}
		}
		l.sweep = now
	}
	f := l.seen[ip]
	if f == nil || now.Sub(f.start) > l.window {
		f = &failCount{start: now}
		l.seen[ip] = f
	}
	f.n++
}

// requireJSON answers 415 to a request whose body is not JSON, and caps every body at the
// configured limit. With always (the API), every unsafe method must say
// application/json, with a body or without: that is the type another site's page cannot
// send without a CORS preflight. Without it (the webhook ingress, authenticated by the
// flow's secret), only a request with a body must.
func (s *Server) requireJSON(always bool) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			req := c.Request()
			if req.ContentLength > s.cfg.BodyLimit {
				return &flows.Error{Code: flows.TooLarge, Message: fmt.Sprintf("the request body is larger than %d bytes", s.cfg.BodyLimit)}
			}
			hasBody := req.ContentLength > 0 || (req.ContentLength < 0 && req.Body != nil && req.Body != http.NoBody)
			// A method the route does not have is answered 405 (or 404) by the router.
			if unsafeMethod(req.Method) && (hasBody || always) && s.routed[req.Method+" "+c.Path()] {
				ct := req.Header.Get(echo.HeaderContentType)
				mt, _, err := mime.ParseMediaType(ct)
				if err != nil || (mt != echo.MIMEApplicationJSON && !strings.HasSuffix(mt, "+json")) {
					msg := fmt.Sprintf("send Content-Type: application/json (it was %q)", ct)
					if always && !hasBody {
						msg = "send Content-Type: application/json, also without a body: changes are accepted only as JSON requests"
					}
					return &flows.Error{Code: flows.Unsupported, Message: msg}
				}
			}
			req.Body = http.MaxBytesReader(c.Response(), req.Body, s.cfg.BodyLimit)
			return next(c)
		}
	}
}

// readBody reads the request body; one over the limit is a TooLarge error.
func readBody(c echo.Context) ([]byte, error) {
	b, err := io.ReadAll(c.Request().Body)
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return nil, &flows.Error{Code: flows.TooLarge, Message: fmt.Sprintf("the request body is larger than %d bytes", mbe.Limit)}
	}
	var ne net.Error
	if errors.Is(err, os.ErrDeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout()) {
		c.Response().Header().Set(echo.HeaderConnection, "close")
		return nil, &flows.Error{Code: codeRequestTimeout, Message: "the request body did not arrive in time"}
	}
	if err != nil {
		return nil, &flows.Error{Code: flows.Invalid, Message: "cannot read the request body"}
	}
	return b, nil
}

// cors allows the configured origins to call the API from a browser.
func (s *Server) cors() echo.MiddlewareFunc {
	return middleware.CORSWithConfig(middleware.CORSConfig{
		AllowOrigins:  s.cfg.CORSOrigins,
		AllowMethods:  []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodDelete},
		AllowHeaders:  []string{echo.HeaderAuthorization, echo.HeaderContentType, "Last-Event-ID"},
		ExposeHeaders: []string{"Location"},
		MaxAge:        600,
	})
}
