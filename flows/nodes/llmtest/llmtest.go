// Package llmtest is a local server that speaks the OpenAI chat completions protocol —
// plain replies, JSON, tool calls, streaming (SSE), errors and malformed bodies — scripted
// per test, so the LLM components are tested without a network. It answers embeddings
// too, deterministically (Embed). It is for tests only.
package llmtest

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"unicode"

	"github.com/sluicehq/sluice/flows/nodes"
)

// Server is a scripted OpenAI-compatible server on loopback.
type Server struct {
	// URL is the base URL a provider uses, ending in /v1.
	URL string

	t         testing.TB
	srv       *httptest.Server
	mu        sync.Mutex
	queue     []Reply
	respond   func(Request) Reply
	reqs      []Request
	arrived   chan struct{}
	aborted   int
	embeds    []EmbeddingRequest
	embedFail []int
}

// EmbeddingRequest is an embeddings request as the server received it.
type EmbeddingRequest struct {
	Model          string   `json:"model"`
	Input          []string `json:"-"`
	Dimensions     int      `json:"dimensions"`
	EncodingFormat string   `json:"encoding_format"`
}

// EmbeddingRequests returns the embeddings requests received so far.
func (s *Server) EmbeddingRequests() []EmbeddingRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]EmbeddingRequest(nil), s.embeds...)
}

// FailEmbeddings answers the next embeddings requests with these statuses, in order.
func (s *Server) FailEmbeddings(status ...int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.embedFail = append(s.embedFail, status...)
}

// EmbedDimensions is the length of an embedding when the request names none, as
// OpenAI's text-embedding-3-small has.
const EmbedDimensions = 1536

// Embed is the server's embedding of text: a hashed bag of its lower-case words (each
// word adds one, with a sign, at the place its hash picks), normalised to length 1. The
// same text always has the same vector, and texts that share words are close, so
// retrieval is testable without a model.
func Embed(text string, dims int) []float32 {
	if dims <= 0 {
		dims = EmbedDimensions
	}
	v := make([]float64, dims)
	for _, w := range strings.FieldsFunc(strings.ToLower(text), func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) }) {
		h := fnv.New64a()
		h.Write([]byte(w))
		x := h.Sum64()
		sign := 1.0
		if x>>63 == 1 {
			sign = -1
		}
		v[x%uint64(dims)] += sign
	}
	var n float64
	for _, x := range v {
		n += x * x
	}
	out := make([]float32, dims)
	if n == 0 {
		out[0] = 1
		return out
	}
	n = math.Sqrt(n)
	for i, x := range v {
		out[i] = float32(x / n)
	}
	return out
}

