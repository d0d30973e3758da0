package server

// Signing in and out with a password, and the one-time password links (docs/teams.md).
// Every form here carries the CSRF token of its page (protect.go), so that another
// site's page can neither sign someone in (into its attacker's account) nor out. A
// session id is drawn anew at every sign-in and never taken from the browser, so a
// planted cookie (session fixation) is worth nothing.

import (
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/sluicehq/sluice/flows"
	"github.com/sluicehq/sluice/teams"
	"github.com/sluicehq/sluice/templ/pages"
)

// safeNext keeps a sign-in's destination on this server: a path, never another origin.
func safeNext(next string) string {
	if next == "" || !strings.HasPrefix(next, "/") || strings.HasPrefix(next, "//") || strings.HasPrefix(next, "/\\") {
		return "/"
	}
	if u, err := url.Parse(next); err != nil || u.Host != "" || u.Scheme != "" {
		return "/"
	}
	return next
}

func (s *Server) signinPage(c echo.Context) error {
	if s.cfg.Token == "" {
		return c.Redirect(http.StatusSeeOther, "/") // the loopback single-person mode has no accounts
	}
	return s.renderSignin(c, http.StatusOK, pages.SigninPage{Next: safeNext(c.QueryParam("next"))})
}

func (s *Server) renderSignin(c echo.Context, status int, sp pages.SigninPage) error {
	p := s.page("Sign in", "")
	p.CSRF = s.csrfToken(c)
	sp.SSO = s.sso != nil
	return s.render(c, status, pages.Signin(p, sp))
}

// signin checks a password. Failures are limited per address (the shared limiter) and
// per email (SignInFailures in AuthWindow), and say nothing of whether the account
// exists.
func (s *Server) signin(c echo.Context) error {
	if s.cfg.Token == "" || s.teams == nil {
		return c.Redirect(http.StatusSeeOther, "/")
	}
	req := c.Request()
	email := strings.ToLower(strings.TrimSpace(req.PostForm.Get("email")))
	next := safeNext(req.PostForm.Get("next"))
	ip := clientIP(req)
	if err := s.rateLimited(c, ip); err != nil {
		return err
	}
	if wait := s.signins.blocked(email); wait > 0 {
		c.Response().Header().Set("Retry-After", "60")
		return s.renderSignin(c, http.StatusTooManyRequests, pages.SigninPage{Next: next, Email: email,
			Message: "too many failed sign-ins for this account; try again in a minute"})
	}
	ctx := req.Context()
	person, err := s.teams.PersonByEmail(ctx, email)
	if err != nil && flows.ErrorCode(err) != flows.NotFound {
		return err
	}
	if !teams.CheckPassword(person.Hash, req.PostForm.Get("password")) {
		s.limiter.fail(ip)
		s.signins.fail(email)
		return s.renderSignin(c, http.StatusUnauthorized, pages.SigninPage{Next: next, Email: email,
			Message: "the email or the password is wrong"})
	}
	if err := s.startSession(c, person, "password"); err != nil {
		return err
	}
	return c.Redirect(http.StatusSeeOther, next)
}

// startSession signs person in: a fresh session id, the old one (if any) revoked.
func (s *Server) startSession(c echo.Context, person teams.Person, via string) error {
	ctx := c.Request().Context()
	if ck, err := c.Cookie(SessionCookie); err == nil && ck.Value != "" {
		d := teams.Digest(ck.Value)
		if old, ok, _ := s.teams.Session(ctx, d); ok {
			_ = s.teams.RevokeSession(ctx, d, old.Person)
		}
		s.auth.drop("s:" + d)
	}
	id := teams.RandomToken(32)
	now := time.Now().UnixMilli()
	if err := s.teams.CreateSession(ctx, teams.Digest(id), teams.Session{Person: person.ID, Created: now, Last: now, Via: via}, s.cfg.SessionLifetime); err != nil {
		return err
	}
	c.SetCookie(&http.Cookie{Name: SessionCookie, Value: id, Path: "/", HttpOnly: true, SameSite: http.SameSiteLaxMode,
		Secure: s.secure(c.Request()), MaxAge: int(s.cfg.SessionLifetime / time.Second)})
	wss, _ := s.workspaces(ctx)
	roles, _ := s.teams.Roles(ctx, person.ID, wss)
	for ws := range roles {
		s.auditAs(c, ws, person.Email, "signin", via, "")
	}
	return nil
}

// signout ends the session in Redis (not only the cookie): a copied cookie stops working too.
func (s *Server) signout(c echo.Context) error {
	p := principalOf(c)
	if p.session != "" && p.person != nil {
		if err := s.teams.RevokeSession(c.Request().Context(), p.session, p.person.ID); err != nil {
			return err
		}
		s.auth.drop("s:" + p.session)
		for ws := range p.roles {
			s.auditAs(c, ws, p.person.Email, "signout", "", "")
		}
	}
	s.clearSessionCookie(c)
	c.SetCookie(&http.Cookie{Name: TokenCookie, Value: "", Path: "/", MaxAge: -1, HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: s.secure(c.Request())})
	if s.cfg.Token == "" {
		return c.Redirect(http.StatusSeeOther, "/")
	}
	return c.Redirect(http.StatusSeeOther, "/signin")
}

func (s *Server) resetPage(c echo.Context) error {
	tok := c.QueryParam("t")
	rp := pages.ResetPage{Token: tok}
	status := http.StatusOK
	if s.teams == nil {
		return &flows.Error{Code: flows.Unavailable, Message: "people need Redis"}
	}
	if ok, err := s.teams.PeekReset(c.Request().Context(), teams.Digest(tok)); err != nil {
		return err
	} else if !ok || tok == "" {
		rp.Message, status = "this link is not valid: it was used, it expired, or it was never issued; ask an owner for a new one", http.StatusNotFound
		rp.Done, rp.Token = false, ""
	}
	p := s.page("Set your password", "")
	p.CSRF = s.csrfToken(c)
	return s.render(c, status, pages.Reset(p, rp))
}

// reset sets a password through a one-time link, and ends the person's sessions.
func (s *Server) reset(c echo.Context) error {
	if s.teams == nil {
		return &flows.Error{Code: flows.Unavailable, Message: "people need Redis"}
	}
	req := c.Request()
	ctx := req.Context()
	tok := req.PostForm.Get("t")
	p := s.page("Set your password", "")
	p.CSRF = s.csrfToken(c)
	hash, herr := teams.HashPassword(req.PostForm.Get("password"))
	if herr != nil {
		return s.render(c, http.StatusBadRequest, pages.Reset(p, pages.ResetPage{Token: tok, Message: herr.Error()}))
	}
	personID, ok, err := s.teams.TakeReset(ctx, teams.Digest(tok))
	if err != nil {
		return err
	}
	if !ok || tok == "" {
		return s.render(c, http.StatusNotFound, pages.Reset(p, pages.ResetPage{Message: "this link is not valid: it was used, it expired, or it was never issued; ask an owner for a new one"}))
	}
	person, err := s.teams.Person(ctx, personID)
	if err != nil {
		return err
	}
	person.Hash = hash
	if err := s.teams.SavePerson(ctx, person); err != nil {
		return err
	}
	if err := s.teams.RevokeSessions(ctx, person.ID); err != nil {
		return err
	}
	s.auth.flush()
	return s.render(c, http.StatusOK, pages.Reset(p, pages.ResetPage{Done: true}))
}
