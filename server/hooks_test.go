package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/flows"
	"github.com/sluicehq/sluice/flows/engine"
	"github.com/sluicehq/sluice/flows/engine/dispatch"
	"github.com/sluicehq/sluice/flows/nodes"
	"github.com/sluicehq/sluice/server"
	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/storetest"
)

func TestWebhookIngressStartsRunsWithTheFlowsSecret(t *testing.T) {
	storetest.Each(t, func(t *testing.T, r *store.Redis) {
		const secret = "hook-secret-91d0"
		var flowWithSecret string
		a := newAPI(t, r, func(c *server.Config, _ *server.Deps) {
			c.HookSecret = func(flow string) string {
				if flow == flowWithSecret {
					return secret
				}
				return ""
			}
		})
		id := a.saveFlow("linear", nil)
		other := a.saveFlow("linear", nil)
		flowWithSecret = id
		body := `{"name": "Hook"}`
		noToken := []string{"Authorization", ""}

		// No secret configured: the flow has no ingress.
		a.must(http.StatusNotFound, "POST", "/hooks/"+other, body, append(noToken, "Authorization", "Bearer "+secret)...)
		// Wrong or missing secret; the admin token is not the hook's secret.
		a.must(http.StatusUnauthorized, "POST", "/hooks/"+id, body, noToken...)
		a.must(http.StatusUnauthorized, "POST", "/hooks/"+id, body, "Authorization", "Bearer wrong")
		a.must(http.StatusUnauthorized, "POST", "/hooks/"+id, body, "Authorization", "Bearer "+testToken)
		a.must(http.StatusUnauthorized, "POST", "/hooks/"+id, body, "Authorization", "", "X-Sluice-Signature", "sha256=00")
		a.must(http.StatusUnsupportedMediaType, "POST", "/hooks/"+id, body, "Authorization", "Bearer "+secret, "Content-Type", "text/plain")

		// The secret as a bearer token.
		var s server.Started
		a.must(http.StatusAccepted, "POST", "/hooks/"+id, body, "Authorization", "Bearer "+secret).into(t, &s)
		if got := a.settle(id, s.Run); got.Status != "succeeded" || string(got.Output) != `{"greeting":"HELLO, HOOK!"}` {
			t.Errorf("run from the hook = %+v", got)
		}
		// A signed body, with an idempotency key: a redelivery starts no second run.
		sig := dispatch.Sign([]byte(secret), []byte(body))
		var s1, s2 server.Started
		a.must(http.StatusAccepted, "POST", "/hooks/"+id, body, "Authorization", "", "X-Sluice-Signature", sig, "Idempotency-Key", "evt-1").into(t, &s1)
		a.must(http.StatusAccepted, "POST", "/hooks/"+id, body, "Authorization", "", "X-Sluice-Signature", sig, "Idempotency-Key", "evt-1").into(t, &s2)
		if s1.Run != s2.Run {
			t.Errorf("the same Idempotency-Key started runs %s and %s", s1.Run, s2.Run)
		}
		var list server.RunList
		a.must(200, "GET", "/api/flows/"+id+"/runs", nil).into(t, &list)
		if list.Total != 2 {
			t.Errorf("runs = %d, want 2", list.Total)
		}
		// The hook's info never shows the secret.
		info := a.must(200, "GET", "/api/flows/"+id+"/hooks", nil)
		var hi server.HookInfo
		info.into(t, &hi)
		if !hi.Enabled || hi.URL != "/hooks/"+id || strings.Contains(info.String(), secret) || !strings.HasPrefix(hi.SecretEnv, "SLUICE_HOOK_SECRET_") {
			t.Errorf("hook info = %s", info)
		}
	})
}

