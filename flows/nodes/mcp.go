package nodes

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/sluicehq/sluice/flows"
)

func mcpSpec(env *Env) flows.Spec {
	return flows.Spec{
		Name:     "mcp",
		Title:    "MCP server",
		Category: "tools",
		Description: "The tools of a Model Context Protocol server, offered to the agent this node is attached to: " +
			"over stdio (a command line the server allows with --mcp-commands, with an environment of names it allows " +
			"with --mcp-env, secrets as {\"$env\": \"NAME\"} references) or Streamable HTTP (a URL, headers with {\"$env\"} " +
			"secrets, checked by the same SSRF guard as the http component). At each agent step the server's tools " +
			"are listed (only those named in tools, when given) and their JSON schemas handed to the model, named " +
			"tool_prefix + the tool's name. A tool's error and the server's refusal of a call reach the model as the " +
			"tool's result, so it can correct itself; a server that cannot be reached or dies fails the step, which " +
			"is retried. With the node's cache set, identical calls share one result (single-flight, across " +
			"processes). Connections are kept per process and reused.",
		Ports: []flows.Port{toolPort},
		Params: json.RawMessage(`{
			"type": "object", "additionalProperties": false,
			"properties": {
				"command": {"type": "string", "minLength": 1, "description": "stdio: the server's command; with args, it must be a command line the worker allows (--mcp-commands)."},
				"args": {"type": "array", "items": {"type": "string"}, "description": "stdio: the command's arguments, exactly as the allowed line has them (a {placeholder} of the line takes any one argument that is not an option)."},
				"env": {"type": "object", "description": "stdio: the server's environment besides PATH, HOME, LANG and TMPDIR of the worker's: names the worker allows (--mcp-env), each a value or {\"$env\": \"NAME\"} for a secret. A variable named like a credential (*TOKEN*, *SECRET*, *KEY*, *PASSWORD*, ...) takes only {\"$env\"}.",
					"x-secret-keys": "` + mcpSecretKeys + `",
					"additionalProperties": {"anyOf": [
						{"type": "string"},
						{"type": "object", "required": ["$env"], "additionalProperties": false,
						 "properties": {"$env": {"type": "string", "pattern": "^[A-Za-z_][A-Za-z0-9_]*$"}}}
					]}},
				"url": {"description": "Streamable HTTP: the server's endpoint, or {\"$env\": \"NAME\"}.",
					"anyOf": [
						{"type": "string", "pattern": "^https?://"},
						{"type": "object", "required": ["$env"], "additionalProperties": false,
						 "properties": {"$env": {"type": "string", "pattern": "^[A-Za-z_][A-Za-z0-9_]*$"}}}
					]},
				"headers": {"type": "object", "description": "Streamable HTTP: header name to a value, or to {\"$env\": \"NAME\", \"prefix\": \"Bearer \"} for a secret. A header named like a credential (Authorization, Cookie, *Token*, *Key*, ...) takes only {\"$env\"}.",
					"x-secret-keys": "` + mcpSecretKeys + `",
					"additionalProperties": {"anyOf": [
						{"type": "string"},
						{"type": "object", "required": ["$env"], "additionalProperties": false,
						 "properties": {"$env": {"type": "string", "pattern": "^[A-Za-z_][A-Za-z0-9_]*$"}, "prefix": {"type": "string"}}}
					]}},
				"tools": {"type": "array", "items": {"type": "string"}, "uniqueItems": true, "description": "Only these of the server's tools (by the server's names); all of them when left out."},
				"tool_prefix": {"type": "string", "pattern": "^[a-zA-Z0-9_-]{0,32}$", "description": "Put before each tool's name as the model sees it, e.g. github_ (names must be unique among an agent's tools)."},
				"timeout": {"type": "string", "format": "duration", "default": "60s", "description": "Deadline of connecting, and of each tool call."}
			}
		}`),
		Example: json.RawMessage(`{"url": "https://mcp.example.com/mcp", "headers": {"Authorization": {"$env": "SLUICE_SECRET_EXAMPLE_MCP_TOKEN", "prefix": "Bearer "}}, "tools": ["search_issues", "get_issue"], "tool_prefix": "tracker_"}`),
		New:     func(b *flows.Build) (flows.Component, error) { return newMCP(env, b) },
	}
}

