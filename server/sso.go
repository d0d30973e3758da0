package server

// Single sign-on with OpenID Connect (docs/teams.md): the authorization code flow with
// PKCE, a state and a nonce kept in a signed, short-lived cookie; the ID token verified
// by go-oidc (signature against the issuer's keys, issuer, audience, expiry); email and
// groups read from the ID token, or from the userinfo endpoint when the token lacks
// them; the person provisioned on first sign-in; groups and email domains mapped to
// roles in workspaces on every sign-in.

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"github.com/labstack/echo/v4"
	"github.com/sluicehq/sluice/flows"
	"github.com/sluicehq/sluice/teams"
	"github.com/sluicehq/sluice/templ/pages"
	"golang.org/x/oauth2"
)

// OIDCConfig turns on single sign-on with an OpenID Connect provider.
type OIDCConfig struct {
	Issuer       string
	ClientID     string
	ClientSecret string // from the environment (SLUICE_OIDC_CLIENT_SECRET), never a flag
	// RedirectURL is this server's /sso/callback as the provider knows it; empty: the
	// address each request came to (set it behind a proxy).
	RedirectURL string
	// Scopes are asked for besides openid, email and profile (e.g. "groups").
	Scopes []string
	// GroupsClaim names the claim of group names (default "groups").
	GroupsClaim string
	// Groups maps a group to roles in workspaces: "group" -> "workspace:role[,workspace:role]".
	Groups map[string]string
	// Domains maps an email domain to roles the same way: "example.com" -> "default:viewer".
	Domains map[string]string
	// HTTPClient talks to the provider (nil: a client with a 30s timeout).
	HTTPClient *http.Client
}

// ParseRoleMap reads "key=ws:role,ws:role;key2=..." (the form of the
// SLUICE_OIDC_GROUPS and SLUICE_OIDC_DOMAINS variables).
func ParseRoleMap(s string) (map[string]string, error) {
	out := map[string]string{}
	for _, part := range strings.Split(s, ";") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		k, v, ok := strings.Cut(part, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("%q: write NAME=WORKSPACE:ROLE", part)
		}
		if _, err := rolesOf(v); err != nil {
			return nil, fmt.Errorf("%q: %v", part, err)
		}
		out[strings.TrimSpace(k)] = v
	}
	return out, nil
}

// rolesOf reads "ws:role,ws:role".
func rolesOf(v string) (map[string]teams.Role, error) {
	out := map[string]teams.Role{}
	for _, wr := range strings.Split(v, ",") {
		ws, r, ok := strings.Cut(strings.TrimSpace(wr), ":")
		if !ok || !teams.ValidWorkspace(ws) {
			return nil, fmt.Errorf("%q: write WORKSPACE:ROLE", wr)
		}
		role, err := teams.ParseRole(r)
		if err != nil {
			return nil, err
		}
		out[ws] = role
	}
	return out, nil
}

type ssoProvider struct {
	cfg OIDCConfig
	key []byte // signs the flow's cookie

	mu       sync.Mutex
	provider *oidc.Provider
	verifier *oidc.IDTokenVerifier
	oauth    oauth2.Config
}

func newSSO(cfg OIDCConfig, key []byte) *ssoProvider {
	if cfg.GroupsClaim == "" {
		cfg.GroupsClaim = "groups"
	}
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = &http.Client{Timeout: 30 * time.Second}
	}
	return &ssoProvider{cfg: cfg, key: key}
}

func (p *ssoProvider) ctx(ctx context.Context) context.Context {
	return oidc.ClientContext(ctx, p.cfg.HTTPClient)
}

// discover reads the provider's configuration once (at the first sign-in, so that the
// server starts while the provider is down).
func (p *ssoProvider) discover(ctx context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.provider != nil {
		return nil
	}
	prov, err := oidc.NewProvider(p.ctx(ctx), p.cfg.Issuer)
	if err != nil {
		return err
	}
	p.provider = prov
	p.verifier = prov.Verifier(&oidc.Config{ClientID: p.cfg.ClientID})
	p.oauth = oauth2.Config{ClientID: p.cfg.ClientID, ClientSecret: p.cfg.ClientSecret, RedirectURL: p.cfg.RedirectURL,
		Endpoint: prov.Endpoint(), Scopes: append([]string{oidc.ScopeOpenID, "email", "profile"}, p.cfg.Scopes...)}
	return nil
}

