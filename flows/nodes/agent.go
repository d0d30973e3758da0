package nodes

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/sluicehq/sluice/flows"
)

// ToolsPort is the agent's input port that tools attach to.
const ToolsPort = "tools"

func agentSpec(env *Env) flows.Spec {
	return flows.Spec{
		Name:     "agent",
		Title:    "Agent",
		Category: "ai",
		Description: "A model with tools: the nodes attached to its tools port (http, data, subflow, and each tool of an " +
			"mcp server) are offered to the model as functions, and the agent runs the function-calling loop — model turn, tool calls, model turn — " +
			"until the model answers without calling a tool, or fails after max_iterations model turns. Every model " +
			"turn and every tool result is saved in the run's checkpoint history, so an agent whose worker crashes " +
			"resumes mid-loop on the next attempt without paying for a finished model turn again or repeating a tool call " +
			"with effects; the final answer, and the results of data tools (which only read the state), are saved with " +
			"the step's commit or the next turn instead of one write each. " +
			"The final answer is the output and is stored under \"as\".",
		Ports: []flows.Port{inPort, outPort,
			{Name: ToolsPort, Direction: "in", Type: flows.PortTool, Multiple: true, Description: "tools the model may call"}},
		Params: json.RawMessage(`{
			"type": "object", "additionalProperties": false, "required": ["model", "user"],
			"properties": {` + modelParams + `,
				"system": {"type": "string", "format": "template", "description": "System message template: the agent's role and how to use its tools."},` + historyParam + `,
				"user": {"type": "string", "format": "template", "description": "User message template: the task, e.g. {{.ticket}}"},
				"max_iterations": {"type": "integer", "minimum": 1, "maximum": 100, "default": 10, "description": "Most model turns; an agent still calling tools then fails the step."},
				"json": {"type": "boolean", "default": false, "description": "The final answer is JSON: parse it."},
				"schema": {"type": "object", "format": "json-schema", "description": "JSON Schema the final answer must match (implies json)."},
				"stream": {"type": "boolean", "default": false, "description": "Stream the model's replies, publishing tokens to the live view."},
				"as": {"type": "string", "pattern": "^[A-Za-z_][A-Za-z0-9_]*$", "default": "answer", "description": "State key the final answer is stored under."}
			}
		}`),
		Example: json.RawMessage(`{"model": "gpt-4o-mini", "system": "You check labels for FDA compliance. Query the data tool for what you need.", "user": "Check document {{.document_id}}.", "max_iterations": 8, "as": "fda"}`),
		New:     func(b *flows.Build) (flows.Component, error) { return newAgent(env, b) },
	}
}

// Agent runs a model's tool loop.
type Agent struct {
	env     *Env
	model   modelConfig
	system  *flows.Template
	history *flows.JQ
	user    *flows.Template
	max     int
	json    bool
	schema  json.RawMessage
	check   *jsonschema.Schema
	stream  bool
	as      string
	ttl     time.Duration
	budget  budget
}

func newAgent(env *Env, b *flows.Build) (flows.Component, error) {
	var p struct {
		modelConfig
		System        string          `json:"system"`
		History       string          `json:"history"`
		User          string          `json:"user"`
		MaxIterations int             `json:"max_iterations"`
		JSON          bool            `json:"json"`
		Schema        json.RawMessage `json:"schema"`
		Stream        bool            `json:"stream"`
		As            string          `json:"as"`
	}
	if err := b.Decode(&p); err != nil {
		return nil, err
	}
	if _, err := env.providerIn(flowOf(b), p.Provider); err != nil {
		return nil, err
	}
	a := &Agent{env: env, model: p.modelConfig, max: p.MaxIterations, json: p.JSON || len(p.Schema) > 0, schema: p.Schema,
		stream: p.Stream, as: p.As, ttl: nodeCacheTTL(b), budget: newBudget(b)}
	var err error
	if p.System != "" {
		if a.system, err = flows.ParseTemplate(p.System); err != nil {
			return nil, &flows.Error{Code: flows.Invalid, Path: "params.system", Err: err}
		}
	}
	if a.user, err = flows.ParseTemplate(p.User); err != nil {
		return nil, &flows.Error{Code: flows.Invalid, Path: "params.user", Err: err}
	}
	if a.history, err = compileHistory(p.History); err != nil {
		return nil, err
	}
	if len(p.Schema) > 0 {
		if a.check, err = flows.CompileSchema(p.Schema); err != nil {
			return nil, &flows.Error{Code: flows.Invalid, Path: "params.schema", Message: err.Error()}
		}
	}
	return a, nil
}

// agentTurn is what the agent saves after each model reply ("model") and each tool
// result ("tool"); a retried step replays them instead of repeating the work.
type agentTurn struct {
	Kind       string       `json:"kind"`
	Message    *chatMessage `json:"message,omitempty"`
	Usage      flows.Usage  `json:"usage,omitzero"`
	ToolCallID string       `json:"tool_call_id,omitempty"`
	Tool       string       `json:"tool,omitempty"`
	Content    string       `json:"content,omitempty"`
	StateBytes int          `json:"state_bytes,omitempty"`
}

