package nodes_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/flows"
	"github.com/sluicehq/sluice/flows/nodes"
	"github.com/sluicehq/sluice/flows/nodes/llmtest"
	"github.com/sluicehq/sluice/flows/nodes/mcptest"
)

// TestMain lets this test binary be the stdio MCP server the stdio tests start.
func TestMain(m *testing.M) {
	mcptest.ServeStdioIfAsked()
	os.Exit(m.Run())
}

// stdioParams are an mcp node's params that start this test binary as an MCP server.
func stdioParams(extra string) string {
	return `{"command": ` + jsonString(os.Args[0]) + `, "env": {"` + mcptest.StdioEnv + `": "1"}` + extra + `}`
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// mcpEnv is an Env whose fake model is srv, allowed to start this test binary and to
// reach loopback.
func mcpEnv(t *testing.T, srv *llmtest.Server) *nodes.Env {
	env := srv.Env(0)
	env.MCPCommands = []nodes.MCPCommandLine{{Command: os.Args[0]}}
	env.MCPEnv = []string{mcptest.StdioEnv}
	env.HTTP = loopbackOK()
	t.Cleanup(env.Close)
	return env
}

// mcpAgentStep builds an agent step with the mcp node of params as its tool.
func mcpAgentStep(t *testing.T, env *nodes.Env, params string, ttl string) (flows.Component, *flows.Step) {
	t.Helper()
	var tool flows.Component
	if ttl != "" {
		tool = buildCached(t, env, "mcp", params, ttl)
	} else {
		tool = buildIn(t, env, "mcp", params)
	}
	a := buildIn(t, env, "agent", `{"model": "m", "user": "go"}`)
	s, _ := newStep(state(t, `{}`))
	s.Tools = map[string]flows.Tool{tool.(flows.Tool).ToolDef().Name: tool.(flows.Tool)}
	return a, s
}

// answerWithResults is a fake model that calls the given tools first and then answers
// with the tool results it got, joined by " | ".
func answerWithResults(srv *llmtest.Server, calls ...llmtest.ToolCall) {
	srv.Respond(func(r llmtest.Request) llmtest.Reply {
		if r.Last().Role != "tool" {
			return llmtest.Calls(calls...)
		}
		var results []string
		for _, m := range r.Messages {
			if m.Role == "tool" {
				results = append(results, m.Text())
			}
		}
		return llmtest.Text(strings.Join(results, " | "))
	})
}

func toolSchema(r llmtest.Request, name string) string {
	for _, t := range r.Tools {
		if t.Function.Name == name {
			return string(t.Function.Parameters)
		}
	}
	return ""
}

// Over stdio: the agent lists the server's tools (only those allowed, with the prefix),
// hands the model their schemas and calls them; a tool's error reaches the model as the
// tool's result.
func TestMCPAgentListsAndCallsToolsOverStdio(t *testing.T) {
	srv := llmtest.New(t)
	env := mcpEnv(t, srv)
	answerWithResults(srv, llmtest.Call("c1", "calc_add", `{"a": 2, "b": 3}`), llmtest.Call("c2", "calc_fail", `{}`))
	a, s := mcpAgentStep(t, env, stdioParams(`, "tools": ["add", "fail"], "tool_prefix": "calc_"`), "")
	res, err := a.Run(context.Background(), s)
	if err != nil {
		t.Fatal(err)
	}
	if want := "5 | error: the order database is down"; res.Output != want {
		t.Errorf("answer %q, want %q", res.Output, want)
	}
	first := srv.Requests()[0]
	if got := strings.Join(first.ToolNames(), ","); got != "calc_add,calc_fail" {
		t.Errorf("tools offered %s, want the allowed two with the prefix", got)
	}
	if sch := toolSchema(first, "calc_add"); !strings.Contains(sch, `"a"`) || !strings.Contains(sch, `"number"`) {
		t.Errorf("calc_add's schema %s is not the server's", sch)
	}
}

// Over Streamable HTTP, with a header from the environment; the server refusing a call
// (arguments that do not fit the tool's schema) is told to the model too.
func TestMCPAgentCallsToolsOverStreamableHTTP(t *testing.T) {
	srv := llmtest.New(t)
	env := mcpEnv(t, srv)
	env.LookupEnv = func(name string) (string, bool) {
		if name == "SLUICE_SECRET_MCP_TOKEN" {
			return "tok-123", true
		}
		return "", false
	}
	mcpSrv := mcptest.StartHTTP(t)
	answerWithResults(srv, llmtest.Call("c1", "lookup_order", `{"id": "A-1"}`), llmtest.Call("c2", "add", `{"a": "two"}`))
	a, s := mcpAgentStep(t, env, `{"url": "`+mcpSrv.URL+`", "headers": {"Authorization": {"$env": "SLUICE_SECRET_MCP_TOKEN", "prefix": "Bearer "}}}`, "")
	res, err := a.Run(context.Background(), s)
	if err != nil {
		t.Fatal(err)
	}
	out := res.Output.(string)
	order, refusal, _ := strings.Cut(out, " | ")
	var o mcptest.Order
	if err := json.Unmarshal([]byte(order), &o); err != nil || o.ID != "A-1" || o.Rows != 120000000 {
		t.Errorf("lookup_order's result %q", order)
	}
	if !strings.HasPrefix(refusal, "error: ") || mcpSrv.Calls("add") != 0 {
		t.Errorf("add with a string for a number: %q (%d calls), want an error for the model and no call", refusal, mcpSrv.Calls("add"))
	}
	if got := strings.Join(srv.Requests()[0].ToolNames(), ","); got != "add,die,fail,getenv,lookup_order,wait" {
		t.Errorf("tools offered %s, want all of the server's", got)
	}
	if h := mcpSrv.Header("Authorization"); h != "Bearer tok-123" {
		t.Errorf("Authorization %q, want the secret from the environment", h)
	}
}

// A server that dies mid-call fails the step (to be retried), and the next attempt
// starts it again.
func TestMCPServerThatDiesMidCallFailsTheStepAndIsStartedAgain(t *testing.T) {
	srv := llmtest.New(t)
	env := mcpEnv(t, srv)
	srv.Reply(llmtest.Calls(llmtest.Call("c1", "die", `{}`)))
	a, s := mcpAgentStep(t, env, stdioParams(``), "")
	_, err := a.Run(context.Background(), s)
	var fe *flows.Error
	if err == nil || flows.IsPermanent(err) || !errors.As(err, &fe) || fe.Code != flows.Unavailable || !strings.Contains(err.Error(), "MCP server") {
		t.Fatalf("a server that died mid-call: %v, want a retried step failure naming the MCP server", err)
	}
	answerWithResults(srv, llmtest.Call("c1", "add", `{"a": 1, "b": 1}`))
	res, err := a.Run(context.Background(), s)
	if err != nil || res.Output != "2" {
		t.Fatalf("the retried step: %v, %v; want the restarted server's answer 2", res, err)
	}
}

// Three agents in parallel asking the same tool of a cached mcp node: one server call.
func TestMCPCachedToolIsCalledOnceForThreeParallelAgents(t *testing.T) {
	srv := llmtest.New(t)
	env := mcpEnv(t, srv)
	mcpSrv := mcptest.StartHTTP(t)
	answerWithResults(srv, llmtest.Call("c1", "wait", `{}`))
	a, s := mcpAgentStep(t, env, `{"url": "`+mcpSrv.URL+`"}`, "1m")
	var wg sync.WaitGroup
	outs := make([]any, 3)
	errs := make([]error, 3)
	for i := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			step := *s
			res, err := a.Run(context.Background(), &step)
			errs[i] = err
			if res != nil {
				outs[i] = res.Output
			}
		}()
	}
	<-mcpSrv.Waiting() // the first call is at the server...
	for srv.Calls() < 3 {
		// ...and the other agents have asked their model, so they call the tool too.
		<-srv.Arrived()
	}
	mcpSrv.Release()
	wg.Wait()
	for i := range 3 {
		if errs[i] != nil || outs[i] != "released" {
			t.Errorf("agent %d: %v, %v", i, outs[i], errs[i])
		}
	}
	if n := mcpSrv.Calls("wait"); n != 1 {
		t.Errorf("the server was called %d times, want once", n)
	}
}