const ssoCookie = "sluice_sso"

// oauthFor is the OAuth configuration for a request: without a configured
// RedirectURL, this server's /sso/callback at the address the request came to.
func (p *ssoProvider) oauthFor(c echo.Context) oauth2.Config {
	oc := p.oauth
	if oc.RedirectURL == "" {
		scheme := "http"
		if c.Request().TLS != nil {
			scheme = "https"
		}
		oc.RedirectURL = scheme + "://" + c.Request().Host + "/sso/callback"
	}
	return oc
}

func (p *ssoProvider) sign(v string) string {
	m := hmac.New(sha256.New, p.key)
	m.Write([]byte("sso\x00" + v))
	return hex.EncodeToString(m.Sum(nil))
}

// ssoStart sends the browser to the provider.
func (s *Server) ssoStart(c echo.Context) error {
	if s.sso == nil || s.teams == nil {
		return &flows.Error{Code: flows.NotFound, Message: "single sign-on is not configured"}
	}
	ctx := c.Request().Context()
	if err := s.sso.discover(ctx); err != nil {
		s.log.Warn("single sign-on: provider discovery failed", "issuer", s.sso.cfg.Issuer, "error", err)
		return &flows.Error{Code: flows.Unavailable, Message: "the single sign-on provider cannot be reached; try again, or sign in with a password"}
	}
	state, nonce, verifier := teams.RandomToken(24), teams.RandomToken(24), oauth2.GenerateVerifier()
	next := base64.RawURLEncoding.EncodeToString([]byte(safeNext(c.QueryParam("next"))))
	v := state + "." + nonce + "." + verifier + "." + next
	c.SetCookie(&http.Cookie{Name: ssoCookie, Value: v + "." + s.sso.sign(v), Path: "/sso/", HttpOnly: true,
		SameSite: http.SameSiteLaxMode, Secure: s.secure(c.Request()), MaxAge: 600})
	oc := s.sso.oauthFor(c)
	return c.Redirect(http.StatusSeeOther, oc.AuthCodeURL(state, oidc.Nonce(nonce), oauth2.S256ChallengeOption(verifier)))
}

// ssoFailed answers a failed sign-on with the sign-in page and what went wrong, never
// the token or the provider's internals.
func (s *Server) ssoFailed(c echo.Context, status int, msg string, err error) error {
	s.log.Info("single sign-on refused", "reason", msg, "error", err)
	s.clearSSOCookie(c)
	return s.renderSignin(c, status, pages.SigninPage{Next: "/", Message: "single sign-on failed: " + msg})
}

func (s *Server) clearSSOCookie(c echo.Context) {
	c.SetCookie(&http.Cookie{Name: ssoCookie, Value: "", Path: "/sso/", MaxAge: -1, HttpOnly: true, SameSite: http.SameSiteLaxMode, Secure: s.secure(c.Request())})
}

// ssoClaims are what Sluice reads of a person from the provider.
type ssoClaims struct {
	Subject       string `json:"sub"`
	Email         string `json:"email"`
	EmailVerified *bool  `json:"email_verified"`
	Name          string `json:"name"`
	Groups        []string
}

