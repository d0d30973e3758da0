package nodes

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/sluicehq/sluice/flows"
)

// Memory keeps what the memory components remember between runs: conversations by
// session and the long-term store's items. store.Memory implements it on Redis. A scope
// is "f:FLOW" (a flow's own) or "s:NAME" (shared by every flow of its workspace naming
// it: scopeOf).
type Memory interface {
	// AppendHistory appends messages to a session and keeps it ttl (0: for ever).
	AppendHistory(ctx context.Context, scope, session string, msgs []flows.HistoryMessage, ttl time.Duration) error
	// LoadHistory returns a session's summary and its newest last messages (0: all);
	// ttl > 0 keeps them that long from now.
	LoadHistory(ctx context.Context, scope, session string, last int, ttl time.Duration) (*flows.History, error)
	// Summarize replaces the messages up to through by summary; false when a summary as
	// recent was stored meanwhile.
	Summarize(ctx context.Context, scope, session, summary string, through int64, ttl time.Duration) (bool, error)
	// ClearHistory forgets a session.
	ClearHistory(ctx context.Context, scope, session string) error

	// PutItem stores an item for ttl (0: for ever).
	PutItem(ctx context.Context, scope string, item flows.StoreItem, ttl time.Duration) error
	// GetItem returns an item or nil; refresh > 0 restarts its time to live.
	GetItem(ctx context.Context, scope string, ns []string, key string, refresh time.Duration) (*flows.StoreItem, error)
	// ListItems returns up to max items whose namespace starts with prefix.
	ListItems(ctx context.Context, scope string, prefix []string, max int, refresh time.Duration) ([]flows.StoreItem, error)
	// DeleteItem deletes an item; false when there was none.
	DeleteItem(ctx context.Context, scope string, ns []string, key string) (bool, error)
}

// sharedParam names a scope shared between flows, for the components that keep data.
const sharedParam = `
	"shared": {"type": "string", "pattern": "^[a-z0-9][a-z0-9_-]{0,63}$", "description": "Keep the data in this shared scope, which every flow of this workspace naming it reads and writes; left out, the data is this flow's own."}`

// scopeOf is where a node's data lives: the flow's own scope, or the shared one it
// names. A shared scope is its workspace's: "s:NAME" in the default workspace (as before
// workspaces), "s:WS.NAME" in workspace WS, so the flows of one workspace share it and
// another's naming the same scope see none of it (docs/teams.md). A name holds no '.',
// so the two never meet.
func scopeOf(flow, shared string) string {
	if shared != "" {
		return "s:" + flows.InWorkspace(flows.WorkspaceOf(flow), shared)
	}
	return "f:" + flow
}

// atPath moves a parameter's error to path (a nested parameter's).
func atPath(err error, path string) error {
	var fe *flows.Error
	if errors.As(err, &fe) {
		c := *fe
		c.Path = path
		return &c
	}
	return err
}

// noRedis is the error of a step that needs what this process was not given.
func noRedis(node, what string) error {
	return flows.Permanent(&flows.Error{Code: flows.Unavailable, Node: node,
		Message: what + " needs Redis, which this process was not given (a worker, serve and run have it)"})
}

