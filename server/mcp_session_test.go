package server_test

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/flows/nodes"
	"github.com/sluicehq/sluice/server"
	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/storetest"
)

// sleepyFlow is an MCP tool whose one step takes sleep.
func (a *api) sleepyFlow(sleep string) string {
	a.t.Helper()
	return a.saveFlow(`{"sluice": 1, "id": "x", "name": "Sleepy", "settings": {"mcp": true},
		"nodes": [{"id": "in", "type": "input"}, {"id": "nap", "type": "script", "params": {"sleep": "`+sleep+`", "update": {"done": true}}},
			{"id": "out", "type": "output", "params": {"value": ".done"}}],
		"edges": [{"from": "in", "to": "nap"}, {"from": "nap", "to": "out"}]}`, nil)
}

// rawMCP is a Streamable HTTP client written out by hand, so a test can drop the
// connection of one call the way a crashed client or a broken network does (the SDK's
// client would send notifications/cancelled instead).
type rawMCP struct {
	a       *api
	host    string
	session string
}

// post sends one JSON-RPC message and returns the response (the caller closes it).
func (m *rawMCP) post(ctx context.Context, body string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, "POST", m.a.base+"/mcp", strings.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if m.a.token != "" {
		req.Header.Set("Authorization", "Bearer "+m.a.token)
	}
	if m.host != "" {
		req.Host = m.host
	}
	if m.session != "" {
		req.Header.Set("Mcp-Session-Id", m.session)
		req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
	}
	return http.DefaultClient.Do(req)
}

// initialize opens a session; it returns the HTTP status (200 when opened) and body.
func (m *rawMCP) initialize() (int, string) {
	m.a.t.Helper()
	resp, err := m.post(context.Background(), `{"jsonrpc": "2.0", "id": 1, "method": "initialize",
		"params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}}`)
	if err != nil {
		m.a.t.Fatal(err)
	}
	defer resp.Body.Close()
	var b strings.Builder
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		b.WriteString(sc.Text() + "\n")
		if strings.Contains(sc.Text(), `"result"`) {
			break
		}
	}
	if resp.StatusCode != http.StatusOK {
		return resp.StatusCode, b.String()
	}
	m.session = resp.Header.Get("Mcp-Session-Id")
	r, err := m.post(context.Background(), `{"jsonrpc": "2.0", "method": "notifications/initialized"}`)
	if err != nil {
		m.a.t.Fatal(err)
	}
	r.Body.Close()
	return resp.StatusCode, b.String()
}

// call starts tools/call of flow; the call's HTTP request lives until ctx ends.
func (m *rawMCP) call(ctx context.Context, flow string) <-chan error {
	done := make(chan error, 1)
	go func() {
		resp, err := m.post(ctx, `{"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "`+flow+`", "arguments": {}}}`)
		if err == nil {
			_, err = bufio.NewReader(resp.Body).ReadString('\x00') // until the answer ends or the request is dropped
			resp.Body.Close()
		}
		done <- err
	}()
	return done
}

// runningRun waits until flow has a run whose step is under way and returns its id.
func (a *api) runningRun(flow string) string {
	a.t.Helper()
	var id string
	eventually(a.t, 30*time.Second, func() string {
		var list server.RunList
		a.must(http.StatusOK, "GET", "/api/flows/"+flow+"/runs", nil).into(a.t, &list)
		for _, r := range list.Runs {
			if r.Status == store.StatusRunning {
				id = r.ID
				return ""
			}
		}
		return "no run of " + flow + " is running"
	})
	return id
}

// A tools/call whose connection drops cancels its run, as /v1 and stdio calls do.
func TestMCPCallWhoseConnectionDropsCancelsItsRun(t *testing.T) {
	a := newAPI(t, storetest.Real(t))
	flow := a.sleepyFlow("20s")
	m := &rawMCP{a: a}
	if status, body := m.initialize(); status != http.StatusOK {
		t.Fatalf("initialize: %d %s", status, body)
	}
	ctx, drop := context.WithCancel(context.Background())
	done := m.call(ctx, flow)
	id := a.runningRun(flow)
	drop() // the client's connection is gone
	<-done
	if r := a.settle(flow, id); r.Status != store.StatusCancelled {
		t.Errorf("the run of a dropped call is %s, want cancelled", r.Status)
	}
}