// mcpSecretKeys matches the names of env variables and headers that carry credentials:
// their values are never written in a flow, only {"$env"} references to them (unlike
// the http component's headers, an mcp node's are no templates, so a literal there is
// always in the flow's JSON).
const mcpSecretKeys = `(?i)auth|cookie|token|secret|passw|credential|(^|[-_])(api|access|private)?[-_]?key($|[-_])|apikey`

// mcpValue is a value of the env, url or headers params: literal, or an environment
// reference with an optional prefix.
type mcpValue struct {
	literal string
	env     string
	prefix  string
}

func (v *mcpValue) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '"' {
		return json.Unmarshal(b, &v.literal)
	}
	var ref struct {
		Env    string `json:"$env"`
		Prefix string `json:"prefix"`
	}
	if err := json.Unmarshal(b, &ref); err != nil {
		return err
	}
	v.env, v.prefix = ref.Env, ref.Prefix
	return nil
}

// identity is how the value shows in a cache key and a connection key: a secret by the
// name of its variable, never its value.
func (v mcpValue) identity() string {
	if v.env != "" {
		return "$env:" + v.env + ":" + v.prefix
	}
	return v.literal
}

func (v mcpValue) resolve(e *Env, flow, node, path string) (string, error) {
	if v.env == "" {
		return v.literal, nil
	}
	s, ok, err := e.lookupSecret(flow, v.env)
	if err != nil {
		return "", secretError(err, node, path)
	}
	if !ok || s == "" {
		return "", flows.Permanent(&flows.Error{Code: flows.Invalid, Node: node, Path: path,
			Message: fmt.Sprintf("environment variable %s is not set on this worker", v.env)})
	}
	return v.prefix + s, nil
}

// MCP offers the tools of an MCP server to an agent.
type MCP struct {
	env     *Env
	flow    string // its flow: the workspace whose secrets it may read
	node    string
	command string
	args    []string
	envVars map[string]mcpValue
	url     *mcpValue
	headers map[string]mcpValue
	allow   []string
	prefix  string
	timeout time.Duration
	ttl     time.Duration
	def     flows.ToolDef
	key     string // the server's identity: the connection and the cache key
	// private, when set, is the connection to use instead of the process's shared one
	// (the inspector's: it is closed when the listing is done).
	private *mcpConnection
}

// conn is the connection this node's calls go through.
func (m *MCP) conn() *mcpConnection {
	if m.private != nil {
		return m.private
	}
	return m.env.mcpConn(m.key)
}

