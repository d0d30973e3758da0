package server_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/server"
	"github.com/sluicehq/sluice/store/storetest"
	"github.com/sluicehq/sluice/teams"
	"github.com/zitadel/oidc/v3/example/server/exampleop"
	"github.com/zitadel/oidc/v3/example/server/storage"
	zoidc "github.com/zitadel/oidc/v3/pkg/oidc"
	"golang.org/x/oauth2"
	"golang.org/x/text/language"
)

// idp is a real OpenID Connect provider on loopback: zitadel/oidc's example server,
// with people of the test's own and the groups each is in.
type idp struct {
	issuer  string
	clients map[string]*storage.Client
	st      groupStorage
}

type idpUsers map[string]*storage.User

func (u idpUsers) GetUserByID(id string) *storage.User { return u[id] }
func (u idpUsers) GetUserByUsername(name string) *storage.User {
	for _, x := range u {
		if x.Username == name {
			return x
		}
	}
	return nil
}
func (u idpUsers) ExampleClientID() string { return "service" }

// groupStorage adds a groups claim to what the userinfo endpoint says.
type groupStorage struct {
	*storage.Storage
	groups map[string][]string
}

func (g groupStorage) SetUserinfoFromToken(ctx context.Context, ui *zoidc.UserInfo, tokenID, subject, origin string) error {
	if err := g.Storage.SetUserinfoFromToken(ctx, ui, tokenID, subject, origin); err != nil {
		return err
	}
	if gs := g.groups[ui.Subject]; gs != nil {
		ui.AppendClaims("groups", gs)
	}
	return nil
}

func newIDP(t *testing.T) *idp {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &idp{issuer: "http://" + ln.Addr().String(), clients: map[string]*storage.Client{}}
	users := idpUsers{
		"u-ada": {ID: "u-ada", Username: "ada", Password: "ada-password", Email: "ada@corp.example", EmailVerified: true, FirstName: "Ada", PreferredLanguage: language.English},
		"u-bo":  {ID: "u-bo", Username: "bo", Password: "bo-password", Email: "bo@corp.example", EmailVerified: true, FirstName: "Bo", PreferredLanguage: language.English},
		"u-cy":  {ID: "u-cy", Username: "cy", Password: "cy-password", Email: "cy@elsewhere.example", EmailVerified: true, FirstName: "Cy", PreferredLanguage: language.English},
	}
	p.st = groupStorage{Storage: storage.NewStorageWithClients(users, p.clients), groups: map[string][]string{"u-ada": {"sluice-editors", "acme-viewers", "legal"}}}
	p.clients["other"] = storage.WebClient("other", "other-secret", "http://127.0.0.1:1/cb")
	srv := &httptest.Server{Listener: ln, Config: &http.Server{Handler: exampleop.SetupServer(p.issuer, p.st, nil, false)}}
	srv.Start()
	t.Cleanup(srv.Close)
	return p
}

// twin is another provider, at another issuer, with p's people, clients and signing
// key: its tokens pass p's signature check, and only the issuer tells them apart.
func (p *idp) twin(t *testing.T) *idp {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	tw := &idp{issuer: "http://" + ln.Addr().String(), clients: p.clients, st: p.st}
	srv := &httptest.Server{Listener: ln, Config: &http.Server{Handler: exampleop.SetupServer(tw.issuer, p.st, nil, false)}}
	srv.Start()
	t.Cleanup(srv.Close)
	return tw
}

// nonceOf is the nonce claim of an ID token (not verified).
func nonceOf(raw string) string {
	parts := strings.Split(raw, ".")
	if len(parts) != 3 {
		return ""
	}
	b, _ := base64.RawURLEncoding.DecodeString(parts[1])
	var cl struct{ Nonce string }
	_ = json.Unmarshal(b, &cl)
	return cl.Nonce
}

