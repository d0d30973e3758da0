// Package server is the HTTP face of Sluice: pages, the editor bundle, the JSON API,
// webhook ingress, live views, health and metrics. Handlers declare the small interfaces
// they need; routes.go shows the whole surface; errors.go is the one place that maps
// error codes to HTTP. It sends no Redis command itself: that is the store's job.
package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/labstack/echo/v4"
	"github.com/sluicehq/sluice/flows"
	"github.com/sluicehq/sluice/flows/cases"
	"github.com/sluicehq/sluice/flows/engine"
	"github.com/sluicehq/sluice/server/live"
	"github.com/sluicehq/sluice/store"
)

// Pinger answers whether the Redis behind the server is reachable.
type Pinger interface {
	Ping(ctx context.Context, d time.Duration) error
}

// Config is what the server needs to know about its environment.
type Config struct {
	Addr            string // host:port to listen on
	Embedded        bool   // running on the embedded Redis: pages show a banner
	ShutdownTimeout time.Duration
	Logger          *slog.Logger

	// Token is the bearer token every route but health needs. Empty turns
	// authentication off, which Run allows only on a loopback address.
	Token string
	// BodyLimit caps request bodies in bytes (default 4 MiB); larger ones get 413.
	BodyLimit int64
	// CORSOrigins are the origins allowed to call the API from a browser; empty turns
	// CORS off (same-origin only).
	CORSOrigins []string
	// AuthFailures is how many failed authentications one client address may make in
	// AuthWindow before it gets 429 until the window passes (defaults 10 per minute).
	AuthFailures int
	AuthWindow   time.Duration
	// HookSecret returns the secret of a flow's webhook ingress (/hooks/FLOW); "" means
	// the flow has none and its ingress is off. Default: HookSecretFromEnv.
	HookSecret func(flow string) string
	// MaxWait caps the wait parameter of run requests (default 60s).
	MaxWait time.Duration
	// AllowedHosts are further Host names the server answers to without a token, for a
	// proxy in front of it ("sluice.internal", "*.example.com", "*" for any). Loopback
	// names and addresses are always allowed; with a token, any Host is.
	AllowedHosts []string
	// ReadHeaderTimeout bounds the reading of a request's headers (default 10s) and
	// ReadTimeout that of its body (default 30s): a slower client gets 408 and its
	// connection is closed.
	ReadHeaderTimeout time.Duration
	ReadTimeout       time.Duration
	// HookConcurrency caps the webhook deliveries whose bodies are read at the same
	// time (default 64); one more gets 503.
	HookConcurrency int
	// MCPSessions caps the open sessions of /mcp (default 1000): one more initialize
	// gets 503. MCPSessionIdle closes a session no request used for that long (default
	// 30m).
	MCPSessions    int
	MCPSessionIdle time.Duration
	// ChatDedupe is how long a request to /v1/chat/completions without an
	// Idempotency-Key is known by its caller and body, so that a client's retry of it
	// joins the run it started (default 2m; negative: never).
	ChatDedupe time.Duration

	// SessionLifetime ends a signed-in browser's session that long after sign-in
	// (default 7 days); SessionIdle one that made no request for that long (default 12h).
	SessionLifetime time.Duration
	SessionIdle     time.Duration
	// AuthCache is how long a process trusts what it resolved of a key or session
	// (default 1s): the longest a revocation or a role change takes to apply.
	AuthCache time.Duration
	// SecureCookies marks cookies Secure also on plain HTTP: the server sits behind a
	// proxy that terminates TLS.
	SecureCookies bool
	// AuditRetention is how long the audit log keeps an entry (default 90 days).
	AuditRetention time.Duration
	// SignInFailures is how many failed sign-ins one email address may have in
	// AuthWindow before it is refused until the window passes (default 5).
	SignInFailures int
	// OIDC turns on single sign-on (sso.go); nil: local accounts only.
	OIDC *OIDCConfig
}

// MinTokenLength is the fewest characters a token may have.
const MinTokenLength = 16