// Deleting a session cancels its calls under way, and the DELETE does not wait for them
// to finish.
func TestMCPDeletingASessionCancelsItsCalls(t *testing.T) {
	a := newAPI(t, storetest.Real(t))
	flow := a.sleepyFlow("20s")
	m := &rawMCP{a: a}
	if status, body := m.initialize(); status != http.StatusOK {
		t.Fatalf("initialize: %d %s", status, body)
	}
	done := m.call(context.Background(), flow)
	id := a.runningRun(flow)
	r := a.do("DELETE", "/mcp", nil, "Mcp-Session-Id", m.session, "Mcp-Protocol-Version", "2025-06-18")
	if r.status != http.StatusNoContent && r.status != http.StatusOK {
		t.Errorf("DELETE /mcp: %d %s", r.status, r.body)
	}
	// The DELETE has returned: the run must not have been waited for.
	var now run
	a.must(http.StatusOK, "GET", "/api/flows/"+flow+"/runs/"+id, nil).into(t, &now)
	if now.Status == store.StatusSucceeded {
		t.Errorf("DELETE /mcp returned after the session's run succeeded")
	}
	if r := a.settle(flow, id); r.Status != store.StatusCancelled {
		t.Errorf("the run of a deleted session's call is %s, want cancelled", r.Status)
	}
	<-done
}

// A call that takes longer than the body read timeout still gets its answer: the
// deadline is for reading the request, not for the run.
func TestMCPCallOutlivesTheRequestReadTimeout(t *testing.T) {
	a := newAPI(t, storetest.Real(t), func(c *server.Config, _ *server.Deps) { c.ReadTimeout = 300 * time.Millisecond })
	flow := a.sleepyFlow("1500ms")
	m := &rawMCP{a: a}
	if status, body := m.initialize(); status != http.StatusOK {
		t.Fatalf("initialize: %d %s", status, body)
	}
	resp, err := m.post(context.Background(), `{"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "`+flow+`", "arguments": {}}}`)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var answer string
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), "data:") {
			answer = sc.Text()
		}
	}
	if !strings.Contains(answer, `"text":"true"`) || strings.Contains(answer, `"isError":true`) {
		t.Errorf("the answer of a call longer than the read timeout: %s", answer)
	}
}

// /mcp answers every Host the rest of Sluice serves: with a token any Host, without one
// the loopback names and --allowed-hosts; other names still get 403.
func TestMCPServesTheHostsSluiceServes(t *testing.T) {
	withToken := newAPI(t, storetest.Embedded(t))
	for _, host := range []string{"sluice.example.com", "app.localhost", "10.1.2.3:8080"} {
		m := &rawMCP{a: withToken, host: host}
		if status, body := m.initialize(); status != http.StatusOK {
			t.Errorf("with a token, Host %s: %d %s", host, status, body)
		}
	}
	noToken := newAPI(t, storetest.Embedded(t), func(c *server.Config, _ *server.Deps) {
		c.Token, c.AllowedHosts = "", []string{"sluice.internal"}
	})
	for host, want := range map[string]int{"app.localhost": 200, "sluice.internal": 200, "localhost:8080": 200, "evil.example": 403} {
		m := &rawMCP{a: noToken, host: host}
		if status, body := m.initialize(); status != want {
			t.Errorf("without a token, Host %s: %d %s, want %d", host, status, body, want)
		}
	}
}

// Sessions are capped, and idle ones are closed.
func TestMCPSessionsAreCappedAndIdleOnesClosed(t *testing.T) {
	a := newAPI(t, storetest.Embedded(t), func(c *server.Config, _ *server.Deps) { c.MCPSessions = 3 })
	var open []*rawMCP
	for range 3 {
		m := &rawMCP{a: a}
		if status, body := m.initialize(); status != http.StatusOK {
			t.Fatalf("initialize: %d %s", status, body)
		}
		open = append(open, m)
	}
	m := &rawMCP{a: a}
	status, body := m.initialize()
	if status != http.StatusServiceUnavailable || !strings.Contains(body, "MCP sessions open") {
		t.Errorf("a fourth session: %d %s, want 503 saying the limit", status, body)
	}
	a.do("DELETE", "/mcp", nil, "Mcp-Session-Id", open[0].session, "Mcp-Protocol-Version", "2025-06-18")
	if status, body := (&rawMCP{a: a}).initialize(); status != http.StatusOK {
		t.Errorf("a session after one ended: %d %s", status, body)
	}

	// With room for one session, a second one opens once the first was closed for being
	// idle (asking the first would keep it busy).
	idle := newAPI(t, storetest.Embedded(t), func(c *server.Config, _ *server.Deps) {
		c.MCPSessions, c.MCPSessionIdle = 1, 200*time.Millisecond
	})
	first := &rawMCP{a: idle}
	if status, body := first.initialize(); status != http.StatusOK {
		t.Fatalf("initialize: %d %s", status, body)
	}
	eventually(t, 30*time.Second, func() string {
		if status, body := (&rawMCP{a: idle}).initialize(); status != http.StatusOK {
			return fmt.Sprintf("a second session: %d %s", status, body)
		}
		return ""
	})
	resp, err := first.post(context.Background(), `{"jsonrpc": "2.0", "id": 3, "method": "tools/list"}`)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("the idle session answers %d, want 404 (closed)", resp.StatusCode)
	}
}