// embeddings answers POST /v1/embeddings.
func (s *Server) embeddings(w http.ResponseWriter, r *http.Request) {
	var req EmbeddingRequest
	var raw struct {
		Input json.RawMessage `json:"input"`
	}
	body, _ := io.ReadAll(r.Body)
	if json.Unmarshal(body, &req) != nil || json.Unmarshal(body, &raw) != nil {
		http.Error(w, `{"error": {"message": "request is not JSON"}}`, http.StatusBadRequest)
		return
	}
	var one string
	if json.Unmarshal(raw.Input, &one) == nil {
		req.Input = []string{one}
	} else if json.Unmarshal(raw.Input, &req.Input) != nil {
		http.Error(w, `{"error": {"message": "llmtest embeds a string or a list of strings"}}`, http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	s.embeds = append(s.embeds, req)
	fail := 0
	if len(s.embedFail) > 0 {
		fail, s.embedFail = s.embedFail[0], s.embedFail[1:]
	}
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	if fail != 0 {
		w.Header().Set("Retry-After-Ms", "1")
		w.WriteHeader(fail)
		fmt.Fprintf(w, `{"error": {"message": "llmtest: scripted failure %d", "type": "llmtest"}}`, fail)
		return
	}
	data := make([]any, len(req.Input))
	tokens := 0
	for i, text := range req.Input {
		vec := Embed(text, req.Dimensions)
		tokens += len(strings.Fields(text)) + 1
		var emb any = vec
		if req.EncodingFormat == "base64" {
			b := make([]byte, 4*len(vec))
			for j, x := range vec {
				binary.LittleEndian.PutUint32(b[4*j:], math.Float32bits(x))
			}
			emb = base64.StdEncoding.EncodeToString(b)
		}
		data[i] = map[string]any{"object": "embedding", "index": i, "embedding": emb}
	}
	b, _ := json.Marshal(map[string]any{"object": "list", "model": req.Model, "data": data,
		"usage": map[string]any{"prompt_tokens": tokens, "total_tokens": tokens}})
	w.Write(b)
}

// Aborted is how many requests their client gave up on while the server held them
// (a Reply with Wait).
func (s *Server) Aborted() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.aborted
}

// Request is a chat completion request as the server received it.
type Request struct {
	Model          string          `json:"model"`
	Messages       []Message       `json:"messages"`
	Tools          []Tool          `json:"tools"`
	Stream         bool            `json:"stream"`
	StreamOptions  json.RawMessage `json:"stream_options"`
	ResponseFormat json.RawMessage `json:"response_format"`
	Temperature    *float64        `json:"temperature"`
	MaxTokens      *int64          `json:"max_tokens"`
	// Authorization is the request's Authorization header.
	Authorization string `json:"-"`
}

// Message is one message of a request or a reply.
type Message struct {
	Role       string     `json:"role"`
	Content    any        `json:"content"`
	ToolCalls  []ToolCall `json:"tool_calls,omitempty"`
	ToolCallID string     `json:"tool_call_id,omitempty"`
}

// Text is the message's content as text.
func (m Message) Text() string {
	switch c := m.Content.(type) {
	case string:
		return c
	case nil:
		return ""
	default:
		b, _ := json.Marshal(c)
		return string(b)
	}
}

// Tool is a tool offered in a request.
type Tool struct {
	Type     string `json:"type"`
	Function struct {
		Name        string          `json:"name"`
		Description string          `json:"description"`
		Parameters  json.RawMessage `json:"parameters"`
	} `json:"function"`
}

// ToolCall is a model's call of a tool.
type ToolCall struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

// Call returns a tool call.
func Call(id, name, args string) ToolCall {
	c := ToolCall{ID: id, Type: "function"}
	c.Function.Name, c.Function.Arguments = name, args
	return c
}

// Last is the request's last message.
func (r Request) Last() Message {
	if len(r.Messages) == 0 {
		return Message{}
	}
	return r.Messages[len(r.Messages)-1]
}

// ToolNames lists the tools offered.
func (r Request) ToolNames() []string {
	var names []string
	for _, t := range r.Tools {
		names = append(names, t.Function.Name)
	}
	return names
}

// Reply is what the server answers one request with.
type Reply struct {
	// Status, when not 0 or 200, answers with an OpenAI error body and this status.
	Status int
	// Header is added to the response (e.g. Retry-After-Ms).
	Header map[string]string
	// Body, when set, is sent as it is: a malformed reply.
	Body string
	// Content and ToolCalls make the assistant message.
	Content   string
	ToolCalls []ToolCall
	// Usage is reported; zero values report 10 prompt and 5 completion tokens.
	PromptTokens, CompletionTokens int64
	// CacheReadTokens and CacheWriteTokens are reported by the Anthropic server as
	// cache_read_input_tokens and cache_creation_input_tokens (on top of PromptTokens,
	// as Anthropic counts them); the OpenAI server reports CacheReadTokens as
	// prompt_tokens_details.cached_tokens (part of PromptTokens, as OpenAI counts them).
	CacheReadTokens, CacheWriteTokens int64
	// Wait, when set, holds the answer until it is closed (or the request ends).
	Wait chan struct{}
	// Hold, when set, pauses a streamed answer after HoldAfter pieces of its content
	// until it is closed (or the request ends).
	Hold      chan struct{}
	HoldAfter int
}

// Text is a reply with content.
func Text(s string) Reply { return Reply{Content: s} }

// Calls is a reply that calls tools.
func Calls(calls ...ToolCall) Reply { return Reply{ToolCalls: calls} }

// Error is an error reply; retryAfterMS > 0 sets Retry-After-Ms so retries are quick.
func Error(status int, message string) Reply {
	return Reply{Status: status, Header: map[string]string{"Retry-After-Ms": "1"}, Content: message}
}

// New starts a server that the test stops.
func New(t testing.TB) *Server {
	s := &Server{t: t, arrived: make(chan struct{}, 10000)}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	s.URL = s.srv.URL + "/v1"
	t.Cleanup(s.srv.Close)
	return s
}

// Reply queues replies, answered in order.
func (s *Server) Reply(r ...Reply) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.queue = append(s.queue, r...)
}

// Respond answers every request the queue has no reply for.
func (s *Server) Respond(fn func(Request) Reply) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.respond = fn
}

// Requests returns the requests received so far.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.reqs...)
}

// Arrived receives once for every request received (as it arrives, before its reply).
func (s *Server) Arrived() <-chan struct{} { return s.arrived }

// Calls is the number of requests received.
func (s *Server) Calls() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.reqs)
}

// Provider is a provider for this server, retrying quickly.
func (s *Server) Provider(name string, retries int) *nodes.Provider {
	return &nodes.Provider{Name: name, BaseURL: s.URL, MaxRetries: &retries}
}

