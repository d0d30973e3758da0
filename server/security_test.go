package server_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sluicehq/sluice/server"
	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/storetest"
	"github.com/sluicehq/sluice/teams"
)

// concrete fills a route's parameters with values that exist as far as routing goes.
func concrete(path string) string {
	r := strings.NewReplacer(":flow", "someflow", ":run", "somerun", ":ckpt", "1-1", ":id", "1-1", ":env", "prod", "*", "css/sluice.css")
	return r.Replace(path)
}

func TestEveryRouteButHealthNeedsTheToken(t *testing.T) {
	a := newAPI(t, storetest.Real(t))
	for _, rt := range a.srv.Routes() {
		method, path, _ := strings.Cut(rt, " ")
		for _, auth := range []string{"", "Bearer wrong", "Basic " + testToken, "Bearer " + testToken + "x"} {
			r := a.do(method, concrete(path), nil, "Authorization", auth)
			if teams.Routes[rt] == teams.Public {
				if r.status == http.StatusUnauthorized {
					t.Errorf("%s answers 401; it must not need the token", rt)
				}
				continue
			}
			if r.status != http.StatusUnauthorized {
				t.Errorf("%s with Authorization %q: status %d, want 401", rt, auth, r.status)
				continue
			}
			if e := r.errorBody(t); e.Code != "unauthorized" || strings.Contains(r.String(), testToken) {
				t.Errorf("%s: error %+v", rt, e)
			}
			if r.header.Get("WWW-Authenticate") == "" {
				t.Errorf("%s: 401 without WWW-Authenticate", rt)
			}
		}
	}
	// The right token opens them (any answer but 401).
	if r := a.do("GET", "/api/flows", nil); r.status != 200 {
		t.Errorf("with the token: %d %s", r.status, r)
	}
}

func TestABrowserGetsTheTokenCookieFromTheURLOnce(t *testing.T) {
	a := newAPI(t, storetest.Embedded(t))
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Get(a.base + "/?token=" + testToken)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/" {
		t.Fatalf("status %d, Location %q; want 303 to / without the token", resp.StatusCode, resp.Header.Get("Location"))
	}
	var ck *http.Cookie
	for _, c := range resp.Cookies() {
		if c.Name == server.TokenCookie {
			ck = c
		}
	}
	if ck == nil || !ck.HttpOnly || ck.SameSite != http.SameSiteStrictMode {
		t.Fatalf("cookie = %+v, want an HttpOnly SameSite=Strict token cookie", ck)
	}
	cookie := server.TokenCookie + "=" + ck.Value
	a.must(200, "GET", "/api/flows", nil, "Authorization", "", "Cookie", cookie)
	// A change sent with the cookie from another site's page is refused.
	a.must(http.StatusForbidden, "POST", "/api/flows/validate", `{}`, "Authorization", "", "Cookie", cookie, "Origin", "https://evil.example")
	a.must(200, "POST", "/api/flows/validate", `{}`, "Authorization", "", "Cookie", cookie, "Origin", a.base)
	a.must(http.StatusUnauthorized, "GET", "/?token=wrong", nil, "Authorization", "")
}

func TestFailedAuthenticationIsRateLimited(t *testing.T) {
	a := newAPI(t, storetest.Real(t), func(c *server.Config, _ *server.Deps) { c.AuthFailures = 3 })
	for i := 0; i < 3; i++ {
		a.must(http.StatusUnauthorized, "GET", "/api/flows", nil, "Authorization", "Bearer guess")
	}
	r := a.must(http.StatusTooManyRequests, "GET", "/api/flows", nil, "Authorization", "Bearer guess")
	if e := r.errorBody(t); e.Code != "rate_limited" || r.header.Get("Retry-After") == "" {
		t.Errorf("429 = %+v, Retry-After %q", e, r.header.Get("Retry-After"))
	}
	// Wrong tokens stay refused, and so does a request with no token; the right token
	// gets through from the same address (someone guessing must not lock a person out).
	a.must(http.StatusTooManyRequests, "GET", "/api/flows", nil, "Authorization", "Bearer guess again")
	a.must(http.StatusTooManyRequests, "GET", "/?token=guess", nil, "Authorization", "")
	a.must(http.StatusUnauthorized, "GET", "/api/flows", nil, "Authorization", "")
	a.must(200, "GET", "/api/flows", nil)
	a.must(http.StatusTooManyRequests, "GET", "/api/flows", nil, "Authorization", "Bearer guess")
	a.must(200, "GET", "/healthz", nil)
	if strings.Contains(a.logs.String(), "guess") || strings.Contains(a.logs.String(), testToken) {
		t.Error("the log shows a token that was sent")
	}
}

