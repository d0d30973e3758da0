package llmtest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/sluicehq/sluice/flows/nodes"
)

// Anthropic is a scripted Anthropic Messages API server on loopback: plain replies, tool
// use, streaming (the API's server-sent events), usage with the prompt cache's fields,
// and errors. Replies are the same Reply values the OpenAI server takes; a tool call's
// arguments become a tool_use block's input.
type Anthropic struct {
	// URL is the base URL a provider uses (the API's paths start with /v1).
	URL string

	srv     *httptest.Server
	mu      sync.Mutex
	queue   []Reply
	respond func(AnthropicRequest) Reply
	reqs    []AnthropicRequest
}

// AnthropicRequest is a Messages API request as the server received it.
type AnthropicRequest struct {
	Model       string             `json:"model"`
	MaxTokens   int64              `json:"max_tokens"`
	System      []AnthropicBlock   `json:"system"`
	Messages    []AnthropicMessage `json:"messages"`
	Tools       []AnthropicTool    `json:"tools"`
	Stream      bool               `json:"stream"`
	Temperature *float64           `json:"temperature"`
	// Raw is the request body.
	Raw json.RawMessage `json:"-"`
	// APIKey is the key the request carried (x-api-key, or Authorization: Bearer as the
	// SDK sends it); Version the anthropic-version header.
	APIKey, Version string `json:"-"`
}

// AnthropicMessage is one message of a request.
type AnthropicMessage struct {
	Role    string           `json:"role"`
	Content []AnthropicBlock `json:"content"`
}

// AnthropicBlock is a content block of a request (text, tool_use, tool_result).
type AnthropicBlock struct {
	Type         string          `json:"type"`
	Text         string          `json:"text,omitempty"`
	ID           string          `json:"id,omitempty"`
	Name         string          `json:"name,omitempty"`
	Input        json.RawMessage `json:"input,omitempty"`
	ToolUseID    string          `json:"tool_use_id,omitempty"`
	Content      json.RawMessage `json:"content,omitempty"`
	IsError      bool            `json:"is_error,omitempty"`
	CacheControl *struct {
		Type string `json:"type"`
	} `json:"cache_control,omitempty"`
}

// AnthropicTool is a tool offered in a request.
type AnthropicTool struct {
	Name         string          `json:"name"`
	Description  string          `json:"description"`
	InputSchema  json.RawMessage `json:"input_schema"`
	CacheControl *struct {
		Type string `json:"type"`
	} `json:"cache_control,omitempty"`
}

// Breakpoints lists where the request set cache breakpoints: "system", "tools", and
// "messages[i]" for the message that carries one.
func (r AnthropicRequest) Breakpoints() []string {
	var out []string
	for _, b := range r.System {
		if b.CacheControl != nil {
			out = append(out, "system")
		}
	}
	for _, t := range r.Tools {
		if t.CacheControl != nil {
			out = append(out, "tools")
		}
	}
	for i, m := range r.Messages {
		for _, b := range m.Content {
			if b.CacheControl != nil {
				out = append(out, fmt.Sprintf("messages[%d]", i))
			}
		}
	}
	return out
}

// NewAnthropic starts a server that the test stops.
func NewAnthropic(t testing.TB) *Anthropic {
	s := &Anthropic{}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	s.URL = s.srv.URL
	t.Cleanup(s.srv.Close)
	return s
}

// Reply queues replies, answered in order.
func (s *Anthropic) Reply(r ...Reply) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.queue = append(s.queue, r...)
}

// Respond answers every request the queue has no reply for.
func (s *Anthropic) Respond(fn func(AnthropicRequest) Reply) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.respond = fn
}

// Requests returns the requests received so far.
func (s *Anthropic) Requests() []AnthropicRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]AnthropicRequest(nil), s.reqs...)
}

// Provider is an anthropic provider for this server with key "test-key".
func (s *Anthropic) Provider(name string, retries int) *nodes.Provider {
	return &nodes.Provider{Name: name, Type: nodes.ProviderAnthropic, BaseURL: s.URL, MaxRetries: &retries, APIKey: "test-key", APIKeyEnv: "TEST_KEY"}
}