func newMCP(env *Env, b *flows.Build) (flows.Component, error) {
	var p struct {
		Command    string              `json:"command"`
		Args       []string            `json:"args"`
		Env        map[string]mcpValue `json:"env"`
		URL        *mcpValue           `json:"url"`
		Headers    map[string]mcpValue `json:"headers"`
		Tools      []string            `json:"tools"`
		ToolPrefix string              `json:"tool_prefix"`
		Timeout    flows.Duration      `json:"timeout"`
	}
	if err := b.Decode(&p); err != nil {
		return nil, err
	}
	switch {
	case p.Command == "" && p.URL == nil:
		return nil, &flows.Error{Code: flows.Invalid, Path: "params", Message: "give the server's command (stdio) or its url (Streamable HTTP)"}
	case p.Command != "" && p.URL != nil:
		return nil, &flows.Error{Code: flows.Invalid, Path: "params.url", Message: "give command or url, not both"}
	case p.Command == "" && (len(p.Args) > 0 || len(p.Env) > 0):
		return nil, &flows.Error{Code: flows.Invalid, Path: "params.args", Message: "args and env are for a command (stdio)"}
	case p.URL == nil && len(p.Headers) > 0:
		return nil, &flows.Error{Code: flows.Invalid, Path: "params.headers", Message: "headers are for a url (Streamable HTTP)"}
	}
	if p.Command != "" {
		if err := checkMCPCommand(env.MCPCommands, p.Command, p.Args); err != nil {
			return nil, err
		}
	}
	for _, name := range slices.Sorted(maps.Keys(p.Env)) {
		if err := checkMCPEnv(env.MCPEnv, name); err != nil {
			return nil, err
		}
	}
	m := &MCP{env: env, flow: flowOf(b), command: p.Command, args: p.Args, envVars: p.Env, url: p.URL, headers: p.Headers, allow: p.Tools,
		prefix: p.ToolPrefix, timeout: p.Timeout.D(), ttl: nodeCacheTTL(b)}
	if b.Node != nil {
		m.node = b.Node.ID
	}
	if m.timeout <= 0 {
		m.timeout = 60 * time.Second
	}
	// The server's identity: what makes two nodes the same server, secrets by name.
	// Workspaces never share a server: one connected with a workspace's secrets
	// serves that workspace's flows only.
	id := map[string]any{"command": p.Command, "args": p.Args, "workspace": flows.WorkspaceOf(m.flow)}
	if p.URL != nil {
		id["url"] = p.URL.identity()
	}
	envID, headerID := map[string]string{}, map[string]string{}
	for k, v := range p.Env {
		envID[k] = v.identity()
	}
	for k, v := range p.Headers {
		headerID[http.CanonicalHeaderKey(k)] = v.identity()
	}
	id["env"], id["headers"] = envID, headerID
	canon, _ := json.Marshal(id)
	sum := sha256.Sum256(canon)
	m.key = hex.EncodeToString(sum[:16])
	// As one of the agent's tools, the node stands for its server's tools: this name only
	// has to be unique among the agent's tools; the model never sees it.
	name := "mcp_" + m.node
	if !toolNameRE.MatchString(name) {
		name = "mcp"
	}
	m.def = flows.ToolDef{Name: name, Description: "the tools of an MCP server", Parameters: json.RawMessage(`{"type": "object"}`)}
	return m, nil
}

// Run refuses: an mcp node only offers tools to an agent.
func (m *MCP) Run(_ context.Context, s *flows.Step) (*flows.Result, error) {
	return nil, flows.Permanent(&flows.Error{Code: flows.Invalid, Node: s.Node,
		Message: "an mcp node is not a step: attach its tool port to an agent's tools port"})
}

// ToolDef stands for the server's tools at compile time.
func (m *MCP) ToolDef() flows.ToolDef { return m.def }

// Call is never used: the agent calls the server's tools through CallTool.
func (m *MCP) Call(ctx context.Context, s *flows.Step, args json.RawMessage) (any, error) {
	return nil, fmt.Errorf("call one of the server's tools")
}

// mcpTool is one of the server's tools as the model sees it.
type mcpTool struct {
	def    flows.ToolDef
	remote string // the server's name for it
}

// Tools lists the server's tools (those allowed) as the model sees them.
func (m *MCP) Tools(ctx context.Context, s *flows.Step) ([]flows.ToolDef, error) {
	tools, err := m.list(ctx, s.Node)
	if err != nil {
		return nil, err
	}
	defs := make([]flows.ToolDef, len(tools))
	for i, t := range tools {
		defs[i] = t.def
	}
	return defs, nil
}

var badToolChars = regexp.MustCompile(`[^a-zA-Z0-9_-]`)

// list returns the server's allowed tools, named for the model.
func (m *MCP) list(ctx context.Context, node string) ([]mcpTool, error) {
	raw, err := m.conn().tools(ctx, m, node)
	if err != nil {
		return nil, err
	}
	var out []mcpTool
	for _, t := range raw {
		if m.allow != nil && !slices.Contains(m.allow, t.Name) {
			continue
		}
		name := badToolChars.ReplaceAllString(m.prefix+t.Name, "_")
		if len(name) > 64 {
			name = name[:64]
		}
		schema, _ := json.Marshal(t.InputSchema)
		if len(schema) == 0 || string(schema) == "null" {
			schema = json.RawMessage(`{"type": "object", "properties": {}}`)
		}
		desc := t.Description
		if desc == "" {
			desc = t.Title
		}
		desc = m.env.Secrets.In(flows.WorkspaceOf(m.flow)).Redact(desc) // it goes to the model, like a result
		out = append(out, mcpTool{def: flows.ToolDef{Name: name, Description: desc, Parameters: schema}, remote: t.Name})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].def.Name < out[j].def.Name })
	return out, nil
}

