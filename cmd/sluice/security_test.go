package main

// The hardening of issue 12 as a user meets it: the processes refuse weak settings, sign
// their webhooks alike, and (browser_test's harness) no other web page can drive them.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/sluicehq/sluice/flows/engine"
	"github.com/sluicehq/sluice/flows/engine/dispatch"
	"github.com/sluicehq/sluice/server"
	"github.com/sluicehq/sluice/store/storetest"
)

func TestServeRefusesAWeakToken(t *testing.T) {
	for _, tok := range []string{"   ", "\t", "short", "fifteen-chars-x", "has a space in it!"} {
		// A server that starts anyway is stopped after a while, which fails the test.
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, binary, "serve", "--addr", "127.0.0.1:0", "--flows", t.TempDir())
		cmd.Env = append(cmd.Environ(), "REDIS_URL=", "SLUICE_TOKEN="+tok)
		out, err := cmd.CombinedOutput()
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 || !strings.Contains(string(out), "SLUICE_TOKEN") {
			t.Errorf("SLUICE_TOKEN=%q: err %v, output %q; want exit 2 naming SLUICE_TOKEN", tok, err, out)
		}
	}
}

// hookReceiver records the result webhooks it gets.
type hookReceiver struct {
	srv  *httptest.Server
	mu   sync.Mutex
	hdrs []http.Header
	body [][]byte
}

func newHookReceiver(t *testing.T) *hookReceiver {
	rc := &hookReceiver{}
	rc.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		b, _ := io.ReadAll(req.Body)
		rc.mu.Lock()
		rc.hdrs = append(rc.hdrs, req.Header.Clone())
		rc.body = append(rc.body, b)
		rc.mu.Unlock()
	}))
	t.Cleanup(rc.srv.Close)
	return rc
}

