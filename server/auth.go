package server

// Who is asking, and may they (docs/teams.md). authenticate finds the principal of a
// request — SLUICE_TOKEN (the owner of every workspace), an API key, a signed-in
// browser's session, or, without a token on loopback, the one person at the keyboard —
// and authorize applies the one permission table, teams.Routes, for the request's
// workspace. Handlers never check roles themselves.
//
// Resolving a key or a session costs one Redis round trip; the result is cached for
// Config.AuthCache (1s), so that the hot path costs none and a revocation, a removal or
// a role change takes effect within that time in every process.

import (
	"context"
	"crypto/subtle"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/sluicehq/sluice/flows"
	"github.com/sluicehq/sluice/teams"
	"github.com/sluicehq/sluice/templ/layout"
)

// SessionCookie holds a signed-in browser's session; WorkspaceCookie the workspace it
// last switched to.
const (
	SessionCookie   = "sluice_session"
	WorkspaceCookie = "sluice_workspace"
	// WorkspaceHeader names the workspace of an API request (a key's own workspace needs
	// none); ?workspace= does too.
	WorkspaceHeader = "Sluice-Workspace"
)

// principal is who a request acts as.
type principal struct {
	kind   string // "token", "local", "session", "key"
	person *teams.Person
	key    *teams.APIKey
	// everywhere: the owner of every workspace (SLUICE_TOKEN, the loopback mode).
	everywhere bool
	roles      map[string]teams.Role
	session    string // the session's digest
}

// role is the principal's role in ws.
func (p *principal) role(ws string) teams.Role {
	if p.everywhere {
		return teams.Owner
	}
	return p.roles[ws]
}

// who names the principal in the audit log and on pages.
func (p *principal) who() string {
	switch {
	case p.key != nil && p.person != nil:
		return p.person.Email + " (key " + p.key.Prefix + ")"
	case p.key != nil:
		return "service " + p.key.Service + " (key " + p.key.Prefix + ")"
	case p.person != nil:
		return p.person.Email
	case p.kind == "token":
		return "SLUICE_TOKEN"
	}
	return "local"
}

// authCache keeps resolved principals and the workspace list for a short while.
type authCache struct {
	ttl time.Duration
	mu  sync.Mutex
	m   map[string]authEntry
	ws  []teams.Workspace
	wsT time.Time
}

type authEntry struct {
	p     *principal
	until time.Time
}

func (a *authCache) get(k string) *principal {
	a.mu.Lock()
	defer a.mu.Unlock()
	e, ok := a.m[k]
	if !ok || time.Now().After(e.until) {
		return nil
	}
	return e.p
}

func (a *authCache) put(k string, p *principal) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.m) > 10000 {
		now := time.Now()
		for k, e := range a.m {
			if now.After(e.until) {
				delete(a.m, k)
			}
		}
	}
	a.m[k] = authEntry{p: p, until: time.Now().Add(a.ttl)}
}

func (a *authCache) drop(k string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.m, k)
}

// flush forgets everything this process knows (after a change it made itself).
func (a *authCache) flush() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.m = map[string]authEntry{}
	a.wsT = time.Time{}
}

// workspaces returns the workspaces, cached.
func (s *Server) workspaces(ctx context.Context) ([]teams.Workspace, error) {
	a := s.auth
	a.mu.Lock()
	if time.Since(a.wsT) < a.ttl {
		ws := a.ws
		a.mu.Unlock()
		return ws, nil
	}
	a.mu.Unlock()
	if s.teams == nil {
		return []teams.Workspace{{ID: teams.DefaultWorkspace}}, nil
	}
	ws, err := s.teams.Workspaces(ctx)
	if err != nil {
		return nil, err
	}
	a.mu.Lock()
	a.ws, a.wsT = ws, time.Now()
	a.mu.Unlock()
	return ws, nil
}

func (s *Server) workspace(ctx context.Context, id string) (teams.Workspace, bool) {
	wss, err := s.workspaces(ctx)
	if err != nil {
		return teams.Workspace{}, false
	}
	for _, w := range wss {
		if w.ID == id {
			return w, true
		}
	}
	return teams.Workspace{}, false
}