func TestHookSecretEnvName(t *testing.T) {
	if got := server.HookSecretEnv("ticket-triage_2"); got != "SLUICE_HOOK_SECRET_TICKET_TRIAGE_2" {
		t.Errorf("env name = %q", got)
	}
	t.Setenv("SLUICE_HOOK_SECRET_MY_FLOW", "s3")
	if server.HookSecretFromEnv("my-flow") != "s3" || server.HookSecretFromEnv("other") != "" {
		t.Error("HookSecretFromEnv does not read SLUICE_HOOK_SECRET_<FLOW>")
	}
	// A variable two workspaces' flows could both read is nobody's.
	for flow, shared := range map[string]bool{"a__b": true, "a-_b": true, "a--b": true, "a.b__c": true, "a__x.b": true,
		"a.b": false, "a_b": false, "a-b.c_d": false, "a_.b": false, "a.b_": false} {
		if server.HookSecretShared(flow) != shared {
			t.Errorf("HookSecretShared(%q) = %v", flow, !shared)
		}
	}
	t.Setenv("SLUICE_HOOK_SECRET_A__B", "s4")
	if server.HookSecretFromEnv("a.b") != "s4" || server.HookSecretFromEnv("a__b") != "" {
		t.Error("SLUICE_HOOK_SECRET_A__B is flow b of workspace a's only")
	}
}

// receiver is a webhook endpoint that fails its first `fail` requests.
type receiver struct {
	mu    sync.Mutex
	fail  int
	calls int
	got   []dispatch.ResultPayload
	raw   [][]byte
	hdr   []http.Header
	srv   *httptest.Server
}

func newReceiver(t *testing.T, fail int) *receiver {
	rc := &receiver{fail: fail}
	rc.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		rc.mu.Lock()
		defer rc.mu.Unlock()
		rc.calls++
		if rc.calls <= rc.fail {
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		var p dispatch.ResultPayload
		json.Unmarshal(b, &p)
		rc.got = append(rc.got, p)
		rc.raw = append(rc.raw, b)
		rc.hdr = append(rc.hdr, r.Header.Clone())
	}))
	t.Cleanup(rc.srv.Close)
	return rc
}

func (rc *receiver) state() (int, []dispatch.ResultPayload) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return rc.calls, append([]dispatch.ResultPayload(nil), rc.got...)
}

// runDispatcher runs a dispatcher for flows until the test ends.
func runDispatcher(t *testing.T, a *api, maxAttempts int, flowIDs ...string) {
	t.Helper()
	d := dispatch.New(a.e, dispatch.Options{
		Flows:       func(context.Context) ([]string, error) { return flowIDs, nil },
		MaxAttempts: maxAttempts, Backoff: 10 * time.Millisecond, MaxBackoff: 50 * time.Millisecond,
		Block: 100 * time.Millisecond, Refresh: 100 * time.Millisecond, ClaimAfter: time.Minute,
		Secret:  func(string) []byte { return []byte("sign-key") },
		Outcome: a.metrics.Delivery,
		HTTP:    loopbackAllowed(t),
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Error("dispatcher did not stop within 10s")
		}
	})
}

