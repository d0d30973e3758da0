package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/sluicehq/sluice/flows/nodes"
	"github.com/sluicehq/sluice/flows/nodes/mcptest"
	"github.com/sluicehq/sluice/server"
	"github.com/sluicehq/sluice/store/storetest"
)

// bearer adds the token to every request of an MCP client.
type bearer struct{ token string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

// mcpClient connects the SDK's client to the server's /mcp; progress notifications go
// to progress.
func (a *api) mcpClient(progress func(*mcp.ProgressNotificationParams)) *mcp.ClientSession {
	a.t.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
			if progress != nil {
				progress(req.Params)
			}
		},
	})
	s, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: a.base + "/mcp",
		HTTPClient: &http.Client{Transport: bearer{a.token}}, MaxRetries: -1}, nil)
	if err != nil {
		a.t.Fatal(err)
	}
	a.t.Cleanup(func() { s.Close() })
	return s
}

func mcpOn(d map[string]any) {
	s, _ := d["settings"].(map[string]any)
	if s == nil {
		s = map[string]any{}
	}
	s["mcp"] = true
	d["settings"] = s
}

// The SDK's client lists the flows offered over MCP as tools and calls one; progress
// notifications follow the run's steps.
func TestMCPClientListsFlowsAsToolsAndCallsOne(t *testing.T) {
	a := newAPI(t, storetest.Real(t))
	linear := a.saveFlow("linear", mcpOn)
	hidden := a.saveFlow("linear", nil) // not offered
	s := a.mcpClient(nil)

	var names []string
	var linearTool *mcp.Tool
	for tool, err := range s.Tools(context.Background(), nil) {
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, tool.Name)
		if tool.Name == linear {
			linearTool = tool
		}
	}
	if !slices.Contains(names, linear) || slices.Contains(names, hidden) {
		t.Fatalf("tools %v, want %s (mcp: true) and not %s", names, linear, hidden)
	}
	schema, _ := json.Marshal(linearTool.InputSchema)
	if !strings.Contains(linearTool.Description, "three steps in a row") || !strings.Contains(string(schema), `"required":["name"]`) {
		t.Errorf("tool %q: %s", linearTool.Description, schema)
	}

	var mu sync.Mutex
	var notes []string
	s2 := a.mcpClient(func(p *mcp.ProgressNotificationParams) {
		mu.Lock()
		notes = append(notes, p.Message)
		mu.Unlock()
	})
	params := &mcp.CallToolParams{Name: linear, Arguments: map[string]any{"name": "Ada"}}
	params.SetProgressToken("p1")
	res, err := s2.CallTool(context.Background(), params)
	if err != nil {
		t.Fatal(err)
	}
	if res.IsError || len(res.Content) != 1 || res.Content[0].(*mcp.TextContent).Text != `{"greeting":"HELLO, ADA!"}` {
		b, _ := json.Marshal(res)
		t.Fatalf("result %s", b)
	}
	if sc, _ := res.StructuredContent.(map[string]any); sc["greeting"] != "HELLO, ADA!" {
		t.Errorf("structured content %v", res.StructuredContent)
	}
	// The client handles notifications apart from the result: they may come after it.
	eventually(t, 5*time.Second, func() string {
		mu.Lock()
		got := strings.Join(notes, "; ")
		mu.Unlock()
		for _, want := range []string{"node greet done", "node shout done"} {
			if !strings.Contains(got, want) {
				return fmt.Sprintf("progress notifications %q do not say %q", got, want)
			}
		}
		return ""
	})

	// Input the flow's schema refuses is the tool's error.
	res, err = s2.CallTool(context.Background(), &mcp.CallToolParams{Name: linear, Arguments: map[string]any{"nom": "Ada"}})
	if err != nil || !res.IsError || !strings.Contains(res.Content[0].(*mcp.TextContent).Text, "input schema") {
		t.Errorf("bad input: %v %+v", err, res)
	}
}