// CallTool calls the server's tool that the model knows as name.
func (m *MCP) CallTool(ctx context.Context, s *flows.Step, name string, args json.RawMessage) (any, error) {
	tools, err := m.list(ctx, s.Node)
	if err != nil {
		return nil, err
	}
	remote := ""
	for _, t := range tools {
		if t.def.Name == name {
			remote = t.remote
		}
	}
	if remote == "" {
		return nil, fmt.Errorf("the MCP server has no tool %q (any more)", name)
	}
	var argv any
	if err := json.Unmarshal(args, &argv); err != nil {
		return nil, fmt.Errorf("the arguments are not JSON: %v", err)
	}
	if _, ok := argv.(map[string]any); !ok && argv != nil {
		return nil, fmt.Errorf("the arguments must be a JSON object")
	}
	key := cacheKey("mcp", s.Version, map[string]any{"server": m.key, "tool": remote, "args": argv})
	b, _, err := m.env.cached(ctx, s, key, m.ttl, func(ctx context.Context) ([]byte, error) {
		text, err := m.conn().call(ctx, m, s.Node, remote, argv, s.IdempotencyKey(ctx))
		if err != nil {
			return nil, err
		}
		// A secret the server echoes is redacted before the result is cached or handed
		// to the model, as the http component does with responses.
		return json.Marshal(m.env.Secrets.In(flows.WorkspaceOf(m.flow)).Redact(text))
	})
	if err != nil {
		return nil, err
	}
	var text string
	if err := json.Unmarshal(b, &text); err != nil {
		return nil, fmt.Errorf("cached MCP result: %v", err)
	}
	return text, nil
}

// MCPIdempotencyMeta is the _meta member of a tools/call that carries the call's
// idempotency key (flows.Step.IdempotencyKey): the same for every attempt of the step.
const MCPIdempotencyMeta = "sluice/idempotency-key"

// mcpToolError is a tool's own error (isError): it goes back to the model. Its text is
// redacted (newToolError), as a result is.
type mcpToolError struct{ text string }

func (m *MCP) toolError(text string) *mcpToolError {
	return &mcpToolError{text: m.env.Secrets.In(flows.WorkspaceOf(m.flow)).Redact(text)}
}

func (e *mcpToolError) Error() string { return e.text }

// resultText is a tool result as the model reads it: its text content, structured
// content as JSON when there is no text, and a note for content it cannot show.
func resultText(r *mcp.CallToolResult) string {
	var parts []string
	for _, c := range r.Content {
		switch c := c.(type) {
		case *mcp.TextContent:
			parts = append(parts, c.Text)
		case *mcp.ImageContent:
			parts = append(parts, fmt.Sprintf("[image, %s, %d bytes]", c.MIMEType, len(c.Data)))
		case *mcp.AudioContent:
			parts = append(parts, fmt.Sprintf("[audio, %s, %d bytes]", c.MIMEType, len(c.Data)))
		case *mcp.ResourceLink:
			parts = append(parts, fmt.Sprintf("[resource %s: %s]", c.Name, c.URI))
		case *mcp.EmbeddedResource:
			if c.Resource != nil && c.Resource.Text != "" {
				parts = append(parts, c.Resource.Text)
			} else if c.Resource != nil {
				parts = append(parts, fmt.Sprintf("[resource %s]", c.Resource.URI))
			}
		}
	}
	if len(parts) == 0 && r.StructuredContent != nil {
		b, _ := json.Marshal(r.StructuredContent)
		parts = append(parts, string(b))
	}
	return strings.Join(parts, "\n")
}

// mcpConnection is this process's connection to one MCP server, shared by every node
// and step that names the same server. It connects on first use and again after a
// transport failure, and closes when it has been idle for Env.MCPIdle (a stdio
// server's process stops then).
type mcpConnection struct {
	env     *Env
	stdio   bool
	mu      sync.Mutex
	session *mcp.ClientSession
	cached  []*mcp.Tool // the server's tools; nil: ask
	stderr  *tailBuffer
	idle    *time.Timer

	// Read without mu by the pool (Env.mcpRoom), which never holds a connection's mu.
	open atomic.Bool  // a session is open
	busy atomic.Int32 // calls and listings under way
	used atomic.Int64 // when the last one ended, unix nanoseconds
}