// authenticate finds the request's principal (see the top of this file) and puts it
// in the context; a request with none gets 401 (a browser asking for a page is sent to
// the sign-in page instead).
func (s *Server) authenticate(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if s.cfg.Token == "" {
			c.Set("principal", &principal{kind: "local", everywhere: true})
			return next(c)
		}
		req := c.Request()
		ip := clientIP(req)
		refuse := func(msg string) error {
			if err := s.rateLimited(c, ip); err != nil {
				return err
			}
			s.limiter.fail(ip)
			return s.unauthorized(c, msg)
		}
		// A browser's first visit: ?token= sets the cookie and is taken out of the URL.
		if q := req.URL.Query().Get("token"); q != "" && req.Method == http.MethodGet {
			if !s.tokenOK(q) {
				return refuse("the token is not valid")
			}
			c.SetCookie(&http.Cookie{Name: TokenCookie, Value: q, Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: s.secure(req)})
			u := *req.URL
			v := u.Query()
			v.Del("token")
			u.RawQuery = v.Encode()
			return c.Redirect(http.StatusSeeOther, u.RequestURI())
		}
		var p *principal
		var err error
		if h := req.Header.Get(echo.HeaderAuthorization); h != "" {
			scheme, t, ok := strings.Cut(h, " ")
			if !ok || !strings.EqualFold(scheme, "Bearer") {
				return refuse("use Authorization: Bearer TOKEN")
			}
			t = strings.TrimSpace(t)
			if _, isKey := teams.ParseKey(t); isKey {
				p, err = s.keyPrincipal(req.Context(), t)
			} else if s.tokenOK(t) {
				p = &principal{kind: "token", everywhere: true}
			}
		} else if ck, cerr := req.Cookie(SessionCookie); cerr == nil && ck.Value != "" {
			p, err = s.sessionPrincipal(req.Context(), ck.Value)
			if err == nil && p == nil {
				// An expired or revoked session: the cookie goes, the person signs in again.
				s.clearSessionCookie(c)
			}
		} else if ck, cerr := req.Cookie(TokenCookie); cerr == nil && ck.Value != "" {
			if !s.tokenOK(ck.Value) {
				return refuse("the token is not valid")
			}
			p = &principal{kind: "token", everywhere: true}
		} else {
			if wantsHTML(c) && req.Method == http.MethodGet {
				return c.Redirect(http.StatusSeeOther, "/signin?next="+urlQueryEscape(req.URL.RequestURI()))
			}
			return s.unauthorized(c, "this server needs you to sign in: send Authorization: Bearer KEY (an API key, or SLUICE_TOKEN), or sign in at /signin")
		}
		if err != nil {
			return err
		}
		if p == nil {
			if wantsHTML(c) && req.Method == http.MethodGet {
				return c.Redirect(http.StatusSeeOther, "/signin?next="+urlQueryEscape(req.URL.RequestURI()))
			}
			return refuse("the key, token or session is not valid (wrong, expired or revoked)")
		}
		c.Set("principal", p)
		return next(c)
	}
}

