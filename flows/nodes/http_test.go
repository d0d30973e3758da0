package nodes_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"reflect"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/sluicehq/sluice/flows"
	"github.com/sluicehq/sluice/flows/nodes"
)

func httpEnv(vars map[string]string) *nodes.Env {
	return &nodes.Env{HTTP: loopbackOK(), LookupEnv: func(k string) (string, bool) { v, ok := vars[k]; return v, ok }}
}

func TestHTTPSendsTheRenderedRequestWithSecretHeadersFromTheEnvironment(t *testing.T) {
	var got struct {
		method, path, query, auth, trace, ctype, body string
	}
	srv, _ := countingServer(t, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got.method, got.path, got.query, got.auth, got.trace, got.ctype, got.body =
			r.Method, r.URL.Path, r.URL.RawQuery, r.Header.Get("Authorization"), r.Header.Get("X-Trace"), r.Header.Get("Content-Type"), string(b)
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"id": 7, "status": "open"}`))
	})
	h := buildIn(t, httpEnv(map[string]string{"SLUICE_SECRET_ORDERS": "s3cret"}), "http", `{"method": "POST",
		"url": "`+srv.URL+`/orders/{{.order}}?q={{urlquery .q}}",
		"headers": {"Authorization": {"$env": "SLUICE_SECRET_ORDERS", "prefix": "Bearer "}, "X-Trace": "run-{{.order}}"},
		"json": "{note: .q}", "as": "order_info"}`)
	s, _ := newStep(state(t, `{"order": 42, "q": "a b&c"}`))
	res, err := h.Run(context.Background(), s)
	if err != nil {
		t.Fatal(err)
	}
	if got.method != "POST" || got.path != "/orders/42" || got.query != "q=a+b%26c" || got.auth != "Bearer s3cret" ||
		got.trace != "run-42" || got.ctype != "application/json" || got.body != `{"note":"a b&c"}` {
		t.Errorf("the server got %+v", got)
	}
	out, _ := json.Marshal(res.Output)
	if want := `{"body":{"id":7,"status":"open"},"content_type":"application/json","status":200}`; string(out) != want || res.Update["order_info"] == nil {
		t.Errorf("output %#v, update %v", res.Output, res.Update)
	}
	if b, _ := json.Marshal(res.Output); strings.Contains(string(b), "s3cret") {
		t.Errorf("the secret is in the step's output: %s", b)
	}
}

func TestHTTPRefusesAMissingSecretAndAParamWithALiteralOne(t *testing.T) {
	srv, hits := countingServer(t, nil)
	h := buildIn(t, httpEnv(nil), "http", `{"url": "`+srv.URL+`", "headers": {"Authorization": {"$env": "SLUICE_SECRET_NOT_SET"}}}`)
	s, _ := newStep(state(t, `{}`))
	_, err := h.Run(context.Background(), s)
	wantPermanent(t, err, "params.headers.Authorization", "environment variable SLUICE_SECRET_NOT_SET is not set")
	if hits.Load() != 0 {
		t.Error("a request went out without its secret header")
	}
	doc := `{"sluice": 1, "id": "x", "nodes": [{"id": "in", "type": "input"}, {"id": "h", "type": "http", "params": {"url": "https://x.example", "headers": {"Authorization": "Bearer abcdefghijklmnopqrstuvwx"}}}], "edges": [{"from": "in", "to": "h"}]}`
	ps := flows.Validate([]byte(doc), nodes.NewRegistry(nil), flows.DefaultLimits).Errors()
	if len(ps) != 1 || ps[0].Code != flows.CodeLiteralSecret {
		t.Errorf("a literal bearer token in a header: %v, want literal_secret", ps)
	}
}

func TestHTTPStatusesDecideRetries(t *testing.T) {
	for _, tc := range []struct {
		status    int
		permanent bool
	}{{404, true}, {400, true}, {429, false}, {503, false}, {408, false}} {
		srv, _ := countingServer(t, func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(tc.status)
			w.Write([]byte("nope"))
		})
		h := buildIn(t, httpEnv(nil), "http", `{"url": "`+srv.URL+`/x"}`)
		s, _ := newStep(state(t, `{}`))
		_, err := h.Run(context.Background(), s)
		if err == nil || flows.IsPermanent(err) != tc.permanent || !strings.Contains(err.Error(), "nope") {
			t.Errorf("%d: %v, want permanent=%v with the body", tc.status, err, tc.permanent)
		}
	}
}

func TestHTTPCapsTheResponseAndTimesOut(t *testing.T) {
	big, _ := countingServer(t, func(w http.ResponseWriter, r *http.Request) { w.Write([]byte(strings.Repeat("x", 2000))) })
	h := buildIn(t, httpEnv(nil), "http", `{"url": "`+big.URL+`", "max_bytes": 1000}`)
	s, _ := newStep(state(t, `{}`))
	_, err := h.Run(context.Background(), s)
	wantPermanent(t, err, "params.max_bytes", "larger than max_bytes (1000 bytes)")

	release := make(chan struct{})
	defer close(release)
	slow, _ := countingServer(t, func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	h = buildIn(t, httpEnv(nil), "http", `{"url": "`+slow.URL+`", "timeout": "50ms"}`)
	_, err = h.Run(context.Background(), s)
	if flows.ErrorCode(err) != flows.Timeout || flows.IsPermanent(err) || !strings.Contains(err.Error(), "within 50ms") {
		t.Errorf("got %v, want a retried timeout", err)
	}
}

func TestHTTPAsAToolRendersTheModelsArguments(t *testing.T) {
	srv, _ := countingServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(`{"city": "` + r.URL.Query().Get("city") + `", "temp": 21}`))
	})
	c := buildIn(t, httpEnv(nil), "http", `{"url": "`+srv.URL+`/weather?city={{urlquery .city}}", "tool_name": "weather",
		"tool_description": "Current weather of a city.", "tool_parameters": {"type": "object", "required": ["city"], "properties": {"city": {"type": "string"}}}}`)
	tool := c.(flows.Tool)
	def := tool.ToolDef()
	if def.Name != "weather" || def.Description != "Current weather of a city." || !strings.Contains(string(def.Parameters), `"city"`) {
		t.Errorf("tool def %+v", def)
	}
	s, _ := newStep(state(t, `{}`))
	out, err := tool.Call(context.Background(), s, json.RawMessage(`{"city": "Zürich"}`))
	if err != nil {
		t.Fatal(err)
	}
	if body := out.(map[string]any)["body"].(map[string]any); body["city"] != "Zürich" {
		t.Errorf("tool result %v", out)
	}
}

// Three branches asking for the same expensive request at once: the upstream answers once.
func TestHTTPCachedRequestRunsOnceForParallelCallers(t *testing.T) {
	release := make(chan struct{})
	srv, hits := countingServer(t, func(w http.ResponseWriter, r *http.Request) {
		<-release
		w.Write([]byte(`{"pages": 3}`))
	})
	env := httpEnv(nil)
	h := buildCached(t, env, "http", `{"method": "POST", "url": "`+srv.URL+`/convert", "body": "{{.doc}}"}`, "1h")
	var wg sync.WaitGroup
	outs := make([]any, 3)
	errs := make([]error, 3)
	for i := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, _ := newStep(state(t, `{"doc": "label.pdf", "branch": `+string(rune('0'+i))+`}`))
			res, err := h.Run(context.Background(), s)
			errs[i] = err
			if err == nil {
				outs[i] = res.Output
			}
		}()
	}
	for hits.Load() == 0 {
		runtime.Gosched()
	}
	close(release)
	wg.Wait()
	for i := range 3 {
		if errs[i] != nil || !reflect.DeepEqual(outs[i], outs[0]) {
			t.Fatalf("branch %d: %v %v", i, outs[i], errs[i])
		}
	}
	if hits.Load() != 1 {
		t.Errorf("the upstream was called %d times, want once", hits.Load())
	}
	if st := env.CacheStats(); st.Hits != 2 || st.Misses != 1 {
		t.Errorf("cache stats %+v, want 2 hits and 1 miss", st)
	}
}

func TestHTTPRefusesVariablesFlowsMayNotRead(t *testing.T) {
	srv, hits := countingServer(t, nil)
	env := httpEnv(map[string]string{"SLUICE_TOKEN": "the-server-token-123", "HOME": "/root"})
	for _, name := range []string{"SLUICE_TOKEN", "HOME"} {
		h := buildIn(t, env, "http", `{"url": "`+srv.URL+`", "headers": {"Authorization": {"$env": "`+name+`"}}}`)
		s, _ := newStep(state(t, `{}`))
		_, err := h.Run(context.Background(), s)
		if !flows.IsPermanent(err) || flows.ErrorCode(err) != flows.Forbidden || !strings.Contains(err.Error(), name) {
			t.Errorf("$env %s: %v, want a permanent refusal naming it", name, err)
		}
	}
	if hits.Load() != 0 {
		t.Error("a request went out")
	}
}

func TestHTTPRedactsSecretsTheUpstreamEchoes(t *testing.T) {
	const secret = "canary-7f3a9c2e41"
	srv, _ := countingServer(t, func(w http.ResponseWriter, r *http.Request) {
		auth := r.Header.Get("Authorization")
		switch r.URL.Path {
		case "/json":
			w.Header().Set("Content-Type", "application/json")
			b, _ := json.Marshal(map[string]any{"you_sent": r.Header, auth: "as a key"})
			w.Write(b)
		case "/escaped":
			w.Header().Set("Content-Type", "application/json")
			w.Write([]byte(`{"auth": "` + strings.ReplaceAll(auth, "c", `\u0063`) + `"}`))
		case "/text":
			w.Header().Set("Content-Type", "text/plain; charset="+auth)
			w.Write([]byte("you sent " + auth))
		case "/401":
			w.WriteHeader(http.StatusUnauthorized)
			w.Write([]byte("bad credentials: " + auth))
		default:
			w.WriteHeader(http.StatusBadGateway)
			w.Write([]byte("upstream failed with " + auth))
		}
	})
	vars := map[string]string{"SLUICE_SECRET_CANARY": secret}
	env := httpEnv(vars)
	for _, path := range []string{"json", "escaped", "text", "401", "502"} {
		h := buildCached(t, env, "http", `{"url": "`+srv.URL+`/`+path+`", "headers": {"Authorization": {"$env": "SLUICE_SECRET_CANARY", "prefix": "Bearer "}}}`, "1m")
		s, _ := newStep(state(t, `{}`))
		res, err := h.Run(context.Background(), s)
		var text string
		if err != nil {
			text = err.Error()
		} else {
			b, _ := json.Marshal(res)
			text = string(b)
		}
		if strings.Contains(text, secret) || strings.Contains(text, "canary") {
			t.Errorf("%s: the secret came back: %s", path, text)
		}
		if !strings.Contains(text, "[redacted:SLUICE_SECRET_CANARY]") {
			t.Errorf("%s: no redaction mark in %s", path, text)
		}
	}
}

// An http node without a URL can only fail: validation refuses it, saying where, as a
// step and as an agent's tool (an imported Langflow agent's tool used to validate and
// then fail every call).
func TestValidationRefusesAnHTTPNodeWithoutAURL(t *testing.T) {
	for _, tc := range []struct{ name, url, edges string }{
		{"step", `""`, `[{"from": "in", "to": "fetch"}]`},
		{"step, white space", `"  "`, `[{"from": "in", "to": "fetch"}]`},
		{"agent's tool", `""`, `[{"from": "in", "to": "agent"}, {"from": "fetch", "port": "tool", "to": "agent", "to_port": "tools"}]`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			doc := `{"sluice": 1, "id": "x", "nodes": [{"id": "in", "type": "input"},
				{"id": "agent", "type": "agent", "params": {"model": "m", "user": "hi"}},
				{"id": "fetch", "type": "http", "params": {"url": ` + tc.url + `}}], "edges": ` + tc.edges + `}`
			if tc.name != "agent's tool" {
				doc = strings.Replace(doc, `{"id": "agent", "type": "agent", "params": {"model": "m", "user": "hi"}},`, "", 1)
			}
			ps := flows.Validate([]byte(doc), nodes.NewRegistry(nil), flows.DefaultLimits).Errors()
			if len(ps) != 1 || ps[0].Node != "fetch" || !strings.Contains(ps[0].Path, "params.url") {
				t.Fatalf("problems %v, want one at node fetch, params.url", ps)
			}
		})
	}
}
