package server

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/sluicehq/sluice/flows"
	"github.com/sluicehq/sluice/flows/engine"
	"github.com/sluicehq/sluice/server/live"
	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/teams"
)

// MCPDeps are what the MCP server needs: the library whose flows it offers, the engine
// that runs them, and Redis with a live hub for their progress.
type MCPDeps struct {
	Library *store.Library
	Engine  *engine.Engine
	Redis   *store.Redis
	// Hub follows runs' events for progress notifications; nil: no progress.
	Hub    *live.Hub
	Logger *slog.Logger
	// Version is reported to clients.
	Version string
}

// NewMCPServer returns the MCP server that offers the library's flows with
// "settings": {"mcp": true} as tools: the tool's name is the flow id, its description
// the flow's, its input schema the flow's input schema. A call starts a run and returns
// its output; progress notifications follow the run's steps; a run that waits for an
// approval is reported as such. `sluice mcp` serves it on stdio, `serve` on /mcp.
func NewMCPServer(d MCPDeps) *mcp.Server {
	if d.Logger == nil {
		d.Logger = slog.Default()
	}
	g := &gateway{lib: d.Library, eng: d.Engine, rdb: d.Redis, hub: d.Hub, log: d.Logger}
	return newMCPServer(g, d.Version).srv
}

// mcpFlows keeps the MCP server's tools in step with the library, and knows the tool
// calls under way, so that a call whose HTTP request is gone, or whose session is
// deleted, cancels its run.
type mcpFlows struct {
	ws      string // the workspace whose flows are the tools
	env     string // the environment whose versions they run ("": the saved files)
	version string
	g       *gateway
	srv     *mcp.Server
	mu      sync.Mutex
	known   map[string]string // flow -> version offered

	cmu      sync.Mutex
	requests map[string]context.Context       // mcpRequestHeader value -> its HTTP request's context
	calls    map[string]map[*mcpCall]struct{} // session id -> its calls under way
}

// mcpCall is one tool call under way.
type mcpCall struct{ cancel context.CancelFunc }

// mcpRequestHeader links a tools/call to the HTTP request that carries it: the /mcp
// handler sets it on every POST (replacing what a client sent) and the SDK hands the
// request's headers to the tool handler.
const mcpRequestHeader = "X-Sluice-Mcp-Request"

func newMCPServer(g *gateway, version string) *mcpFlows { return newMCPServerIn(g, version, "", "") }

// newMCPServerIn is the MCP server of one workspace's flows ("": the default one), as
// environment env has them ("": the saved files, docs/environments.md).
func newMCPServerIn(g *gateway, version, ws, env string) *mcpFlows {
	if version == "" {
		version = "dev"
	}
	srv := mcp.NewServer(&mcp.Implementation{Name: "sluice", Title: "Sluice flows", Version: version}, &mcp.ServerOptions{
		Instructions: "Each tool runs a Sluice flow durably and returns the run's output. A run that needs a person's approval is reported as waiting, with where to approve it.",
		Capabilities: &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{ListChanged: true}},
	})
	m := &mcpFlows{ws: ws, env: env, version: version, g: g, srv: srv, known: map[string]string{}, requests: map[string]context.Context{}, calls: map[string]map[*mcpCall]struct{}{}}
	// The tools follow the library: before every listing (and a call of a tool not
	// offered yet), flows added, changed, removed or no longer offered are brought up
	// to date. A call of a known flow runs its saved file as it is now anyway.
	srv.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			switch method {
			case "tools/list":
				m.sync(ctx)
			case "tools/call":
				if p, ok := req.GetParams().(*mcp.CallToolParamsRaw); ok && !m.offers(p.Name) {
					m.sync(ctx)
				}
			}
			return next(ctx, method, req)
		}
	})
	m.sync(context.Background())
	return m
}

