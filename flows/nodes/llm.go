package nodes

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/sluicehq/sluice/flows"
)

// modelParams are the parameters every component that calls a model shares.
const modelParams = `
	"provider": {"type": "string", "default": "default", "description": "LLM provider configured on the server (see docs/llm-providers.md); \"default\" is OPENAI_BASE_URL with OPENAI_API_KEY."},
	"model": {"type": "string", "minLength": 1, "description": "Model name as the provider knows it, e.g. gpt-4o-mini, llama3.1 or claude-sonnet-4-5."},
	"temperature": {"type": "number", "minimum": 0, "maximum": 2, "description": "Sampling temperature; left out, the provider's default."},
	"max_tokens": {"type": "integer", "minimum": 1, "description": "Most tokens the model may write per reply (Anthropic providers: 4096 when not set)."},
	"prompt_cache": {"type": "array", "uniqueItems": true, "items": {"enum": ["system", "tools", "messages"]}, "description": "Anthropic providers: where to set prompt cache breakpoints — after the system prompt, the tool definitions, the conversation so far. Default: system and tools (agents also messages); [] turns caching off. Other providers ignore it (OpenAI caches by itself)."}`

// historyParam is the earlier messages of a conversation, for the components that
// send a system and a user message.
const historyParam = `
	"history": {"type": "string", "format": "jq", "description": "jq making the earlier messages of the conversation, a list of {role, content} (role user, assistant or system), sent between the system and the user message: .history after a memory node's load."}`

// modelConfig is what a model-calling component reads from modelParams.
type modelConfig struct {
	Provider    string   `json:"provider"`
	Model       string   `json:"model"`
	Temperature *float64 `json:"temperature"`
	MaxTokens   int64    `json:"max_tokens"`
	PromptCache []string `json:"prompt_cache"`
}

// request starts a chat request with these settings.
func (m *modelConfig) request() *chatRequest {
	r := &chatRequest{Provider: m.Provider, Model: m.Model, Temperature: m.Temperature, MaxTokens: m.MaxTokens, PromptCache: m.PromptCache}
	if m.PromptCache != nil && len(m.PromptCache) == 0 {
		r.PromptCache = []string{} // off, which nil (the default) is not
	}
	return r
}

func llmSpec(env *Env) flows.Spec {
	return flows.Spec{
		Name:     "llm",
		Title:    "LLM",
		Category: "ai",
		Description: "Asks a model once: a chat completion from a provider configured on the server, OpenAI-compatible " +
			"(OpenAI, Ollama, vLLM, llama.cpp) or Anthropic (type anthropic, with prompt caching). The system and user " +
			"messages are templates over the node's input. " +
			"The reply (text, or with json the parsed value, checked against schema when given) is the output and is " +
			"stored under \"as\". Token usage (with Anthropic also the cache's read and written tokens, see prompt_cache) " +
			"is recorded on the step; with stream the tokens are published to the live " +
			"view as they come. With the node's cache set, identical requests share one reply.",
		Ports: []flows.Port{inPort, outPort},
		Params: json.RawMessage(`{
			"type": "object", "additionalProperties": false, "required": ["model", "user"],
			"properties": {` + modelParams + `,
				"system": {"type": "string", "format": "template", "description": "System message template."},` + historyParam + `,
				"user": {"type": "string", "format": "template", "description": "User message template, e.g. Summarise: {{.document}}"},
				"json": {"type": "boolean", "default": false, "description": "Ask for a JSON reply and parse it."},
				"schema": {"type": "object", "format": "json-schema", "description": "JSON Schema the reply must match (implies json); sent to the provider as the response format."},
				"stream": {"type": "boolean", "default": false, "description": "Stream the reply, publishing tokens to the live view."},
				"as": {"type": "string", "pattern": "^[A-Za-z_][A-Za-z0-9_]*$", "default": "answer", "description": "State key the reply is stored under."}
			}
		}`),
		Example: json.RawMessage(`{"model": "gpt-4o-mini", "system": "You answer in one sentence.", "user": "{{.question}}", "as": "answer"}`),
		New:     func(b *flows.Build) (flows.Component, error) { return newLLM(env, b) },
	}
}

// LLM asks a model once.
type LLM struct {
	env     *Env
	model   modelConfig
	system  *flows.Template
	history *flows.JQ
	user    *flows.Template
	json    bool
	schema  json.RawMessage
	check   *jsonschema.Schema
	stream  bool
	as      string
	ttl     time.Duration
	budget  budget
}