// login signs in at the provider's form, starting from start, with a client that keeps
// cookies; stop, when set, ends the redirects at a URL it accepts (and returns it).
func login(t *testing.T, c *http.Client, start, user, password string) *http.Response {
	t.Helper()
	resp, err := c.Get(start)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	u := resp.Request.URL
	id := u.Query().Get("authRequestID")
	if id == "" {
		t.Fatalf("not at the provider's login form: %s (%d)", u, resp.StatusCode)
	}
	resp, err = c.PostForm(u.Scheme+"://"+u.Host+"/login/username", url.Values{"id": {id}, "username": {user}, "password": {password}})
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// tokenFor runs the code flow as client id of p (its redirect stopped) with nonce and
// returns the ID token.
func (p *idp) tokenFor(id, secret, redirect, user, password, nonce string) (string, error) {
	oc := oauth2.Config{ClientID: id, ClientSecret: secret, RedirectURL: redirect, Scopes: []string{"openid", "email"},
		Endpoint: oauth2.Endpoint{AuthURL: p.issuer + "/auth", TokenURL: p.issuer + "/oauth/token"}}
	jar, _ := cookiejar.New(nil)
	var code string
	c := &http.Client{Jar: jar, CheckRedirect: func(r *http.Request, _ []*http.Request) error {
		if strings.HasPrefix(r.URL.String(), redirect) {
			code = r.URL.Query().Get("code")
			return http.ErrUseLastResponse
		}
		return nil
	}}
	resp, err := c.Get(oc.AuthCodeURL("st", oauth2.SetAuthURLParam("nonce", nonce)))
	if err != nil {
		return "", err
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	u := resp.Request.URL
	resp, err = c.PostForm(u.Scheme+"://"+u.Host+"/login/username", url.Values{"id": {u.Query().Get("authRequestID")}, "username": {user}, "password": {password}})
	if err != nil {
		return "", err
	}
	resp.Body.Close()
	if code == "" {
		return "", fmt.Errorf("no code from the provider")
	}
	tok, err := oc.Exchange(context.Background(), code)
	if err != nil {
		return "", err
	}
	raw, _ := tok.Extra("id_token").(string)
	return raw, nil
}

// swapIDToken is a transport that, when swap is set, replaces the ID token of the
// provider's token answers: a man in the middle, a provider gone wrong.
type swapIDToken struct {
	mu   sync.Mutex
	swap func(string) string
}

func (s *swapIDToken) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := http.DefaultTransport.RoundTrip(r)
	s.mu.Lock()
	swap := s.swap
	s.mu.Unlock()
	if err != nil || swap == nil || !strings.HasSuffix(r.URL.Path, "/oauth/token") {
		return resp, err
	}
	var body map[string]any
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if json.Unmarshal(b, &body) == nil {
		if raw, ok := body["id_token"].(string); ok {
			body["id_token"] = swap(raw)
		}
		b, _ = json.Marshal(body)
	}
	resp.Body = io.NopCloser(bytes.NewReader(b))
	resp.ContentLength = int64(len(b))
	resp.Header.Del("Content-Length")
	return resp, nil
}

// ssoBrowser signs user on through the provider and returns the browser with the
// session.
func (a *api) ssoBrowser(t *testing.T, user, password string) *browser {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar}
	resp := login(t, c, a.base+"/sso/start?next=/api/me", user, password)
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	b := a.browser()
	u, _ := url.Parse(a.base)
	for _, ck := range jar.Cookies(u) {
		b.cookies[ck.Name] = ck.Value
	}
	if resp.StatusCode != 200 || b.cookies[server.SessionCookie] == "" {
		t.Fatalf("single sign-on as %s: %d", user, resp.StatusCode)
	}
	return b
}