func memorySpec(env *Env) flows.Spec {
	return flows.Spec{
		Name:     "memory",
		Title:    "Conversation memory",
		Category: "data",
		Description: "The history of a conversation, kept in Redis by session id (a template over the state, such as " +
			"{{.session_id}}) so that a chat continues across runs. operation load stores the recent messages under \"as\" " +
			"as a list of {role, content} — the newest max_messages, fewer when max_tokens would be exceeded — which an llm " +
			"or agent node takes as its history; append adds the messages its jq expression makes (such as the user's " +
			"message and the model's reply); clear forgets the session. With summarize, a history longer than " +
			"summarize.after messages has everything older than the window summarised by the named model, and the summary " +
			"comes first in what load returns as a system message. A session is kept for ttl after its last use. " +
			"Attached to an agent's tools port it lets the model look through the whole conversation (query, limit).",
		Ports: []flows.Port{inPort, outPort, toolPort},
		Params: json.RawMessage(`{
			"type": "object", "additionalProperties": false, "required": ["session"],
			"properties": {
				"operation": {"enum": ["load", "append", "clear"], "default": "load", "description": "What a step does: load the recent messages, append messages, or clear the session."},
				"session": {"type": "string", "format": "template", "description": "The conversation's id, a template over the node's input, e.g. {{.session_id}}."},` + sharedParam + `,
				"messages": {"type": "string", "format": "jq", "description": "append: jq making the message or list of messages ({role, content}) to append, e.g. [{role: \"user\", content: .message}, {role: \"assistant\", content: .reply}]."},
				"max_messages": {"type": "integer", "minimum": 1, "maximum": 1000, "default": 20, "description": "load: the most recent messages returned."},
				"max_tokens": {"type": "integer", "minimum": 1, "description": "load: the returned messages (the summary included) stay within this many tokens (cl100k_base)."},
				"summarize": {"type": "object", "additionalProperties": false, "required": ["model"], "description": "load: summarise what is older than the window once the history is longer than after.",
					"properties": {
						"provider": {"type": "string", "default": "default", "description": "LLM provider configured on the server."},
						"model": {"type": "string", "minLength": 1, "description": "The model that writes the summary."},
						"after": {"type": "integer", "minimum": 2, "default": 40, "description": "Summarise once the session holds more than this many messages."},
						"instructions": {"type": "string", "description": "What the summary keeps; default: facts, decisions, names and open questions."}
					}},
				"ttl": {"type": "string", "format": "duration", "default": "720h", "description": "How long a session is kept after its last use; 0s keeps it for ever."},
				"as": {"type": "string", "pattern": "^[A-Za-z_][A-Za-z0-9_]*$", "default": "history", "description": "load: state key the messages are stored under."},` + toolParams + `
			}
		}`),
		Example: json.RawMessage(`{"operation": "load", "session": "{{.session_id}}", "max_messages": 20, "summarize": {"model": "gpt-4o-mini", "after": 40}}`),
		New:     func(b *flows.Build) (flows.Component, error) { return newMemory(env, b) },
	}
}

// MemoryNode loads, appends to or clears a conversation.
type MemoryNode struct {
	env       *Env
	op        string
	session   *flows.Template
	shared    string
	messages  *flows.JQ
	max       int
	maxTokens int
	summarize *summarizeConfig
	ttl       time.Duration
	as        string
	def       flows.ToolDef
	budget    budget
}

type summarizeConfig struct {
	Provider     string `json:"provider"`
	Model        string `json:"model"`
	After        int    `json:"after"`
	Instructions string `json:"instructions"`
}

var memoryToolArgs = json.RawMessage(`{"type": "object", "additionalProperties": false,
	"properties": {"query": {"type": "string", "description": "Only messages containing this text (any case)."},
	               "limit": {"type": "integer", "minimum": 1, "maximum": 200, "description": "The most recent messages returned (default 20)."}}}`)

func newMemory(env *Env, b *flows.Build) (flows.Component, error) {
	var p struct {
		toolConfig
		Operation   string           `json:"operation"`
		Session     string           `json:"session"`
		Shared      string           `json:"shared"`
		Messages    string           `json:"messages"`
		MaxMessages int              `json:"max_messages"`
		MaxTokens   int              `json:"max_tokens"`
		Summarize   *summarizeConfig `json:"summarize"`
		TTL         flows.Duration   `json:"ttl"`
		As          string           `json:"as"`
	}
	if err := b.Decode(&p); err != nil {
		return nil, err
	}
	m := &MemoryNode{env: env, op: p.Operation, shared: p.Shared, max: p.MaxMessages, maxTokens: p.MaxTokens, ttl: p.TTL.D(), as: p.As, budget: newBudget(b)}
	var err error
	if m.session, err = flows.ParseTemplate(p.Session); err != nil {
		return nil, &flows.Error{Code: flows.Invalid, Path: "params.session", Err: err}
	}
	switch {
	case p.Messages != "":
		if m.messages, err = flows.CompileJQ(p.Messages); err != nil {
			return nil, &flows.Error{Code: flows.Invalid, Path: "params.messages", Err: err}
		}
	case p.Operation == "append":
		return nil, &flows.Error{Code: flows.Invalid, Path: "params.messages", Message: "append needs messages: jq making the messages to append"}
	}
	if p.Summarize != nil {
		s := *p.Summarize
		if s.Provider == "" {
			s.Provider = DefaultProvider
		}
		if s.After == 0 {
			s.After = 40
		}
		if _, err := env.providerIn(flowOf(b), s.Provider); err != nil {
			return nil, atPath(err, "params.summarize.provider")
		}
		if s.After <= m.max {
			return nil, &flows.Error{Code: flows.Invalid, Path: "params.summarize.after",
				Message: fmt.Sprintf("summarize.after (%d) must be more than max_messages (%d): the messages in the window are never summarised", s.After, m.max)}
		}
		m.summarize = &s
	}
	p.ToolParameters = nil
	m.def = p.def(b, "Look through the earlier messages of this conversation: the newest ones, or those containing a text.", memoryToolArgs)
	return m, nil
}