// callContext is the context a tool call runs its flow under: cancelled when the client
// cancels (the SDK's), when the HTTP request that carries the call is gone (a dropped
// connection: the answer can no longer be delivered, as no event store keeps it for a
// resumed stream), and when the call's session is deleted or closed.
func (m *mcpFlows) callContext(ctx context.Context, req *mcp.CallToolRequest) (context.Context, func()) {
	ctx, cancel := context.WithCancel(ctx)
	stop := func() bool { return false }
	if req.Extra != nil && req.Extra.Header != nil {
		m.cmu.Lock()
		httpCtx := m.requests[req.Extra.Header.Get(mcpRequestHeader)]
		m.cmu.Unlock()
		if httpCtx != nil {
			stop = context.AfterFunc(httpCtx, cancel)
		}
	}
	sid := ""
	if req.Session != nil {
		sid = req.Session.ID()
	}
	call := &mcpCall{cancel: cancel}
	m.cmu.Lock()
	if m.calls[sid] == nil {
		m.calls[sid] = map[*mcpCall]struct{}{}
	}
	m.calls[sid][call] = struct{}{}
	m.cmu.Unlock()
	return ctx, func() {
		stop()
		m.cmu.Lock()
		delete(m.calls[sid], call)
		if len(m.calls[sid]) == 0 {
			delete(m.calls, sid)
		}
		m.cmu.Unlock()
		cancel()
	}
}

// cancelSession cancels the calls under way in a session (it is being deleted).
func (m *mcpFlows) cancelSession(sid string) {
	m.cmu.Lock()
	defer m.cmu.Unlock()
	for c := range m.calls[sid] {
		c.cancel()
	}
}

// track registers an HTTP request's context under id until the returned func is called.
func (m *mcpFlows) track(id string, ctx context.Context) func() {
	m.cmu.Lock()
	m.requests[id] = ctx
	m.cmu.Unlock()
	return func() {
		m.cmu.Lock()
		delete(m.requests, id)
		m.cmu.Unlock()
	}
}

// sessions counts the open MCP sessions.
func (m *mcpFlows) sessions() int {
	n := 0
	for range m.srv.Sessions() {
		n++
	}
	return n
}

// scope gives ctx the server's workspace and environment.
func (m *mcpFlows) scope(ctx context.Context) context.Context {
	return withEnvironment(withWorkspace(ctx, m.ws), m.env)
}

// offers reports whether flow is offered as a tool now.
func (m *mcpFlows) offers(flow string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	_, ok := m.known[flow]
	return ok
}

// sync adds, replaces and removes tools so they are the library's offered flows.
func (m *mcpFlows) sync(ctx context.Context) {
	plans := m.g.flows(m.scope(ctx), func(p *flows.Plan) bool { return p.Doc.Settings.MCP })
	m.mu.Lock()
	defer m.mu.Unlock()
	seen := map[string]bool{}
	for _, p := range plans {
		seen[p.Flow] = true
		if m.known[p.Flow] == p.Version {
			continue
		}
		tool, wrapped := flowTool(p)
		m.srv.AddTool(tool, m.handler(p.Flow, wrapped))
		m.known[p.Flow] = p.Version
	}
	var gone []string
	for f := range m.known {
		if !seen[f] {
			gone = append(gone, f)
			delete(m.known, f)
		}
	}
	if len(gone) > 0 {
		sort.Strings(gone)
		m.srv.RemoveTools(gone...)
	}
}

// flowTool describes a flow as a tool. MCP arguments are an object: a flow whose input
// is anything else is called with {"input": ...} (wrapped).
func flowTool(p *flows.Plan) (*mcp.Tool, bool) {
	desc := p.Doc.Description
	if desc == "" {
		desc = p.Doc.Name
	}
	if desc == "" {
		desc = "Runs the Sluice flow " + p.Flow + "."
	}
	t := &mcp.Tool{Name: p.Flow, Title: p.Doc.Name, Description: desc}
	schema := inputSchema(p)
	var m map[string]any
	if len(schema) == 0 || json.Unmarshal(schema, &m) != nil {
		t.InputSchema = map[string]any{"type": "object"}
		return t, false
	}
	if m["type"] == "object" {
		t.InputSchema = m
		return t, false
	}
	t.InputSchema = map[string]any{"type": "object", "required": []string{"input"}, "properties": map[string]any{"input": m}}
	return t, true
}