// An approval may require a group: only a person whose single sign-on gave that group
// answers it (with the role the approval needs as well); an operator without the group,
// a local account and a service account's key are refused, naming the group. The run
// records who answered, when and with what edit.
func TestAnApprovalThatNeedsAGroupIsAnsweredByItsMembersOnly(t *testing.T) {
	p := newIDP(t)
	a := newAPI(t, storetest.Real(t), func(c *server.Config, _ *server.Deps) {
		c.OIDC = &server.OIDCConfig{Issuer: p.issuer, ClientID: "sluice", ClientSecret: "sluice-secret",
			Groups: map[string]string{"sluice-editors": "default:editor"}, Domains: map[string]string{"corp.example": "default:operator"}}
	})
	p.clients["sluice"] = storage.WebClient("sluice", "sluice-secret", a.base+"/sso/callback")
	id := a.saveFlow("approval", func(d map[string]any) {
		for _, n := range d["nodes"].([]any) {
			if n := n.(map[string]any); n["type"] == "approval" {
				n["params"].(map[string]any)["group"] = "legal"
			}
		}
	})
	ada, bo := a.ssoBrowser(t, "ada", "ada-password"), a.ssoBrowser(t, "bo", "bo-password") // ada is in legal, bo is not
	var me struct{ Person struct{ Groups []string } }
	ada.api("GET", "/api/me", "").into(t, &me)
	if strings.Join(me.Person.Groups, ",") != "sluice-editors,acme-viewers,legal" {
		t.Errorf("ada's groups: %v", me.Person.Groups)
	}
	a.person("lo@example.com", "password-of-lo", map[string]teams.Role{teams.DefaultWorkspace: teams.Owner})
	local := a.browser()
	local.signin("lo@example.com", "password-of-lo")
	key := a.serviceKey(teams.DefaultWorkspace, teams.Owner)

	run := a.start(id, `{"input": {"customer": "Ada", "reply": "Dear Ada"}}`)
	if got := a.settle(id, run); got.Status != "waiting" {
		t.Fatalf("run = %+v, want waiting", got)
	}
	resume := "/api/flows/" + id + "/runs/" + run + "/resume"
	decision := `{"decision": "approve", "value": {"reply": "Dear Ada, thanks"}}`
	for who, r := range map[string]res{
		"an operator not in the group": bo.api("POST", resume, decision),
		"a local account (an owner)":   local.api("POST", resume, decision),
		"a service account's key":      a.do("POST", resume, decision, "Authorization", "Bearer "+key),
	} {
		if r.status != http.StatusForbidden || !strings.Contains(r.String(), `group \"legal\"`) || r.header.Get("Sluice-Required-Group") != "legal" {
			t.Errorf("%s answered an approval for group legal: %d %s", who, r.status, r)
		}
	}
	if r := ada.api("POST", resume, decision); r.status != 200 {
		t.Fatalf("ada's answer: %d %s", r.status, r)
	}
	if got := a.settle(id, run); got.Status != "succeeded" || !strings.Contains(string(got.Output), "Dear Ada, thanks") {
		t.Errorf("run %+v", got)
	}
	var state struct {
		Approval struct {
			Decision, By, At string
			Edit             map[string]any
		}
	}
	var ck struct{ Checkpoints []struct{ ID, Node string } }
	a.must(200, "GET", "/api/flows/"+id+"/runs/"+run+"/checkpoints", nil).into(t, &ck)
	for _, c := range ck.Checkpoints {
		if c.Node == "review" {
			var one struct{ State json.RawMessage }
			a.must(200, "GET", "/api/flows/"+id+"/runs/"+run+"/checkpoints/"+c.ID, nil).into(t, &one)
			_ = json.Unmarshal(one.State, &state)
		}
	}
	rec := state.Approval
	at, err := time.Parse(time.RFC3339, rec.At)
	if rec.Decision != "approve" || rec.By != "ada@corp.example" || err != nil || time.Since(at) > time.Minute || rec.Edit["reply"] != "Dear Ada, thanks" {
		t.Errorf("the recorded answer: %+v (at: %v)", rec, err)
	}
}

