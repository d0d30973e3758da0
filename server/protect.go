package server

// What keeps other web pages from driving Sluice. A page the user has open elsewhere
// can send requests to a local Sluice (a form, a no-cors fetch, a page whose DNS name
// was rebound to 127.0.0.1); Sluice must tell them from its own pages and from API
// clients, in every mode, with and without a token:
//
//   - Host (checkHost): without a token, only loopback names and the --allowed-hosts
//     are answered, so a rebound DNS name gets 403 before anything else.
//   - Origin and Sec-Fetch-Site (crossOrigin): an unsafe method (POST, PUT, PATCH,
//     DELETE) from another origin is refused with 403, unless the origin is one of the
//     --cors origins. Requests without either header (curl, SDKs, webhook senders) are
//     not browser requests and pass.
//   - Content-Type (requireJSON): every API write must say application/json, with a body
//     or without. A browser sends that type cross-origin only after a CORS preflight,
//     which Sluice answers only for the --cors origins; the types a page may send
//     without one (multipart/form-data, application/x-www-form-urlencoded, text/plain)
//     get 415. The one write whose body is not JSON, a file upload (files.go), needs an
//     X-File-Name header instead, which no form sets and a page sends cross-origin only
//     after a preflight: without it, 415 too.
//   - The server-rendered pages' forms carry a CSRF token (csrfToken, checkCSRF): a
//     signed double-submit cookie.

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/sluicehq/sluice/flows"
)

// checkHost refuses, without a token, a Host that is not a loopback name or address or
// one of cfg.AllowedHosts: a page on evil.example whose name now resolves to 127.0.0.1
// (DNS rebinding) is same-origin to itself, so only the Host tells it apart.
func (s *Server) checkHost(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if s.cfg.Token != "" || HostAllowed(c.Request().Host, s.cfg.AllowedHosts) {
			return next(c)
		}
		return &flows.Error{Code: flows.Forbidden, Message: fmt.Sprintf("host %q is not served: without a token this server answers only to "+
			"localhost, *.localhost and loopback addresses; add the name to --allowed-hosts (SLUICE_ALLOWED_HOSTS) "+
			"when a proxy forwards it, or set SLUICE_TOKEN", c.Request().Host)}
	}
}

// HostAllowed reports whether a Host header (host or host:port) names this server when
// it runs without a token: localhost, a name under .localhost, a loopback IP literal,
// or an entry of allowed ("name", "*.domain" for its subdomains, "*" for any).
func HostAllowed(hostport string, allowed []string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.ToLower(strings.Trim(host, "[]")), ".")
	if host == "" {
		return false
	}
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return true
	}
	if a, err := netip.ParseAddr(host); err == nil && a.Unmap().IsLoopback() {
		return true
	}
	for _, a := range allowed {
		a = strings.TrimSuffix(strings.ToLower(strings.TrimSpace(a)), ".")
		switch {
		case a == "*" || a == host:
			return true
		case strings.HasPrefix(a, "*.") && strings.HasSuffix(host, a[1:]):
			return true
		}
	}
	return false
}

// crossOrigin refuses unsafe methods that a browser says come from another origin
// (Sec-Fetch-Site, else Origin compared with Host); the --cors origins are trusted.
func (s *Server) crossOrigin() echo.MiddlewareFunc {
	cop := http.NewCrossOriginProtection()
	anyOrigin := false
	for _, o := range s.cfg.CORSOrigins {
		if o == "*" {
			anyOrigin = true // CheckConfig refuses this without a token
			continue
		}
		if err := cop.AddTrustedOrigin(o); err != nil {
			s.log.Warn("a --cors origin is not an origin (scheme://host[:port]); it is not trusted for changes", "origin", o, "error", err)
		}
	}
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			req := c.Request()
			if anyOrigin {
				return next(c)
			}
			if err := cop.Check(req); err != nil {
				return &flows.Error{Code: flows.Forbidden, Message: fmt.Sprintf("cross-origin request refused: a change must come from this server's own pages "+
					"or from an API client, not from another site's page (Origin %q, Sec-Fetch-Site %q); "+
					"allow an origin with --cors", req.Header.Get("Origin"), req.Header.Get("Sec-Fetch-Site"))}
			}
			return next(c)
		}
	}
}