func TestRequestLimits(t *testing.T) {
	a := newAPI(t, storetest.Real(t))
	id := a.saveFlow("linear", nil)
	// 413: over the body limit (4 MiB), whether announced or not.
	big := `{"input": {"name": "` + strings.Repeat("x", 5<<20) + `"}}`
	e := a.must(http.StatusRequestEntityTooLarge, "POST", "/api/flows/"+id+"/runs", big).errorBody(t)
	if e.Code != "too_large" {
		t.Errorf("413 error = %+v", e)
	}
	req, _ := http.NewRequest("PUT", a.base+"/api/flows/"+id, &chunked{n: 5 << 20})
	req.Header.Set("Authorization", "Bearer "+testToken)
	req.Header.Set("Content-Type", "application/json")
	before := a.must(200, "GET", "/api/flows/"+id, nil).String()
	resp, err := http.DefaultClient.Do(req)
	switch {
	case err != nil && (errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)):
		// The server answered 413 and closed the connection while the client was still
		// sending: on a loaded machine the reset can reach the client before the answer.
	case err != nil:
		t.Fatal(err)
	default:
		resp.Body.Close()
		if resp.StatusCode != http.StatusRequestEntityTooLarge {
			t.Errorf("chunked body over the limit: %d, want 413", resp.StatusCode)
		}
	}
	if after := a.must(200, "GET", "/api/flows/"+id, nil).String(); after != before {
		t.Error("a refused body over the limit changed the flow")
	}
	// 415: a body that is not JSON.
	for _, ct := range []string{"text/plain", "application/x-www-form-urlencoded", ""} {
		r := a.do("POST", "/api/flows/"+id+"/runs", `{"input": {}}`, "Content-Type", ct)
		if r.status != http.StatusUnsupportedMediaType || r.errorBody(t).Code != "unsupported" {
			t.Errorf("Content-Type %q: %d %s, want 415", ct, r.status, r)
		}
	}
	a.must(http.StatusAccepted, "POST", "/api/flows/"+id+"/runs", `{"input": {"name": "x"}}`, "Content-Type", "application/json; charset=utf-8")
	a.must(http.StatusAccepted, "POST", "/api/flows/"+id+"/runs", `{"input": {"name": "x"}}`, "Content-Type", "application/vnd.sluice+json")
}

// chunked is a JSON-looking body of unannounced length.
type chunked struct{ n, off int }

func (c *chunked) Read(p []byte) (int, error) {
	if c.off >= c.n {
		return 0, errEOF
	}
	k := min(len(p), c.n-c.off)
	for i := range p[:k] {
		p[i] = ' '
	}
	if c.off == 0 {
		p[0] = '{'
	}
	c.off += k
	return k, nil
}

func TestCORSIsOffUnlessConfigured(t *testing.T) {
	r := storetest.Embedded(t)
	a := newAPI(t, r)
	res := a.do("OPTIONS", "/api/flows", nil, "Origin", "https://app.example", "Access-Control-Request-Method", "GET")
	if h := res.header.Get("Access-Control-Allow-Origin"); h != "" {
		t.Errorf("CORS off, yet Access-Control-Allow-Origin = %q", h)
	}
	b := newAPI(t, r, func(c *server.Config, _ *server.Deps) { c.CORSOrigins = []string{"https://app.example"} })
	res = b.do("GET", "/api/flows", nil, "Origin", "https://app.example")
	if h := res.header.Get("Access-Control-Allow-Origin"); h != "https://app.example" {
		t.Errorf("configured origin: Access-Control-Allow-Origin = %q", h)
	}
	res = b.do("GET", "/api/flows", nil, "Origin", "https://other.example")
	if h := res.header.Get("Access-Control-Allow-Origin"); h != "" {
		t.Errorf("other origin: Access-Control-Allow-Origin = %q", h)
	}
}

func TestRefusesToListenBeyondLoopbackWithoutAToken(t *testing.T) {
	for addr, ok := range map[string]bool{"127.0.0.1:0": true, "localhost:0": true, "[::1]:0": true, "0.0.0.0:0": false, ":8080": false, "192.0.2.1:80": false, "[::]:0": false} {
		err := server.CheckListen(addr, "")
		if (err == nil) != ok {
			t.Errorf("CheckListen(%q, no token) = %v, want ok=%v", addr, err, ok)
		}
		if err := server.CheckListen(addr, "t"); err != nil {
			t.Errorf("CheckListen(%q, token) = %v", addr, err)
		}
	}
	srv := server.New(server.Config{Addr: "0.0.0.0:0"}, server.Deps{Redis: storetest.Embedded(t), Library: newLibrary(t)})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Run(ctx, nil); err == nil || !strings.Contains(err.Error(), "SLUICE_TOKEN") {
		t.Errorf("Run on 0.0.0.0 without a token = %v, want a refusal naming SLUICE_TOKEN", err)
	}
}

func TestInternalErrorsShowNoInternals(t *testing.T) {
	backing := storetest.Embedded(t)
	p := newProxy(t, backing.Addr())
	r, err := store.Open(context.Background(), store.Options{URL: "redis://" + p.ln.Addr().String()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	a := newAPI(t, r)
	id := a.saveFlow("linear", nil)
	p.Close() // Redis goes away under the server
	res := a.do("GET", "/api/flows/"+id+"/runs", nil)
	if res.status != http.StatusServiceUnavailable {
		t.Fatalf("with Redis gone: %d %s, want 503", res.status, res)
	}
	e := res.errorBody(t)
	if e.Code != "unavailable" || strings.Contains(e.Message, "127.0.0.1") || strings.Contains(e.Message, "dial") {
		t.Errorf("error = %+v: it must not show internals", e)
	}
}