// wait returns the first webhook the receiver got.
func (rc *hookReceiver) wait(t *testing.T) (http.Header, []byte) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		rc.mu.Lock()
		if len(rc.hdrs) > 0 {
			defer rc.mu.Unlock()
			return rc.hdrs[0], rc.body[0]
		}
		rc.mu.Unlock()
		if time.Now().After(deadline) {
			t.Fatal("no result webhook arrived")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A result webhook carries the same headers and signature whichever process sends it:
// serve, or a headless worker.
func TestResultWebhooksAreSignedAlikeByServeAndWorker(t *testing.T) {
	r := storetest.Real(t)
	const secret = "hook-secret-signed-alike"
	headers := map[string]http.Header{}
	for _, proc := range []string{"serve", "worker"} {
		t.Run(proc, func(t *testing.T) {
			rc := newHookReceiver(t)
			dir := t.TempDir()
			id, path := writeExampleFlow(t, dir, "linear", func(d map[string]any) {
				for _, n := range d["nodes"].([]any) {
					if n := n.(map[string]any); n["id"] == "out" {
						n["params"].(map[string]any)["webhook"] = rc.srv.URL + "/done"
					}
				}
			})
			storetest.DeleteFlowKeys(t, r, id)
			env := []string{"REDIS_URL=" + storetest.URL(), server.HookSecretEnv(id) + "=" + secret, "SLUICE_HTTP_ALLOW=127.0.0.1"}
			if proc == "serve" {
				p := start(t, env, "serve", "--addr", "127.0.0.1:0", "--flows", dir)
				base := p.waitLine(t, servingLine, 20*time.Second)[1]
				req, _ := http.NewRequest("POST", base+"/api/flows/"+id+"/runs", strings.NewReader(`{"input": {"name": "Ada"}}`))
				req.Header.Set("Content-Type", "application/json")
				res, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				res.Body.Close()
				if res.StatusCode != http.StatusAccepted {
					t.Fatalf("start: %d", res.StatusCode)
				}
			} else {
				w := start(t, env, "worker", path)
				w.waitLine(t, regexp.MustCompile(`msg="serving flow"`), 20*time.Second)
				e := engine.New(r, registry(nil), engine.Options{})
				plan, err := loadPlan(e, path, io.Discard)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := e.Start(context.Background(), plan, json.RawMessage(`{"name": "Ada"}`), engine.StartOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			h, body := rc.wait(t)
			if got, want := h.Get("X-Sluice-Signature"), dispatch.Sign([]byte(secret), body); got != want {
				t.Errorf("X-Sluice-Signature = %q, want %q (the body signed with the flow's secret)", got, want)
			}
			if !bytes.Contains(body, []byte(`"HELLO, ADA!"`)) {
				t.Errorf("body = %s", body)
			}
			headers[proc] = h
		})
	}
	for _, name := range []string{"Content-Type", "User-Agent", "X-Sluice-Flow", "X-Sluice-Run", "X-Sluice-Delivery", "X-Sluice-Attempt", "X-Sluice-Signature"} {
		for proc, h := range headers {
			if h.Get(name) == "" {
				t.Errorf("the webhook from %s has no %s", proc, name)
			}
		}
	}
}

// attackPage is a page of another site the person has open while Sluice runs: it tries
// every way a page can send a request without the server's consent (no-cors fetches with
// the types a page may send, fetches that need a CORS preflight, a form posted by a
// top-level navigation), with the browser's cookies for Sluice.
const attackPage = `<!doctype html><title>attacking</title><script>
const q = new URLSearchParams(location.search), target = q.get("target"), flow = q.get("flow");
const doc = JSON.stringify({sluice: 1, id: "from-another-site", nodes: [{id: "in", type: "input"}], edges: []});
const fd = new FormData();
fd.append("file", new Blob([doc], {type: "application/json"}), "flow.json");
const runs = target + "/api/flows/" + flow + "/runs";
const input = JSON.stringify({input: {name: "Mallory"}});
const opts = {credentials: "include"};
Promise.allSettled([
  fetch(target + "/api/flows", {...opts, method: "POST", mode: "no-cors", body: fd}),
  fetch(target + "/api/flows?overwrite=true", {...opts, method: "POST", mode: "no-cors", headers: {"Content-Type": "text/plain"}, body: doc}),
  fetch(runs, {...opts, method: "POST", mode: "no-cors"}),
  fetch(runs, {...opts, method: "POST", mode: "no-cors", headers: {"Content-Type": "text/plain"}, body: input}),
  fetch(runs, {...opts, method: "POST", mode: "no-cors", headers: {"Content-Type": "application/x-www-form-urlencoded"}, body: "input=%7B%7D"}),
  fetch(runs, {...opts, method: "POST", headers: {"Content-Type": "application/json"}, body: input}),
  fetch(target + "/api/flows/" + flow, {...opts, method: "DELETE"}),
]).then(() => { document.title = "done"; });
</script>`

// formPage posts a form to Sluice as soon as it loads (a top-level navigation).
const formPage = `<!doctype html><title>form</title><form method="post"><input name="_csrf" value="guessed"><input name="x" value="1"></form>
<script>const f = document.forms[0]; f.action = new URLSearchParams(location.search).get("to"); f.submit();</script>`

func TestBrowserAnotherSitesPageCannotDriveSluice(t *testing.T) {
	r := storetest.Real(t)
	attacker := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		if req.URL.Path == "/form" {
			io.WriteString(w, formPage)
			return
		}
		io.WriteString(w, attackPage)
	}))
	defer attacker.Close()
	_, port, _ := net.SplitHostPort(attacker.Listener.Addr().String())
	// Two other origins on loopback: another site (localhost is not 127.0.0.1), and the
	// same site on another port (which gets even SameSite=Strict cookies).
	origins := []string{"http://localhost:" + port, "http://127.0.0.1:" + port}

	for _, mode := range []struct{ name, token string }{{"no token", ""}, {"token", "browser-attack-token-7d1e"}} {
		t.Run(mode.name, func(t *testing.T) {
			dir := t.TempDir()
			id, _ := writeExampleFlow(t, dir, "linear", nil)
			storetest.DeleteFlowKeys(t, r, id)
			storetest.DeleteFlowKeys(t, r, "from-another-site")
			p := start(t, []string{"REDIS_URL=" + storetest.URL(), "SLUICE_TOKEN=" + mode.token}, "serve", "--addr", "127.0.0.1:0", "--flows", dir)
			base := p.waitLine(t, servingLine, 30*time.Second)[1]
			api := &apiClient{t: t, base: base, token: mode.token}
			auth := ""
			if mode.token == "" {
				auth = "none"
			}

			b := newBrowser(t, base)
			b.noShots = true
			// The person uses Sluice in this browser: its cookies (the token's, the
			// forms') are there for another page to ride on.
			if mode.token != "" {
				b.open("/?token=" + mode.token)
			} else {
				b.open("/")
			}
			b.waitText("main", id)
			for _, origin := range origins {
				b.open("/") // back on Sluice between attacks
				b.run("open the attack page on "+origin, chromedp.Navigate(origin+"/attack?target="+url.QueryEscape(base)+"&flow="+id))
				b.waitFor("the attack page's requests to settle", `document.title === "done"`)
				for _, action := range []string{"delete", "duplicate"} {
					b.run("open the form page on "+origin, chromedp.Navigate(origin+"/form?to="+url.QueryEscape(base+"/flows/"+id+"/"+action)))
					b.waitFor("the form's answer from Sluice", fmt.Sprintf(`location.origin === %q`, base))
				}
			}

			// Nothing changed: the one flow, no run, no copy, no import.
			st, body := api.do("GET", "/api/flows", "", nil, auth)
			var list struct{ Flows []struct{ ID string } }
			json.Unmarshal(body, &list)
			if st != 200 || len(list.Flows) != 1 || list.Flows[0].ID != id {
				t.Errorf("flows after the attacks: %d %s, want only %s", st, body, id)
			}
			st, body = api.do("GET", "/api/flows/"+id+"/runs", "", nil, auth)
			var runs struct{ Total int }
			json.Unmarshal(body, &runs)
			if st != 200 || runs.Total != 0 {
				t.Errorf("runs after the attacks: %d %s, want none", st, body)
			}
			// The attacks did reach the server, and each was refused there.
			refused := map[string]bool{}
			line := regexp.MustCompile(`msg=request method=(POST|DELETE) path=(\S+) status=(\d+)`)
			for _, l := range p.allLines() {
				m := line.FindStringSubmatch(l)
				if m == nil {
					continue
				}
				if m[3] != "403" && m[3] != "415" && m[3] != "401" {
					t.Errorf("an attack was answered %s: %s", m[3], l)
				}
				refused[m[1]+" "+m[2]] = true
			}
			for _, want := range []string{"POST /api/flows", "POST /api/flows/" + id + "/runs", "POST /flows/" + id + "/delete", "POST /flows/" + id + "/duplicate"} {
				if !refused[want] {
					t.Errorf("no refused %s in the server's log: the attack never reached it, so this proves nothing (%v)", want, refused)
				}
			}
		})
	}
}