// The server's address goes through the SSRF guard; a command must be allowed.
func TestMCPGuardsItsServers(t *testing.T) {
	srv := llmtest.New(t)
	env := srv.Env(0) // loopback not allowed, no command allowed
	t.Cleanup(env.Close)
	mcpSrv := mcptest.StartHTTP(t)
	answerWithResults(srv)
	a, s := mcpAgentStep(t, env, `{"url": "`+mcpSrv.URL+`"}`, "")
	_, err := a.Run(context.Background(), s)
	var fe *flows.Error
	if !flows.IsPermanent(err) || !errors.As(err, &fe) || fe.Code != flows.Forbidden || fe.Path != "params.url" {
		t.Errorf("an MCP server on loopback: %v, want a permanent forbidden error at params.url", err)
	}
	if _, err := tryBuildIn(env, "mcp", stdioParams("")); err == nil || !strings.Contains(err.Error(), "--mcp-commands") {
		t.Errorf("a command the server does not allow: %v", err)
	}
	if _, err := tryBuildIn(env, "mcp", `{}`); err == nil || !strings.Contains(err.Error(), "give the server's command") {
		t.Errorf("neither command nor url: %v", err)
	}
}

// Secrets never reach flow JSON: a header or an env variable of an mcp node named like a
// credential takes only an {"$env"} reference, whatever its value looks like.
func TestMCPRefusesLiteralCredentialsInHeadersAndEnv(t *testing.T) {
	validate := func(params string) []flows.Problem {
		doc := `{"sluice": 1, "id": "x", "nodes": [{"id": "in", "type": "input"}, {"id": "a", "type": "agent", "params": {"model": "m", "user": "go"}},
			{"id": "t", "type": "mcp", "params": ` + params + `}],
			"edges": [{"from": "in", "to": "a"}, {"from": "t", "port": "tool", "to": "a", "to_port": "tools"}]}`
		return flows.Validate([]byte(doc), nodes.NewRegistry(&nodes.Env{MCPCommands: []nodes.MCPCommandLine{{Command: "srv"}},
			MCPEnv: []string{"GITHUB_PERSONAL_ACCESS_TOKEN", "OPENAI_API_KEY", "DB_PASSWORD", "GITHUB_TOKEN", "LOG_LEVEL", "MONKEY"}}), flows.DefaultLimits).Errors()
	}
	for _, tc := range []struct{ name, params, path string }{
		{"an Authorization header", `{"url": "https://mcp.example.com/mcp", "headers": {"Authorization": "hunter2"}}`, "nodes[2].params.headers.Authorization"},
		{"an API key header", `{"url": "https://mcp.example.com/mcp", "headers": {"X-Api-Key": "abc"}}`, "nodes[2].params.headers.X-Api-Key"},
		{"a token in the environment", `{"command": "srv", "env": {"GITHUB_PERSONAL_ACCESS_TOKEN": "abc"}}`, "nodes[2].params.env.GITHUB_PERSONAL_ACCESS_TOKEN"},
		{"a key in the environment", `{"command": "srv", "env": {"OPENAI_API_KEY": "abc"}}`, "nodes[2].params.env.OPENAI_API_KEY"},
		{"a password in the environment", `{"command": "srv", "env": {"DB_PASSWORD": "abc"}}`, "nodes[2].params.env.DB_PASSWORD"},
	} {
		ps := validate(tc.params)
		if len(ps) != 1 || ps[0].Code != flows.CodeLiteralSecret || ps[0].Path != tc.path || ps[0].Node != "t" {
			t.Errorf("%s: %v, want one literal_secret at %s", tc.name, ps, tc.path)
		}
	}
	for _, params := range []string{
		`{"url": "https://mcp.example.com/mcp", "headers": {"Authorization": {"$env": "SLUICE_SECRET_T", "prefix": "Bearer "}, "Accept": "application/json", "X-Keyboard": "qwerty"}}`,
		`{"command": "srv", "env": {"GITHUB_TOKEN": {"$env": "SLUICE_SECRET_GH"}, "LOG_LEVEL": "debug", "MONKEY": "1"}}`,
	} {
		if ps := validate(params); len(ps) != 0 {
			t.Errorf("%s: %v, want no problems", params, ps)
		}
	}
}