// CheckToken refuses a token that is too short to resist guessing (fewer than
// MinTokenLength visible characters), that holds white space, which Authorization
// headers lose, or control characters, which they cannot carry. Zero-width, format and
// combining characters are allowed but do not count: they add nothing a person sees.
// An empty token (authentication off) is not checked.
func CheckToken(token string) error {
	if token == "" {
		return nil
	}
	if strings.TrimSpace(token) == "" {
		return fmt.Errorf("SLUICE_TOKEN is only white space: use at least %d random characters (e.g. openssl rand -hex 24)", MinTokenLength)
	}
	if strings.ContainsFunc(token, unicode.IsSpace) {
		return errors.New("SLUICE_TOKEN contains white space (a line break from a file?): use only visible characters")
	}
	if !utf8.ValidString(token) {
		return errors.New("SLUICE_TOKEN is not valid UTF-8: use only visible characters")
	}
	if strings.ContainsFunc(token, unicode.IsControl) {
		return errors.New("SLUICE_TOKEN contains a control character: use only visible characters")
	}
	if n := visibleChars(token); n < MinTokenLength {
		return fmt.Errorf("SLUICE_TOKEN has %d visible characters; use at least %d random ones (e.g. openssl rand -hex 24)", n, MinTokenLength)
	}
	return nil
}

// visibleChars counts the characters of s a person sees: printable ones that are not
// spaces, format characters (zero-width space, BOM, ...) or combining marks.
func visibleChars(s string) int {
	n := 0
	for _, r := range s {
		if unicode.IsGraphic(r) && !unicode.IsSpace(r) && !unicode.In(r, unicode.Cf, unicode.Mn, unicode.Me) {
			n++
		}
	}
	return n
}

// CheckConfig refuses settings that would leave the server open: a short token, no token
// beyond loopback, and, without a token, CORS for any origin (any web page could then
// drive the server).
func CheckConfig(cfg Config) error {
	if err := CheckToken(cfg.Token); err != nil {
		return err
	}
	if err := CheckListen(cfg.Addr, cfg.Token); err != nil {
		return err
	}
	if cfg.Token == "" && slices.Contains(cfg.CORSOrigins, "*") {
		return errors.New("--cors \"*\" without a token would let any web page drive this server: name the origins, or set SLUICE_TOKEN")
	}
	return nil
}

// Deps are the parts of Sluice the server works with.
type Deps struct {
	Redis   *store.Redis
	Library *store.Library
	Engine  *engine.Engine
	// Sync publishes saved flows so that the in-process workers serve them at once.
	Sync *engine.LibrarySync
	// Metrics, when nil, is a new set; pass the one given to the engine as its
	// Observer so that step metrics show.
	Metrics *Metrics
	// MCPTools lists the tools of an mcp node's server for the editor's inspector
	// (nodes.Env); nil: the inspector cannot list them.
	MCPTools MCPToolLister
	// Version is the build's version, reported to MCP clients.
	Version string
	// Files keeps uploaded files for runs (store.Files); nil: uploads answer 503.
	Files FileStore
	// Teams keeps people, keys and sessions; nil: Redis.Teams("").
	Teams *store.Teams
	// Grader grades test cases' model-graded assertions (nodes.Env); nil fails them.
	Grader cases.Grader
	// Git, when set, commits each save of a flow (its file and cases) to the
	// repository the library is in, by whoever saved (git.go); nil: no commits.
	Git *store.GitRepo
}

// MCPToolLister lists the tools an mcp node with these params offers.
type MCPToolLister interface {
	MCPTools(ctx context.Context, params json.RawMessage) ([]flows.ToolDef, error)
}

// Server is the Echo app with its dependencies.
type Server struct {
	cfg     Config
	log     *slog.Logger
	echo    *echo.Echo
	redis   Pinger
	rdb     *store.Redis
	library *store.Library
	engine  *engine.Engine
	sync    *engine.LibrarySync
	metrics *Metrics
	hub     *live.Hub
	limiter *failLimiter
	mcp     *mcpFlows
	tools   MCPToolLister
	files   FileStore
	grader  cases.Grader   // cases.go
	git     *store.GitRepo // git.go
	// csrfKey signs the pages' form tokens (protect.go).
	csrfKey []byte
	// hookReads holds a slot per webhook body being read.
	hookReads chan struct{}
	// routed holds the registered routes, "METHOD path".
	routed map[string]bool
	// teams keeps people, keys and sessions; auth caches what was resolved of them
	// (auth.go); signins limits failed sign-ins per email.
	teams   *store.Teams
	auth    *authCache
	signins *failLimiter
	sso     *ssoProvider
}

