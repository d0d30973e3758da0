package server_test

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/sluicehq/sluice/server/live"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/sluicehq/sluice/flows/engine"
	"github.com/sluicehq/sluice/server"
	"github.com/sluicehq/sluice/store/storetest"
	"github.com/sluicehq/sluice/teams"
)

// serviceKey makes a service account key of role in ws (with the token).
func (a *api) serviceKey(ws string, role teams.Role) string {
	a.t.Helper()
	var made struct{ Key string }
	a.must(http.StatusCreated, "POST", "/api/keys", map[string]any{"role": role, "service": "svc"}, server.WorkspaceHeader, ws).into(a.t, &made)
	return made.Key
}

// mcpTools lists the tool names /mcp offers to key.
func (a *api) mcpTools(key string) []string {
	a.t.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil)
	s, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: a.base + "/mcp",
		HTTPClient: &http.Client{Transport: bearer{key}}, MaxRetries: -1}, nil)
	if err != nil {
		a.t.Fatal(err)
	}
	defer s.Close()
	res, err := s.ListTools(context.Background(), nil)
	if err != nil {
		a.t.Fatal(err)
	}
	var out []string
	for _, tl := range res.Tools {
		out = append(out, tl.Name)
	}
	return out
}

// Two workspaces with a flow of the same id: nothing of one reaches a member of the
// other — not the flow, its listing, its runs, its checkpoints, its dead letters, its
// schedules, its live events, its MCP tool, its /v1 model.
func TestWorkspacesWithFlowsOfTheSameIDShareNothing(t *testing.T) {
	a := newAPI(t, storetest.Real(t))
	a.workspace("wsa")
	a.workspace("wsb")
	id, doc := a.flowDoc("linear", func(d map[string]any) {
		mcpOn(d)
		d["nodes"].([]any)[0].(map[string]any)["params"] = map[string]any{"schema": map[string]any{"type": "object",
			"properties": map[string]any{"name": map[string]any{"type": "string"}, "messages": map[string]any{"type": "array"}}}}
	})
	for _, ws := range []string{"wsa", "wsb"} {
		storetest.DeleteFlowKeys(t, a.r, ws+"."+id)
		named := strings.Replace(string(doc), `"name": "Linear pipeline"`, `"name": "Flow of `+ws+`"`, 1)
		a.must(http.StatusCreated, "PUT", "/api/flows/"+id, named, server.WorkspaceHeader, ws)
	}
	ka, kb := a.serviceKey("wsa", teams.Operator), a.serviceKey("wsb", teams.Operator)
	as := func(key string) []string { return []string{"Authorization", "Bearer " + key} }

	// The flow, by its bare id, is each workspace's own.
	var fa, fb struct{ Name, ID string }
	a.must(200, "GET", "/api/flows/"+id, nil, as(ka)...).into(t, &fa)
	a.must(200, "GET", "/api/flows/"+id, nil, as(kb)...).into(t, &fb)
	if fa.Name != "Flow of wsa" || fb.Name != "Flow of wsb" || fa.ID != "wsa."+id {
		t.Fatalf("flows: %+v, %+v", fa, fb)
	}
	// Not the default workspace's, nor reachable by the other's full id.
	a.must(http.StatusNotFound, "GET", "/api/flows/"+id, nil)
	a.must(http.StatusNotFound, "GET", "/api/flows/wsb."+id, nil, as(ka)...)
	a.must(http.StatusNotFound, "GET", "/api/flows/wsb."+id, nil, append(as(testToken), server.WorkspaceHeader, "wsa")...)

	// Listings.
	list := a.must(200, "GET", "/api/flows", nil, as(ka)...).String()
	if !strings.Contains(list, `"wsa.`+id+`"`) || strings.Contains(list, "wsb.") {
		t.Errorf("wsa's listing: %s", list)
	}
	if def := a.must(200, "GET", "/api/flows", nil).String(); strings.Contains(def, id) {
		t.Errorf("the default workspace lists another's flow: %s", def)
	}

	// Runs and checkpoints: a run id of one is nothing in the other.
	a.must(http.StatusNotFound, "POST", "/api/flows/"+id+"/runs", `{"input": {"name": "Ada"}}`) // the default workspace has no such flow
	a.must(http.StatusAccepted, "POST", "/api/flows/"+id+"/runs", `{"input": {"name": "Bo"}}`, as(kb)...)
	var st struct {
		Run    string `json:"id"`
		Status string
	}
	a.must(http.StatusOK, "POST", "/api/flows/"+id+"/runs?wait=20s", `{"input": {"name": "Cy"}}`, as(ka)...).into(t, &st)
	if st.Status != "succeeded" {
		t.Fatalf("wsa's run: %+v", st)
	}
	a.must(http.StatusOK, "GET", "/api/flows/"+id+"/runs/"+st.Run, nil, as(ka)...)
	for _, p := range []string{"", "/checkpoints", "/events"} {
		if p == "/events" {
			continue // a stream: checked below through /ws
		}
		r := a.do("GET", "/api/flows/"+id+"/runs/"+st.Run+p, nil, as(kb)...)
		if r.status != http.StatusNotFound && !(p == "/checkpoints" && !strings.Contains(r.String(), st.Run) && r.status == 200 && strings.Contains(r.String(), "[]")) {
			t.Errorf("wsb reads wsa's run%s: %d %s", p, r.status, r)
		}
	}
	runsB := a.must(200, "GET", "/api/flows/"+id+"/runs", nil, as(kb)...).String()
	if strings.Contains(runsB, st.Run) {
		t.Errorf("wsb's run list holds wsa's run: %s", runsB)
	}
	// Dead letters and schedules: each sees its own flow's (empty here), never an error
	// that names the other.
	for _, p := range []string{"/deadletters", "/schedules", "/queues"} {
		r := a.must(200, "GET", "/api/flows/"+id+p, nil, as(kb)...)
		if strings.Contains(r.String(), "wsa") {
			t.Errorf("wsb's %s names wsa: %s", p, r)
		}
	}

	// /v1/models and /mcp.
	for key, want := range map[string]string{ka: "wsa." + id, kb: "wsb." + id} {
		models := a.must(200, "GET", "/v1/models", nil, as(key)...).String()
		if !strings.Contains(models, want) || strings.Count(models, id) != 1 {
			t.Errorf("/v1/models for %s: %s", want, models)
		}
		tools := a.mcpTools(key)
		if len(tools) != 1 || tools[0] != want {
			t.Errorf("/mcp tools for %s: %v", want, tools)
		}
	}
	other := map[string]string{ka: "wsb." + id, kb: "wsa." + id}
	for key, name := range other {
		a.must(http.StatusNotFound, "GET", "/v1/models/"+name, nil, as(key)...)
		a.must(http.StatusNotFound, "POST", "/v1/chat/completions", `{"model": "`+name+`", "messages": [{"role": "user", "content": "hi"}]}`, as(key)...)
	}
}

