package server_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/sluicehq/sluice/flows"
	"github.com/sluicehq/sluice/flows/nodes"
	"github.com/sluicehq/sluice/flows/nodes/llmtest"
	"github.com/sluicehq/sluice/server"
	"github.com/sluicehq/sluice/store/storetest"
	"github.com/sluicehq/sluice/teams"
)

// secretFlow is a flow that sends the secret in NAME to url as a bearer token.
func secretFlow(url, name string) string {
	return `{"sluice": 1, "id": "x", "nodes": [
		{"id": "in", "type": "input"},
		{"id": "call", "type": "http", "params": {"url": "` + url + `", "headers": {"Authorization": {"$env": "` + name + `", "prefix": "Bearer "}}, "as": "resp"}},
		{"id": "out", "type": "output"}],
		"edges": [{"from": "in", "to": "call"}, {"from": "call", "to": "out"}]}`
}

// providerFlow is a flow whose one model call names provider.
func providerFlow(provider string) string {
	return `{"sluice": 1, "id": "x", "nodes": [
		{"id": "in", "type": "input"},
		{"id": "ask", "type": "llm", "params": {"provider": "` + provider + `", "model": "m", "user": "hi", "as": "answer"}},
		{"id": "out", "type": "output"}],
		"edges": [{"from": "in", "to": "ask"}, {"from": "ask", "to": "out"}]}`
}

// problemAt reports whether an invalid flow's answer has a problem at node and path.
func problemAt(t *testing.T, r res, node, path string) bool {
	t.Helper()
	var e server.ErrorBody
	r.into(t, &e)
	for _, p := range e.Error.Problems {
		if p.Node == node && strings.HasSuffix(p.Path, path) {
			return true
		}
	}
	return false
}

