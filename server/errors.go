package server

import (
	"errors"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"
	"github.com/sluicehq/sluice/flows"
	"github.com/sluicehq/sluice/templ/layout"
	"github.com/sluicehq/sluice/templ/pages"
)

// statusOf is the one map from error codes to HTTP status.
var statusOf = map[flows.Code]int{
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
}

func (s *Server) handleError(err error, c echo.Context) {
	if c.Response().Committed {
		return
	}
	d := ErrorDetail{Status: http.StatusInternalServerError, Code: flows.Internal, Message: "internal error"}
	var fe *flows.Error
	var he *echo.HTTPError
	switch {
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

// wantsHTML is true for a browser navigating to a page: never for /api, /hooks or /ws.
func wantsHTML(c echo.Context) bool {
	p := c.Request().URL.Path
	if strings.HasPrefix(p, "/api/") || p == "/api" || strings.HasPrefix(p, "/hooks/") || p == "/ws" || p == "/healthz" {
		return false
	}
	return strings.Contains(c.Request().Header.Get(echo.HeaderAccept), "text/html")
}