// New builds the server; it does not listen until Run.
func New(cfg Config, d Deps) *Server {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.ShutdownTimeout == 0 {
		cfg.ShutdownTimeout = 10 * time.Second
	}
	if cfg.BodyLimit <= 0 {
		cfg.BodyLimit = 4 << 20
	}
	if cfg.AuthFailures <= 0 {
		cfg.AuthFailures = 10
	}
	if cfg.AuthWindow <= 0 {
		cfg.AuthWindow = time.Minute
	}
	if cfg.HookSecret == nil {
		cfg.HookSecret = HookSecretFromEnv
	}
	if cfg.MaxWait <= 0 {
		cfg.MaxWait = 60 * time.Second
	}
	if cfg.ReadHeaderTimeout <= 0 {
		cfg.ReadHeaderTimeout = 10 * time.Second
	}
	if cfg.ReadTimeout <= 0 {
		cfg.ReadTimeout = 30 * time.Second
	}
	if cfg.HookConcurrency <= 0 {
		cfg.HookConcurrency = 64
	}
	if cfg.MCPSessions <= 0 {
		cfg.MCPSessions = 1000
	}
	if cfg.MCPSessionIdle <= 0 {
		cfg.MCPSessionIdle = 30 * time.Minute
	}
	if cfg.ChatDedupe == 0 {
		cfg.ChatDedupe = 2 * time.Minute
	}
	if cfg.SessionLifetime <= 0 {
		cfg.SessionLifetime = 7 * 24 * time.Hour
	}
	if cfg.SessionIdle <= 0 {
		cfg.SessionIdle = 12 * time.Hour
	}
	if cfg.AuthCache <= 0 {
		cfg.AuthCache = time.Second
	}
	if cfg.AuditRetention <= 0 {
		cfg.AuditRetention = 90 * 24 * time.Hour
	}
	if cfg.SignInFailures <= 0 {
		cfg.SignInFailures = 5
	}
	if d.Metrics == nil {
		d.Metrics = NewMetrics()
	}
	s := &Server{cfg: cfg, log: cfg.Logger, redis: d.Redis, rdb: d.Redis, library: d.Library, engine: d.Engine, sync: d.Sync,
		metrics: d.Metrics, limiter: newFailLimiter(cfg.AuthFailures, cfg.AuthWindow),
		csrfKey: newCSRFKey(cfg.Token), hookReads: make(chan struct{}, cfg.HookConcurrency)}
	if d.Redis != nil {
		s.hub = live.NewHub(d.Redis, cfg.Logger)
		s.metrics.watchQueues(d.Redis)
	}
	s.auth = &authCache{ttl: cfg.AuthCache, m: map[string]authEntry{}}
	s.signins = newFailLimiter(cfg.SignInFailures, cfg.AuthWindow)
	s.teams = d.Teams
	if s.teams == nil && d.Redis != nil {
		s.teams = d.Redis.Teams("")
	}
	if cfg.OIDC != nil {
		s.sso = newSSO(*cfg.OIDC, s.csrfKey)
	}
	s.tools = d.MCPTools
	s.files = d.Files
	s.grader = d.Grader
	s.git = d.Git
	if d.Engine != nil && d.Library != nil {
		s.mcp = newMCPServer(s.gateway(), d.Version)
	}
	e := echo.New()
	e.HideBanner = true
	e.HidePort = true
	e.HTTPErrorHandler = s.handleError
	e.JSONSerializer = plainJSON{}
	s.echo = e
	s.routes()
	s.routed = map[string]bool{}
	for _, r := range s.Routes() {
		s.routed[r] = true
	}
	return s
}

// plainJSON writes JSON without escaping <, > and & (edge names read "a:out->b:in"):
// answers are application/json with nosniff, never HTML.
type plainJSON struct{ echo.DefaultJSONSerializer }

