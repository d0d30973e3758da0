package server_test

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"mime/multipart"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/server"
	"github.com/sluicehq/sluice/store/storetest"
)

// noToken runs the server as `make run` does: no token, on loopback.
func noToken(c *server.Config, _ *server.Deps) { c.Token = "" }

// send sends a request as a browser or another client would: exactly the headers given
// ("Host" sets the Host header), the body as is.
func (a *api) send(method, path string, body io.Reader, header ...string) res {
	a.t.Helper()
	req, err := http.NewRequest(method, a.base+path, body)
	if err != nil {
		a.t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		if header[i] == "Host" {
			req.Host = header[i+1]
			continue
		}
		req.Header.Set(header[i], header[i+1])
	}
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Do(req)
	if err != nil {
		a.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return res{status: resp.StatusCode, header: resp.Header, body: b}
}

func (a *api) bearer() []string {
	if a.token == "" {
		return nil
	}
	return []string{"Authorization", "Bearer " + a.token}
}

// unsafeAPIRoutes are the routes under /api that change something.
func unsafeAPIRoutes(a *api) []string {
	var out []string
	for _, rt := range a.srv.Routes() {
		method, path, _ := strings.Cut(rt, " ")
		if strings.HasPrefix(path, "/api/") && method != "GET" && method != "HEAD" {
			out = append(out, rt)
		}
	}
	return out
}

func TestEveryAPIChangeMustBeAJSONRequest(t *testing.T) {
	r := storetest.Real(t)
	for _, mode := range []struct {
		name string
		opts []apiOption
	}{{"no token", []apiOption{noToken}}, {"token", nil}} {
		t.Run(mode.name, func(t *testing.T) {
			a := newAPI(t, r, mode.opts...)
			id := a.saveFlow("linear", nil)
			routes := unsafeAPIRoutes(a)
			if len(routes) < 10 {
				t.Fatalf("only %d API routes change something: %v", len(routes), routes)
			}
			var mp bytes.Buffer
			mw := multipart.NewWriter(&mp)
			fw, _ := mw.CreateFormFile("file", "flow.json")
			fw.Write([]byte(`{"sluice": 1, "id": "from-a-form", "nodes": [], "edges": []}`))
			mw.Close()
			bodies := []struct {
				what, ctype string
				body        []byte
			}{
				{"no body and no Content-Type", "", nil},
				{"an empty form", "application/x-www-form-urlencoded", nil},
				{"a multipart upload", mw.FormDataContentType(), mp.Bytes()},
				{"a urlencoded form", "application/x-www-form-urlencoded", []byte("input=%7B%7D")},
				{"JSON sent as text/plain", "text/plain", []byte(`{"input": {"name": "x"}}`)},
				{"JSON without a Content-Type", "", []byte(`{"input": {"name": "x"}}`)},
			}
			for _, rt := range routes {
				method, path, _ := strings.Cut(rt, " ")
				path = strings.ReplaceAll(concrete(path), "someflow", id)
				for _, b := range bodies {
					h := a.bearer()
					if b.ctype != "" {
						h = append(h, "Content-Type", b.ctype)
					}
					res := a.send(method, path, bytes.NewReader(b.body), h...)
					if res.status != http.StatusUnsupportedMediaType || res.errorBody(t).Code != "unsupported" {
						t.Errorf("%s with %s: %d %s, want 415", rt, b.what, res.status, res)
					}
				}
			}
			// Nothing of it changed anything: still one flow, no run.
			var list struct{ Flows []struct{ ID string } }
			a.must(200, "GET", "/api/flows", nil).into(t, &list)
			if len(list.Flows) != 1 || list.Flows[0].ID != id {
				t.Errorf("flows after the refused requests: %+v", list.Flows)
			}
			var runs server.RunList
			a.must(200, "GET", "/api/flows/"+id+"/runs", nil).into(t, &runs)
			if runs.Total != 0 {
				t.Errorf("%d runs started by refused requests", runs.Total)
			}
			// A JSON request without a body is fine.
			approval := a.saveFlow("approval", nil)
			run := a.start(approval, map[string]any{"input": map[string]any{"customer": "Ada"}})
			a.settle(approval, run)
			a.must(http.StatusOK, "POST", "/api/flows/"+approval+"/runs/"+run+"/cancel", nil, "Content-Type", "application/json")
		})
	}
}

func TestChangesFromAnotherOriginAreRefused(t *testing.T) {
	r := storetest.Real(t)
	for _, mode := range []struct {
		name string
		opts []apiOption
	}{{"no token", []apiOption{noToken}}, {"token", nil}} {
		t.Run(mode.name, func(t *testing.T) {
			a := newAPI(t, r, mode.opts...)
			id := a.saveFlow("linear", nil)
			u, _ := url.Parse(a.base)
			_, port, _ := net.SplitHostPort(u.Host)
			foreign := []struct{ what, origin, site string }{
				{"another site", "https://evil.example", ""},
				{"another port of the same host", "http://127.0.0.1:1", ""},
				{"localhost for 127.0.0.1", "http://localhost:" + port, ""},
				{"the null origin", "null", ""},
				{"a cross-site fetch", "", "cross-site"},
				{"a same-site fetch from another port", "", "same-site"},
				{"a cross-site fetch with a matching Origin", a.base, "cross-site"},
			}
			for _, rt := range unsafeAPIRoutes(a) {
				method, path, _ := strings.Cut(rt, " ")
				path = strings.ReplaceAll(concrete(path), "someflow", id)
				for _, f := range foreign {
					h := append(a.bearer(), "Content-Type", "application/json")
					if f.origin != "" {
						h = append(h, "Origin", f.origin)
					}
					if f.site != "" {
						h = append(h, "Sec-Fetch-Site", f.site)
					}
					res := a.send(method, path, strings.NewReader(`{}`), h...)
					if res.status != http.StatusForbidden || res.errorBody(t).Code != "forbidden" || !strings.Contains(res.errorBody(t).Message, "cross-origin") {
						t.Errorf("%s from %s: %d %s, want 403 naming the cross-origin request", rt, f.what, res.status, res)
					}
				}
			}
			// A page form posting to the server-rendered pages' routes from elsewhere.
			for _, p := range []string{"/flows/" + id + "/delete", "/flows/" + id + "/duplicate"} {
				res := a.send("POST", p, strings.NewReader("x=1"), append(a.bearer(), "Content-Type", "application/x-www-form-urlencoded", "Origin", "https://evil.example")...)
				if res.status != http.StatusForbidden {
					t.Errorf("form POST %s from another site: %d %s, want 403", p, res.status, res)
				}
			}
			var list struct{ Flows []struct{ ID string } }
			a.must(200, "GET", "/api/flows", nil).into(t, &list)
			if len(list.Flows) != 1 {
				t.Errorf("flows after the refused requests: %+v", list.Flows)
			}
			// The server's own pages (same origin) and API clients (no Origin) pass.
			in := `{"input": {"name": "x"}}`
			a.must(http.StatusAccepted, "POST", "/api/flows/"+id+"/runs", in, "Origin", a.base, "Sec-Fetch-Site", "same-origin")
			a.must(http.StatusAccepted, "POST", "/api/flows/"+id+"/runs", in, "Origin", a.base)
			a.must(http.StatusAccepted, "POST", "/api/flows/"+id+"/runs", in)
		})
	}
	// An origin allowed with --cors may change things.
	a := newAPI(t, r, func(c *server.Config, _ *server.Deps) { c.CORSOrigins = []string{"https://app.example"} })
	id := a.saveFlow("linear", nil)
	in := `{"input": {"name": "x"}}`
	a.must(http.StatusAccepted, "POST", "/api/flows/"+id+"/runs", in, "Origin", "https://app.example", "Sec-Fetch-Site", "cross-site")
	a.must(http.StatusForbidden, "POST", "/api/flows/"+id+"/runs", in, "Origin", "https://other.example", "Sec-Fetch-Site", "cross-site")
}

var csrfInput = regexp.MustCompile(`name="_csrf" value="([0-9a-f]+)"`)

func TestPageFormsNeedTheirCSRFToken(t *testing.T) {
	r := storetest.Real(t)
	for _, mode := range []struct {
		name string
		opts []apiOption
	}{{"no token", []apiOption{noToken}}, {"token", nil}} {
		t.Run(mode.name, func(t *testing.T) {
			a := newAPI(t, r, mode.opts...)
			id := a.saveFlow("linear", nil)
			page := a.must(200, "GET", "/", nil)
			m := csrfInput.FindStringSubmatch(page.String())
			if m == nil {
				t.Fatalf("the flows page's forms carry no CSRF token:\n%s", page)
			}
			token := m[1]
			var cookie string
			for _, c := range (&http.Response{Header: page.header}).Cookies() {
				if c.Name == "sluice_csrf" {
					if !c.HttpOnly || c.SameSite != http.SameSiteStrictMode {
						t.Errorf("CSRF cookie %+v, want HttpOnly and SameSite=Strict", c)
					}
					cookie = c.Name + "=" + c.Value
				}
			}
			if cookie == "" {
				t.Fatal("no CSRF cookie set by the flows page")
			}
			form := func(tok string) io.Reader { return strings.NewReader(url.Values{"_csrf": {tok}}.Encode()) }
			post := func(path, tok, cookie string) res {
				h := append(a.bearer(), "Content-Type", "application/x-www-form-urlencoded", "Origin", a.base)
				if cookie != "" {
					h = append(h, "Cookie", cookie)
				}
				return a.send("POST", path, form(tok), h...)
			}
			for _, p := range []string{"/flows/" + id + "/duplicate", "/flows/" + id + "/delete"} {
				for what, rq := range map[string]res{
					"no token":                  post(p, "", cookie),
					"no cookie":                 post(p, token, ""),
					"a wrong token":             post(p, strings.Repeat("0", 64), cookie),
					"its own cookie, unsigned":  post(p, strings.Repeat("ab", 32), "sluice_csrf="+strings.Repeat("ab", 32)),
					"the token with its cookie": {},
				} {
					if what == "the token with its cookie" {
						continue
					}
					if rq.status != http.StatusForbidden || !strings.Contains(rq.errorBody(t).Message, "CSRF") {
						t.Errorf("POST %s with %s: %d %s, want 403", p, what, rq.status, rq)
					}
				}
			}
			a.must(200, "GET", "/api/flows/"+id, nil)
			// With the page's token, the forms work.
			if res := post("/flows/"+id+"/duplicate", token, cookie); res.status != http.StatusSeeOther || !strings.HasPrefix(res.header.Get("Location"), "/flows/"+id+"-copy") {
				t.Fatalf("duplicate with the token: %d %s", res.status, res.header.Get("Location"))
			}
			if res := post("/flows/"+id+"/delete", token, cookie); res.status != http.StatusSeeOther {
				t.Fatalf("delete with the token: %d %s", res.status, res)
			}
			a.must(404, "GET", "/api/flows/"+id, nil)
		})
	}
}

func TestHostAllowedWithoutAToken(t *testing.T) {
	for _, tc := range []struct {
		host    string
		allowed []string
		want    bool
	}{
		{"localhost:8080", nil, true},
		{"LOCALHOST", nil, true},
		{"app.localhost:8080", nil, true},
		{"localhost.:8080", nil, true},
		{"127.0.0.1:8080", nil, true},
		{"127.1.2.3", nil, true},
		{"[::1]:8080", nil, true},
		{"[::ffff:127.0.0.1]:8080", nil, true},
		{"evil.example:8080", nil, false},
		{"localhost.evil.example", nil, false},
		{"evillocalhost", nil, false},
		{"10.0.0.1:8080", nil, false},
		{"[::]:8080", nil, false},
		{"0.0.0.0:8080", nil, false},
		{"", nil, false},
		{"sluice.internal:443", []string{"sluice.internal"}, true},
		{"a.example.com", []string{"*.example.com"}, true},
		{"example.com", []string{"*.example.com"}, false},
		{"anything.example", []string{"*"}, true},
	} {
		if got := server.HostAllowed(tc.host, tc.allowed); got != tc.want {
			t.Errorf("HostAllowed(%q, %q) = %v, want %v", tc.host, tc.allowed, got, tc.want)
		}
	}
}

func TestWithoutATokenOnlyLoopbackHostsAreAnswered(t *testing.T) {
	r := storetest.Real(t)
	a := newAPI(t, r, noToken)
	u, _ := url.Parse(a.base)
	_, port, _ := net.SplitHostPort(u.Host)
	// A page on evil.example whose name now resolves to 127.0.0.1 (DNS rebinding): its
	// requests are same-origin to itself, and name it in Host.
	id, doc := a.flowDoc("linear", nil)
	evil := "evil.example:" + port
	for _, rq := range []struct {
		method, path string
		body         []byte
	}{{"GET", "/", nil}, {"GET", "/api/flows", nil}, {"GET", "/healthz", nil}, {"PUT", "/api/flows/" + id, doc}, {"GET", "/ws", nil}} {
		res := a.send(rq.method, rq.path, bytes.NewReader(rq.body), "Host", evil, "Origin", "http://"+evil, "Content-Type", "application/json")
		if res.status != http.StatusForbidden || !strings.Contains(res.errorBody(t).Message, "--allowed-hosts") {
			t.Errorf("%s %s with Host %s: %d %s, want 403 naming --allowed-hosts", rq.method, rq.path, evil, res.status, res)
		}
	}
	a.must(404, "GET", "/api/flows/"+id, nil)
	for _, h := range []string{"localhost:" + port, "127.0.0.1:" + port, "sluice.localhost:" + port} {
		if res := a.send("GET", "/api/flows", nil, "Host", h); res.status != 200 {
			t.Errorf("Host %s: %d %s", h, res.status, res)
		}
	}
	// Behind a proxy, the proxy's name is allowed explicitly.
	b := newAPI(t, r, noToken, func(c *server.Config, _ *server.Deps) { c.AllowedHosts = []string{"sluice.internal"} })
	if res := b.send("GET", "/api/flows", nil, "Host", "sluice.internal"); res.status != 200 {
		t.Errorf("an allowed host: %d %s", res.status, res)
	}
	if res := b.send("GET", "/api/flows", nil, "Host", "other.internal"); res.status != 403 {
		t.Errorf("a host not allowed: %d %s", res.status, res)
	}
	// With a token, any Host is answered (the token is what protects the server).
	c := newAPI(t, r)
	if res := c.send("GET", "/api/flows", nil, "Host", evil, "Authorization", "Bearer "+c.token); res.status != 200 {
		t.Errorf("token mode, foreign Host: %d %s", res.status, res)
	}
}

func TestShortTokensAreRefused(t *testing.T) {
	for tok, ok := range map[string]bool{
		"":                         true, // no token: authentication off (loopback only)
		"                    ":     false,
		"\t\n":                     false,
		"short-token":              false,
		"fifteen-chars-x":          false,
		"sixteen-chars-xx":         true,
		"  sixteen-chars-xx  ":     false, // white space is lost in headers
		"with a space in its mids": false,
		"ääääääääääääääää":         true,
		// Only visible characters count: zero-width, format, combining and control
		// characters, and bytes that are not UTF-8, add nothing a person could see.
		strings.Repeat("\u200b", 16):  false,
		strings.Repeat("\ufeff", 20):  false,
		strings.Repeat("\u0301", 16):  false,
		strings.Repeat("\x01", 16):    false,
		strings.Repeat("\xff", 16):    false,
		"fifteen-chars-x\u200b\u200b": false,
		"sixteen-chars-x\x7f":         false,
		"\ufeffsixteen-chars-xx":      true,
		strings.Repeat("\u4e00", 16):  true,
	} {
		err := server.CheckToken(tok)
		if (err == nil) != ok {
			t.Errorf("CheckToken(%q) = %v, want ok=%v", tok, err, ok)
		}
		if err != nil && !strings.Contains(err.Error(), "SLUICE_TOKEN") {
			t.Errorf("CheckToken(%q) = %v: name the setting", tok, err)
		}
	}
	srv := server.New(server.Config{Addr: "127.0.0.1:0", Token: "   "}, server.Deps{Redis: storetest.Embedded(t), Library: newLibrary(t)})
	if err := srv.Run(t.Context(), nil); err == nil || !strings.Contains(err.Error(), "SLUICE_TOKEN") {
		t.Errorf("Run with a white-space token = %v, want a refusal", err)
	}
	if err := server.CheckConfig(server.Config{Addr: "127.0.0.1:0", CORSOrigins: []string{"*"}}); err == nil {
		t.Error("CORS for any origin without a token was accepted")
	}
}

// slowHook opens a connection that sends a webhook's headers and one byte of its body,
// then nothing more.
func slowHook(t *testing.T, base, flow string, header string) net.Conn {
	t.Helper()
	u, _ := url.Parse(base)
	c, err := net.Dial("tcp", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	fmt.Fprintf(c, "POST /hooks/%s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n%s\r\n{", flow, u.Host, header)
	return c
}

// answer reads what the server answers on a raw connection until it closes it; it fails
// the test when the server keeps the connection past limit (a bound against hanging, not
// a measure of speed).
func answer(t *testing.T, c net.Conn, limit time.Duration) string {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(limit))
	b, err := io.ReadAll(c)
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatalf("the server still holds the connection after %s (got %q)", limit, b)
	}
	return string(b)
}

