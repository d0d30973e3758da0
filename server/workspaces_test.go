package server_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
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