// Upgrade: a flows folder and a Redis written the way the release before workspaces
// wrote them — a flow file at the top of the folder, its keys under {f:ID} — are the
// default workspace: its members and SLUICE_TOKEN see and run them as before, with
// the same keys; a member of another workspace sees none of it.
func TestDataOfTheReleaseBeforeWorkspacesIsTheDefaultWorkspace(t *testing.T) {
	a := newAPI(t, storetest.Real(t))
	id, doc := a.flowDoc("linear", nil)
	// Written as before: the file in the folder itself, a run started by the engine.
	if err := os.WriteFile(filepath.Join(a.lib.Dir, id+".json"), doc, 0o644); err != nil {
		t.Fatal(err)
	}
	// serve's library watcher at start: the folder's flows are published and served.
	ctx := context.Background()
	if _, err := a.sync.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	plan, _, err := a.e.Compile(doc)
	if err != nil {
		t.Fatal(err)
	}
	run, err := a.e.Start(ctx, plan, json.RawMessage(`{"name": "Old"}`), engine.StartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := a.r.Client.Exists(ctx, "sluice:{f:"+id+"}:run:"+run).Result(); n != 1 {
		t.Fatalf("the run's hash is not at today's key")
	}

	// SLUICE_TOKEN, unchanged.
	a.settle(id, run)
	a.must(200, "GET", "/api/flows/"+id, nil)
	// A member of the default workspace, signed in.
	a.person("old@example.com", "password-of-old", map[string]teams.Role{teams.DefaultWorkspace: teams.Operator})
	b := a.browser()
	b.signin("old@example.com", "password-of-old")
	if r := b.api("GET", "/api/flows/"+id+"/runs/"+run, ""); r.status != 200 || !strings.Contains(r.String(), "HELLO, OLD!") {
		t.Fatalf("the old run as a member of the default workspace: %d %s", r.status, r)
	}
	if r := b.api("GET", "/api/flows", ""); !strings.Contains(r.String(), `"`+id+`"`) {
		t.Errorf("the old flow is not listed: %s", r)
	}
	var st struct {
		Run string `json:"id"`
	}
	b.api("POST", "/api/flows/"+id+"/runs?wait=20s", `{"input": {"name": "New"}}`).into(t, &st)
	if n, _ := a.r.Client.Exists(ctx, "sluice:{f:"+id+"}:run:"+st.Run).Result(); n != 1 {
		t.Errorf("a new run of the default workspace is not at today's key")
	}
	// A member of another workspace only.
	a.workspace("other")
	a.person("else@example.com", "password-of-else", map[string]teams.Role{"other": teams.Owner})
	e := a.browser()
	e.signin("else@example.com", "password-of-else")
	for _, p := range []string{"/api/flows/" + id, "/api/flows/" + id + "/runs/" + run} {
		if r := e.api("GET", p, "", server.WorkspaceHeader, "other"); r.status != http.StatusNotFound {
			t.Errorf("%s from another workspace: %d", p, r.status)
		}
		if r := e.api("GET", p, "", server.WorkspaceHeader, teams.DefaultWorkspace); r.status != http.StatusForbidden {
			t.Errorf("%s naming the default workspace, not a member: %d", p, r.status)
		}
	}
	// A flow of the other workspace has its workspace in its keys and its own folder.
	oid, odoc := a.flowDoc("linear", nil)
	storetest.DeleteFlowKeys(t, a.r, "other."+oid)
	e.api("PUT", "/api/flows/"+oid, string(odoc), server.WorkspaceHeader, "other")
	e.api("POST", "/api/flows/"+oid+"/runs?wait=20s", `{"input": {"name": "X"}}`, server.WorkspaceHeader, "other").into(t, &st)
	if n, _ := a.r.Client.Exists(ctx, "sluice:{f:other."+oid+"}:run:"+st.Run).Result(); n != 1 {
		t.Errorf("the other workspace's run is not under {f:other.%s}", oid)
	}
	if _, err := os.Stat(filepath.Join(a.lib.Dir, "other", oid+".json")); err != nil {
		t.Errorf("the other workspace's file: %v", err)
	}
}

// The live view of one workspace never carries another's events, whatever it asks for.
func TestLiveViewsStayInTheirWorkspace(t *testing.T) {
	a := newAPI(t, storetest.Real(t))
	a.workspace("wsa")
	a.workspace("wsb")
	id, doc := a.flowDoc("linear", nil)
	for _, ws := range []string{"wsa", "wsb"} {
		storetest.DeleteFlowKeys(t, a.r, ws+"."+id)
		a.must(http.StatusCreated, "PUT", "/api/flows/"+id, doc, server.WorkspaceHeader, ws)
	}
	ka, kb := a.serviceKey("wsa", teams.Viewer), a.serviceKey("wsb", teams.Operator)
	h := http.Header{}
	h.Set("Authorization", "Bearer "+kb)
	c, _, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(a.base, "http")+"/ws?flow="+id, h)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	first := readUntil(t, c, 10*time.Second, func(m live.Envelope) bool { return m.Type == "subscribed" })
	if first[len(first)-1].Flow != "wsb."+id {
		t.Fatalf("subscribed to %q, want wsb.%s", first[len(first)-1].Flow, id)
	}
	// Asking for the other workspace's flow by its full id is refused.
	if err := c.WriteJSON(map[string]string{"type": "subscribe", "flow": "wsa." + id}); err != nil {
		t.Fatal(err)
	}
	refused := readUntil(t, c, 10*time.Second, func(m live.Envelope) bool { return m.Type == "error" || m.Type == "subscribed" })
	if last := refused[len(refused)-1]; last.Type != "error" {
		t.Fatalf("subscribing to another workspace's flow: %+v", last)
	}
	var ra struct {
		Run string `json:"id"`
	}
	var rb server.Started
	a.must(http.StatusOK, "POST", "/api/flows/"+id+"/runs?wait=20s", `{"input": {"name": "A"}}`, server.WorkspaceHeader, "wsa").into(t, &ra)
	a.must(http.StatusAccepted, "POST", "/api/flows/"+id+"/runs", `{"input": {"name": "B"}}`, "Authorization", "Bearer "+kb).into(t, &rb)
	got := readUntil(t, c, 20*time.Second, runEnded(rb.Run))
	for _, m := range got {
		if m.Event != nil && (m.Event.Run == ra.Run || m.Event.Flow == "wsa."+id) || m.Flow == "wsa."+id {
			t.Fatalf("wsb's live view carried wsa's %+v", m)
		}
	}
	_ = ka
}