func newLLM(env *Env, b *flows.Build) (flows.Component, error) {
	var p struct {
		modelConfig
		System  string          `json:"system"`
		History string          `json:"history"`
		User    string          `json:"user"`
		JSON    bool            `json:"json"`
		Schema  json.RawMessage `json:"schema"`
		Stream  bool            `json:"stream"`
		As      string          `json:"as"`
	}
	if err := b.Decode(&p); err != nil {
		return nil, err
	}
	if _, err := env.providerIn(flowOf(b), p.Provider); err != nil {
		return nil, err
	}
	l := &LLM{env: env, model: p.modelConfig, json: p.JSON || len(p.Schema) > 0, schema: p.Schema, stream: p.Stream, as: p.As, ttl: nodeCacheTTL(b), budget: newBudget(b)}
	var err error
	if p.System != "" {
		if l.system, err = flows.ParseTemplate(p.System); err != nil {
			return nil, &flows.Error{Code: flows.Invalid, Path: "params.system", Err: err}
		}
	}
	if l.user, err = flows.ParseTemplate(p.User); err != nil {
		return nil, &flows.Error{Code: flows.Invalid, Path: "params.user", Err: err}
	}
	if l.history, err = compileHistory(p.History); err != nil {
		return nil, err
	}
	if len(p.Schema) > 0 {
		if l.check, err = flows.CompileSchema(p.Schema); err != nil {
			return nil, &flows.Error{Code: flows.Invalid, Path: "params.schema", Message: err.Error()}
		}
	}
	return l, nil
}

// nodeCacheTTL is the node's cache TTL (0: not cached).
func nodeCacheTTL(b *flows.Build) time.Duration {
	if b.Node != nil && b.Node.Cache != nil {
		return b.Node.Cache.TTL.D()
	}
	return 0
}

// compileHistory compiles the history parameter (nil when it is empty).
func compileHistory(src string) (*flows.JQ, error) {
	if src == "" {
		return nil, nil
	}
	q, err := flows.CompileJQ(src)
	if err != nil {
		return nil, &flows.Error{Code: flows.Invalid, Path: "params.history", Err: err}
	}
	return q, nil
}

// prompt renders the system message, the history and the user message over the node's
// input.
func prompt(ctx context.Context, step *flows.Step, system *flows.Template, history *flows.JQ, user *flows.Template) ([]chatMessage, int, error) {
	var msgs []chatMessage
	n := 0
	render := func(role, path string, tpl *flows.Template) error {
		if tpl == nil {
			return nil
		}
		text, err := tpl.Execute(ctx, step.Input)
		if err != nil {
			return templateError(step.Node, path, err)
		}
		n += len(text)
		msgs = append(msgs, chatMessage{Role: role, Content: text})
		return nil
	}
	if err := render("system", "params.system", system); err != nil {
		return nil, 0, err
	}
	past, err := historyMessages(ctx, step, history)
	if err != nil {
		return nil, 0, err
	}
	for _, m := range past {
		n += len(m.Content)
	}
	msgs = append(msgs, past...)
	if err := render("user", "params.user", user); err != nil {
		return nil, 0, err
	}
	return msgs, n, nil
}

// historyMessages evaluates the history parameter: a list of {role, content} (null is
// no history).
func historyMessages(ctx context.Context, step *flows.Step, history *flows.JQ) ([]chatMessage, error) {
	if history == nil {
		return nil, nil
	}
	bad := func(msg string) error {
		return flows.Permanent(&flows.Error{Code: flows.Invalid, Node: step.Node, Path: "params.history", Message: msg})
	}
	v, err := history.First(ctx, step.Input, step.State)
	if err != nil {
		return nil, flows.Permanent(&flows.Error{Code: flows.Invalid, Node: step.Node, Path: "params.history", Err: err})
	}
	if v == nil {
		return nil, nil
	}
	list, ok := v.([]any)
	if !ok {
		return nil, bad(fmt.Sprintf("the history is %s, not a list of {role, content}", flows.TypeName(v)))
	}
	out := make([]chatMessage, 0, len(list))
	for i, x := range list {
		o, ok := x.(map[string]any)
		role, _ := o["role"].(string)
		content, isText := o["content"].(string)
		if !ok || !isText {
			return nil, bad(fmt.Sprintf("history message %d is not {role, content} with text content", i))
		}
		switch role {
		case "user", "assistant", "system":
		default:
			return nil, bad(fmt.Sprintf("history message %d has role %q; want user, assistant or system", i, role))
		}
		out = append(out, chatMessage{Role: role, Content: content})
	}
	return out, nil
}

// Run asks the model and stores its reply.
func (l *LLM) Run(ctx context.Context, s *flows.Step) (*flows.Result, error) {
	msgs, shown, err := prompt(ctx, s, l.system, l.history, l.user)
	if err != nil {
		return nil, err
	}
	req := l.model.request()
	req.Messages, req.JSON, req.Schema = msgs, l.json, l.schema
	reply, _, err := l.env.chat(ctx, s, req, chatOptions{component: "llm", stream: l.stream, cacheTTL: l.ttl, budget: l.budget})
	if err != nil {
		return nil, err
	}
	out, err := decodeOutput(s, reply.Message.Content, l.json, l.check)
	if err != nil {
		return nil, err
	}
	return &flows.Result{Output: out, Update: map[string]any{l.as: out}, Usage: reply.Usage, StateBytes: shown}, nil
}

var _ flows.Component = (*LLM)(nil)
