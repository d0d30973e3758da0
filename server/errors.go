package server

import (
	"errors"
	"net"
	"net/http"
	"strings"
	"syscall"

	"github.com/labstack/echo/v4"
	"github.com/sluicehq/sluice/flows"
	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/templ/layout"
	"github.com/sluicehq/sluice/templ/pages"
)

// codeRateLimited is the code of a client that failed authentication too often.
const codeRateLimited flows.Code = "rate_limited"

// codeRequestTimeout is the code of a request whose body did not arrive in time.
const codeRequestTimeout flows.Code = "request_timeout"

// codeRunFailed and codeRunWaiting answer an OpenAI-compatible call whose run failed or
// waits for a person: 400s, which no client retries (see runOutcome).
const (
	codeRunFailed  flows.Code = "run_failed"
	codeRunWaiting flows.Code = "run_waiting"
)

// statusOf is the one map from error codes to HTTP status.
var statusOf = map[flows.Code]int{
	codeRateLimited:    http.StatusTooManyRequests,
	codeRequestTimeout: http.StatusRequestTimeout,
	codeRunFailed:      http.StatusBadRequest,
	codeRunWaiting:     http.StatusBadRequest,
	flows.Invalid:      http.StatusBadRequest,
	flows.NotFound:     http.StatusNotFound,
	flows.Conflict:     http.StatusConflict,
	flows.TooLarge:     http.StatusRequestEntityTooLarge,
	flows.Unavailable:  http.StatusServiceUnavailable,
	flows.Timeout:      http.StatusGatewayTimeout,
	flows.Internal:     http.StatusInternalServerError,
	flows.Unsupported:  http.StatusUnsupportedMediaType,
	flows.Forbidden:    http.StatusForbidden,
	flows.Unauthorized: http.StatusUnauthorized,
}

// codeOf maps statuses that Echo itself produces back to our codes.
var codeOf = map[int]flows.Code{
	http.StatusBadRequest:            flows.Invalid,
	http.StatusNotFound:              flows.NotFound,
	http.StatusMethodNotAllowed:      "method_not_allowed",
	http.StatusConflict:              flows.Conflict,
	http.StatusRequestEntityTooLarge: flows.TooLarge,
	http.StatusUnsupportedMediaType:  flows.Unsupported,
	http.StatusUnauthorized:          flows.Unauthorized,
	http.StatusForbidden:             flows.Forbidden,
	http.StatusTooManyRequests:       "rate_limited",
	http.StatusRequestTimeout:        codeRequestTimeout,
	http.StatusServiceUnavailable:    flows.Unavailable,
}

// ErrorBody is the JSON shape of every error response.
type ErrorBody struct {
	Error ErrorDetail `json:"error"`
}

// ErrorDetail says what went wrong and where.
type ErrorDetail struct {
	Status  int        `json:"status"`
	Code    flows.Code `json:"code"`
	Message string     `json:"message"`
	Flow    string     `json:"flow,omitempty"`
	Node    string     `json:"node,omitempty"`
	Path    string     `json:"path,omitempty"`
	// Problems are every problem of an invalid flow document.
	Problems flows.Problems `json:"problems,omitempty"`
}

func (s *Server) handleError(err error, c echo.Context) {
	if c.Response().Committed {
		return
	}
	d := ErrorDetail{Status: http.StatusInternalServerError, Code: flows.Internal, Message: "internal error"}
	var fe *flows.Error
	var he *echo.HTTPError
	var ie *flows.InvalidError
	switch {
	case errors.As(err, &ie):
		d.Status, d.Code, d.Flow = http.StatusBadRequest, flows.Invalid, ie.Flow
		d.Message = ie.Error()
		d.Problems = ie.Problems
		if d.Problems == nil {
			d.Problems = flows.Problems{}
		}
	case isUnavailable(err):
		d.Status, d.Code, d.Message = http.StatusServiceUnavailable, flows.Unavailable, "Redis is unavailable; try again"
	case errors.As(err, &fe):
		d.Code = fe.Code
		if st, ok := statusOf[fe.Code]; ok {
			d.Status = st
		}
		if fe.Code != flows.Internal {
			d.Message = fe.Message
			if d.Message == "" && fe.Err != nil {
				d.Message = fe.Err.Error()
			}
			d.Flow, d.Node, d.Path = fe.Flow, fe.Node, fe.Path
		}
	case errors.As(err, &he):
		d.Status = he.Code
		if code, ok := codeOf[he.Code]; ok {
			d.Code = code
		} else if he.Code < 500 {
			d.Code = flows.Invalid
		}
		if he.Code < 500 {
			if m, ok := he.Message.(string); ok {
				d.Message = m
			} else {
				d.Message = http.StatusText(he.Code)
			}
		}
		if he.Code == http.StatusNotFound {
			d.Message = "no route for " + c.Request().Method + " " + c.Request().URL.Path
		}
	}
	// An answer given before the request's body was read closes the connection: net/http
	// would otherwise read (up to 256 KiB of) the rest first, at the sender's pace.
	if req := c.Request(); req.ContentLength != 0 && req.Body != nil && req.Body != http.NoBody {
		c.Response().Header().Set(echo.HeaderConnection, "close")
	}
	if d.Status >= 500 {
		s.log.Error("request failed", "method", c.Request().Method, "path", c.Request().URL.Path, "error", err)
	}
	if wantsHTML(c) {
		c.Response().Header().Set(echo.HeaderContentType, echo.MIMETextHTMLCharsetUTF8)
		c.Response().WriteHeader(d.Status)
		p := layout.Page{Title: http.StatusText(d.Status), Embedded: s.cfg.Embedded}
		_ = pages.Error(p, d.Status, d.Message).Render(c.Request().Context(), c.Response())
		return
	}
	if c.Request().Method == http.MethodHead {
		_ = c.NoContent(d.Status)
		return
	}
	_ = c.JSON(d.Status, ErrorBody{Error: d})
}

// isUnavailable reports whether err means Redis could not be reached, which is worth
// retrying, unlike a bug.
func isUnavailable(err error) bool {
	var ne net.Error
	var oe *net.OpError
	return errors.As(err, &ne) || errors.As(err, &oe) || store.IsClosed(err) || errors.Is(err, syscall.ECONNREFUSED)
}

// wantsHTML is true for a browser navigating to a page: never for /api, /hooks or /ws.
func wantsHTML(c echo.Context) bool {
	p := c.Request().URL.Path
	if strings.HasPrefix(p, "/api/") || p == "/api" || strings.HasPrefix(p, "/hooks/") || p == "/ws" || p == "/healthz" || p == "/readyz" || p == "/metrics" {
		return false
	}
	return strings.Contains(c.Request().Header.Get(echo.HeaderAccept), "text/html")
}