func TestResultWebhooksAreDeliveredWithRetriesAndTheirOwnDeadLetters(t *testing.T) {
	storetest.Each(t, func(t *testing.T, r *store.Redis) {
		a := newAPI(t, r)
		id := a.saveFlow("linear", nil)
		runDispatcher(t, a, 3, id)

		// Fails twice, then takes it: delivered once, on the third attempt.
		rc := newReceiver(t, 2)
		run := a.start(id, map[string]any{"input": map[string]any{"name": "Ada"}, "webhook": rc.srv.URL + "/done?token=abc"})
		eventually(t, 20*time.Second, func() string {
			if calls, got := rc.state(); len(got) != 1 || calls != 3 {
				return "receiver has not got the result on the third attempt yet"
			}
			return ""
		})
		_, got := rc.state()
		p := got[0]
		if p.Flow != id || p.Run != run || p.Status != "succeeded" || string(p.Output) != `{"greeting":"HELLO, ADA!"}` || p.Delivery == "" {
			t.Errorf("payload = %+v", p)
		}
		h := rc.hdr[0]
		if h.Get("X-Sluice-Delivery") != p.Delivery || h.Get("X-Sluice-Attempt") != "3" || h.Get("X-Sluice-Flow") != id || h.Get("X-Sluice-Run") != run {
			t.Errorf("headers = %v", h)
		}
		if sig := h.Get("X-Sluice-Signature"); sig != dispatch.Sign([]byte("sign-key"), rc.raw[0]) {
			t.Errorf("signature %q does not sign the body with the flow's key", sig)
		}
		// The run does not show its webhook (its URL may hold a token).
		if v := a.must(200, "GET", "/api/flows/"+id+"/runs/"+run, nil).String(); strings.Contains(v, "token=abc") || !strings.Contains(v, `"has_webhook":true`) {
			t.Errorf("run view = %s", v)
		}
		// Acknowledged entries are gone from the results stream; nothing else is left.
		eventually(t, 10*time.Second, func() string {
			if n, _ := r.ResultsLength(t.Context(), id); n != 0 {
				return "results stream still holds entries"
			}
			return ""
		})

		// Always failing: after 3 attempts it goes to the delivery dead letters.
		bad := newReceiver(t, 1000)
		run2 := a.start(id, map[string]any{"input": map[string]any{"name": "Bo"}, "webhook": bad.srv.URL + "/x?secret=s3cr3t"})
		var dl server.DeliveryList
		eventually(t, 20*time.Second, func() string {
			a.must(200, "GET", "/api/flows/"+id+"/deliveries", nil).into(t, &dl)
			if len(dl.Deliveries) != 1 {
				return "no failed delivery listed"
			}
			return ""
		})
		d := dl.Deliveries[0]
		if d.Run != run2 || d.Attempts != 3 || !strings.Contains(d.Error, "status 500") || d.Target != bad.srv.URL {
			t.Errorf("failed delivery = %+v", d)
		}
		if raw := a.must(200, "GET", "/api/flows/"+id+"/deliveries", nil).String(); strings.Contains(raw, "s3cr3t") || strings.Contains(raw, "/x") {
			t.Errorf("failed deliveries show the webhook's path or query: %s", raw)
		}
		if calls, _ := bad.state(); calls != 3 {
			t.Errorf("receiver called %d times, want 3", calls)
		}
		// Fixed receiver: a retry delivers it.
		bad.mu.Lock()
		bad.fail = 0
		bad.mu.Unlock()
		a.must(200, "POST", "/api/flows/"+id+"/deliveries/"+d.ID+"/retry", nil)
		eventually(t, 20*time.Second, func() string {
			if _, got := bad.state(); len(got) != 1 || got[0].Run != run2 {
				return "the retried delivery has not arrived"
			}
			return ""
		})
		a.must(200, "GET", "/api/flows/"+id+"/deliveries", nil).into(t, &dl)
		if len(dl.Deliveries) != 0 {
			t.Errorf("failed deliveries after the retry = %+v", dl)
		}
		a.must(http.StatusNotFound, "POST", "/api/flows/"+id+"/deliveries/"+d.ID+"/retry", nil)
		a.must(http.StatusNotFound, "DELETE", "/api/flows/"+id+"/deliveries/"+d.ID, nil)

		// Discard: a failed delivery that nobody wants sent.
		a.start(id, map[string]any{"input": map[string]any{"name": "Cy"}, "webhook": newReceiver(t, 1000).srv.URL})
		eventually(t, 20*time.Second, func() string {
			a.must(200, "GET", "/api/flows/"+id+"/deliveries", nil).into(t, &dl)
			if len(dl.Deliveries) != 1 {
				return "the third run's failed delivery is not listed"
			}
			return ""
		})
		a.must(http.StatusNoContent, "DELETE", "/api/flows/"+id+"/deliveries/"+dl.Deliveries[0].ID, nil)
		a.must(200, "GET", "/api/flows/"+id+"/deliveries", nil).into(t, &dl)
		if len(dl.Deliveries) != 0 {
			t.Errorf("failed deliveries after the discard = %+v", dl)
		}

		// No secret in any event or log line: the webhooks' queries, the hook's key.
		evs, err := r.EventsAfter(t.Context(), id, "0-0", 10000)
		if err != nil {
			t.Fatal(err)
		}
		for _, ev := range evs {
			if b, _ := json.Marshal(ev); strings.Contains(string(b), "token=abc") || strings.Contains(string(b), "s3cr3t") {
				t.Errorf("an event shows a webhook's secret: %s", b)
			}
		}
		if !strings.Contains(a.logs.String(), "dispatch: webhook failed") {
			t.Error("the test's log capture is not working")
		}
		for _, secret := range []string{"token=abc", "s3cr3t", "sign-key", testToken} {
			if strings.Contains(a.logs.String(), secret) {
				t.Errorf("the log shows %q", secret)
			}
		}

		m := a.must(200, "GET", "/metrics", nil).String()
		for _, want := range []string{`outcome="delivered"`, `outcome="retry"`, `outcome="dead"`} {
			if !strings.Contains(m, want) {
				t.Errorf("metrics lack deliveries %s", want)
			}
		}
	})
}

