package engine_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/flows/engine/dispatch"
	"github.com/sluicehq/sluice/flows/nodes"
	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/storetest"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
)

func TestOutputNodesWebhookReceivesTheRunsResult(t *testing.T) {
	storetest.Conformance(t, func(t *testing.T, r *store.Redis) {
		got := make(chan dispatch.ResultPayload, 4)
		hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			b, _ := io.ReadAll(req.Body)
			var p dispatch.ResultPayload
			json.Unmarshal(b, &p)
			got <- p
		}))
		defer hook.Close()
		v := newEnv(t, r)
		p := v.compile(`{"sluice": 1, "id": "FLOW", "nodes": [{"id": "in", "type": "input"},
		  {"id": "out", "type": "output", "params": {"value": "{n}", "webhook": "` + hook.URL + `/done"}}],
		 "edges": [{"from": "in", "to": "out"}]}`)
		v.work(p)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() {
			done <- dispatch.New(v.e, dispatch.Options{Flows: func(context.Context) ([]string, error) { return []string{p.Flow}, nil },
				Block: 100 * time.Millisecond, HTTP: loopbackAllowed(t)}).Run(ctx)
		}()
		defer func() { cancel(); <-done }()
		run := v.run(p, `{"n": 7}`)
		mustStatus(t, run, store.StatusSucceeded)
		select {
		case res := <-got:
			if res.Run != run.ID || res.Status != store.StatusSucceeded || string(res.Output) != `{"n":7}` {
				t.Errorf("webhook got %+v", res)
			}
		case <-time.After(20 * time.Second):
			t.Fatal("the output node's webhook was never called")
		}
	})
}

// loopbackAllowed is the HTTP policy of tests whose webhook receivers listen on 127.0.0.1.
func loopbackAllowed(t *testing.T) *nodes.HTTPPolicy {
	allow, err := nodes.ParseAllowList("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	return &nodes.HTTPPolicy{Allow: allow}
}

// fixedResolver answers every name with one address, without DNS.
type fixedResolver netip.Addr

func (f fixedResolver) LookupNetIP(context.Context, string, string) ([]netip.Addr, error) {
	return []netip.Addr{netip.Addr(f)}, nil
}

func TestResultWebhooksToInternalAddressesAreRefusedUnlessAllowed(t *testing.T) {
	r := storetest.Real(t)
	var dialled atomic.Int32
	hook := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {}))
	hook.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			dialled.Add(1)
		}
	}
	hook.Start()
	defer hook.Close()
	_, port, _ := net.SplitHostPort(hook.Listener.Addr().String())
	targets := []string{
		hook.URL + "/done",                                   // loopback, as an address
		"http://internal.example:" + port + "/done",          // loopback, behind a name
		"http://10.0.0.1/done",                               // private
		"http://169.254.169.254/latest/meta-data/",           // cloud metadata (link-local)
		"http://user:pass@127.0.0.1:" + port + "/with-login", // loopback with a receiver's login
	}
	deliver := func(policy *nodes.HTTPPolicy) ([]store.FailedDelivery, string) {
		t.Helper()
		v := newEnv(t, r)
		var nodesJSON, edges []string
		for i, u := range targets {
			nodesJSON = append(nodesJSON, fmt.Sprintf(`{"id": "out%d", "type": "output", "params": {"webhook": %q}}`, i, u))
			edges = append(edges, fmt.Sprintf(`{"from": "in", "to": "out%d"}`, i))
		}
		p := v.compile(`{"sluice": 1, "id": "FLOW", "nodes": [{"id": "in", "type": "input"}, ` + strings.Join(nodesJSON, ", ") + `],
			"edges": [` + strings.Join(edges, ", ") + `]}`)
		v.work(p)
		run := v.run(p, `{}`)
		mustStatus(t, run, store.StatusSucceeded)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() {
			done <- dispatch.New(v.e, dispatch.Options{Flows: func(context.Context) ([]string, error) { return []string{p.Flow}, nil },
				Block: 100 * time.Millisecond, MaxAttempts: 3, Backoff: time.Millisecond, MaxBackoff: time.Millisecond, HTTP: policy}).Run(ctx)
		}()
		defer func() { cancel(); <-done }()
		// Every webhook ends delivered or in the delivery dead letters: the results stream
		// is then acknowledged and empty.
		var dead []store.FailedDelivery
		deadline := time.Now().Add(30 * time.Second)
		for {
			n, err := r.Client.XLen(ctx, store.FlowKeys(p.Flow).Results()).Result()
			if err != nil {
				t.Fatal(err)
			}
			if n == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the run's webhooks were never all settled")
			}
			time.Sleep(20 * time.Millisecond)
		}
		dead, err := r.FailedDeliveries(ctx, p.Flow, 100)
		if err != nil {
			t.Fatal(err)
		}
		return dead, p.Flow
	}

	// The default policy: every webhook refused, none dialled, each at its first attempt.
	resolver := fixedResolver(netip.MustParseAddr("127.0.0.1"))
	dead, _ := deliver(&nodes.HTTPPolicy{Resolver: resolver})
	if len(dead) != len(targets) {
		t.Fatalf("%d dead deliveries, want %d: %+v", len(dead), len(targets), dead)
	}
	for _, d := range dead {
		if !strings.Contains(d.Error, "refused by the server's HTTP policy") || !strings.Contains(d.Error, "--http-allow") {
			t.Errorf("delivery to %s: error %q, want the policy's refusal", d.Target, d.Error)
		}
	}
	if n := dialled.Load(); n != 0 {
		t.Errorf("the loopback receiver was dialled %d times", n)
	}
	// Allow-listed, loopback is reached (under its address and its name); the others
	// stay refused.
	allow, _ := nodes.ParseAllowList("127.0.0.1")
	dead, _ = deliver(&nodes.HTTPPolicy{Allow: allow, Resolver: resolver})
	if len(dead) != 2 {
		t.Fatalf("%d dead deliveries with 127.0.0.1 allowed, want 2 (10.0.0.1 and 169.254.169.254): %+v", len(dead), dead)
	}
	for _, d := range dead {
		if d.Target != "http://10.0.0.1" && d.Target != "http://169.254.169.254" {
			t.Errorf("dead delivery to %s", d.Target)
		}
	}
	if dialled.Load() == 0 {
		t.Error("the allowed receiver was never dialled")
	}
}