// The secrets allow-list reaches validation in every command that compiles flows.
func TestTheSecretsAllowListReachesEveryCommand(t *testing.T) {
	r := storetest.Real(t)
	echo := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"auth": req.Header.Get("Authorization")})
	}))
	defer echo.Close()
	dir := t.TempDir()
	id, path := writeExampleFlow(t, dir, "linear", func(d map[string]any) {
		d["nodes"] = []any{
			map[string]any{"id": "in", "type": "input"},
			map[string]any{"id": "call", "type": "http", "params": map[string]any{"url": echo.URL,
				"headers": map[string]any{"Authorization": map[string]any{"$env": "ORDERS_KEY"}}}},
			map[string]any{"id": "out", "type": "output"},
		}
		d["edges"] = []any{map[string]any{"from": "in", "to": "call"}, map[string]any{"from": "call", "to": "out"}}
	})
	storetest.DeleteFlowKeys(t, r, id)
	const value = "orders-key-5e1f0a77"
	run := func(env []string, args ...string) (int, string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, binary, args...)
		cmd.Env = append(cmd.Environ(), append([]string{"ORDERS_KEY=" + value, "SLUICE_HTTP_ALLOW=127.0.0.1", "REDIS_URL=" + storetest.URL(), "SLUICE_SECRETS="}, env...)...)
		out, err := cmd.CombinedOutput()
		if ee, ok := err.(*exec.ExitError); ok {
			return ee.ExitCode(), string(out)
		} else if err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		return 0, string(out)
	}
	refused := func(what string, code int, out string) {
		t.Helper()
		if code != 1 || !strings.Contains(out, "secret_not_allowed") || !strings.Contains(out, `node "call"`) || !strings.Contains(out, "ORDERS_KEY") {
			t.Errorf("%s without the allow-list: exit %d, %q; want exit 1 with secret_not_allowed at node call", what, code, out)
		}
	}
	code, out := run(nil, "validate", path)
	refused("validate", code, out)
	code, out = run(nil, "run", path)
	refused("run", code, out)
	code, out = run(nil, "worker", path)
	refused("worker", code, out)

	if code, out := run(nil, "validate", "--secrets", "ORDERS_KEY", path); code != 0 {
		t.Errorf("validate --secrets ORDERS_KEY: exit %d, %s", code, out)
	}
	if code, out := run(nil, "validate", "--secrets", "SLUICE_TOKEN", path); code != 2 || !strings.Contains(out, "setting of Sluice") {
		t.Errorf("validate --secrets SLUICE_TOKEN: exit %d, %s; want 2: Sluice's own settings are never readable", code, out)
	}
	code, out = run([]string{"SLUICE_SECRETS=ORDERS_KEY"}, "run", path)
	if code != 0 || strings.Contains(out, value) || !strings.Contains(out, "[redacted:ORDERS_KEY]") {
		t.Errorf("run with SLUICE_SECRETS=ORDERS_KEY: exit %d, %s; want the echoed key redacted", code, out)
	}
}