// keyPrincipal resolves an API key, or nil when it is not a live key.
func (s *Server) keyPrincipal(ctx context.Context, key string) (*principal, error) {
	digest := teams.Digest(key)
	if p := s.auth.get("k:" + digest); p != nil {
		return p, nil
	}
	if s.teams == nil {
		return nil, nil
	}
	id, _ := teams.ParseKey(key)
	k, err := s.teams.Key(ctx, id)
	if flows.ErrorCode(err) == flows.NotFound {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	now := time.Now()
	if !k.Live(now) || !hmacEqual(k.Digest, digest) {
		return nil, nil
	}
	p := &principal{kind: "key", key: &k, roles: map[string]teams.Role{k.Workspace: k.Role}}
	if k.Person != "" {
		// A person's key can do at most what the person can now.
		person, err := s.teams.Person(ctx, k.Person)
		if flows.ErrorCode(err) == flows.NotFound {
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		p.person = &person
		wss, err := s.workspaces(ctx)
		if err != nil {
			return nil, err
		}
		roles, err := s.teams.Roles(ctx, person.ID, wss)
		if err != nil {
			return nil, err
		}
		if have := roles[k.Workspace]; !have.AtLeast(k.Role) {
			p.roles[k.Workspace] = have
		}
	}
	if now.UnixMilli()-k.LastUsed > 1000 {
		_ = s.teams.TouchKey(ctx, k.ID, now.UnixMilli())
	}
	s.auth.put("k:"+digest, p)
	return p, nil
}

// sessionPrincipal resolves a session cookie, or nil when the session is over.
func (s *Server) sessionPrincipal(ctx context.Context, cookie string) (*principal, error) {
	digest := teams.Digest(cookie)
	if p := s.auth.get("s:" + digest); p != nil {
		return p, nil
	}
	if s.teams == nil {
		return nil, nil
	}
	sess, ok, err := s.teams.Session(ctx, digest)
	if err != nil || !ok {
		return nil, err
	}
	now := time.Now()
	if now.Sub(time.UnixMilli(sess.Last)) > s.cfg.SessionIdle || now.Sub(time.UnixMilli(sess.Created)) > s.cfg.SessionLifetime {
		_ = s.teams.RevokeSession(ctx, digest, sess.Person)
		return nil, nil
	}
	person, err := s.teams.Person(ctx, sess.Person)
	if flows.ErrorCode(err) == flows.NotFound {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	wss, err := s.workspaces(ctx)
	if err != nil {
		return nil, err
	}
	roles, err := s.teams.Roles(ctx, person.ID, wss)
	if err != nil {
		return nil, err
	}
	if now.Sub(time.UnixMilli(sess.Last)) > time.Minute {
		sess.Last = now.UnixMilli()
		_ = s.teams.TouchSession(ctx, digest, sess)
	}
	p := &principal{kind: "session", person: &person, roles: roles, session: digest}
	s.auth.put("s:"+digest, p)
	return p, nil
}

// secure reports whether cookies must be Secure: the request came over TLS, or the
// server is told it sits behind a proxy that terminates it.
func (s *Server) secure(r *http.Request) bool { return r.TLS != nil || s.cfg.SecureCookies }

func (s *Server) clearSessionCookie(c echo.Context) {
	c.SetCookie(&http.Cookie{Name: SessionCookie, Value: "", Path: "/", MaxAge: -1, HttpOnly: true, SameSite: http.SameSiteLaxMode, Secure: s.secure(c.Request())})
}

func principalOf(c echo.Context) *principal {
	p, _ := c.Get("principal").(*principal)
	if p == nil {
		return &principal{}
	}
	return p
}

// workspaceOf is the workspace a request acts in, as authorize chose it.
func workspaceOf(c echo.Context) string {
	if ws, _ := c.Get("workspace").(string); ws != "" {
		return ws
	}
	return teams.DefaultWorkspace
}

// requestedWorkspace is the workspace a request names: an API key's own, else the
// Sluice-Workspace header, ?workspace=, the switcher's cookie, the default.
func requestedWorkspace(c echo.Context, p *principal) (string, error) {
	req := c.Request()
	named := req.Header.Get(WorkspaceHeader)
	if named == "" {
		named = req.URL.Query().Get("workspace")
	}
	if p.key != nil {
		if named != "" && named != p.key.Workspace {
			c.Response().Header().Set("Sluice-Required-Role", "member")
			return "", &flows.Error{Code: flows.Forbidden, Message: fmt.Sprintf("this API key belongs to workspace %q, not %q", p.key.Workspace, named)}
		}
		return p.key.Workspace, nil
	}
	if named == "" {
		// A link to a flow of another workspace ("/flows/acme.triage") names it.
		if w, _, ok := strings.Cut(c.Param("flow"), teams.Sep); ok {
			return w, nil
		}
		if ck, err := req.Cookie(WorkspaceCookie); err == nil {
			named = ck.Value
		}
	}
	if named == "" {
		return teams.DefaultWorkspace, nil
	}
	return named, nil
}

// authorize applies teams.Routes to the request: it finds the workspace, the
// principal's role in it and whether the role holds the route's permission; then it
// gives the handlers the flow id the engine knows (the workspace's).
func (s *Server) authorize(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		p := principalOf(c)
		route := c.Request().Method + " " + c.Path()
		perm, known := teams.Routes[route]
		if !known {
			perm = teams.Instance // a route the table forgot is the instance owner's only
		}
		ws, err := requestedWorkspace(c, p)
		if err != nil {
			return err
		}
		w, ok := s.workspace(c.Request().Context(), ws)
		if !ok && (perm == teams.Public || perm == teams.Self) {
			ws, ok = teams.DefaultWorkspace, true // who am I, sign out, ...: whatever the cookie says
		}
		if !ok {
			if p.everywhere {
				return &flows.Error{Code: flows.NotFound, Message: fmt.Sprintf("no workspace %q", ws)}
			}
			c.Response().Header().Set("Sluice-Required-Role", "member")
			return &flows.Error{Code: flows.Forbidden, Message: fmt.Sprintf("you are not a member of workspace %q", ws)}
		}
		c.Set("workspace", ws)
		c.SetRequest(c.Request().WithContext(withWorkspace(c.Request().Context(), ws)))
		role := p.role(ws)
		c.Set("role", role)
		switch perm {
		case teams.Public, teams.Self:
		case teams.Instance:
			if !p.everywhere {
				c.Response().Header().Set("Sluice-Required-Role", "instance")
				return &flows.Error{Code: flows.Forbidden, Message: "only the owner of every workspace (SLUICE_TOKEN) may do this"}
			}
		default:
			need := teams.Need(perm, w.Sensitive)
			if perm == teams.Promote {
				need = s.promoteRole(c.Request().Context(), ws, c.Param("env")) // environments.go
			}
			if ok, why := teams.AllowsAs(role, perm, need); !ok {
				c.Response().Header().Set("Sluice-Required-Role", string(need))
				if role == "" {
					return &flows.Error{Code: flows.Forbidden, Message: fmt.Sprintf("you are not a member of workspace %q", ws)}
				}
				return &flows.Error{Code: flows.Forbidden, Message: why}
			}
		}
		if err := s.qualifyParams(c, ws); err != nil {
			return err
		}
		if err := s.checkEnvironment(c.Request().Context(), ws, environmentFrom(c.Request().Context())); err != nil {
			return err // environments.go
		}
		if c.Request().Method == http.MethodGet && wantsHTML(c) {
			c.SetRequest(c.Request().WithContext(layout.WithFrame(c.Request().Context(), s.frame(c))))
		}
		err = next(c)
		if err == nil {
			s.auditRoute(c, route)
			s.commitRoute(c, route) // git.go
		}
		return err
	}
}

// qualifyParams turns the :flow of the route into the engine's flow id in ws. A flow id
// in a URL is always a bare one: one naming another workspace ("acme.triage") is no
// flow here.
func (s *Server) qualifyParams(c echo.Context, ws string) error {
	names := c.ParamNames()
	for i, n := range names {
		if n != "flow" {
			continue
		}
		vals := c.ParamValues()
		v := vals[i]
		if w, f, ok := strings.Cut(v, teams.Sep); ok {
			if w != ws || ws == teams.DefaultWorkspace {
				return &flows.Error{Code: flows.NotFound, Flow: v, Message: "no such flow"}
			}
			v = f
		}
		vals[i] = teams.Qualify(ws, v)
		c.SetParamValues(vals...)
	}
	return nil
}

func urlQueryEscape(s string) string { return url.QueryEscape(s) }

func hmacEqual(a, b string) bool { return subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1 }

// frame is what a page's top bar shows of who is looking.
func (s *Server) frame(c echo.Context) *layout.Frame {
	m := s.me(c)
	f := &layout.Frame{Who: m.Who, Role: string(m.Role), Workspace: m.Workspace, Teams: m.Teams,
		SignedIn: principalOf(c).session != "", Can: map[string]bool{}, Why: map[string]string{}}
	for _, w := range m.Workspaces {
		f.Workspaces = append(f.Workspaces, w.ID)
	}
	for p, ok := range m.Can {
		f.Can[string(p)] = ok
	}
	for p, why := range m.Why {
		f.Why[string(p)] = why
	}
	if f.SignedIn || f.Teams {
		f.CSRF = s.csrfToken(c)
	}
	return f
}