func (plainJSON) Serialize(c echo.Context, v any, indent string) error {
	enc := json.NewEncoder(c.Response())
	enc.SetEscapeHTML(false)
	if indent != "" {
		enc.SetIndent("", indent)
	}
	return enc.Encode(v)
}

// Handler is the server's http.Handler, for tests and embedding.
func (s *Server) Handler() http.Handler { return s.echo }

// Routes lists the registered routes as "METHOD path" (Echo's :param syntax).
func (s *Server) Routes() []string {
	var out []string
	for _, r := range s.echo.Routes() {
		if r.Method == echo.RouteNotFound {
			continue // the catch-alls a group with middleware adds
		}
		out = append(out, r.Method+" "+r.Path)
	}
	return out
}

// RouteHandlers names the handler of each route ("METHOD path" -> "listFlows"): the
// operationIds of the OpenAPI description are these names (a test checks).
func (s *Server) RouteHandlers() map[string]string {
	out := map[string]string{}
	for _, r := range s.echo.Routes() {
		if r.Method == echo.RouteNotFound {
			continue
		}
		name := r.Name[strings.LastIndex(r.Name, ".")+1:]
		if i := strings.Index(r.Name, ")."); i >= 0 {
			name = r.Name[i+2:]
		}
		name, _, _ = strings.Cut(name, "-fm")
		name, _, _ = strings.Cut(name, ".func")
		out[r.Method+" "+r.Path] = strings.TrimSuffix(name, "Handler") // mcpHandler serves /mcp: mcpGet, mcpPost, mcpDelete
	}
	return out
}

// CheckListen refuses to serve without a token on anything but a loopback address:
// an open Sluice runs any flow anyone sends it.
func CheckListen(addr, token string) error {
	if token != "" {
		return nil
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("address %q: %v", addr, err)
	}
	if host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return nil
	}
	return fmt.Errorf("refusing to listen on %s without a token: set SLUICE_TOKEN (or --token), or listen on localhost", addr)
}

// HookSecretFromEnv reads the webhook secret of a flow from the environment variable
// SLUICE_HOOK_SECRET_<FLOW>, the flow id upper-cased with '-' written as '_'.
func HookSecretFromEnv(flow string) string {
	return os.Getenv(HookSecretEnv(flow))
}

// HookSecretEnv is the name of the environment variable that holds flow's webhook secret.
func HookSecretEnv(flow string) string {
	// A flow of a workspace ("acme.triage") reads SLUICE_HOOK_SECRET_ACME__TRIAGE.
	return "SLUICE_HOOK_SECRET_" + strings.ToUpper(strings.ReplaceAll(strings.ReplaceAll(flow, "-", "_"), ".", "__"))
}

// Run listens on cfg.Addr and serves until ctx ends, then shuts down gracefully within
// cfg.ShutdownTimeout. ready, when not nil, receives the bound address once listening.
func (s *Server) Run(ctx context.Context, ready func(addr net.Addr)) error {
	if err := CheckConfig(s.cfg); err != nil {
		return err
	}
	ln, err := net.Listen("tcp", s.cfg.Addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", s.cfg.Addr, err)
	}
	hs := &http.Server{
		Handler:           s.echo,
		ReadHeaderTimeout: s.cfg.ReadHeaderTimeout,
		IdleTimeout:       120 * time.Second,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
		BaseContext:       func(net.Listener) context.Context { return ctx },
	}
	if s.hub != nil {
		hubCtx, stopHub := context.WithCancel(context.Background())
		defer stopHub()
		go s.hub.Run(hubCtx)
	}
	if ready != nil {
		ready(ln.Addr())
	}
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), s.cfg.ShutdownTimeout)
	defer cancel()
	if s.hub != nil {
		s.hub.Close() // live connections end now; Shutdown does not wait for hijacked ones
	}
	err = hs.Shutdown(sctx)
	if errors.Is(err, context.DeadlineExceeded) {
		hs.Close()
		return fmt.Errorf("shutdown took longer than %s; connections closed", s.cfg.ShutdownTimeout)
	}
	if serr := <-errc; serr != nil && !errors.Is(serr, http.ErrServerClosed) {
		return serr
	}
	return err
}