// unsafeMethod reports whether a request may change something.
func unsafeMethod(m string) bool {
	switch m {
	case http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace:
		return false
	}
	return true
}

// CSRF tokens of the server-rendered pages' forms: a signed double-submit cookie. The
// cookie holds a random nonce (HttpOnly, SameSite=Strict); a form carries
// HMAC-SHA256(key, nonce) in its _csrf field. The key is derived from the token, so that
// every process serving one deployment shares it (and forms survive a restart); without
// a token (one process on loopback) it is drawn at start, and a form of a page rendered
// before a restart is refused until the page is reloaded. A page elsewhere can neither
// read the cookie nor compute the field: even one that manages to set a cookie for the
// host (another port of localhost shares cookies) cannot sign its nonce.
const (
	csrfCookie = "sluice_csrf"
	csrfField  = "_csrf"
)

func newCSRFKey(token string) []byte {
	if token != "" {
		k := sha256.Sum256([]byte("sluice csrf key\x00" + token))
		return k[:]
	}
	k := make([]byte, 32)
	_, _ = rand.Read(k) // crypto/rand.Read never fails (Go 1.24+)
	return k
}

func (s *Server) csrfSign(nonce string) string {
	m := hmac.New(sha256.New, s.csrfKey)
	m.Write([]byte(nonce))
	return hex.EncodeToString(m.Sum(nil))
}

// csrfToken returns the token the page's forms carry, setting the nonce cookie when the
// browser has none.
func (s *Server) csrfToken(c echo.Context) string {
	if t, ok := c.Get("csrfToken").(string); ok {
		return t // the page and its top bar share one nonce
	}
	t := s.newCSRFToken(c)
	c.Set("csrfToken", t)
	return t
}

func (s *Server) newCSRFToken(c echo.Context) string {
	if ck, err := c.Cookie(csrfCookie); err == nil && len(ck.Value) == 64 {
		return s.csrfSign(ck.Value)
	}
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	nonce := hex.EncodeToString(b)
	c.SetCookie(&http.Cookie{Name: csrfCookie, Value: nonce, Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode,
		Secure: c.Request().TLS != nil, Expires: time.Now().Add(30 * 24 * time.Hour)})
	return s.csrfSign(nonce)
}

// checkCSRF guards the pages' form posts: the _csrf field must sign the cookie's nonce.
func (s *Server) checkCSRF(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		req := c.Request()
		req.Body = http.MaxBytesReader(c.Response(), req.Body, 64<<10) // a form of one button
		if err := req.ParseForm(); err != nil {
			return &flows.Error{Code: flows.Invalid, Message: "the form cannot be read"}
		}
		ck, err := c.Cookie(csrfCookie)
		got := req.PostForm.Get(csrfField)
		if err != nil || got == "" || !hmac.Equal([]byte(got), []byte(s.csrfSign(ck.Value))) {
			return &flows.Error{Code: flows.Forbidden, Message: "the form's CSRF token is missing or stale: reload the page and try again"}
		}
		return next(c)
	}
}

// Slow clients. The http.Server bounds the headers (ReadHeaderTimeout); bodyDeadline
// bounds the body of every request that has one: it must arrive whole within
// cfg.ReadTimeout, or the request ends with 408 and its connection is closed. It is a
// deadline on the connection for the body only: net/http lifts it when the body has been
// read to its end (it then reads the connection in the background, without a deadline,
// to notice a client that goes away), so that long polls (?wait=) keep their answer; event
// streams and websockets have no body and get no deadline.
func (s *Server) bodyDeadline(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		req := c.Request()
		if req.Body != nil && req.Body != http.NoBody {
			// An error means a ResponseWriter without deadlines (not a net/http server).
			_ = http.NewResponseController(c.Response()).SetReadDeadline(time.Now().Add(s.cfg.ReadTimeout))
		}
		return next(c)
	}
}