func TestSlowWebhookBodiesAreCutOff(t *testing.T) {
	r := storetest.Real(t)
	const secret = "hook-secret-slow-1"
	a := newAPI(t, r, func(c *server.Config, _ *server.Deps) {
		c.ReadTimeout = 300 * time.Millisecond
		c.HookSecret = func(string) string { return secret }
	})
	id := a.saveFlow("linear", nil)
	sig := "X-Sluice-Signature: sha256=" + strings.Repeat("0", 64) + "\r\n"
	var conns []net.Conn
	for i := 0; i < 50; i++ {
		conns = append(conns, slowHook(t, a.base, id, sig))
	}
	for i, c := range conns {
		got := answer(t, c, 30*time.Second)
		if !strings.HasPrefix(got, "HTTP/1.1 408") {
			t.Fatalf("slow connection %d was answered %q, want 408 and closed", i, got)
		}
	}
	// The deadline is for the body only: a request that waits for its run after reading
	// its body (longer than the read timeout) gets its answer.
	slow := a.saveFlow(`{"sluice": 1, "id": "x", "nodes": [{"id": "in", "type": "input"}, {"id": "wait", "type": "delay", "params": {"for": "30s"}}],
		"edges": [{"from": "in", "to": "wait"}]}`, nil)
	res := a.must(http.StatusAccepted, "POST", "/api/flows/"+slow+"/runs?wait=1s", `{"input": {}}`)
	var started server.Started
	res.into(t, &started)
	if started.Run == "" {
		t.Fatalf("the long poll's answer: %s", res)
	}
}