// The editor's inspector lists a node's tools as the model would see them.
func TestMCPToolsForTheInspector(t *testing.T) {
	env := &nodes.Env{HTTP: loopbackOK()}
	t.Cleanup(env.Close)
	mcpSrv := mcptest.StartHTTP(t)
	defs, err := env.MCPTools(context.Background(), "default", json.RawMessage(`{"url": "`+mcpSrv.URL+`", "tools": ["add", "fail"], "tool_prefix": "x_"}`))
	if err != nil {
		t.Fatal(err)
	}
	if len(defs) != 2 || defs[0].Name != "x_add" || defs[0].Description != "Add two numbers." || defs[1].Name != "x_fail" {
		t.Errorf("tools %+v", defs)
	}
	if _, err := env.MCPTools(context.Background(), "default", json.RawMessage(`{"url": 7}`)); flows.ErrorCode(err) != flows.Invalid {
		t.Errorf("bad params: %v, want invalid", err)
	}
}

// secretEnv is mcpEnv that lets flows read SLUICE_SECRET_MCP_TOKEN (value secret) and
// lets a node set the test server's token variable.
func secretEnv(t *testing.T, srv *llmtest.Server, secret string) *nodes.Env {
	env := mcpEnv(t, srv)
	env.MCPEnv = append(env.MCPEnv, mcptest.TokenEnv)
	env.LookupEnv = func(name string) (string, bool) {
		if name == "SLUICE_SECRET_MCP_TOKEN" {
			return secret, true
		}
		return "", false
	}
	return env
}