// DefaultMCPIdle and DefaultMCPServers bound the MCP connections a process keeps:
// one idle that long is closed, and at most that many stdio servers run at once.
const (
	DefaultMCPIdle    = 5 * time.Minute
	DefaultMCPServers = 32
)

func (e *Env) mcpConn(key string) *mcpConnection {
	if c, ok := e.mcps.Load(key); ok {
		return c.(*mcpConnection)
	}
	c, _ := e.mcps.LoadOrStore(key, &mcpConnection{env: e})
	return c.(*mcpConnection)
}

// begin marks the connection in use; end, no longer, and arms the idle timer.
func (c *mcpConnection) begin() {
	c.busy.Add(1)
	c.mu.Lock()
	if c.idle != nil {
		c.idle.Stop()
		c.idle = nil
	}
	c.mu.Unlock()
}

func (c *mcpConnection) end() {
	c.used.Store(time.Now().UnixNano())
	if c.busy.Add(-1) > 0 {
		return
	}
	idle := c.env.MCPIdle
	if idle == 0 {
		idle = DefaultMCPIdle
	}
	if idle < 0 {
		return
	}
	c.mu.Lock()
	if c.session != nil && c.idle == nil {
		c.idle = time.AfterFunc(idle, func() { c.closeIdle() })
	}
	c.mu.Unlock()
}

// closeIdle closes the session unless a call or listing is under way; it reports
// whether it did.
func (c *mcpConnection) closeIdle() bool {
	c.mu.Lock()
	if c.busy.Load() > 0 || c.session == nil {
		c.mu.Unlock()
		return false
	}
	s := c.session
	c.session, c.cached, c.idle = nil, nil, nil
	c.open.Store(false)
	c.mu.Unlock()
	_ = s.Close()
	return true
}

// mcpRoom makes room for one more stdio server: when MCPServers are running, the one
// idle the longest is stopped; when none is idle, the step fails and is retried.
func (e *Env) mcpRoom(node string) error {
	limit := e.MCPServers
	if limit <= 0 {
		limit = DefaultMCPServers
	}
	for range 3 {
		var running int
		var victim *mcpConnection
		e.mcps.Range(func(_, v any) bool {
			c := v.(*mcpConnection)
			if !c.stdio || !c.open.Load() {
				return true
			}
			running++
			if c.busy.Load() == 0 && (victim == nil || c.used.Load() < victim.used.Load()) {
				victim = c
			}
			return true
		})
		if running < limit {
			return nil
		}
		if victim == nil {
			break
		}
		victim.closeIdle()
	}
	return failStep(&flows.Error{Code: flows.Unavailable, Node: node,
		Message: fmt.Sprintf("this process already runs %d stdio MCP servers, all of them busy; the step is retried", limit)})
}

// transportError fails the step (it is retried): the server could not be reached, or
// the connection broke. The connection is dropped, so the next attempt connects again.
func (c *mcpConnection) transportError(m *MCP, node string, s *mcp.ClientSession, err error) error {
	c.mu.Lock()
	if c.session == s {
		c.session, c.cached = nil, nil
		c.open.Store(false)
	}
	c.mu.Unlock()
	if s != nil {
		go s.Close()
	}
	msg := fmt.Sprintf("MCP server %s: %v", m.describe(), err)
	return failStep(&flows.Error{Code: flows.Unavailable, Node: node, Message: m.withStderr(c, msg)})
}

// withStderr adds the end of a stdio server's stderr to msg, and redacts the whole: a
// server that prints its environment (a token the node passed) must not put it in an
// error, a log line or an HTTP answer.
func (m *MCP) withStderr(c *mcpConnection, msg string) string {
	if tail := c.stderr.String(); m.command != "" && tail != "" {
		msg += "; its stderr ends: " + truncateText(tail, 300)
	}
	return m.env.Secrets.In(flows.WorkspaceOf(m.flow)).Redact(msg)
}

// describe names the server without secrets.
func (m *MCP) describe() string {
	if m.command != "" {
		return fmt.Sprintf("%q", m.command)
	}
	if m.url.env != "" {
		return "at $" + m.url.env
	}
	if u, err := url.Parse(m.url.literal); err == nil {
		return redact(u)
	}
	return "at its url"
}