// stateReader marks tools whose results are slices of the run state (data), counted
// in the step's StateBytes.
type stateReader interface{ readsState() }

// Run runs the tool loop, resuming from the turns an earlier attempt saved.
func (a *Agent) Run(ctx context.Context, s *flows.Step) (_ *flows.Result, err error) {
	msgs, shown, err := prompt(ctx, s, a.system, a.history, a.user)
	if err != nil {
		return nil, err
	}
	tools, defs, err := agentTools(ctx, s)
	if err != nil {
		return nil, err
	}

	var usage flows.Usage
	iterations := 0
	for i, raw := range s.Turns {
		var t agentTurn
		if err := json.Unmarshal(raw, &t); err != nil {
			return nil, flows.Permanent(&flows.Error{Code: flows.Invalid, Node: s.Node, Message: fmt.Sprintf("saved turn %d is not an agent turn: %v", i+1, err)})
		}
		switch {
		case t.Kind == "model" && t.Message != nil:
			msgs = append(msgs, *t.Message)
			usage = usage.Add(t.Usage)
			iterations++
		case t.Kind == "tool":
			msgs = append(msgs, chatMessage{Role: "tool", ToolCallID: t.ToolCallID, Content: t.Content})
			shown += t.StateBytes
		}
	}

	// Turns are saved as they come, so that a retried step pays for no model call
	// twice and repeats no tool's effect. The turns after which nothing is paid for or
	// done — a read-only tool's result (it is made again for nothing), the model's
	// final reply — wait in later and go with the step's commit (flows.Result.Turns),
	// or are saved before the next turn that is saved alone, before a tool that may
	// save turns of its own (a subflow's run), and when the step fails (so that its
	// history shows what it failed on): in order, and each one write fewer.
	var later []any
	flush := func() error {
		for len(later) > 0 {
			if err := s.SaveTurn(ctx, later[0]); err != nil {
				return fmt.Errorf("saving the agent's turn: %w", err)
			}
			later = later[1:]
		}
		return nil
	}
	defer func() {
		if err != nil {
			_ = flush()
		}
	}()
	save := func(t agentTurn) error {
		if s.SaveTurn == nil {
			return nil
		}
		if err := flush(); err != nil {
			return err
		}
		if err := s.SaveTurn(ctx, t); err != nil {
			return fmt.Errorf("saving the agent's turn: %w", err)
		}
		return nil
	}
	keep := func(t agentTurn) {
		if s.SaveTurn != nil {
			later = append(later, t)
		}
	}
	for {
		last, pending := pendingCalls(msgs)
		if last != nil && len(pending) == 0 && len(last.ToolCalls) == 0 {
			out, err := decodeOutput(s, last.Content, a.json, a.check)
			if err != nil {
				return nil, err
			}
			return &flows.Result{Output: out, Update: map[string]any{a.as: out}, Usage: usage, StateBytes: shown, Turns: later}, nil
		}
		if len(pending) > 0 {
			for _, call := range pending {
				readOnly := tools[call.Name].state
				if !readOnly {
					if err := flush(); err != nil {
						return nil, err
					}
				}
				content, bytes, err := a.callTool(ctx, s, tools, call)
				if err != nil {
					return nil, err
				}
				shown += bytes
				t := agentTurn{Kind: "tool", ToolCallID: call.ID, Tool: call.Name, Content: content, StateBytes: bytes}
				if readOnly {
					keep(t)
				} else if err := save(t); err != nil {
					return nil, err
				}
				msgs = append(msgs, chatMessage{Role: "tool", ToolCallID: call.ID, Content: content})
			}
			continue
		}
		if iterations >= a.max {
			return nil, flows.Permanent(&flows.Error{Code: flows.Invalid, Node: s.Node, Path: "params.max_iterations",
				Message: fmt.Sprintf("the agent was still calling tools after %d model turns (max_iterations)", a.max)})
		}
		req := a.model.request()
		req.Messages, req.Tools, req.JSON, req.Schema = msgs, defs, a.json, a.schema
		reply, _, err := a.env.chat(ctx, s, req, chatOptions{component: "agent", stream: a.stream, cacheTTL: a.ttl, budget: a.budget})
		if err != nil {
			return nil, err
		}
		iterations++
		usage = usage.Add(reply.Usage)
		m := reply.Message
		for i := range m.ToolCalls {
			if m.ToolCalls[i].ID == "" {
				m.ToolCalls[i].ID = fmt.Sprintf("call_%d_%d", iterations, i)
			}
		}
		if t := (agentTurn{Kind: "model", Message: &m, Usage: reply.Usage}); len(m.ToolCalls) == 0 {
			keep(t)
		} else if err := save(t); err != nil {
			return nil, err
		}
		msgs = append(msgs, m)
	}
}

