package server_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/flows/engine/dispatch"
	"github.com/sluicehq/sluice/flows/nodes"
	"github.com/sluicehq/sluice/server"
	"github.com/sluicehq/sluice/store/storetest"
)

// Two workspaces with a flow of the same id, each with its webhook secret in the
// environment (SLUICE_HOOK_SECRET_WSA__ID, as an operator sets them): the ingress of
// one (/hooks/wsa.ID) never starts the other's, result webhooks carry and are signed
// for their own workspace's runs only, failed deliveries are listed, retried and
// discarded in their workspace only, and a default-workspace flow whose secret variable
// would be the same as a workspace's flow's ("wsa__ID") has no ingress and signs nothing.
func TestWebhooksOfTwoWorkspacesStayInTheirWorkspaces(t *testing.T) {
	r := storetest.Real(t)
	a := newAPIWith(t, r, &nodes.Env{HTTP: loopbackAllowed(t)}, func(c *server.Config, _ *server.Deps) { c.HookSecret = server.HookSecretFromEnv })
	a.workspace("wsa")
	a.workspace("wsb")
	id, doc := a.flowDoc("linear", nil)
	shared := "wsa__" + id // the default workspace's flow whose variable is wsa's flow's
	storetest.DeleteFlowKeys(t, r, shared)
	for _, ws := range []string{"wsa", "wsb"} {
		storetest.DeleteFlowKeys(t, r, ws+"."+id)
		a.must(http.StatusCreated, "PUT", "/api/flows/"+id, doc, server.WorkspaceHeader, ws)
	}
	a.must(http.StatusCreated, "PUT", "/api/flows/"+shared, strings.Replace(string(doc), `"id": "`+id+`"`, `"id": "`+shared+`"`, 1))
	secretA, secretB := "hook-secret-of-wsa-5e1", "hook-secret-of-wsb-9c2"
	t.Setenv(server.HookSecretEnv("wsa."+id), secretA)
	t.Setenv(server.HookSecretEnv("wsb."+id), secretB)
	if server.HookSecretEnv(shared) != server.HookSecretEnv("wsa."+id) {
		t.Fatalf("the test's premise: %s and %s", server.HookSecretEnv(shared), server.HookSecretEnv("wsa."+id))
	}
	body := `{"name": "Hook"}`
	hook := func(flow string, header ...string) res {
		return a.do("POST", "/hooks/"+flow, body, append([]string{"Authorization", ""}, header...)...)
	}
	bearer := func(s string) []string { return []string{"Authorization", "Bearer " + s} }
	signed := func(s string) []string {
		return []string{"X-Sluice-Signature", dispatch.Sign([]byte(s), []byte(body))}
	}

	// Ingress: each workspace's flow opens with its own secret only.
	var started server.Started
	if r := hook("wsa."+id, bearer(secretA)...); r.status != http.StatusAccepted {
		t.Fatalf("wsa's hook with wsa's secret: %d %s", r.status, r)
	} else {
		r.into(t, &started)
	}
	for _, h := range []struct {
		flow   string
		header []string
		want   int
	}{
		{"wsb." + id, bearer(secretA), http.StatusUnauthorized},
		{"wsb." + id, signed(secretA), http.StatusUnauthorized},
		{"wsa." + id, bearer(secretB), http.StatusUnauthorized},
		{id, bearer(secretA), http.StatusNotFound}, // the default workspace has no such flow, nor secret
		{shared, bearer(secretA), http.StatusNotFound},
		{shared, signed(secretA), http.StatusNotFound},
	} {
		if r := hook(h.flow, h.header...); r.status != h.want {
			t.Errorf("/hooks/%s with %v: %d, want %d: %s", h.flow, h.header[0], r.status, h.want, r)
		}
	}
	inA, inB := []string{server.WorkspaceHeader, "wsa"}, []string{server.WorkspaceHeader, "wsb"}
	a.must(http.StatusOK, "GET", "/api/flows/"+id+"/runs/"+started.Run, nil, inA...)
	a.must(http.StatusNotFound, "GET", "/api/flows/"+id+"/runs/"+started.Run, nil, inB...)
	for ws, want := range map[string]int64{"wsa": 1, "wsb": 0} {
		var list server.RunList
		a.must(http.StatusOK, "GET", "/api/flows/"+id+"/runs", nil, server.WorkspaceHeader, ws).into(t, &list)
		if list.Total != want {
			t.Errorf("%s has %d runs, want %d", ws, list.Total, want)
		}
	}
	var shRuns server.RunList
	a.must(http.StatusOK, "GET", "/api/flows/"+shared+"/runs", nil).into(t, &shRuns)
	if shRuns.Total != 0 {
		t.Errorf("wsa's secret started %d runs of the default workspace's %s", shRuns.Total, shared)
	}
	var info server.HookInfo
	a.must(http.StatusOK, "GET", "/api/flows/"+id+"/hooks", nil, inA...).into(t, &info)
	if info.URL != "/hooks/wsa."+id || !info.Enabled || info.SecretEnv != server.HookSecretEnv("wsa."+id) {
		t.Errorf("wsa's hook info: %+v", info)
	}
	a.must(http.StatusOK, "GET", "/api/flows/"+shared+"/hooks", nil).into(t, &info)
	if info.Enabled || info.Problem == "" {
		t.Errorf("the shared variable's flow's hook info: %+v", info)
	}

	// Results: each receiver gets its workspace's runs, signed with that flow's secret;
	// wsb's receiver fails, and its failed delivery is wsb's alone.
	d := dispatch.New(a.e, dispatch.Options{
		Flows:       func(context.Context) ([]string, error) { return []string{"wsa." + id, "wsb." + id, shared}, nil },
		MaxAttempts: 1, Backoff: 10 * time.Millisecond, MaxBackoff: 50 * time.Millisecond,
		Block: 100 * time.Millisecond, Refresh: 100 * time.Millisecond, ClaimAfter: time.Minute,
		Secret: func(flow string) []byte { return []byte(server.HookSecretFromEnv(flow)) },
		HTTP:   loopbackAllowed(t),
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	defer func() { cancel(); <-done }()
	ra, rb, rs := newReceiver(t, 0), newReceiver(t, 1000), newReceiver(t, 0)
	var runA, runB, runS server.Started
	a.must(http.StatusAccepted, "POST", "/api/flows/"+id+"/runs", map[string]any{"input": map[string]any{"name": "A"}, "webhook": ra.srv.URL}, inA...).into(t, &runA)
	a.must(http.StatusAccepted, "POST", "/api/flows/"+id+"/runs", map[string]any{"input": map[string]any{"name": "B"}, "webhook": rb.srv.URL}, inB...).into(t, &runB)
	a.must(http.StatusAccepted, "POST", "/api/flows/"+shared+"/runs", map[string]any{"input": map[string]any{"name": "S"}, "webhook": rs.srv.URL}).into(t, &runS)
	eventually(t, 30*time.Second, func() string {
		_, gotA := ra.state()
		callsB, _ := rb.state()
		_, gotS := rs.state()
		if len(gotA) < 1 || callsB < 1 || len(gotS) < 1 {
			return "the results were not all sent"
		}
		return ""
	})
	ra.mu.Lock()
	if len(ra.got) != 1 || ra.got[0].Run != runA.Run || ra.got[0].Flow != "wsa."+id || ra.hdr[0].Get("X-Sluice-Signature") != dispatch.Sign([]byte(secretA), ra.raw[0]) {
		t.Errorf("wsa's receiver got %+v (signature %q)", ra.got, ra.hdr[0].Get("X-Sluice-Signature"))
	}
	ra.mu.Unlock()
	rs.mu.Lock()
	if len(rs.got) != 1 || rs.got[0].Run != runS.Run || rs.hdr[0].Get("X-Sluice-Signature") != "" {
		t.Errorf("the shared variable's flow's result was signed (with wsa's secret): %q", rs.hdr[0].Get("X-Sluice-Signature"))
	}
	rs.mu.Unlock()
	var dead server.DeliveryList
	eventually(t, 30*time.Second, func() string {
		a.must(http.StatusOK, "GET", "/api/flows/"+id+"/deliveries", nil, inB...).into(t, &dead)
		if len(dead.Deliveries) != 1 {
			return "wsb's failed delivery is not listed"
		}
		return ""
	})
	if dl := dead.Deliveries[0]; dl.Run != runB.Run || dl.Flow != "wsb."+id {
		t.Errorf("wsb's failed delivery: %+v", dl)
	}
	var none server.DeliveryList
	a.must(http.StatusOK, "GET", "/api/flows/"+id+"/deliveries", nil, inA...).into(t, &none)
	if len(none.Deliveries) != 0 {
		t.Errorf("wsa lists another workspace's failed deliveries: %+v", none.Deliveries)
	}
	a.must(http.StatusNotFound, "POST", "/api/flows/"+id+"/deliveries/"+dead.Deliveries[0].ID+"/retry", nil, inA...)
	a.must(http.StatusNotFound, "DELETE", "/api/flows/"+id+"/deliveries/"+dead.Deliveries[0].ID, nil, inA...)
	a.must(http.StatusOK, "GET", "/api/flows/"+id+"/deliveries", nil, inB...).into(t, &dead)
	if len(dead.Deliveries) != 1 {
		t.Errorf("wsb's failed delivery went from a request in wsa: %+v", dead.Deliveries)
	}
}