func (s *Server) ssoCallback(c echo.Context) error {
	if s.sso == nil || s.teams == nil {
		return &flows.Error{Code: flows.NotFound, Message: "single sign-on is not configured"}
	}
	p := s.sso
	ctx := c.Request().Context()
	if err := p.discover(ctx); err != nil {
		return &flows.Error{Code: flows.Unavailable, Message: "the single sign-on provider cannot be reached; try again"}
	}
	ck, err := c.Cookie(ssoCookie)
	if err != nil {
		return s.ssoFailed(c, http.StatusBadRequest, "the sign-in was not started here (or took longer than 10 minutes); start again", err)
	}
	parts := strings.Split(ck.Value, ".")
	if len(parts) != 5 || !hmac.Equal([]byte(parts[4]), []byte(p.sign(strings.Join(parts[:4], ".")))) {
		return s.ssoFailed(c, http.StatusBadRequest, "the sign-in's cookie is not valid; start again", nil)
	}
	state, nonce, verifier := parts[0], parts[1], parts[2]
	nextB, _ := base64.RawURLEncoding.DecodeString(parts[3])
	if e := c.QueryParam("error"); e != "" {
		return s.ssoFailed(c, http.StatusUnauthorized, "the provider refused: "+e, nil)
	}
	if !hmac.Equal([]byte(c.QueryParam("state")), []byte(state)) {
		return s.ssoFailed(c, http.StatusBadRequest, "the answer does not belong to this sign-in (state); start again", nil)
	}
	oc := p.oauthFor(c)
	tok, err := oc.Exchange(p.ctx(ctx), c.QueryParam("code"), oauth2.VerifierOption(verifier))
	if err != nil {
		return s.ssoFailed(c, http.StatusUnauthorized, "the provider did not give a token for the code", err)
	}
	raw, _ := tok.Extra("id_token").(string)
	if raw == "" {
		return s.ssoFailed(c, http.StatusUnauthorized, "the provider gave no ID token", nil)
	}
	idt, err := p.verifier.Verify(p.ctx(ctx), raw)
	if err != nil {
		return s.ssoFailed(c, http.StatusUnauthorized, "the ID token is not valid ("+p.refusal(raw, err)+")", err)
	}
	if !hmac.Equal([]byte(idt.Nonce), []byte(nonce)) {
		return s.ssoFailed(c, http.StatusUnauthorized, "the ID token is not for this sign-in (nonce)", nil)
	}
	claims, err := p.claims(ctx, idt, tok)
	if err != nil {
		return s.ssoFailed(c, http.StatusUnauthorized, "the provider's claims cannot be read", err)
	}
	person, err := s.provision(ctx, idt.Issuer, claims)
	if err != nil {
		var fe *flows.Error
		if errors.As(err, &fe) && fe.Code == flows.Forbidden {
			return s.ssoFailed(c, http.StatusForbidden, fe.Message, nil)
		}
		return err
	}
	s.clearSSOCookie(c)
	if err := s.startSession(c, person, "sso"); err != nil {
		return err
	}
	return c.Redirect(http.StatusSeeOther, safeNext(string(nextB)))
}

// refusal says in a few words why a token was refused: what its (unverified) claims
// show first — another issuer, another audience — else what go-oidc said.
func (p *ssoProvider) refusal(raw string, err error) string {
	parts := strings.Split(raw, ".")
	if len(parts) == 3 {
		var cl struct {
			Iss string `json:"iss"`
			Aud any    `json:"aud"`
		}
		if b, derr := base64.RawURLEncoding.DecodeString(parts[1]); derr == nil && json.Unmarshal(b, &cl) == nil {
			if cl.Iss != "" && cl.Iss != p.cfg.Issuer {
				return "wrong issuer"
			}
			aud := stringsOf(cl.Aud)
			if len(aud) > 0 && !slices.Contains(aud, p.cfg.ClientID) {
				return "wrong audience"
			}
		}
	}
	return verifyReason(err)
}

// verifyReason says in a few words why go-oidc refused a token.
func verifyReason(err error) string {
	m := err.Error()
	switch {
	case strings.Contains(m, "issued by a different provider"):
		return "wrong issuer"
	case strings.Contains(m, "audience"):
		return "wrong audience"
	case strings.Contains(m, "expired"):
		return "expired"
	case strings.Contains(m, "signature"), strings.Contains(m, "malformed"), strings.Contains(m, "jwt"):
		return "bad signature"
	}
	return "rejected"
}