// Attack: another workspace's run and checkpoint ids guessed in URLs. A member of wsb —
// even SLUICE_TOKEN acting in wsb — who puts wsa's run and checkpoint ids under wsb's
// flow of the same id gets 404 from every route that takes them, reading or changing,
// with nothing of wsa's run in any answer; naming wsa's flow in the URL is refused
// (not a member). wsa's run is untouched.
func TestAnotherWorkspacesRunOrCheckpointIDGuessedInAURLIsNothing(t *testing.T) {
	a := newAPI(t, storetest.Real(t))
	a.workspace("wsa")
	a.workspace("wsb")
	id, doc := a.flowDoc("approval", nil)
	for _, ws := range []string{"wsa", "wsb"} {
		storetest.DeleteFlowKeys(t, a.r, ws+"."+id)
		a.must(http.StatusCreated, "PUT", "/api/flows/"+id, doc, server.WorkspaceHeader, ws)
	}
	const secret = "Quinn-of-wsa-31"
	var ra struct {
		ID, Status string
	}
	a.must(http.StatusOK, "POST", "/api/flows/"+id+"/runs?wait=20s", `{"input": {"customer": "`+secret+`"}}`, server.WorkspaceHeader, "wsa").into(t, &ra)
	if ra.Status != "waiting" {
		t.Fatalf("wsa's run: %+v", ra)
	}
	var ck struct{ Checkpoints []struct{ ID string } }
	a.must(http.StatusOK, "GET", "/api/flows/"+id+"/runs/"+ra.ID+"/checkpoints", nil, server.WorkspaceHeader, "wsa").into(t, &ck)
	ckpt := ck.Checkpoints[len(ck.Checkpoints)-1].ID
	kb := a.serviceKey("wsb", teams.Owner)
	run := "/api/flows/" + id + "/runs/" + ra.ID
	requests := []struct{ method, path, body string }{
		{"GET", run, ""},
		{"GET", run + "/checkpoints", ""},
		{"GET", run + "/checkpoints/" + ckpt, ""},
		{"GET", run + "/checkpoints/" + ckpt + "/diff", ""},
		{"GET", run + "/compare", ""},
		{"POST", run + "/cancel", ""},
		{"POST", run + "/resume", `{"decision": "approve"}`},
		{"POST", run + "/fork", `{"checkpoint": "` + ckpt + `"}`},
		{"POST", run + "/retry", `{}`},
		{"POST", run + "/replay", `{}`},
		{"POST", run + "/move", `{"version": "current"}`},
		{"GET", "/flows/" + id + "/runs/" + ra.ID, ""},
	}
	for _, as := range [][]string{{"Authorization", "Bearer " + kb}, {server.WorkspaceHeader, "wsb"}} {
		who := "wsb's key"
		if as[0] == server.WorkspaceHeader {
			who = "SLUICE_TOKEN in wsb"
		}
		// The run's live events: a 404, not a stream that stays open and says nothing.
		probeAs := as
		if as[0] == server.WorkspaceHeader {
			probeAs = append([]string{"Authorization", "Bearer " + testToken}, as...)
		}
		if status, _ := a.probe("GET", run+"/events", probeAs...); status != http.StatusNotFound {
			t.Errorf("the run's events as %s: %d", who, status)
		}
		for _, q := range requests {
			var body any
			if q.body != "" {
				body = q.body
			}
			r := a.do(q.method, q.path, body, append(as, "Accept", "text/html, application/json")...)
			if r.status != http.StatusNotFound || strings.Contains(r.String(), secret) || strings.Contains(r.String(), ckpt) {
				t.Errorf("%s %s as %s: %d %s", q.method, q.path, who, r.status, r)
			}
		}
	}
	// wsa's flow named in the URL: no flow of wsb's key's workspace; a signed-in
	// member of wsb only is no member of wsa.
	if r := a.do("GET", "/api/flows/wsa."+id+"/runs/"+ra.ID, nil, "Authorization", "Bearer "+kb); r.status != http.StatusNotFound || strings.Contains(r.String(), secret) {
		t.Errorf("wsa's run by its full id with wsb's key: %d %s", r.status, r)
	}
	a.person("bea@example.com", "password-of-bea", map[string]teams.Role{"wsb": teams.Owner})
	bea := a.browser()
	bea.signin("bea@example.com", "password-of-bea")
	for _, p := range []string{"/api/flows/wsa." + id + "/runs/" + ra.ID, "/api/flows/wsa." + id + "/runs/" + ra.ID + "/checkpoints/" + ckpt} {
		if r := bea.api("GET", p, ""); r.status != http.StatusForbidden || strings.Contains(r.String(), secret) {
			t.Errorf("%s as a member of wsb only: %d %s", p, r.status, r)
		}
	}
	var still struct{ Status string }
	a.must(http.StatusOK, "GET", run, nil, server.WorkspaceHeader, "wsa").into(t, &still)
	if still.Status != "waiting" {
		t.Errorf("wsa's run after wsb's tries: %s", still.Status)
	}
}
