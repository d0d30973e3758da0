package nodes

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/sluicehq/sluice/flows"
)

// defaultAnthropicMaxTokens is max_tokens for a node that sets none: Anthropic's API
// needs one.
const defaultAnthropicMaxTokens = 4096

// Prompt cache breakpoints a node may ask for (param prompt_cache).
const (
	cacheSystem   = "system"
	cacheTools    = "tools"
	cacheMessages = "messages"
)

// defaultPromptCache is where Sluice sets Anthropic cache breakpoints when a node says
// nothing: the system prompt and the tool definitions, which repeat on every call of a
// node; an agent also caches its conversation so far, which every turn repeats.
func defaultPromptCache(component string) []string {
	if component == "agent" {
		return []string{cacheSystem, cacheTools, cacheMessages}
	}
	return []string{cacheSystem, cacheTools}
}

// messageService returns the Messages API client of an Anthropic provider, built from
// the provider's settings only (no ANTHROPIC_* variable is read).
func (e *Env) messageService(p *Provider) *anthropic.MessageService {
	if s, ok := e.chats.Load(p.Name); ok {
		return s.(*anthropic.MessageService)
	}
	opts := []aoption.RequestOption{
		aoption.WithBaseURL(p.BaseURL),
		aoption.WithMaxRetries(p.retries()),
		aoption.WithHTTPClient(e.providerClient(p)),
	}
	if p.APIKey != "" {
		opts = append(opts, aoption.WithAPIKey(p.APIKey))
	}
	if p.Timeout > 0 {
		opts = append(opts, aoption.WithRequestTimeout(p.Timeout.D()))
	}
	s := anthropic.NewMessageService(opts...)
	actual, _ := e.chats.LoadOrStore(p.Name, &s)
	return actual.(*anthropic.MessageService)
}

// anthropicParams turns a request into the Messages API's parameters, with cache
// breakpoints where the request (or Sluice's default for the component) puts them.
func (r *chatRequest) anthropicParams(component string) (anthropic.MessageNewParams, []aoption.RequestOption, error) {
	p := anthropic.MessageNewParams{Model: anthropic.Model(r.Model), MaxTokens: r.MaxTokens}
	if p.MaxTokens <= 0 {
		p.MaxTokens = defaultAnthropicMaxTokens
	}
	var opts []aoption.RequestOption
	if r.Temperature != nil {
		opts = append(opts, aoption.WithJSONSet("temperature", *r.Temperature))
	}
	breakpoints := r.PromptCache
	if breakpoints == nil {
		breakpoints = defaultPromptCache(component)
	}
	for _, m := range r.Messages {
		var block anthropic.ContentBlockParamUnion
		role := "user"
		switch m.Role {
		case "system":
			p.System = append(p.System, anthropic.TextBlockParam{Text: m.Content})
			continue
		case "user":
			block = anthropic.NewTextBlock(m.Content)
		case "tool":
			block = anthropic.NewToolResultBlock(m.ToolCallID, m.Content, strings.HasPrefix(m.Content, "error: "))
		case "assistant":
			role = "assistant"
			var blocks []anthropic.ContentBlockParamUnion
			if m.Content != "" {
				blocks = append(blocks, anthropic.NewTextBlock(m.Content))
			}
			for _, tc := range m.ToolCalls {
				args := json.RawMessage(tc.Arguments)
				if strings.TrimSpace(tc.Arguments) == "" || !json.Valid(args) {
					args = json.RawMessage(`{}`)
				}
				blocks = append(blocks, anthropic.NewToolUseBlock(tc.ID, args, tc.Name))
			}
			if len(blocks) == 0 {
				blocks = append(blocks, anthropic.NewTextBlock("(no answer)"))
			}
			p.Messages = appendBlocks(p.Messages, role, blocks...)
			continue
		default:
			return p, nil, fmt.Errorf("message role %q", m.Role)
		}
		p.Messages = appendBlocks(p.Messages, role, block)
	}
	switch {
	case len(r.Schema) > 0:
		var schema map[string]any
		if err := json.Unmarshal(r.Schema, &schema); err != nil {
			return p, nil, fmt.Errorf("schema: %v", err)
		}
		p.OutputConfig.Format = anthropic.JSONOutputFormatParam{Schema: schema}
	case r.JSON:
		p.System = append(p.System, anthropic.TextBlockParam{Text: "Answer with one JSON value only: no prose, no code fence."})
	}
	for _, t := range r.Tools {
		var schema map[string]any
		if len(t.Parameters) > 0 {
			if err := json.Unmarshal(t.Parameters, &schema); err != nil {
				return p, nil, fmt.Errorf("tool %s parameters: %v", t.Name, err)
			}
		}
		in := anthropic.ToolInputSchemaParam{ExtraFields: map[string]any{}}
		for k, v := range schema {
			switch k {
			case "type":
			case "properties":
				in.Properties = v
			case "required":
				if list, ok := v.([]any); ok {
					for _, x := range list {
						if s, ok := x.(string); ok {
							in.Required = append(in.Required, s)
						}
					}
				}
			default:
				in.ExtraFields[k] = v
			}
		}
		if in.Properties == nil {
			in.Properties = map[string]any{}
		}
		tool := &anthropic.ToolParam{Name: t.Name, InputSchema: in}
		if t.Description != "" {
			tool.Description = anthropic.String(t.Description)
		}
		p.Tools = append(p.Tools, anthropic.ToolUnionParam{OfTool: tool})
	}
	if len(p.Messages) == 0 {
		return p, nil, fmt.Errorf("the request has no user message")
	}
	// Cache breakpoints: each marks the end of a prefix the provider caches.
	if slices.Contains(breakpoints, cacheSystem) && len(p.System) > 0 {
		p.System[len(p.System)-1].CacheControl = anthropic.NewCacheControlEphemeralParam()
	}
	if slices.Contains(breakpoints, cacheTools) && len(p.Tools) > 0 {
		p.Tools[len(p.Tools)-1].OfTool.CacheControl = anthropic.NewCacheControlEphemeralParam()
	}
	if slices.Contains(breakpoints, cacheMessages) && len(p.Messages) > 1 {
		if last := content(&p.Messages[len(p.Messages)-1]); len(last) > 0 {
			if cc := last[len(last)-1].GetCacheControl(); cc != nil {
				*cc = anthropic.NewCacheControlEphemeralParam()
			}
		}
	}
	return p, opts, nil
}