// A server that fails to start and prints the token it was given to stderr: the
// error (what the inspector answers, what a run records and logs) has it redacted.
func TestMCPServersStderrHasItsSecretsRedacted(t *testing.T) {
	const secret = "tok-9f3a7c1e55d2"
	env := secretEnv(t, llmtest.New(t), secret)
	params := `{"command": ` + jsonString(os.Args[0]) + `, "env": {"` + mcptest.StdioEnv + `": "stderr", "` +
		mcptest.TokenEnv + `": {"$env": "SLUICE_SECRET_MCP_TOKEN"}}, "timeout": "20s"}`
	_, err := env.MCPTools(context.Background(), "default", json.RawMessage(params))
	if err == nil || !strings.Contains(err.Error(), "cannot log in with token [redacted:SLUICE_SECRET_MCP_TOKEN]") {
		t.Errorf("the inspector's error %v; want the stderr with the token redacted", err)
	}
	if err != nil && strings.Contains(err.Error(), secret) {
		t.Errorf("the inspector's error has the secret: %v", err)
	}
	a, s := mcpAgentStep(t, env, params, "")
	_, err = a.Run(context.Background(), s)
	if err == nil || strings.Contains(err.Error(), secret) || !strings.Contains(err.Error(), "[redacted:") {
		t.Errorf("a step's error %v; want the stderr with the token redacted", err)
	}
}