func TestSingleSignOnAgainstARealProvider(t *testing.T) {
	p := newIDP(t)
	p2 := newIDP(t) // another provider: another issuer, other keys
	swap := &swapIDToken{}
	a := newAPI(t, storetest.Embedded(t), func(c *server.Config, _ *server.Deps) {
		c.OIDC = &server.OIDCConfig{Issuer: p.issuer, ClientID: "sluice", ClientSecret: "sluice-secret",
			Groups:     map[string]string{"sluice-editors": "default:editor", "acme-viewers": "acme:viewer"},
			Domains:    map[string]string{"corp.example": "default:viewer"},
			HTTPClient: &http.Client{Transport: swap}}
	})
	p.clients["sluice"] = storage.WebClient("sluice", "sluice-secret", a.base+"/sso/callback")
	p2.clients["sluice"] = storage.WebClient("sluice", "sluice-secret", "http://127.0.0.1:1/cb")
	a.workspace("acme")

	signOn := func(user, password string) (*http.Response, *browser) {
		t.Helper()
		jar, _ := cookiejar.New(nil)
		c := &http.Client{Jar: jar}
		resp := login(t, c, a.base+"/sso/start?next=/api/me", user, password)
		b := a.browser()
		u, _ := url.Parse(a.base)
		for _, ck := range jar.Cookies(u) {
			b.cookies[ck.Name] = ck.Value
		}
		return resp, b
	}

	// Sign-in, provisioned on the first one, groups mapped to roles in two workspaces.
	resp, b := signOn("ada", "ada-password")
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || b.cookies[server.SessionCookie] == "" {
		t.Fatalf("single sign-on: %d %s", resp.StatusCode, body)
	}
	var me struct {
		Who, Role  string
		Workspaces []struct{ ID, Role string }
	}
	b.api("GET", "/api/me", "").into(t, &me)
	if me.Who != "ada@corp.example" || me.Role != "editor" || len(me.Workspaces) != 2 || me.Workspaces[0].Role != "viewer" {
		t.Fatalf("me = %+v", me)
	}
	// The email domain alone gives bo a viewer's role; cy has neither and is refused.
	_, bb := signOn("bo", "bo-password")
	bb.api("GET", "/api/me", "").into(t, &me)
	if me.Who != "bo@corp.example" || me.Role != "viewer" {
		t.Fatalf("bo: %+v", me)
	}
	resp, bc := signOn("cy", "cy-password")
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden || bc.cookies[server.SessionCookie] != "" || !strings.Contains(string(body), "no role in any workspace") {
		t.Errorf("cy (no mapped role): %d, cookies %v", resp.StatusCode, bc.cookies)
	}

	// A revoked session (sign-out) and its cookie.
	tok := b.csrf("/")
	kept := b.cookies[server.SessionCookie]
	b.send("POST", "/signout", url.Values{"_csrf": {tok}})
	old := a.browser()
	old.cookies[server.SessionCookie] = kept
	eventually(t, 5_000_000_000, func() string {
		if r := old.api("GET", "/api/me", ""); r.status != http.StatusUnauthorized {
			return "a signed-out SSO session still works"
		}
		return ""
	})

	// Tokens that must be refused, each with its reason and no session. Each stands in
	// for the token of the sign-in under way, with its nonce, so that only the check
	// named refuses it: another client's token is signed by the provider, and the twin
	// provider's by the same key as the provider's.
	twin := p.twin(t)
	another := func(from *idp, client, secret, redirect string) func(string) string {
		return func(raw string) string {
			tok, err := from.tokenFor(client, secret, redirect, "ada", "ada-password", nonceOf(raw))
			if err != nil {
				t.Errorf("a token of %s for %s: %v", from.issuer, client, err)
			}
			return tok
		}
	}
	for _, tc := range []struct {
		name, reason string
		swap         func(string) string
	}{
		{"a tampered ID token", "bad signature", func(raw string) string {
			parts := strings.Split(raw, ".")
			payload := []byte(parts[1])
			payload[len(payload)/2] ^= 1
			return parts[0] + "." + string(payload) + "." + parts[2]
		}},
		{"a token for another client", "wrong audience", another(p, "other", "other-secret", "http://127.0.0.1:1/cb")},
		{"a token of another issuer", "wrong issuer", another(twin, "sluice", "sluice-secret", a.base+"/sso/callback")},
		{"a token of another provider", "wrong issuer", another(p2, "sluice", "sluice-secret", "http://127.0.0.1:1/cb")},
	} {
		swap.mu.Lock()
		swap.swap = tc.swap
		swap.mu.Unlock()
		resp, bx := signOn("ada", "ada-password")
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized || bx.cookies[server.SessionCookie] != "" || !strings.Contains(string(body), tc.reason) {
			t.Errorf("%s: %d, cookies %v, want 401 %q; %s", tc.name, resp.StatusCode, bx.cookies, tc.reason, body)
		}
		if strings.Contains(string(body), "eyJ") {
			t.Errorf("%s: the page shows a token", tc.name)
		}
	}
	swap.mu.Lock()
	swap.swap = nil
	swap.mu.Unlock()
	_ = teams.Owner
}