// claims reads the person's claims from the ID token, and from the userinfo endpoint
// when the token lacks the email or the groups.
func (p *ssoProvider) claims(ctx context.Context, idt *oidc.IDToken, tok *oauth2.Token) (ssoClaims, error) {
	var c ssoClaims
	all := map[string]any{}
	if err := idt.Claims(&all); err != nil {
		return c, err
	}
	if err := idt.Claims(&c); err != nil {
		return c, err
	}
	c.Groups = stringsOf(all[p.cfg.GroupsClaim])
	if c.Email == "" || all[p.cfg.GroupsClaim] == nil {
		ui, err := p.provider.UserInfo(p.ctx(ctx), oauth2.StaticTokenSource(tok))
		if err == nil && ui.Subject == idt.Subject {
			var extra map[string]any
			_ = ui.Claims(&extra)
			if c.Email == "" {
				c.Email, c.EmailVerified = ui.Email, &ui.EmailVerified
			}
			if c.Groups == nil {
				c.Groups = stringsOf(extra[p.cfg.GroupsClaim])
			}
			if c.Name == "" {
				c.Name, _ = extra["name"].(string)
			}
		}
	}
	c.Subject = idt.Subject
	return c, nil
}

func stringsOf(v any) []string {
	switch x := v.(type) {
	case []any:
		var out []string
		for _, e := range x {
			if s, ok := e.(string); ok {
				out = append(out, s)
			}
		}
		return out
	case string:
		return []string{x}
	}
	return nil
}

// provision finds or creates the person of a sign-on and applies the roles its groups
// and email domain map to; one with no role anywhere is refused.
func (s *Server) provision(ctx context.Context, issuer string, cl ssoClaims) (teams.Person, error) {
	subject := issuer + "|" + cl.Subject
	if cl.Email == "" {
		return teams.Person{}, &flows.Error{Code: flows.Forbidden, Message: "the provider gave no email address"}
	}
	if cl.EmailVerified != nil && !*cl.EmailVerified {
		return teams.Person{}, &flows.Error{Code: flows.Forbidden, Message: "the provider has not verified this email address"}
	}
	mapped := map[string]teams.Role{}
	raise := func(v string) {
		rs, err := rolesOf(v)
		if err != nil {
			return
		}
		for ws, r := range rs {
			if r.AtLeast(mapped[ws]) {
				mapped[ws] = r
			}
		}
	}
	for _, g := range cl.Groups {
		if v, ok := s.sso.cfg.Groups[g]; ok {
			raise(v)
		}
	}
	if _, domain, ok := strings.Cut(strings.ToLower(cl.Email), "@"); ok {
		if v, ok := s.sso.cfg.Domains[domain]; ok {
			raise(v)
		}
	}
	person, err := s.teams.PersonByEmail(ctx, cl.Email)
	linked := false
	switch {
	case flows.ErrorCode(err) == flows.NotFound:
		if len(mapped) == 0 {
			return person, &flows.Error{Code: flows.Forbidden, Message: "your groups and email domain give you no role in any workspace; ask an owner"}
		}
		person = teams.Person{Email: cl.Email, Name: cl.Name, Subject: subject, Groups: cl.Groups}
		if err := s.teams.CreatePerson(ctx, &person); err != nil {
			return person, err
		}
	case err != nil:
		return person, err
	case person.Subject != "" && person.Subject != subject:
		return person, &flows.Error{Code: flows.Forbidden, Message: "this email address belongs to another single sign-on account"}
	case person.Subject == "":
		person.Subject = subject // a local account signs on for the first time: linked by its verified email
		linked = true
	}
	// The groups of this sign-in are the person's until the next (approvals ask them).
	if linked || !slices.Equal(person.Groups, cl.Groups) {
		person.Groups = cl.Groups
		if err := s.teams.SavePerson(ctx, person); err != nil {
			return person, err
		}
	}
	wss, err := s.workspaces(ctx)
	if err != nil {
		return person, err
	}
	for ws, r := range mapped {
		if _, ok := s.workspace(ctx, ws); !ok {
			continue
		}
		if err := s.teams.SetRole(ctx, ws, person.ID, r); err != nil {
			return person, err
		}
	}
	roles, err := s.teams.Roles(ctx, person.ID, wss)
	if err != nil {
		return person, err
	}
	if len(roles) == 0 {
		return person, &flows.Error{Code: flows.Forbidden, Message: "you have no role in any workspace; ask an owner"}
	}
	s.auth.flush()
	return person, nil
}