func TestRunsWithoutAWebhookAreAcknowledgedAndTrimmed(t *testing.T) {
	r := storetest.Real(t)
	a := newAPI(t, r)
	id := a.saveFlow("linear", nil)
	for i := 0; i < 3; i++ {
		a.must(200, "POST", "/api/flows/"+id+"/runs?wait=30s", `{"input": {"name": "x"}}`)
	}
	if n, _ := r.ResultsLength(t.Context(), id); n != 3 {
		t.Fatalf("results stream before dispatch = %d entries, want 3 (nothing trims it before dispatch acknowledges)", n)
	}
	runDispatcher(t, a, 3, id)
	eventually(t, 10*time.Second, func() string {
		if n, _ := r.ResultsLength(t.Context(), id); n != 0 {
			return "results not trimmed after dispatch"
		}
		return ""
	})
}

func TestADeliveryADispatcherLeftIsTakenOverByAnother(t *testing.T) {
	r := storetest.Real(t)
	a := newAPI(t, r)
	id := a.saveFlow("linear", nil)

	// The receiver hangs on its first request (the first dispatcher dies meanwhile) and
	// takes the second.
	arrived := make(chan struct{}, 1)
	release := make(chan struct{})
	var mu sync.Mutex
	calls := 0
	var got []dispatch.ResultPayload
	rc := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		mu.Lock()
		calls++
		n := calls
		mu.Unlock()
		if n == 1 {
			arrived <- struct{}{}
			select {
			case <-release:
			case <-req.Context().Done():
			}
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		var p dispatch.ResultPayload
		json.NewDecoder(req.Body).Decode(&p)
		mu.Lock()
		got = append(got, p)
		mu.Unlock()
	}))
	defer rc.Close()
	defer close(release)

	opts := dispatch.Options{Flows: func(context.Context) ([]string, error) { return []string{id}, nil },
		MaxAttempts: 3, Backoff: 10 * time.Millisecond, Block: 100 * time.Millisecond, ClaimAfter: 300 * time.Millisecond,
		HTTP: loopbackAllowed(t)}
	ctx1, crash := context.WithCancel(context.Background())
	done1 := make(chan error, 1)
	go func() { done1 <- dispatch.New(a.e, opts).Run(ctx1) }()

	run := a.start(id, map[string]any{"input": map[string]any{"name": "Ada"}, "webhook": rc.URL})
	select {
	case <-arrived:
	case <-time.After(20 * time.Second):
		t.Fatal("the first dispatcher never sent the webhook")
	}
	crash() // the first dispatcher goes away mid-delivery
	<-done1
	if n, _ := r.ResultsLength(t.Context(), id); n != 1 {
		t.Fatalf("results stream holds %d entries after the crash, want the pending 1", n)
	}

	ctx2, stop2 := context.WithCancel(context.Background())
	done2 := make(chan error, 1)
	go func() { done2 <- dispatch.New(a.e, opts).Run(ctx2) }()
	defer func() { stop2(); <-done2 }()
	eventually(t, 20*time.Second, func() string {
		mu.Lock()
		defer mu.Unlock()
		if len(got) != 1 {
			return "the second dispatcher has not delivered the result"
		}
		return ""
	})
	if got[0].Run != run || got[0].Status != "succeeded" {
		t.Errorf("delivered = %+v", got[0])
	}
	eventually(t, 10*time.Second, func() string {
		if n, _ := r.ResultsLength(t.Context(), id); n != 0 {
			return "the delivered entry is still in the results stream"
		}
		return ""
	})
}