// pendingCalls returns the last assistant message and those of its tool calls that
// have no result yet.
func pendingCalls(msgs []chatMessage) (*chatMessage, []toolCall) {
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role != "assistant" {
			continue
		}
		answered := map[string]bool{}
		for _, m := range msgs[i+1:] {
			if m.Role == "tool" {
				answered[m.ToolCallID] = true
			}
		}
		var pending []toolCall
		for _, c := range msgs[i].ToolCalls {
			if !answered[c.ID] {
				pending = append(pending, c)
			}
		}
		return &msgs[i], pending
	}
	return nil, nil
}

// agentTool is one tool the model may call: a tool node, or one of a tool set's tools.
type agentTool struct {
	def  flows.ToolDef
	call func(ctx context.Context, s *flows.Step, args json.RawMessage) (any, error)
	// state marks tools whose results are slices of the run state (data).
	state bool
}

// agentTools lists what the model may call, by name: the tool nodes attached to the
// agent, with each tool set (an MCP server) listed as its tools.
func agentTools(ctx context.Context, s *flows.Step) (map[string]agentTool, []flows.ToolDef, error) {
	names := make([]string, 0, len(s.Tools))
	for n := range s.Tools {
		names = append(names, n)
	}
	sort.Strings(names)
	tools := map[string]agentTool{}
	var order []string
	add := func(t agentTool, from string) error {
		if _, dup := tools[t.def.Name]; dup {
			return flows.Permanent(&flows.Error{Code: flows.Invalid, Node: s.Node,
				Message: fmt.Sprintf("two of the agent's tools are named %q (%s is one): give the tool nodes a tool_name or a tool_prefix", t.def.Name, from)})
		}
		tools[t.def.Name] = t
		order = append(order, t.def.Name)
		return nil
	}
	for _, n := range names {
		node := s.Tools[n]
		if set, ok := node.(toolSet); ok {
			defs, err := set.Tools(ctx, s)
			if err != nil {
				var sf *stepFailure
				if errors.As(err, &sf) {
					return nil, nil, sf.err
				}
				return nil, nil, err
			}
			for _, d := range defs {
				name := d.Name
				if err := add(agentTool{def: d, call: func(ctx context.Context, s *flows.Step, args json.RawMessage) (any, error) {
					return set.CallTool(ctx, s, name, args)
				}}, "an MCP server's tool"); err != nil {
					return nil, nil, err
				}
			}
			continue
		}
		_, reads := node.(stateReader)
		if err := add(agentTool{def: node.ToolDef(), call: node.Call, state: reads}, "a tool node"); err != nil {
			return nil, nil, err
		}
	}
	sort.Strings(order)
	defs := make([]flows.ToolDef, len(order))
	for i, n := range order {
		defs[i] = tools[n].def
	}
	return tools, defs, nil
}

// callTool runs one tool call. What the model got wrong (an unknown tool, bad
// arguments) and what the tool failed at go back to the model as the result, so it
// can correct itself; only a cancelled step, or a tool that could not be reached at
// all (an MCP server that is down), fails the step.
func (a *Agent) callTool(ctx context.Context, s *flows.Step, tools map[string]agentTool, call toolCall) (string, int, error) {
	tool, ok := tools[call.Name]
	if !ok {
		names := make([]string, 0, len(tools))
		for n := range tools {
			names = append(names, n)
		}
		sort.Strings(names)
		return fmt.Sprintf("error: there is no tool %q; the tools are: %s", call.Name, strings.Join(names, ", ")), 0, nil
	}
	args := json.RawMessage(call.Arguments)
	if strings.TrimSpace(call.Arguments) == "" {
		args = json.RawMessage(`{}`)
	}
	if !json.Valid(args) {
		return fmt.Sprintf("error: the arguments are not valid JSON: %s", truncateText(call.Arguments, 200)), 0, nil
	}
	tctx, span := toolSpan(flows.WithToolCall(ctx, call.ID), call)
	res, err := tool.call(tctx, s, args)
	if err != nil {
		if ctx.Err() != nil {
			endToolSpan(span, "", ctx.Err())
			return "", 0, ctx.Err()
		}
		var sf *stepFailure
		if errors.As(err, &sf) {
			endToolSpan(span, "", sf.err)
			return "", 0, sf.err
		}
		endToolSpan(span, "error: "+err.Error(), nil)
		return "error: " + err.Error(), 0, nil
	}
	var content string
	if str, ok := res.(string); ok {
		content = str
	} else {
		b, err := json.Marshal(flows.JSONValue(res))
		if err != nil {
			endToolSpan(span, "error: the tool's result is not JSON", nil)
			return "error: the tool's result is not JSON", 0, nil
		}
		content = string(b)
	}
	endToolSpan(span, content, nil)
	bytes := 0
	if tool.state {
		bytes = len(content)
	}
	return content, bytes, nil
}

var _ flows.Component = (*Agent)(nil)