func TestWebhookIngressChecksTheCallerBeforeReadingTheBody(t *testing.T) {
	r := storetest.Real(t)
	const secret = "hook-secret-early-1"
	var withSecret string
	a := newAPI(t, r, func(c *server.Config, _ *server.Deps) {
		c.HookSecret = func(f string) string {
			if f == withSecret {
				return secret
			}
			return ""
		}
	})
	withSecret = a.saveFlow("linear", nil)
	other := a.saveFlow("linear", nil)
	// Headers and a byte of a large body: the answer comes without the rest.
	for what, tc := range map[string]struct{ flow, header, status string }{
		"a flow without a secret": {other, "Authorization: Bearer " + secret + "\r\n", "404"},
		"no credentials":          {withSecret, "", "401"},
		"a wrong bearer secret":   {withSecret, "Authorization: Bearer wrong\r\n", "401"},
		"another scheme":          {withSecret, "Authorization: Basic " + secret + "\r\n", "401"},
	} {
		c := slowHook(t, a.base, tc.flow, tc.header)
		br := bufio.NewReader(c)
		c.SetReadDeadline(time.Now().Add(30 * time.Second))
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("%s: no answer before the body was sent: %v", what, err)
		}
		if !strings.HasPrefix(line, "HTTP/1.1 "+tc.status) {
			t.Errorf("%s: %q, want %s", what, line, tc.status)
		}
	}
}

func TestWebhookIngressReadsAtMostSoManyBodiesAtOnce(t *testing.T) {
	r := storetest.Real(t)
	const secret = "hook-secret-cap-1"
	a := newAPI(t, r, func(c *server.Config, _ *server.Deps) {
		c.HookConcurrency = 2
		c.HookSecret = func(string) string { return secret }
	})
	id := a.saveFlow("linear", nil)
	sig := "X-Sluice-Signature: sha256=" + strings.Repeat("0", 64) + "\r\n"
	slowHook(t, a.base, id, sig)
	slowHook(t, a.base, id, sig)
	// Once both slow bodies are being read, a third delivery is turned away at once.
	eventually(t, 20*time.Second, func() string {
		res := a.send("POST", "/hooks/"+id, strings.NewReader(`{}`), "Content-Type", "application/json", "X-Sluice-Signature", "sha256=00")
		if res.status != http.StatusServiceUnavailable {
			return fmt.Sprintf("third delivery: %d %s, want 503", res.status, res)
		}
		if res.header.Get("Retry-After") == "" {
			return "503 without Retry-After"
		}
		return ""
	})
}