// handler runs the flow for a call.
func (m *mcpFlows) handler(flow string, wrapped bool) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		ctx, done := m.callContext(ctx, req)
		defer done()
		ctx = m.scope(ctx)
		plan, err := m.g.plan(ctx, flow)
		if err != nil {
			return toolError(fmt.Sprintf("flow %s: %v", flow, err)), nil
		}
		if plan.Doc == nil || !plan.Doc.Settings.MCP {
			return toolError(fmt.Sprintf("flow %s is no longer offered over MCP", flow)), nil
		}
		input := req.Params.Arguments
		if len(input) == 0 {
			input = json.RawMessage(`{}`)
		}
		if wrapped {
			var args struct {
				Input json.RawMessage `json:"input"`
			}
			if err := json.Unmarshal(input, &args); err != nil || len(args.Input) == 0 {
				return toolError(`call it with {"input": ...}`), nil
			}
			input = args.Input
		}
		var onEvent func(store.Event)
		if token := req.Params.GetProgressToken(); token != nil && req.Session != nil {
			steps := 0
			onEvent = func(ev store.Event) {
				msg := progressMessage(ev)
				if msg == "" {
					return
				}
				steps++
				if err := req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: token, Progress: float64(steps), Message: msg}); err != nil {
					m.g.log.Debug("cannot send an MCP progress notification", "error", err)
				}
			}
		}
		id, run, err := m.g.run(ctx, plan, input, onEvent)
		if err != nil {
			if id != "" && ctx.Err() != nil {
				m.g.cancel(flow, id) // the client gave up on the call
			}
			return toolError(fmt.Sprintf("flow %s: %v", flow, err)), nil
		}
		return runResult(run), nil
	}
}

func toolError(msg string) *mcp.CallToolResult {
	return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: msg}}}
}

// runResult is what a settled run answers a tool call with.
func runResult(r *store.Run) *mcp.CallToolResult {
	switch r.Status {
	case store.StatusSucceeded:
		out := r.Output()
		if out == nil {
			out = json.RawMessage("null")
		}
		text := string(out)
		var str string
		if json.Unmarshal(out, &str) == nil {
			text = str
		}
		res := &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}}
		var obj map[string]any
		if json.Unmarshal(out, &obj) == nil {
			res.StructuredContent = obj
		}
		return res
	case store.StatusWaiting:
		view := viewRun(r)
		nodes := make([]string, 0, len(view.Waiting))
		for n := range view.Waiting {
			nodes = append(nodes, n)
		}
		sort.Strings(nodes)
		var b strings.Builder
		fmt.Fprintf(&b, "Run %s of flow %s waits for a person's approval", r.ID, r.Flow)
		for _, n := range nodes {
			fmt.Fprintf(&b, " at node %q: %s", n, view.Waiting[n].Prompt)
		}
		fmt.Fprintf(&b, ". Approve or reject it in Sluice (/flows/%s/runs/%s), or with POST /api/flows/%s/runs/%s/resume {\"decision\": \"approve\"}; the run goes on then, and its output is at GET /api/flows/%s/runs/%s.",
			r.Flow, r.ID, r.Flow, r.ID, r.Flow, r.ID)
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: b.String()}},
			StructuredContent: map[string]any{"run": r.ID, "flow": r.Flow, "status": r.Status, "waiting": view.Waiting}}
	default:
		where := ""
		if r.ErrorNode != "" {
			where = fmt.Sprintf(" at node %q", r.ErrorNode)
		}
		return toolError(fmt.Sprintf("run %s of flow %s %s%s: %s", r.ID, r.Flow, r.Status, where, r.Error))
	}
}

// progressMessage says what a run's event means for a waiting client ("" for events
// not worth a notification, such as streamed tokens).
func progressMessage(ev store.Event) string {
	var d map[string]any
	_ = json.Unmarshal(ev.Data, &d)
	switch ev.Type {
	case "step":
		if d["status"] == "waiting" {
			return fmt.Sprintf("node %s waits for a person's approval", ev.Node)
		}
		return fmt.Sprintf("node %s done", ev.Node)
	case "turn":
		return fmt.Sprintf("node %s: agent turn", ev.Node)
	case "retry":
		return fmt.Sprintf("node %s failed and is retried: %v", ev.Node, d["error"])
	case "rate_limit":
		if d["waiting"] == true {
			return fmt.Sprintf("node %s waits for its turn at provider %v (rate limit)", ev.Node, d["provider"])
		}
	}
	return ""
}

