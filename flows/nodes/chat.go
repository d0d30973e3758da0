package nodes

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/shared"
	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/sluicehq/sluice/flows"
)

// chatMessage is one message of a conversation, in the form agents save their turns.
type chatMessage struct {
	Role       string     `json:"role"` // system, user, assistant or tool
	Content    string     `json:"content,omitempty"`
	ToolCalls  []toolCall `json:"tool_calls,omitempty"`
	ToolCallID string     `json:"tool_call_id,omitempty"`
}

// toolCall is a model's request to call a tool.
type toolCall struct {
	ID        string `json:"id"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// chatRequest is everything that makes two model calls the same; it is also the cache
// key's argument.
type chatRequest struct {
	Provider    string          `json:"provider"`
	Model       string          `json:"model"`
	Messages    []chatMessage   `json:"messages"`
	Temperature *float64        `json:"temperature,omitempty"`
	MaxTokens   int64           `json:"max_tokens,omitempty"`
	JSON        bool            `json:"json,omitempty"`
	Schema      json.RawMessage `json:"schema,omitempty"`
	Tools       []flows.ToolDef `json:"tools,omitempty"`
	// PromptCache names where Anthropic providers set cache breakpoints: "system",
	// "tools", "messages"; nil: Sluice's default for the component.
	PromptCache []string `json:"prompt_cache,omitempty"`
}

// chatReply is the model's answer.
type chatReply struct {
	Message      chatMessage `json:"message"`
	Usage        flows.Usage `json:"usage"`
	FinishReason string      `json:"finish_reason,omitempty"`
}

// chatOptions are a model call's settings that do not change its answer.
type chatOptions struct {
	component string // for the cache key
	stream    bool
	cacheTTL  time.Duration
	budget    budget
}

// providerOptions are the openai-go client settings of an OpenAI-compatible provider,
// from its own settings only.
func (e *Env) providerOptions(p *Provider) []option.RequestOption {
	opts := []option.RequestOption{
		option.WithBaseURL(p.BaseURL),
		option.WithMaxRetries(p.retries()),
		option.WithMaxRetryDelay(30 * time.Second),
		option.WithHTTPClient(e.providerClient(p)),
	}
	if p.APIKey != "" {
		opts = append(opts, option.WithAPIKey(p.APIKey))
	}
	if p.Timeout > 0 {
		opts = append(opts, option.WithRequestTimeout(p.Timeout.D()))
	}
	return opts
}

// chatService returns the chat completions client of an OpenAI-compatible provider. It is
// built from the provider's own settings only: nothing is read from OPENAI_* variables
// here, so a provider never receives another provider's key.
func (e *Env) chatService(p *Provider) *openai.ChatCompletionService {
	if s, ok := e.chats.Load(p.Name); ok {
		return s.(*openai.ChatCompletionService)
	}
	s := openai.NewChatCompletionService(e.providerOptions(p)...)
	actual, _ := e.chats.LoadOrStore(p.Name, &s)
	return actual.(*openai.ChatCompletionService)
}

// params turns a request into the SDK's parameters.
func (r *chatRequest) params() (openai.ChatCompletionNewParams, error) {
	p := openai.ChatCompletionNewParams{Model: shared.ChatModel(r.Model)}
	for _, m := range r.Messages {
		switch m.Role {
		case "system":
			p.Messages = append(p.Messages, openai.SystemMessage(m.Content))
		case "user":
			p.Messages = append(p.Messages, openai.UserMessage(m.Content))
		case "tool":
			p.Messages = append(p.Messages, openai.ToolMessage(m.Content, m.ToolCallID))
		case "assistant":
			a := openai.ChatCompletionAssistantMessageParam{}
			if m.Content != "" {
				a.Content.OfString = openai.String(m.Content)
			}
			for _, tc := range m.ToolCalls {
				a.ToolCalls = append(a.ToolCalls, openai.ChatCompletionMessageToolCallUnionParam{
					OfFunction: &openai.ChatCompletionMessageFunctionToolCallParam{ID: tc.ID,
						Function: openai.ChatCompletionMessageFunctionToolCallFunctionParam{Name: tc.Name, Arguments: tc.Arguments}}})
			}
			p.Messages = append(p.Messages, openai.ChatCompletionMessageParamUnion{OfAssistant: &a})
		default:
			return p, fmt.Errorf("message role %q", m.Role)
		}
	}
	if r.Temperature != nil {
		p.Temperature = openai.Float(*r.Temperature)
	}
	if r.MaxTokens > 0 {
		p.MaxTokens = openai.Int(r.MaxTokens)
	}
	switch {
	case len(r.Schema) > 0:
		var schema map[string]any
		if err := json.Unmarshal(r.Schema, &schema); err != nil {
			return p, fmt.Errorf("schema: %v", err)
		}
		p.ResponseFormat.OfJSONSchema = &shared.ResponseFormatJSONSchemaParam{JSONSchema: shared.ResponseFormatJSONSchemaJSONSchemaParam{
			Name: "output", Schema: schema}}
	case r.JSON:
		p.ResponseFormat.OfJSONObject = &shared.ResponseFormatJSONObjectParam{}
	}
	for _, t := range r.Tools {
		var params map[string]any
		if len(t.Parameters) > 0 {
			if err := json.Unmarshal(t.Parameters, &params); err != nil {
				return p, fmt.Errorf("tool %s parameters: %v", t.Name, err)
			}
		}
		if params == nil {
			params = map[string]any{"type": "object", "properties": map[string]any{}}
		}
		fd := shared.FunctionDefinitionParam{Name: t.Name, Parameters: shared.FunctionParameters(params)}
		if t.Description != "" {
			fd.Description = openai.String(t.Description)
		}
		p.Tools = append(p.Tools, openai.ChatCompletionFunctionTool(fd))
	}
	return p, nil
}

// chat sends one request to a provider, cached and single-flight when opts.cacheTTL is
// set. Streamed tokens are published with step.Emit as "token" events.
func (e *Env) chat(ctx context.Context, step *flows.Step, req *chatRequest, opts chatOptions) (*chatReply, bool, error) {
	p, err := e.runProvider(step, req.Provider)
	if err != nil {
		return nil, false, err
	}
	if err := e.checkBudget(ctx, step, opts.budget); err != nil {
		return nil, false, err
	}
	call := func(ctx context.Context) ([]byte, error) {
		reply, err := e.complete(ctx, step, p, req, opts.component, opts.stream)
		if err != nil {
			return nil, err
		}
		return json.Marshal(reply)
	}
	b, hit, err := e.cached(ctx, step, cacheKey(opts.component, step.Version, req), opts.cacheTTL, call)
	if err != nil {
		return nil, false, err
	}
	var reply chatReply
	if err := json.Unmarshal(b, &reply); err != nil {
		return nil, false, fmt.Errorf("cached reply: %v", err)
	}
	if hit {
		reply.Usage = flows.Usage{} // nothing was spent for this step
	} else if err := e.spend(ctx, step, opts.budget, p, req.Model, reply.Usage); err != nil {
		return nil, false, err
	}
	if hit && opts.stream && step.Emit != nil {
		step.Emit("token", map[string]any{"text": reply.Message.Content, "cached": true})
	}
	return &reply, hit, nil
}

// complete makes the call with the provider's API, through its rate limit.
func (e *Env) complete(ctx context.Context, step *flows.Step, p *Provider, req *chatRequest, component string, stream bool) (*chatReply, error) {
	ctx, span := modelSpan(ctx, step, p, req)
	ctx, lc := e.limited(ctx, step, p)
	started := time.Now()
	var reply *chatReply
	var err error
	switch p.kind() {
	case ProviderAnthropic:
		reply, err = e.completeAnthropic(ctx, step, p, req, component, stream)
	default:
		reply, err = e.completeOpenAI(ctx, step, p, req, stream)
	}
	took := time.Since(started)
	if err == nil {
		// What the call cost is part of its usage from here on: the step's, the run's
		// checkpoints and the metrics all see the same estimate.
		reply.Usage.CostUSD, _ = p.cost(req.Model, reply.Usage)
	}
	endModelSpan(span, reply, err)
	e.observeModel(step, p, req.Model, took, reply, err)
	if err != nil {
		return nil, err
	}
	e.settle(ctx, p, lc, reply.Usage)
	return reply, nil
}

// completeOpenAI makes the call with the OpenAI chat completions API.
func (e *Env) completeOpenAI(ctx context.Context, step *flows.Step, p *Provider, req *chatRequest, stream bool) (*chatReply, error) {
	params, err := req.params()
	if err != nil {
		return nil, flows.Permanent(&flows.Error{Code: flows.Invalid, Node: step.Node, Err: err})
	}
	svc := e.chatService(p)
	if !stream {
		res, err := svc.New(ctx, params)
		if err != nil {
			return nil, providerError(step, p, err)
		}
		if len(res.Choices) == 0 {
			return nil, malformed(step, p, "it has no choices")
		}
		c := res.Choices[0]
		reply := &chatReply{Message: chatMessage{Role: "assistant", Content: c.Message.Content}, FinishReason: string(c.FinishReason),
			Usage: openAIUsage(res.Usage)}
		if c.Message.Refusal != "" && c.Message.Content == "" {
			return nil, flows.Permanent(&flows.Error{Code: flows.Invalid, Node: step.Node, Message: "the model refused: " + c.Message.Refusal})
		}
		for _, tc := range c.Message.ToolCalls {
			if tc.Function.Name == "" {
				return nil, malformed(step, p, "a tool call has no function name")
			}
			reply.Message.ToolCalls = append(reply.Message.ToolCalls, toolCall{ID: tc.ID, Name: tc.Function.Name, Arguments: tc.Function.Arguments})
		}
		return reply, nil
	}

	params.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
	s := svc.NewStreaming(ctx, params)
	defer s.Close()
	reply := &chatReply{Message: chatMessage{Role: "assistant"}}
	var content strings.Builder
	var calls []*toolCall
	chunks := 0
	for s.Next() {
		ch := s.Current()
		chunks++
		if ch.Usage.PromptTokens > 0 || ch.Usage.CompletionTokens > 0 {
			reply.Usage = openAIUsage(ch.Usage)
		}
		if len(ch.Choices) == 0 {
			continue
		}
		c := ch.Choices[0]
		if c.Delta.Content != "" {
			content.WriteString(c.Delta.Content)
			if step.Emit != nil {
				step.Emit("token", map[string]any{"text": c.Delta.Content})
			}
		}
		for _, d := range c.Delta.ToolCalls {
			i := int(d.Index)
			if i < 0 || i > 128 {
				return nil, malformed(step, p, fmt.Sprintf("tool call index %d", i))
			}
			for len(calls) <= i {
				calls = append(calls, &toolCall{})
			}
			if d.ID != "" {
				calls[i].ID = d.ID
			}
			if d.Function.Name != "" {
				calls[i].Name = d.Function.Name
			}
			calls[i].Arguments += d.Function.Arguments
		}
		if c.FinishReason != "" {
			reply.FinishReason = string(c.FinishReason)
		}
	}
	if err := s.Err(); err != nil {
		return nil, providerError(step, p, err)
	}
	if chunks == 0 {
		return nil, malformed(step, p, "the stream ended without a chunk")
	}
	reply.Message.Content = content.String()
	for _, c := range calls {
		if c.Name == "" {
			return nil, malformed(step, p, "a streamed tool call has no function name")
		}
		reply.Message.ToolCalls = append(reply.Message.ToolCalls, *c)
	}
	return reply, nil
}

// openAIUsage reads a chat completion's usage: the prompt tokens the provider answered
// from its cache are part of the prompt tokens, as flows.Usage counts them.
func openAIUsage(u openai.CompletionUsage) flows.Usage {
	return flows.Usage{InputTokens: u.PromptTokens, OutputTokens: u.CompletionTokens, CacheReadTokens: u.PromptTokensDetails.CachedTokens}
}

// providerError explains a failed call. Requests the provider refuses as wrong (400,
// 401, 403, 404, 422) fail permanently: retrying sends the same request. Everything
// else — 429 and 5xx after the client's own retries, broken connections, replies that
// are not chat completions — is retried by the runtime.
func providerError(step *flows.Step, p *Provider, err error) error {
	status, message := 0, ""
	var apiErr *openai.Error
	var antErr *anthropic.Error
	switch {
	case errors.As(err, &apiErr):
		status, message = apiErr.StatusCode, apiErr.Message
	case errors.As(err, &antErr):
		status, message = antErr.StatusCode, antErr.Message
	}
	if status != 0 {
		msg := fmt.Sprintf("LLM provider %q answered %d", p.Name, status)
		if message != "" {
			msg += ": " + truncateText(message, 300)
		}
		fe := &flows.Error{Code: flows.Unavailable, Node: step.Node, Message: msg}
		switch status {
		case http.StatusBadRequest, http.StatusUnauthorized, http.StatusForbidden, http.StatusNotFound, http.StatusUnprocessableEntity:
			fe.Code = flows.Invalid
			return flows.Permanent(fe)
		}
		return fe
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	if errors.As(err, &se) || errors.As(err, &te) || strings.Contains(err.Error(), "invalid character") || strings.Contains(err.Error(), "unmarshal") {
		return malformed(step, p, err.Error())
	}
	return &flows.Error{Code: flows.Unavailable, Node: step.Node, Message: fmt.Sprintf("LLM provider %q: %v", p.Name, err)}
}

func malformed(step *flows.Step, p *Provider, why string) error {
	return &flows.Error{Code: flows.Unavailable, Node: step.Node,
		Message: fmt.Sprintf("LLM provider %q sent a reply that is not a chat completion: %s", p.Name, truncateText(why, 300))}
}

func truncateText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// decodeOutput turns a reply's text into the step's output: the text, or with JSON
// output the parsed value, checked against the schema when there is one. A reply that
// does not fit is retried: a model may do better the next time.
func decodeOutput(step *flows.Step, text string, asJSON bool, schema *jsonschema.Schema) (any, error) {
	if !asJSON {
		return text, nil
	}
	v, err := flows.DecodeJSON([]byte(stripFence(text)))
	if err != nil {
		return nil, &flows.Error{Code: flows.Unavailable, Node: step.Node, Path: "params.json",
			Message: fmt.Sprintf("the model's reply is not valid JSON (%v): %s", err, truncateText(text, 200))}
	}
	if schema != nil {
		if err := schema.Validate(jsonschemaValue(v)); err != nil {
			msg := err.Error()
			if i := strings.Index(msg, "\n"); i >= 0 {
				msg = strings.TrimSpace(msg[i+1:])
			}
			return nil, &flows.Error{Code: flows.Unavailable, Node: step.Node, Path: "params.schema",
				Message: fmt.Sprintf("the model's reply does not match the schema: %s", msg)}
		}
	}
	return v, nil
}

// jsonschemaValue converts json.Number values (which the state keeps) for the validator.
func jsonschemaValue(v any) any {
	b, _ := json.Marshal(v)
	x, err := jsonschema.UnmarshalJSON(strings.NewReader(string(b)))
	if err != nil {
		return v
	}
	return x
}

// stripFence removes a Markdown code fence some models wrap JSON in.
func stripFence(s string) string {
	t := strings.TrimSpace(s)
	if strings.HasPrefix(t, "```") && strings.HasSuffix(t, "```") && len(t) >= 6 {
		t = strings.TrimPrefix(t[3:len(t)-3], "json")
		return strings.TrimSpace(t)
	}
	return s
}