// A workspace's flows read only the secrets and call only the providers the operator
// gives that workspace, narrowed by its owner's lists: wsa is given TEAM_A_KEY and the
// provider team-a, wsb is not. Saving, a dropped file, a run of a version saved before
// the owner narrowed the lists, and the MCP inspector each keep to the workspace's.
func TestAWorkspacesFlowsReadOnlyItsSecretsAndCallOnlyItsProviders(t *testing.T) {
	r := storetest.Real(t)
	var mu sync.Mutex
	var seen []string
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		mu.Lock()
		seen = append(seen, req.Header.Get("Authorization"))
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"ok": true}`))
	}))
	defer recv.Close()
	model := llmtest.New(t)
	model.Reply(llmtest.Reply{Content: "hello"})
	env := model.Env(0)
	teamA := model.Provider("team-a", 0)
	teamA.Workspaces = []string{"wsa"}
	env.Providers["team-a"] = teamA
	env.HTTP = loopbackAllowed(t)
	vars := map[string]string{"TEAM_A_KEY": "team-a-secret-value", "SLUICE_SECRET_SHARED": "shared-secret-value"}
	secrets, err := flows.NewSecrets(flows.SecretsConfig{Allow: []string{"wsa:TEAM_A_KEY"}, Lookup: func(n string) (string, bool) { v, ok := vars[n]; return v, ok }})
	if err != nil {
		t.Fatal(err)
	}
	env.Secrets = secrets
	a := newAPIWith(t, r, env, func(_ *server.Config, d *server.Deps) { d.MCPTools = env })
	a.workspace("wsa")
	a.workspace("wsb")
	in := func(ws string) []string { return []string{server.WorkspaceHeader, ws} }

	// Saving: wsa may name TEAM_A_KEY and team-a; wsb's save is refused at the node and
	// path, and its message does not list another workspace's provider.
	sid, sdoc := a.flowDoc(secretFlow(recv.URL+"/ping", "TEAM_A_KEY"), nil)
	pid, pdoc := a.flowDoc(providerFlow("team-a"), nil)
	for _, ws := range []string{"wsa", "wsb"} {
		storetest.DeleteFlowKeys(t, r, ws+"."+sid)
		storetest.DeleteFlowKeys(t, r, ws+"."+pid)
	}
	a.must(http.StatusCreated, "PUT", "/api/flows/"+sid, sdoc, in("wsa")...)
	a.must(http.StatusCreated, "PUT", "/api/flows/"+pid, pdoc, in("wsa")...)
	refused := a.must(http.StatusBadRequest, "PUT", "/api/flows/"+sid, sdoc, in("wsb")...)
	if !problemAt(t, refused, "call", "params.headers.Authorization.$env") || !strings.Contains(refused.String(), "TEAM_A_KEY") {
		t.Errorf("wsb saving a flow that reads wsa's secret: %s", refused)
	}
	refused = a.must(http.StatusBadRequest, "PUT", "/api/flows/"+pid, pdoc, in("wsb")...)
	if !problemAt(t, refused, "ask", "params.provider") || !strings.Contains(refused.String(), "there are: default, fake (") {
		t.Errorf("wsb saving a flow that calls wsa's provider (its message must not list it): %s", refused)
	}
	// The default workspace is not wsa either.
	a.must(http.StatusBadRequest, "PUT", "/api/flows/"+sid, sdoc)

	// Runs in wsa read the secret and call the provider.
	var st struct {
		Run    string `json:"id"`
		Status string
		Error  string
	}
	a.must(http.StatusOK, "POST", "/api/flows/"+sid+"/runs?wait=20s", `{"input": {}}`, in("wsa")...).into(t, &st)
	if st.Status != "succeeded" {
		t.Fatalf("wsa's run with its secret: %+v", st)
	}
	mu.Lock()
	if len(seen) != 1 || seen[0] != "Bearer team-a-secret-value" {
		t.Errorf("the receiver saw %q", seen)
	}
	mu.Unlock()
	a.must(http.StatusOK, "POST", "/api/flows/"+pid+"/runs?wait=20s", `{"input": {}}`, in("wsa")...).into(t, &st)
	if st.Status != "succeeded" || model.Calls() != 1 {
		t.Fatalf("wsa's run with its provider: %+v, %d calls", st, model.Calls())
	}

	// An owner names only what the operator gives the workspace.
	if r := a.do("PUT", "/api/settings", `{"secrets": ["TEAM_A_KEY"]}`, in("wsb")...); r.status != http.StatusBadRequest || r.errorBody(t).Path != "secrets[0]" {
		t.Errorf("wsb's owner listing wsa's secret: %d %s", r.status, r)
	}
	if r := a.do("PUT", "/api/settings", `{"providers": ["team-a"]}`, in("wsb")...); r.status != http.StatusBadRequest || r.errorBody(t).Path != "providers[0]" {
		t.Errorf("wsb's owner listing wsa's provider: %d %s", r.status, r)
	}

	// wsa's owner narrows: the shared secret only, the default provider only. A save is
	// refused at once, and the versions saved before fail at their node when they run.
	a.must(http.StatusOK, "PUT", "/api/settings", `{"secrets": ["SLUICE_SECRET_SHARED"], "providers": ["default"]}`, in("wsa")...)
	edited := strings.Replace(string(sdoc), `"as": "resp"`, `"as": "resp2"`, 1)
	a.must(http.StatusBadRequest, "PUT", "/api/flows/"+sid, edited, in("wsa")...)
	for _, f := range []struct{ id, node, want string }{
		{sid, "call", "does not let its flows read TEAM_A_KEY"},
		{pid, "ask", `does not let its flows call provider "team-a"`},
	} {
		var run run
		a.must(http.StatusOK, "POST", "/api/flows/"+f.id+"/runs?wait=20s", `{"input": {}}`, in("wsa")...).into(t, &run)
		if run.Status != "failed" || run.ErrorNode != f.node || !strings.Contains(run.Error, f.want) {
			t.Errorf("a run of the version saved before the owner narrowed the lists: %+v", run)
		}
	}
	mu.Lock()
	if len(seen) != 1 {
		t.Errorf("the secret was sent again after the owner took it away: %q", seen)
	}
	mu.Unlock()
	if model.Calls() != 1 {
		t.Errorf("the provider was called again after the owner took it away: %d calls", model.Calls())
	}

	// Given back, the same document saves at once (what was refused is not remembered).
	a.must(http.StatusOK, "PUT", "/api/settings", `{"secrets": ["SLUICE_SECRET_SHARED", "TEAM_A_KEY"]}`, in("wsa")...)
	a.must(http.StatusOK, "PUT", "/api/flows/"+sid, edited, in("wsa")...)

	// A flow file dropped into wsb's folder is not published, nor served.
	dropped := storetest.FlowID(t)
	storetest.DeleteFlowKeys(t, r, "wsb."+dropped)
	doc := strings.Replace(secretFlow(recv.URL+"/ping", "TEAM_A_KEY"), `"id": "x"`, `"id": "`+dropped+`"`, 1)
	if err := os.MkdirAll(filepath.Join(a.lib.Dir, "wsb"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(a.lib.Dir, "wsb", dropped+".json"), []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	bad, err := a.sync.Sync(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if probs := bad["wsb."+dropped]; len(probs) == 0 || probs[0].Code != flows.CodeSecretNotAllowed {
		t.Errorf("the dropped file's problems: %+v", bad)
	}
	if _, err := a.r.CurrentVersion(context.Background(), "wsb."+dropped); flows.ErrorCode(err) != flows.NotFound {
		t.Errorf("the dropped file was published: %v", err)
	}

	// The MCP inspector resolves secrets as the request's workspace.
	params, _ := json.Marshal(map[string]any{"url": recv.URL + "/mcp", "headers": map[string]any{"Authorization": map[string]any{"$env": "TEAM_A_KEY"}}})
	if r := a.do("POST", "/api/mcp/tools", map[string]any{"params": json.RawMessage(params)}, in("wsb")...); r.status != http.StatusForbidden || !strings.Contains(r.String(), "TEAM_A_KEY") {
		t.Errorf("the MCP inspector in wsb with wsa's secret: %d %s", r.status, r)
	}
	mu.Lock()
	if len(seen) != 1 {
		t.Errorf("the inspector sent wsa's secret for wsb: %q", seen)
	}
	mu.Unlock()
}

// A flow whose output holds the value of a variable its workspace may not read — an
// input that guessed it, an upstream that answers it — shows "[redacted]" where it was:
// the value is gone, and the variable's name is not told either. The workspace the
// operator gives the variable sees "[redacted:NAME]"; a setting of Sluice (the token)
// is named to no workspace.
func TestARedactedValueNamesNoVariableTheFlowsWorkspaceMayNotRead(t *testing.T) {
	r := storetest.Real(t)
	const acmeValue, sharedValue = "acme-key-value-47", "shared-value-47"
	vars := map[string]string{"ACME_KEY": acmeValue, "SLUICE_SECRET_SHARED": sharedValue, "SLUICE_TOKEN": testToken}
	secrets, err := flows.NewSecrets(flows.SecretsConfig{Allow: []string{"acme:ACME_KEY"},
		Lookup: func(n string) (string, bool) { v, ok := vars[n]; return v, ok },
		Environ: func() []string {
			var kv []string
			for n, v := range vars {
				kv = append(kv, n+"="+v)
			}
			return kv
		}})
	if err != nil {
		t.Fatal(err)
	}
	flows.UseSecrets(secrets) // as serve does (cmd/sluice/env.go)
	t.Cleanup(func() { flows.UseSecrets(nil) })
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"said": "` + acmeValue + ` ` + sharedValue + ` ` + testToken + `"}`))
	}))
	defer upstream.Close()
	a := newAPIWith(t, r, &nodes.Env{Secrets: secrets, HTTP: loopbackAllowed(t)})
	a.workspace("acme")
	a.workspace("beta")
	id, doc := a.flowDoc(`{"sluice": 1, "id": "x", "nodes": [{"id": "in", "type": "input"},
		{"id": "call", "type": "http", "params": {"url": "`+upstream.URL+`/answer", "as": "resp"}},
		{"id": "out", "type": "output"}],
		"edges": [{"from": "in", "to": "call"}, {"from": "call", "to": "out"}]}`, nil)
	for _, c := range []struct{ ws, acme string }{
		{"acme", "[redacted:ACME_KEY]"},
		{"beta", "[redacted]"},
		{teams.DefaultWorkspace, "[redacted]"},
	} {
		in := []string{server.WorkspaceHeader, c.ws}
		a.forgetFlow(teams.Qualify(c.ws, id))
		a.must(http.StatusCreated, "PUT", "/api/flows/"+id, doc, in...)
		var done run
		a.must(http.StatusOK, "POST", "/api/flows/"+id+"/runs?wait=20s", map[string]any{"input": map[string]any{"guess": acmeValue}}, in...).into(t, &done)
		if done.Status != "succeeded" {
			t.Fatalf("%s: run %+v", c.ws, done)
		}
		// The token's value is "[redacted]" everywhere; the shared secret is named.
		want := []string{`"guess":"` + c.acme + `"`, `"said":"` + c.acme + ` [redacted:SLUICE_SECRET_SHARED] [redacted]"`}
		for _, w := range want {
			if !strings.Contains(string(done.Output), w) || strings.Contains(string(done.Output), acmeValue) {
				t.Errorf("%s: the run's output %s, want %s in it and no secret value", c.ws, done.Output, w)
			}
		}
		// Nowhere in the run or its checkpoints a name the workspace may not read (the
		// run's input, the caller's own, holds the guess as it was sent).
		for _, p := range []string{"/runs/" + done.ID, "/runs/" + done.ID + "/checkpoints/" + done.LastCkpt} {
			if got := a.must(http.StatusOK, "GET", "/api/flows/"+id+p, nil, in...).String(); c.ws != "acme" && strings.Contains(got, "ACME_KEY") {
				t.Errorf("%s: %s names acme's variable: %s", c.ws, p, got)
			}
		}
	}
}