// Env is an Env whose default provider (and "fake") is this server.
func (s *Server) Env(retries int) *nodes.Env {
	return &nodes.Env{Providers: map[string]*nodes.Provider{
		nodes.DefaultProvider: s.Provider(nodes.DefaultProvider, retries),
		"fake":                s.Provider("fake", retries),
	}}
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/embeddings") {
		s.embeddings(w, r)
		return
	}
	if r.Method != http.MethodPost || !strings.HasSuffix(r.URL.Path, "/chat/completions") {
		http.Error(w, `{"error": {"message": "llmtest serves POST /v1/chat/completions and /v1/embeddings only"}}`, http.StatusNotFound)
		return
	}
	var req Request
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, `{"error": {"message": "request is not JSON"}}`, http.StatusBadRequest)
		return
	}
	req.Authorization = r.Header.Get("Authorization")
	s.mu.Lock()
	s.reqs = append(s.reqs, req)
	n := len(s.reqs)
	select {
	case s.arrived <- struct{}{}:
	default:
	}
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
			s.mu.Lock()
			s.aborted++
			s.mu.Unlock()
			return
		}
	}
	for k, v := range reply.Header {
		w.Header().Set(k, v)
	}
	switch {
	case reply.Status != 0 && reply.Status != http.StatusOK:
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(reply.Status)
		b, _ := json.Marshal(map[string]any{"error": map[string]any{"message": reply.Content, "type": "llmtest", "code": nil, "param": nil}})
		w.Write(b)
	case reply.Body != "":
		if req.Stream {
			w.Header().Set("Content-Type", "text/event-stream")
		} else {
			w.Header().Set("Content-Type", "application/json")
		}
		w.Write([]byte(reply.Body))
	case req.Stream:
		s.stream(r.Context(), w, req, reply, n)
	default:
		w.Header().Set("Content-Type", "application/json")
		b, _ := json.Marshal(completion(reply, req, n))
		w.Write(b)
	}
}

func usage(r Reply) map[string]any {
	p, c := r.PromptTokens, r.CompletionTokens
	if p == 0 && c == 0 {
		p, c = 10, 5
	}
	u := map[string]any{"prompt_tokens": p, "completion_tokens": c, "total_tokens": p + c}
	if r.CacheReadTokens > 0 {
		u["prompt_tokens_details"] = map[string]any{"cached_tokens": r.CacheReadTokens}
	}
	return u
}

func finish(r Reply) string {
	if len(r.ToolCalls) > 0 {
		return "tool_calls"
	}
	return "stop"
}

func completion(r Reply, req Request, n int) map[string]any {
	msg := map[string]any{"role": "assistant", "content": r.Content, "refusal": nil}
	if len(r.ToolCalls) > 0 {
		msg["tool_calls"] = r.ToolCalls
		if r.Content == "" {
			msg["content"] = nil
		}
	}
	return map[string]any{"id": fmt.Sprintf("chatcmpl-%d", n), "object": "chat.completion", "created": 1, "model": req.Model,
		"choices": []any{map[string]any{"index": 0, "message": msg, "finish_reason": finish(r), "logprobs": nil}},
		"usage":   usage(r)}
}

// stream answers as server-sent events: the content a few characters per chunk, each
// tool call's name first and its arguments in two pieces, the finish reason, then the
// usage when the request asked for it.
func (s *Server) stream(ctx context.Context, w http.ResponseWriter, req Request, r Reply, n int) {
	w.Header().Set("Content-Type", "text/event-stream")
	fl, _ := w.(http.Flusher)
	send := func(choices []any, extra map[string]any) {
		ch := map[string]any{"id": fmt.Sprintf("chatcmpl-%d", n), "object": "chat.completion.chunk", "created": 1, "model": req.Model, "choices": choices}
		for k, v := range extra {
			ch[k] = v
		}
		b, _ := json.Marshal(ch)
		fmt.Fprintf(w, "data: %s\n\n", b)
		if fl != nil {
			fl.Flush()
		}
	}
	delta := func(d map[string]any, finish any) []any {
		return []any{map[string]any{"index": 0, "delta": d, "finish_reason": finish}}
	}
	send(delta(map[string]any{"role": "assistant", "content": ""}, nil), nil)
	for i, piece := range Pieces(r.Content) {
		if r.Hold != nil && i == r.HoldAfter {
			select {
			case <-r.Hold:
			case <-ctx.Done():
				return
			}
		}
		send(delta(map[string]any{"content": piece}, nil), nil)
	}
	for i, c := range r.ToolCalls {
		send(delta(map[string]any{"tool_calls": []any{map[string]any{"index": i, "id": c.ID, "type": "function",
			"function": map[string]any{"name": c.Function.Name, "arguments": ""}}}}, nil), nil)
		half := len(c.Function.Arguments) / 2
		for _, part := range []string{c.Function.Arguments[:half], c.Function.Arguments[half:]} {
			send(delta(map[string]any{"tool_calls": []any{map[string]any{"index": i, "function": map[string]any{"arguments": part}}}}, nil), nil)
		}
	}
	send(delta(map[string]any{}, finish(r)), nil)
	if strings.Contains(string(req.StreamOptions), "include_usage") {
		send([]any{}, map[string]any{"usage": usage(r)})
	}
	fmt.Fprint(w, "data: [DONE]\n\n")
}

// Pieces is how the server splits streamed content: up to four bytes a chunk, never
// inside a UTF-8 character.
func Pieces(s string) []string {
	var out []string
	for len(s) > 0 {
		n := min(4, len(s))
		for n < len(s) && n > 0 && (s[n]&0xC0) == 0x80 {
			n++
		}
		out = append(out, s[:n])
		s = s[n:]
	}
	return out
}