// sessionOf renders the session id over data.
func (m *MemoryNode) sessionOf(ctx context.Context, node string, data any) (string, error) {
	id, err := m.session.Execute(ctx, data)
	if err != nil {
		return "", templateError(node, "params.session", err)
	}
	id = strings.TrimSpace(id)
	if id == "" || len(id) > 256 {
		return "", flows.Permanent(&flows.Error{Code: flows.Invalid, Node: node, Path: "params.session",
			Message: fmt.Sprintf("the session id is %d characters; it must be 1 to 256 (does the input carry it?)", len(id))})
	}
	return id, nil
}

// Run loads, appends or clears.
func (m *MemoryNode) Run(ctx context.Context, s *flows.Step) (*flows.Result, error) {
	if m.env.Memory == nil {
		return nil, noRedis(s.Node, "conversation memory")
	}
	session, err := m.sessionOf(ctx, s.Node, s.Input)
	if err != nil {
		return nil, err
	}
	scope := scopeOf(s.Flow, m.shared)
	switch m.op {
	case "append":
		msgs, err := m.toAppend(ctx, s)
		if err != nil {
			return nil, err
		}
		if err := m.env.Memory.AppendHistory(ctx, scope, session, msgs, m.ttl); err != nil {
			return nil, err
		}
		return &flows.Result{Output: map[string]any{"session": session, "appended": len(msgs)}}, nil
	case "clear":
		if err := m.env.Memory.ClearHistory(ctx, scope, session); err != nil {
			return nil, err
		}
		return &flows.Result{Output: map[string]any{"session": session, "cleared": true}}, nil
	}
	msgs, usage, err := m.load(ctx, s, scope, session)
	if err != nil {
		return nil, err
	}
	return &flows.Result{Output: msgs, Update: map[string]any{m.as: msgs}, Usage: usage}, nil
}

// toAppend evaluates the messages expression: one {role, content} or a list of them.
func (m *MemoryNode) toAppend(ctx context.Context, s *flows.Step) ([]flows.HistoryMessage, error) {
	bad := func(msg string) error {
		return flows.Permanent(&flows.Error{Code: flows.Invalid, Node: s.Node, Path: "params.messages", Message: msg})
	}
	v, err := m.messages.First(ctx, s.Input, s.State)
	if err != nil {
		return nil, flows.Permanent(&flows.Error{Code: flows.Invalid, Node: s.Node, Path: "params.messages", Err: err})
	}
	list, ok := v.([]any)
	if !ok {
		list = []any{v}
	}
	var out []flows.HistoryMessage
	for i, x := range list {
		o, ok := x.(map[string]any)
		if !ok {
			return nil, bad(fmt.Sprintf("message %d is %s, not an object {role, content}", i, flows.TypeName(x)))
		}
		role, _ := o["role"].(string)
		switch role {
		case "user", "assistant", "system":
		default:
			return nil, bad(fmt.Sprintf("message %d has role %q; want user, assistant or system", i, role))
		}
		var content string
		switch c := o["content"].(type) {
		case string:
			content = c
		case nil:
		default:
			b, _ := json.Marshal(flows.JSONValue(c))
			content = string(b)
		}
		out = append(out, flows.HistoryMessage{Role: role, Content: content})
	}
	return out, nil
}

// summaryPrefix starts the system message that brings the summary to a model.
const summaryPrefix = "Summary of the conversation so far: "