// connect returns the open session, connecting when there is none.
func (c *mcpConnection) connect(ctx context.Context, m *MCP, node string) (*mcp.ClientSession, error) {
	c.mu.Lock()
	if s := c.session; s != nil {
		c.mu.Unlock()
		return s, nil
	}
	c.mu.Unlock()
	if m.command != "" && m.private == nil {
		// Without any connection's lock: making room may close another one.
		if err := m.env.mcpRoom(node); err != nil {
			return nil, err
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.session != nil {
		return c.session, nil
	}
	var t mcp.Transport
	if m.command != "" {
		c.stdio = true
		cmd := exec.Command(m.command, m.args...)
		cmd.Env = childEnv()
		for k, v := range m.envVars {
			s, err := v.resolve(m.env, m.flow, node, "params.env."+k)
			if err != nil {
				return nil, err
			}
			cmd.Env = append(cmd.Env, k+"="+s)
		}
		c.stderr = &tailBuffer{max: 4096}
		cmd.Stderr = c.stderr
		t = &mcp.CommandTransport{Command: cmd, TerminateDuration: 2 * time.Second}
	} else {
		raw, err := m.url.resolve(m.env, m.flow, node, "params.url")
		if err != nil {
			return nil, err
		}
		u, err := url.Parse(raw)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, flows.Permanent(&flows.Error{Code: flows.Invalid, Node: node, Path: "params.url", Message: "the MCP server's url is not an http(s) URL"})
		}
		if err := m.env.HTTP.CheckURL(u); err != nil {
			return nil, flows.Permanent(&flows.Error{Code: flows.Forbidden, Node: node, Path: "params.url", Message: fmt.Sprintf("MCP server %s: %v", redact(u), err)})
		}
		h := http.Header{}
		for k, v := range m.headers {
			s, err := v.resolve(m.env, m.flow, node, "params.headers."+k)
			if err != nil {
				return nil, err
			}
			h.Set(k, s)
		}
		guarded := m.env.httpClient()
		hc := *guarded
		hc.Transport = &headerTransport{next: guarded.Transport, headers: h}
		t = &mcp.StreamableClientTransport{Endpoint: raw, HTTPClient: &hc, MaxRetries: 1}
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "sluice", Version: "1"}, &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
			c.mu.Lock()
			c.cached = nil
			c.mu.Unlock()
		},
	})
	cctx, cancel := context.WithTimeout(ctx, m.timeout)
	defer cancel()
	s, err := client.Connect(cctx, t, nil)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if errors.Is(err, ErrForbiddenAddress) {
			return nil, flows.Permanent(&flows.Error{Code: flows.Forbidden, Node: node, Path: "params.url", Message: fmt.Sprintf("MCP server %s: %v", m.describe(), err)})
		}
		msg := fmt.Sprintf("cannot connect to the MCP server %s: %v", m.describe(), err)
		return nil, failStep(&flows.Error{Code: flows.Unavailable, Node: node, Message: m.withStderr(c, msg)})
	}
	c.session, c.cached = s, nil
	c.open.Store(true)
	return s, nil
}

// tools returns the server's tools, listed once per connection (and again when the
// server says they changed).
func (c *mcpConnection) tools(ctx context.Context, m *MCP, node string) ([]*mcp.Tool, error) {
	c.begin()
	defer c.end()
	s, err := c.connect(ctx, m, node)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	cached := c.cached
	c.mu.Unlock()
	if cached != nil {
		return cached, nil
	}
	lctx, cancel := context.WithTimeout(ctx, m.timeout)
	defer cancel()
	var tools []*mcp.Tool
	for t, err := range s.Tools(lctx, nil) {
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			return nil, c.transportError(m, node, s, fmt.Errorf("listing its tools: %w", err))
		}
		tools = append(tools, t)
	}
	if tools == nil {
		tools = []*mcp.Tool{}
	}
	c.mu.Lock()
	if c.session == s {
		c.cached = tools
	}
	c.mu.Unlock()
	return tools, nil
}