// Result webhooks are signed as Standard Webhooks are: webhook-id (the delivery's, the
// same for every attempt), webhook-timestamp (the attempt's) and webhook-signature over
// both and the body, which the Standard Webhooks library verifies with the flow's
// secret; a captured delivery sent again later fails that check (its timestamp is old,
// and a newer one breaks the signature). X-Sluice-Signature is still there.
func TestResultWebhooksAreSignedAsStandardWebhooks(t *testing.T) {
	secret := []byte("hook-secret-for-standard-webhooks")
	type delivery struct {
		header http.Header
		body   []byte
	}
	got := make(chan delivery, 4)
	var n atomic.Int32
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		b, _ := io.ReadAll(req.Body)
		got <- delivery{req.Header.Clone(), b}
		if n.Add(1) == 1 {
			w.WriteHeader(http.StatusInternalServerError) // the first attempt fails: a retry follows
		}
	}))
	defer hook.Close()
	v := newEnv(t, storetest.Real(t))
	p := v.compile(`{"sluice": 1, "id": "FLOW", "nodes": [{"id": "in", "type": "input"},
	  {"id": "out", "type": "output", "params": {"value": "{n}", "webhook": "` + hook.URL + `/done"}}],
	 "edges": [{"from": "in", "to": "out"}]}`)
	v.work(p)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- dispatch.New(v.e, dispatch.Options{Flows: func(context.Context) ([]string, error) { return []string{p.Flow}, nil },
			Block: 100 * time.Millisecond, HTTP: loopbackAllowed(t), Secret: func(string) []byte { return secret }, Backoff: 10 * time.Millisecond}).Run(ctx)
	}()
	defer func() { cancel(); <-done }()
	mustStatus(t, v.run(p, `{"n": 7}`), store.StatusSucceeded)
	wh, _ := standardwebhooks.NewWebhookRaw(secret)
	var ids []string
	for i := range 2 {
		var d delivery
		select {
		case d = <-got:
		case <-time.After(30 * time.Second):
			t.Fatalf("attempt %d never came", i+1)
		}
		if err := wh.Verify(d.body, d.header); err != nil {
			t.Errorf("attempt %d: the Standard Webhooks library refuses it: %v (headers %v)", i+1, err, d.header)
		}
		if d.header.Get("X-Sluice-Signature") != dispatch.Sign(secret, d.body) {
			t.Errorf("attempt %d: X-Sluice-Signature %q", i+1, d.header.Get("X-Sluice-Signature"))
		}
		ids = append(ids, d.header.Get("webhook-id"))
		if i == 1 {
			// Sent again an hour later, as it was captured: refused.
			old := d.header.Clone()
			ts, _ := strconv.ParseInt(old.Get("webhook-timestamp"), 10, 64)
			old.Set("webhook-timestamp", strconv.FormatInt(ts-3600, 10))
			if err := wh.Verify(d.body, old); err == nil {
				t.Error("a delivery with an hour-old timestamp passes")
			}
		}
	}
	if ids[0] == "" || ids[0] != ids[1] {
		t.Errorf("webhook-id of the two attempts: %q, want one id", ids)
	}
}