func (s *Anthropic) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/v1/messages" {
		anthropicError(w, http.StatusNotFound, "not_found_error", "llmtest serves POST /v1/messages only, not "+r.URL.Path)
		return
	}
	var req AnthropicRequest
	dec := json.NewDecoder(r.Body)
	var raw json.RawMessage
	if err := dec.Decode(&raw); err != nil || json.Unmarshal(raw, &req) != nil {
		anthropicError(w, http.StatusBadRequest, "invalid_request_error", "request is not a Messages API request")
		return
	}
	req.Raw, req.APIKey, req.Version = raw, r.Header.Get("X-Api-Key"), r.Header.Get("Anthropic-Version")
	if req.APIKey == "" {
		req.APIKey = strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
	}
	s.mu.Lock()
	s.reqs = append(s.reqs, req)
	n := len(s.reqs)
	var reply Reply
	switch {
	case len(s.queue) > 0:
		reply, s.queue = s.queue[0], s.queue[1:]
	case s.respond != nil:
		fn := s.respond
		s.mu.Unlock()
		reply = fn(req)
		s.mu.Lock()
	default:
		reply = Reply{Status: http.StatusBadRequest, Content: fmt.Sprintf("llmtest: no reply scripted for request %d", n)}
	}
	s.mu.Unlock()
	if reply.Wait != nil {
		select {
		case <-reply.Wait:
		case <-r.Context().Done():
			return
		}
	}
	for k, v := range reply.Header {
		w.Header().Set(k, v)
	}
	switch {
	case reply.Status != 0 && reply.Status != http.StatusOK:
		anthropicError(w, reply.Status, "api_error", reply.Content)
	case reply.Body != "":
		w.Write([]byte(reply.Body))
	case req.Stream:
		s.stream(w, req, reply, n)
	default:
		w.Header().Set("Content-Type", "application/json")
		b, _ := json.Marshal(anthropicMessage(reply, req, n, true))
		w.Write(b)
	}
}

func anthropicError(w http.ResponseWriter, status int, kind, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	b, _ := json.Marshal(map[string]any{"type": "error", "error": map[string]any{"type": kind, "message": msg}})
	w.Write(b)
}

func anthropicUsage(r Reply, output bool) map[string]any {
	in, out := r.PromptTokens, r.CompletionTokens
	if in == 0 && out == 0 {
		in, out = 10, 5
	}
	u := map[string]any{"input_tokens": in, "cache_creation_input_tokens": r.CacheWriteTokens, "cache_read_input_tokens": r.CacheReadTokens, "output_tokens": 1}
	if output {
		u["output_tokens"] = out
	}
	return u
}

func anthropicStop(r Reply) string {
	if len(r.ToolCalls) > 0 {
		return "tool_use"
	}
	return "end_turn"
}

func toolInput(c ToolCall) json.RawMessage {
	if json.Valid([]byte(c.Function.Arguments)) && strings.TrimSpace(c.Function.Arguments) != "" {
		return json.RawMessage(c.Function.Arguments)
	}
	return json.RawMessage(`{}`)
}

// anthropicMessage is the whole answer (complete), or its start for a stream (no
// content, one output token so far).
func anthropicMessage(r Reply, req AnthropicRequest, n int, complete bool) map[string]any {
	content := []any{}
	var stop any
	if complete {
		if r.Content != "" {
			content = append(content, map[string]any{"type": "text", "text": r.Content})
		}
		for _, c := range r.ToolCalls {
			content = append(content, map[string]any{"type": "tool_use", "id": c.ID, "name": c.Function.Name, "input": toolInput(c)})
		}
		stop = anthropicStop(r)
	}
	return map[string]any{"id": fmt.Sprintf("msg_%d", n), "type": "message", "role": "assistant", "model": req.Model,
		"content": content, "stop_reason": stop, "stop_sequence": nil, "usage": anthropicUsage(r, complete)}
}

// stream answers as the Messages API streams: message_start, a text block in pieces of
// up to four bytes, each tool_use block with its input in two partial_json deltas,
// message_delta with the stop reason and the output tokens, message_stop.
func (s *Anthropic) stream(w http.ResponseWriter, req AnthropicRequest, r Reply, n int) {
	w.Header().Set("Content-Type", "text/event-stream")
	fl, _ := w.(http.Flusher)
	send := func(kind string, data map[string]any) {
		data["type"] = kind
		b, _ := json.Marshal(data)
		fmt.Fprintf(w, "event: %s\ndata: %s\n\n", kind, b)
		if fl != nil {
			fl.Flush()
		}
	}
	send("message_start", map[string]any{"message": anthropicMessage(r, req, n, false)})
	idx := 0
	if r.Content != "" {
		send("content_block_start", map[string]any{"index": idx, "content_block": map[string]any{"type": "text", "text": ""}})
		for _, piece := range Pieces(r.Content) {
			send("content_block_delta", map[string]any{"index": idx, "delta": map[string]any{"type": "text_delta", "text": piece}})
		}
		send("content_block_stop", map[string]any{"index": idx})
		idx++
	}
	for _, c := range r.ToolCalls {
		send("content_block_start", map[string]any{"index": idx, "content_block": map[string]any{"type": "tool_use", "id": c.ID, "name": c.Function.Name, "input": map[string]any{}}})
		in := string(toolInput(c))
		half := len(in) / 2
		for _, part := range []string{in[:half], in[half:]} {
			send("content_block_delta", map[string]any{"index": idx, "delta": map[string]any{"type": "input_json_delta", "partial_json": part}})
		}
		send("content_block_stop", map[string]any{"index": idx})
		idx++
	}
	u := anthropicUsage(r, true)
	send("message_delta", map[string]any{"delta": map[string]any{"stop_reason": anthropicStop(r), "stop_sequence": nil},
		"usage": map[string]any{"output_tokens": u["output_tokens"]}})
	send("message_stop", map[string]any{})
}