// call calls a tool and returns its result's text. A tool's error and the server's
// refusal of the call are errors the model gets as the result; a broken connection
// fails the step.
func (c *mcpConnection) call(ctx context.Context, m *MCP, node, tool string, args any, key string) (string, error) {
	c.begin()
	defer c.end()
	s, err := c.connect(ctx, m, node)
	if err != nil {
		return "", err
	}
	cctx, cancel := context.WithTimeout(ctx, m.timeout)
	defer cancel()
	res, err := s.CallTool(cctx, &mcp.CallToolParams{Name: tool, Arguments: args, Meta: mcp.Meta{MCPIdempotencyMeta: key}})
	if err != nil {
		var rpcErr *jsonrpc.Error
		switch {
		case ctx.Err() != nil:
			return "", ctx.Err()
		case errors.As(err, &rpcErr):
			return "", m.toolError(fmt.Sprintf("the MCP server refused the call: %s", rpcErr.Message))
		case cctx.Err() != nil:
			return "", m.toolError(fmt.Sprintf("the tool did not answer within %s", m.timeout))
		}
		return "", c.transportError(m, node, s, err)
	}
	text := resultText(res)
	if res.IsError {
		if text == "" {
			text = "the tool failed"
		}
		return "", m.toolError(text)
	}
	return text, nil
}

// closeMCP closes every connection (stdio servers are stopped).
func (e *Env) closeMCP() {
	e.mcps.Range(func(k, v any) bool {
		v.(*mcpConnection).close()
		return true
	})
}

// close closes the session, busy or not.
func (c *mcpConnection) close() {
	c.mu.Lock()
	s := c.session
	c.session, c.cached = nil, nil
	if c.idle != nil {
		c.idle.Stop()
		c.idle = nil
	}
	c.open.Store(false)
	c.mu.Unlock()
	if s != nil {
		_ = s.Close()
	}
}

// childEnv is what a stdio MCP server inherits of the worker's environment: where
// programs are and where home is, nothing that could hold a secret.
func childEnv() []string {
	var out []string
	for _, k := range []string{"PATH", "HOME", "LANG", "TMPDIR"} {
		if v, ok := os.LookupEnv(k); ok {
			out = append(out, k+"="+v)
		}
	}
	return out
}

// headerTransport adds the node's headers to every request to an MCP server.
type headerTransport struct {
	next    http.RoundTripper
	headers http.Header
}

func (t *headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range t.headers {
		r.Header[k] = v
	}
	return t.next.RoundTrip(r)
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if len(t.b) > t.max {
		t.b = t.b[len(t.b)-t.max:]
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	if t == nil {
		return ""
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(bytes.TrimSpace(t.b))
}

// MCPTools lists the tools an mcp node with these params offers (for the editor's
// inspector): connecting as a worker of workspace ws's flows would, with this process's
// allow-lists and the secrets ws may read.
func (e *Env) MCPTools(ctx context.Context, ws string, params json.RawMessage) ([]flows.ToolDef, error) {
	e.init()
	spec := mcpSpec(e)
	reg := flows.NewRegistry()
	reg.Register(spec)
	sp, _ := reg.Lookup("mcp")
	p, err := sp.WithDefaults(params)
	if err != nil {
		return nil, &flows.Error{Code: flows.Invalid, Path: "params", Message: err.Error()}
	}
	if err := sp.CheckParams(p); err != nil {
		return nil, err
	}
	c, err := sp.New(&flows.Build{Flow: &flows.Document{ID: flows.InWorkspace(ws, "inspect")}, Node: &flows.Node{ID: "inspect", Type: "mcp"}, Params: p})
	if err != nil {
		return nil, err
	}
	// The inspector's connection is its own and is closed when the listing is done: a
	// server started for the editor must not outlive the request (nor count against
	// the workers' servers).
	m := c.(*MCP)
	m.private = &mcpConnection{env: e}
	defer m.private.close()
	tools, err := m.list(ctx, "")
	if err != nil {
		return nil, err
	}
	defs := make([]flows.ToolDef, len(tools))
	for i, t := range tools {
		defs[i] = t.def
	}
	return defs, nil
}

var (
	_ flows.Component = (*MCP)(nil)
	_ flows.Tool      = (*MCP)(nil)
	_ toolSet         = (*MCP)(nil)
)