// hookOutputSpec is an output component with a result webhook, as the output component
// will have: the dispatcher finds it through engine.Webhooker.
func hookOutputSpec() flows.Spec {
	return flows.Spec{Name: "hook_output", Title: "Output with a webhook (tests)", Category: "test", Description: "Ends the run; its result goes to the webhook.",
		Ports:  []flows.Port{{Name: flows.PortIn, Direction: "in", Type: flows.PortState, Multiple: true, Required: true}},
		Params: json.RawMessage(`{"type": "object", "additionalProperties": false, "properties": {"webhook": {"type": "string"}}}`),
		New: func(b *flows.Build) (flows.Component, error) {
			var p struct {
				Webhook string `json:"webhook"`
			}
			if err := b.Decode(&p); err != nil {
				return nil, err
			}
			return &hookOutput{url: p.Webhook}, nil
		}}
}

type hookOutput struct{ url string }

func (h *hookOutput) Run(_ context.Context, s *flows.Step) (*flows.Result, error) {
	return &flows.Result{Output: map[string]any{"name": s.State["name"]}, Final: true}, nil
}

func (h *hookOutput) Webhook() string { return h.url }

var _ engine.Webhooker = (*hookOutput)(nil)

func TestAnOutputNodesWebhookGetsTheResultToo(t *testing.T) {
	a := newAPI(t, storetest.Real(t))
	node, req := newReceiver(t, 0), newReceiver(t, 0)
	id := a.saveFlow(`{"sluice": 1, "id": "x", "nodes": [{"id": "in", "type": "input"}, {"id": "out", "type": "hook_output", "params": {"webhook": "`+node.srv.URL+`"}}],
		"edges": [{"from": "in", "to": "out"}]}`, nil)
	runDispatcher(t, a, 3, id)
	run := a.start(id, map[string]any{"input": map[string]any{"name": "Ada"}, "webhook": req.srv.URL})
	for name, rc := range map[string]*receiver{"the output node's webhook": node, "the run's webhook": req} {
		eventually(t, 20*time.Second, func() string {
			if _, got := rc.state(); len(got) != 1 {
				return name + " has not got the result"
			}
			return ""
		})
		if _, got := rc.state(); got[0].Run != run || string(got[0].Output) != `{"name":"Ada"}` {
			t.Errorf("%s got %+v", name, got[0])
		}
	}
}

func TestARunSaysWhetherItsResultGoesToAWebhook(t *testing.T) {
	a := newAPI(t, storetest.Real(t))
	withHook := a.saveFlow(`{"sluice": 1, "id": "x", "nodes": [{"id": "in", "type": "input"}, {"id": "out", "type": "hook_output", "params": {"webhook": "https://hooks.example/done?token=abc"}}],
		"edges": [{"from": "in", "to": "out"}]}`, nil)
	plain := a.saveFlow(`{"sluice": 1, "id": "x", "nodes": [{"id": "in", "type": "input"}, {"id": "out", "type": "hook_output"}],
		"edges": [{"from": "in", "to": "out"}]}`, nil)
	for flow, want := range map[string]bool{withHook: true, plain: false} {
		run := a.start(flow, map[string]any{"input": map[string]any{"name": "Ada"}})
		a.settle(flow, run)
		var one map[string]any
		a.must(200, "GET", "/api/flows/"+flow+"/runs/"+run, nil).into(t, &one)
		var list struct{ Runs []map[string]any }
		a.must(200, "GET", "/api/flows/"+flow+"/runs", nil).into(t, &list)
		if len(list.Runs) != 1 {
			t.Fatalf("runs of %s: %+v", flow, list.Runs)
		}
		for where, v := range map[string]map[string]any{"the run": one, "the list": list.Runs[0]} {
			if got, ok := v["has_webhook"].(bool); !ok || got != want {
				t.Errorf("%s of a flow whose output node has a webhook=%v: has_webhook = %#v, want %v", where, want, v["has_webhook"], want)
			}
		}
		if strings.Contains(fmt.Sprint(one), "token=abc") {
			t.Error("the run shows its webhook's URL")
		}
	}
}

// loopbackAllowed is the HTTP policy of tests whose webhook receivers listen on 127.0.0.1.
func loopbackAllowed(t *testing.T) *nodes.HTTPPolicy {
	allow, err := nodes.ParseAllowList("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	return &nodes.HTTPPolicy{Allow: allow}
}