// mcpHandler serves the MCP server over Streamable HTTP (GET, POST and DELETE).
//
// Sluice's own checks (Host, Origin, the token) run before it, so the SDK's DNS
// rebinding guard is off: it would refuse the Host names Sluice serves (app.localhost,
// --allowed-hosts, any Host with a token behind a proxy on loopback). Idle sessions
// close after MCPSessionIdle; past MCPSessions open sessions a new one gets 503.
func (s *Server) mcpHandler() echo.HandlerFunc {
	if s.mcp == nil {
		return func(echo.Context) error {
			return &flows.Error{Code: flows.Unavailable, Message: "this server offers no flows over MCP"}
		}
	}
	// One MCP server and one session table per workspace: a session opened in one
	// workspace is unknown to every other, and lists and calls that workspace's flows.
	newHandler := func(m *mcpFlows) http.Handler {
		return mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return m.srv }, &mcp.StreamableHTTPOptions{
			Logger: s.log, SessionTimeout: s.cfg.MCPSessionIdle, DisableLocalhostProtection: true, MaxRequestBodyBytes: s.cfg.BodyLimit})
	}
	var mu sync.Mutex
	servers := map[string]*mcpFlows{teams.DefaultWorkspace: s.mcp}
	handlers := map[string]http.Handler{teams.DefaultWorkspace: newHandler(s.mcp)}
	open := func() int {
		mu.Lock()
		defer mu.Unlock()
		n := 0
		for _, m := range servers {
			n += m.sessions()
		}
		return n
	}
	return func(c echo.Context) error {
		ws, env := workspaceOf(c), environmentFrom(c.Request().Context())
		// One server per environment too: its tools run that environment's versions.
		key := ws
		if env != "" {
			key += "\x00" + env
		}
		mu.Lock()
		m, h := servers[key], handlers[key]
		if m == nil {
			m = newMCPServerIn(s.gateway(), s.mcp.version, ws, env)
			h = newHandler(m)
			servers[key], handlers[key] = m, h
		}
		mu.Unlock()
		r := c.Request()
		sid := r.Header.Get("Mcp-Session-Id")
		switch r.Method {
		case http.MethodPost:
			if sid == "" && open() >= s.cfg.MCPSessions {
				c.Response().Header().Set("Retry-After", "60")
				return &flows.Error{Code: flows.Unavailable, Message: fmt.Sprintf("this server has %d MCP sessions open, its limit; "+
					"end one (DELETE /mcp) or wait: a session idle for %s is closed", s.cfg.MCPSessions, s.cfg.MCPSessionIdle)}
			}
			id := rand.Text()
			r.Header.Set(mcpRequestHeader, id)
			defer m.track(id, r.Context())()
		case http.MethodDelete:
			m.cancelSession(sid)
		}
		h.ServeHTTP(c.Response(), r)
		return nil
	}
}

// MCPToolsRequest is the body of POST /api/mcp/tools: an mcp node's params.
type MCPToolsRequest struct {
	Params json.RawMessage `json:"params"`
}

// MCPToolList is the answer: the tools the node offers, as the model sees them.
type MCPToolList struct {
	Tools []flows.ToolDef `json:"tools"`
}

// listMCPTools connects to an mcp node's server, as a worker of this process would, and
// lists its tools for the editor's inspector.
func (s *Server) listMCPTools(c echo.Context) error {
	if s.tools == nil {
		return &flows.Error{Code: flows.Unavailable, Message: "this server cannot list MCP tools"}
	}
	var req MCPToolsRequest
	if err := decodeRequest(c, &req); err != nil {
		return err
	}
	if len(req.Params) == 0 {
		return &flows.Error{Code: flows.Invalid, Path: "params", Message: "give the mcp node's params"}
	}
	ctx, cancel := context.WithTimeout(c.Request().Context(), 30*time.Second)
	defer cancel()
	tools, err := s.tools.MCPTools(ctx, req.Params)
	if err != nil {
		return err
	}
	if tools == nil {
		tools = []flows.ToolDef{}
	}
	return c.JSON(http.StatusOK, MCPToolList{Tools: tools})
}