// appendBlocks adds blocks as a message of role, joining them to the last message when
// it has the same role: the API wants the roles to alternate, and the results of one
// turn's tool calls are one user message.
func appendBlocks(msgs []anthropic.MessageParam, role string, blocks ...anthropic.ContentBlockParamUnion) []anthropic.MessageParam {
	if n := len(msgs); n > 0 {
		switch last := &msgs[n-1]; {
		case role == "user" && last.OfUser != nil:
			last.OfUser.Content = append(last.OfUser.Content, blocks...)
			return msgs
		case role == "assistant" && last.OfAssistant != nil:
			last.OfAssistant.Content = append(last.OfAssistant.Content, blocks...)
			return msgs
		}
	}
	if role == "assistant" {
		return append(msgs, anthropic.NewAssistantMessage(blocks...))
	}
	return append(msgs, anthropic.NewUserMessage(blocks...))
}

// content is a message's blocks.
func content(m *anthropic.MessageParam) []anthropic.ContentBlockParamUnion {
	switch {
	case m.OfUser != nil:
		return m.OfUser.Content
	case m.OfAssistant != nil:
		return m.OfAssistant.Content
	}
	return nil
}

// anthropicUsage records every input token in InputTokens, cached ones included, as the
// OpenAI API does; the cache figures say how many of them were read or written.
func anthropicUsage(u anthropic.Usage) flows.Usage {
	return flows.Usage{
		InputTokens:      u.InputTokens + u.CacheCreationInputTokens + u.CacheReadInputTokens,
		OutputTokens:     u.OutputTokens,
		CacheReadTokens:  u.CacheReadInputTokens,
		CacheWriteTokens: u.CacheCreationInputTokens,
	}
}

// anthropicReply turns a message into the reply.
func anthropicReply(step *flows.Step, p *Provider, m *anthropic.Message) (*chatReply, error) {
	reply := &chatReply{Message: chatMessage{Role: "assistant"}, FinishReason: string(m.StopReason), Usage: anthropicUsage(m.Usage)}
	var text strings.Builder
	for _, b := range m.Content {
		switch b.Type {
		case "text":
			text.WriteString(b.Text)
		case "tool_use":
			if b.Name == "" {
				return nil, malformed(step, p, "a tool_use block has no name")
			}
			args := string(b.Input)
			if args == "" || args == "null" {
				args = "{}"
			}
			reply.Message.ToolCalls = append(reply.Message.ToolCalls, toolCall{ID: b.ID, Name: b.Name, Arguments: args})
		}
	}
	reply.Message.Content = text.String()
	if m.StopReason == anthropic.StopReasonRefusal && reply.Message.Content == "" {
		return nil, flows.Permanent(&flows.Error{Code: flows.Invalid, Node: step.Node, Message: "the model refused to answer"})
	}
	return reply, nil
}

// completeAnthropic makes the call with Anthropic's Messages API.
func (e *Env) completeAnthropic(ctx context.Context, step *flows.Step, p *Provider, req *chatRequest, component string, stream bool) (*chatReply, error) {
	params, opts, err := req.anthropicParams(component)
	if err != nil {
		return nil, flows.Permanent(&flows.Error{Code: flows.Invalid, Node: step.Node, Err: err})
	}
	svc := e.messageService(p)
	if !stream {
		if p.Timeout == 0 {
			// Without it the SDK refuses large max_tokens unless streaming; the step's
			// deadline bounds the call anyway.
			opts = append(opts, aoption.WithRequestTimeout(time.Hour))
		}
		m, err := svc.New(ctx, params, opts...)
		if err != nil {
			return nil, providerError(step, p, err)
		}
		return anthropicReply(step, p, m)
	}
	s := svc.NewStreaming(ctx, params, opts...)
	defer s.Close()
	var m anthropic.Message
	events := 0
	for s.Next() {
		ev := s.Current()
		events++
		if err := m.Accumulate(ev); err != nil {
			return nil, malformed(step, p, err.Error())
		}
		if ev.Type == "content_block_delta" && ev.Delta.Type == "text_delta" && ev.Delta.Text != "" && step.Emit != nil {
			step.Emit("token", map[string]any{"text": ev.Delta.Text})
		}
	}
	if err := s.Err(); err != nil {
		return nil, providerError(step, p, err)
	}
	if events == 0 {
		return nil, malformed(step, p, "the stream ended without an event")
	}
	return anthropicReply(step, p, &m)
}