// load returns the window of recent messages, summarising first when the session has
// grown past summarize.after.
func (m *MemoryNode) load(ctx context.Context, s *flows.Step, scope, session string) ([]any, flows.Usage, error) {
	// Only the window is read, unless the session may need summarising: then all of it
	// (a summarised session holds little more than its window).
	last := m.max
	if m.summarize != nil {
		last = 0
	}
	h, err := m.env.Memory.LoadHistory(ctx, scope, session, last, m.ttl)
	if err != nil {
		return nil, flows.Usage{}, err
	}
	var usage flows.Usage
	if m.summarize != nil && len(h.Messages) > m.summarize.After {
		older := h.Messages[:len(h.Messages)-m.max]
		text, u, err := m.summarise(ctx, s, h.Summary, older)
		if err != nil {
			return nil, flows.Usage{}, err
		}
		usage = u
		through := older[len(older)-1].Seq
		if _, err := m.env.Memory.Summarize(ctx, scope, session, text, through, m.ttl); err != nil {
			return nil, flows.Usage{}, err
		}
		h.Summary, h.Through, h.Messages = text, through, h.Messages[len(older):]
	}
	window := h.Messages
	if len(window) > m.max {
		window = window[len(window)-m.max:]
	}
	var summary []any
	budget := m.maxTokens
	if h.Summary != "" {
		msg := map[string]any{"role": "system", "content": summaryPrefix + h.Summary}
		summary = []any{msg}
		if budget > 0 {
			n, err := messageTokens("system", summaryPrefix+h.Summary)
			if err != nil {
				return nil, flows.Usage{}, err
			}
			budget -= n
		}
	}
	start := 0
	if m.maxTokens > 0 {
		start = len(window)
		for start > 0 {
			n, err := messageTokens(window[start-1].Role, window[start-1].Content)
			if err != nil {
				return nil, flows.Usage{}, err
			}
			if n > budget {
				break
			}
			budget -= n
			start--
		}
	}
	out := summary
	if out == nil {
		out = []any{}
	}
	for _, msg := range window[start:] {
		out = append(out, map[string]any{"role": msg.Role, "content": msg.Content})
	}
	return out, usage, nil
}

// messageTokens counts a message as chat models do: its text plus a few tokens of
// framing (role and separators).
func messageTokens(role, content string) (int, error) {
	n, err := countTokens(content)
	return n + 4, err
}

const defaultSummaryInstructions = "Keep the facts, decisions, names, numbers and open questions; drop pleasantries. Write it in the third person, in at most 200 words."

// summarise asks the summarize model for a summary of the previous summary and older.
func (m *MemoryNode) summarise(ctx context.Context, s *flows.Step, previous string, older []flows.HistoryMessage) (string, flows.Usage, error) {
	instructions := m.summarize.Instructions
	if instructions == "" {
		instructions = defaultSummaryInstructions
	}
	var b strings.Builder
	if previous != "" {
		b.WriteString("The summary so far:\n" + previous + "\n\nWhat was said after it:\n")
	}
	for _, msg := range older {
		b.WriteString(msg.Role + ": " + msg.Content + "\n")
	}
	req := &chatRequest{Provider: m.summarize.Provider, Model: m.summarize.Model, Messages: []chatMessage{
		{Role: "system", Content: "You summarise a conversation so that it can go on without its earlier messages. " + instructions},
		{Role: "user", Content: b.String()},
	}}
	reply, _, err := m.env.chat(ctx, s, req, chatOptions{component: "memory", budget: m.budget})
	if err != nil {
		return "", flows.Usage{}, err
	}
	text := strings.TrimSpace(reply.Message.Content)
	if text == "" {
		return "", flows.Usage{}, &flows.Error{Code: flows.Unavailable, Node: s.Node, Path: "params.summarize.model", Message: "the model wrote an empty summary"}
	}
	return text, reply.Usage, nil
}

// ToolDef offers the conversation to a model.
func (m *MemoryNode) ToolDef() flows.ToolDef { return m.def }

// Call returns the newest messages of the session (over the run's state), or those
// that contain the query.
func (m *MemoryNode) Call(ctx context.Context, s *flows.Step, args json.RawMessage) (any, error) {
	if m.env.Memory == nil {
		return nil, failStep(noRedis(s.Node, "conversation memory"))
	}
	var a struct {
		Query string `json:"query"`
		Limit int    `json:"limit"`
	}
	if err := json.Unmarshal(args, &a); err != nil {
		return nil, fmt.Errorf(`call it with {"query": "text", "limit": 20}: %v`, err)
	}
	if a.Limit <= 0 || a.Limit > 200 {
		a.Limit = 20
	}
	session, err := m.sessionOf(ctx, s.Node, s.State)
	if err != nil {
		return nil, failStep(err)
	}
	h, err := m.env.Memory.LoadHistory(ctx, scopeOf(s.Flow, m.shared), session, 0, m.ttl)
	if err != nil {
		return nil, failStep(err)
	}
	q := strings.ToLower(a.Query)
	var found []flows.HistoryMessage
	for _, msg := range h.Messages {
		if q == "" || strings.Contains(strings.ToLower(msg.Content), q) {
			found = append(found, msg)
		}
	}
	if len(found) > a.Limit {
		found = found[len(found)-a.Limit:]
	}
	out := map[string]any{"messages": found}
	if h.Summary != "" {
		out["summary"] = h.Summary
	}
	return out, nil
}

var (
	_ flows.Component = (*MemoryNode)(nil)
	_ flows.Tool      = (*MemoryNode)(nil)
)