// The inspector's answer and the server's log lines have a failing server's stderr with
// the node's secrets redacted.
func TestInspectorRedactsAFailingServersStderr(t *testing.T) {
	const secret = "ghp-7c1d9e0a44b2f"
	dir := t.TempDir()
	script := filepath.Join(dir, "server.sh")
	if err := os.WriteFile(script, []byte("echo \"bad credentials: $GITHUB_TOKEN\" >&2\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	lines, err := nodes.ParseMCPCommands("sh " + script)
	if err != nil {
		t.Fatal(err)
	}
	env := &nodes.Env{MCPCommands: lines, MCPEnv: []string{"GITHUB_TOKEN"},
		HTTP: &nodes.HTTPPolicy{Allow: []nodes.AllowRule{{Prefix: netip.MustParsePrefix("127.0.0.0/8")}}},
		LookupEnv: func(name string) (string, bool) {
			if name == "SLUICE_SECRET_GH" {
				return secret, true
			}
			return "", false
		}}
	t.Cleanup(env.Close)
	a := newAPI(t, storetest.Embedded(t), func(_ *server.Config, d *server.Deps) { d.MCPTools = env })
	r := a.do("POST", "/api/mcp/tools", map[string]any{"params": map[string]any{"command": "sh", "args": []string{script},
		"env": map[string]any{"GITHUB_TOKEN": map[string]string{"$env": "SLUICE_SECRET_GH"}}}})
	if r.status != http.StatusServiceUnavailable || !strings.Contains(r.String(), "bad credentials: [redacted:SLUICE_SECRET_GH]") {
		t.Errorf("inspector: %d %s, want 503 with the stderr redacted", r.status, r.body)
	}
	if strings.Contains(r.String(), secret) || strings.Contains(a.logs.String(), secret) {
		t.Errorf("the secret is in the answer or the logs:\n%s\n%s", r.body, a.logs.String())
	}
}

// A flow whose mcp node would turn an allowed command into a shell is not saved: the
// answer names the node and the argument; the inspector refuses to start it.
func TestSavingAFlowThatWouldRunAShellIsRefused(t *testing.T) {
	lines, err := nodes.ParseMCPCommands("npx -y @modelcontextprotocol/server-github")
	if err != nil {
		t.Fatal(err)
	}
	env := &nodes.Env{MCPCommands: lines}
	t.Cleanup(env.Close)
	a := newAPIWith(t, storetest.Embedded(t), env, func(_ *server.Config, d *server.Deps) { d.MCPTools = env })
	marker := filepath.Join(t.TempDir(), "pwned")
	node := map[string]any{"command": "npx", "args": []string{"-y", "-c", "touch " + marker}}
	id, doc := a.flowDoc(`{"sluice": 1, "id": "x", "nodes": [{"id": "in", "type": "input"},
		{"id": "a", "type": "agent", "params": {"model": "m", "user": "go"}}, {"id": "gh", "type": "mcp", "params": {}}],
		"edges": [{"from": "in", "to": "a"}, {"from": "gh", "port": "tool", "to": "a", "to_port": "tools"}]}`, func(d map[string]any) {
		d["nodes"].([]any)[2].(map[string]any)["params"] = node
	})
	e := a.must(http.StatusBadRequest, "PUT", "/api/flows/"+id, doc).errorBody(t)
	if len(e.Problems) != 1 || e.Problems[0].Node != "gh" || e.Problems[0].Path != "nodes[2].params.args[1]" {
		t.Errorf("problems %+v, want one at node gh, nodes[2].params.args[1]", e.Problems)
	}
	a.must(http.StatusNotFound, "GET", "/api/flows/"+id, nil)
	a.must(http.StatusForbidden, "POST", "/api/mcp/tools", map[string]any{"params": node})
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("the shell command ran")
	}
}