// A secret a tool returns reaches the model redacted, as the http component's responses
// do (and the cache holds it redacted too).
func TestMCPToolResultReachesTheModelWithSecretsRedacted(t *testing.T) {
	const secret = "tok-1b7e44a09c3f"
	srv := llmtest.New(t)
	env := secretEnv(t, srv, secret)
	answerWithResults(srv, llmtest.Call("c1", "getenv", `{"name": "`+mcptest.TokenEnv+`"}`))
	params := stdioParams(`, "tools": ["getenv"]`)
	params = strings.Replace(params, `"1"}`, `"1", "`+mcptest.TokenEnv+`": {"$env": "SLUICE_SECRET_MCP_TOKEN"}}`, 1)
	a, s := mcpAgentStep(t, env, params, "10m")
	res, err := a.Run(context.Background(), s)
	if err != nil {
		t.Fatal(err)
	}
	reqs := srv.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d model requests, want 2", len(reqs))
	}
	got := reqs[1].Last().Text()
	if strings.Contains(got, secret) || got != mcptest.TokenEnv+"=[redacted:SLUICE_SECRET_MCP_TOKEN]" {
		t.Errorf("the model got the tool result %q; want the token redacted", got)
	}
	if strings.Contains(res.Output.(string), secret) {
		t.Errorf("output %q has the secret", res.Output)
	}
}

// children counts this process's child processes (the stdio servers it started).
func children(t *testing.T) int {
	t.Helper()
	self := strconv.Itoa(os.Getpid())
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	n := 0
	for _, p := range stats {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces, so read after the last ')'.
		fields := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
		if len(fields) > 1 && fields[1] == self {
			n++
		}
	}
	return n
}

// waitChildren waits until this process has at most n children.
func waitChildren(t *testing.T, n int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for children(t) > n {
		if time.Now().After(deadline) {
			t.Fatalf("%d child processes, want at most %d", children(t), n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// The inspector starts a stdio server for one listing only: thirty listings of thirty
// different servers leave no process behind.
func TestMCPInspectorLeavesNoServerRunning(t *testing.T) {
	env := &nodes.Env{MCPCommands: []nodes.MCPCommandLine{{Command: os.Args[0]}}, MCPEnv: []string{mcptest.StdioEnv, "MCPTEST_N"}}
	t.Cleanup(env.Close)
	before := children(t)
	for i := range 30 {
		params := `{"command": ` + jsonString(os.Args[0]) + `, "env": {"` + mcptest.StdioEnv + `": "1", "MCPTEST_N": "` + strconv.Itoa(i) + `"}}`
		if _, err := env.MCPTools(context.Background(), "default", json.RawMessage(params)); err != nil {
			t.Fatal(err)
		}
		if n := children(t); n > before {
			t.Fatalf("after listing %d: %d child processes, %d before", i+1, n, before)
		}
	}
}

// A worker's stdio servers are bounded (the one idle longest makes room) and stop once
// idle.
func TestMCPWorkerStdioServersAreBoundedAndReaped(t *testing.T) {
	srv := llmtest.New(t)
	env := mcpEnv(t, srv)
	env.MCPEnv = append(env.MCPEnv, "MCPTEST_N")
	env.MCPServers = 2
	env.MCPIdle = time.Hour // this part: only the bound stops servers
	before := children(t)
	answerWithResults(srv, llmtest.Call("c1", "add", `{"a": 1, "b": 2}`))
	for i := range 5 {
		params := stdioParams(`, "tools": ["add"]`)
		params = strings.Replace(params, `"1"}`, `"1", "MCPTEST_N": "`+strconv.Itoa(i)+`"}`, 1)
		a, s := mcpAgentStep(t, env, params, "")
		if res, err := a.Run(context.Background(), s); err != nil || res.Output != "3" {
			t.Fatalf("server %d: %v %v", i, res, err)
		}
		if n := children(t) - before; n > 2 {
			t.Fatalf("after server %d: %d stdio servers run, the bound is 2", i+1, n)
		}
	}
	if n := children(t) - before; n != 2 {
		t.Errorf("%d stdio servers run after five, want the bound, 2", n)
	}

	// Idle ones stop.
	idle := mcpEnv(t, srv)
	idle.MCPIdle = 20 * time.Millisecond
	a, s := mcpAgentStep(t, idle, stdioParams(`, "tools": ["add"]`), "")
	if _, err := a.Run(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	env.Close()
	waitChildren(t, before)
}