// A run that waits for an approval is reported, with where to approve it, not hung on.
func TestMCPToolCallReportsAnApprovalWait(t *testing.T) {
	a := newAPI(t, storetest.Real(t))
	flow := a.saveFlow("approval", mcpOn)
	s := a.mcpClient(nil)
	res, err := s.CallTool(context.Background(), &mcp.CallToolParams{Name: flow, Arguments: map[string]any{"customer": "Ada"}})
	if err != nil {
		t.Fatal(err)
	}
	text := res.Content[0].(*mcp.TextContent).Text
	sc, _ := res.StructuredContent.(map[string]any)
	if res.IsError || sc["status"] != "waiting" || !strings.Contains(text, `waits for a person's approval at node "review": Send this reply to Ada?`) ||
		!strings.Contains(text, "/api/flows/"+flow+"/runs/"+sc["run"].(string)+"/resume") {
		t.Errorf("result %q %v", text, sc)
	}
}

func TestMCPNeedsTheToken(t *testing.T) {
	a := newAPI(t, storetest.Embedded(t))
	r := a.do("POST", "/mcp", `{"jsonrpc": "2.0", "id": 1, "method": "tools/list"}`, "Authorization", "")
	if r.status != http.StatusUnauthorized {
		t.Errorf("/mcp without the token: %d", r.status)
	}
}

// The editor's inspector lists an mcp node's tools through the API.
func TestInspectorListsAnMCPNodesTools(t *testing.T) {
	env := &nodes.Env{HTTP: &nodes.HTTPPolicy{Allow: []nodes.AllowRule{{Prefix: netip.MustParsePrefix("127.0.0.0/8")}}}}
	t.Cleanup(env.Close)
	a := newAPI(t, storetest.Embedded(t), func(_ *server.Config, d *server.Deps) { d.MCPTools = env })
	srv := mcptest.StartHTTP(t)
	var list server.MCPToolList
	a.must(http.StatusOK, "POST", "/api/mcp/tools", map[string]any{"params": map[string]any{"url": srv.URL, "tools": []string{"add"}}}).into(t, &list)
	if len(list.Tools) != 1 || list.Tools[0].Name != "add" || !strings.Contains(string(list.Tools[0].Parameters), `"b"`) {
		t.Errorf("tools %+v", list.Tools)
	}
	e := a.must(http.StatusBadRequest, "POST", "/api/mcp/tools", map[string]any{"params": map[string]any{"url": 7}}).errorBody(t)
	if e.Path != "params.url" {
		t.Errorf("bad params: %+v", e)
	}
	e = a.must(http.StatusForbidden, "POST", "/api/mcp/tools", map[string]any{"params": map[string]any{"command": "rm"}}).errorBody(t)
	if !strings.Contains(e.Message, "--mcp-commands") {
		t.Errorf("a command not allowed: %+v", e)
	}
}

// A flow saved without mcp after it was listed is not run any more.
func TestMCPStopsOfferingAFlowThatTurnedMCPOff(t *testing.T) {
	a := newAPI(t, storetest.Embedded(t))
	id, doc := a.flowDoc("linear", mcpOn)
	a.must(http.StatusCreated, "PUT", "/api/flows/"+id, doc)
	s := a.mcpClient(nil)
	if _, err := s.ListTools(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	var d map[string]any
	json.Unmarshal(doc, &d)
	delete(d, "settings")
	a.must(http.StatusOK, "PUT", "/api/flows/"+id, d)
	res, err := s.CallTool(context.Background(), &mcp.CallToolParams{Name: id, Arguments: map[string]any{"name": "Ada"}})
	if err != nil || !res.IsError || !strings.Contains(res.Content[0].(*mcp.TextContent).Text, "no longer offered") {
		t.Errorf("calling a flow no longer offered: %v %+v", err, res)
	}
	tools, err := s.ListTools(context.Background(), nil)
	if err != nil || len(tools.Tools) != 0 {
		t.Errorf("tools after turning mcp off: %v %v", tools, err)
	}
}
