package server

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"
	"unicode"

	"github.com/labstack/echo/v4"
	"github.com/sluicehq/sluice/flows"
	"github.com/sluicehq/sluice/store"
)

// The OpenAI-compatible face of Sluice: any OpenAI SDK, chat UI or agent framework can
// call a flow as if it were a model. The model is a flow id; a flow qualifies when its
// input node's schema has a "messages" property of type array (the chat's messages).
// The run's input is {"messages": [{"role", "content"}, ...]}; the answer is the run's
// output (see answerText); a streamed answer is the run's token events as they come.
// A conversation that a flow remembers (a memory node keyed by {{.session_id}}) goes on
// across requests when the client names it: the body's "session_id" (an extra field the
// OpenAI SDKs send with extra_body) or the X-Session-Id header becomes the run input's
// session_id, and the answer says it back in X-Session-Id.

// ChatCompletionRequest is the part of an OpenAI chat completion request Sluice reads;
// sampling settings, tools and the like are the flow's business and are ignored.
type ChatCompletionRequest struct {
	Model         string            `json:"model"`
	Messages      []ChatMessageIn   `json:"messages"`
	Stream        bool              `json:"stream"`
	StreamOptions *ChatStreamOption `json:"stream_options"`
	// SessionID names the conversation for flows that remember one (not OpenAI's).
	SessionID string `json:"session_id"`
}

// SessionHeader carries a conversation's session id in a request and its answer.
const SessionHeader = "X-Session-Id"

// maxSessionID is the longest session id, as the memory component takes it.
const maxSessionID = 256

// sessionOf is the request's session id: the body's, else the header's ("" for none).
func sessionOf(c echo.Context, req *ChatCompletionRequest) (string, error) {
	id := req.SessionID
	path := "session_id"
	if id == "" {
		id, path = c.Request().Header.Get(SessionHeader), SessionHeader
	}
	id = strings.TrimSpace(id)
	if len(id) > maxSessionID || strings.ContainsFunc(id, unicode.IsControl) {
		return "", &flows.Error{Code: flows.Invalid, Path: path, Message: fmt.Sprintf("a session id is 1 to %d characters without control characters", maxSessionID)}
	}
	return id, nil
}

// ChatStreamOption asks for usage at the end of a stream.
type ChatStreamOption struct {
	IncludeUsage bool `json:"include_usage"`
}

// ChatMessageIn is one message of a request: its content is text, or a list of parts of
// which only text parts are read.
type ChatMessageIn struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
	Name    string          `json:"name,omitempty"`
}

// ChatMessage is a message as the flow gets it.
type ChatMessage struct {
	Role    string `json:"role"`
	Content string `json:"content"`
	Name    string `json:"name,omitempty"`
}

// ChatUsage is a completion's token usage: the whole run's.
type ChatUsage struct {
	PromptTokens     int64 `json:"prompt_tokens"`
	CompletionTokens int64 `json:"completion_tokens"`
	TotalTokens      int64 `json:"total_tokens"`
}

// chatFlow reports whether a flow takes chat messages: its input schema has a
// "messages" property of type array.
func chatFlow(p *flows.Plan) bool {
	var s struct {
		Properties map[string]struct {
			Type any `json:"type"`
		} `json:"properties"`
	}
	if json.Unmarshal(inputSchema(p), &s) != nil {
		return false
	}
	m, ok := s.Properties["messages"]
	if !ok {
		return false
	}
	switch t := m.Type.(type) {
	case string:
		return t == "array"
	case []any:
		for _, x := range t {
			if x == "array" {
				return true
			}
		}
	}
	return false
}

func (s *Server) gateway() *gateway {
	return &gateway{lib: s.library, eng: s.runs(), rdb: s.rdb, hub: s.hub, log: s.log}
}

// listModels serves GET /v1/models: the flows that take chat messages.
func (s *Server) listModels(c echo.Context) error {
	type model struct {
		ID      string `json:"id"`
		Object  string `json:"object"`
		Created int64  `json:"created"`
		OwnedBy string `json:"owned_by"`
	}
	out := struct {
		Object string  `json:"object"`
		Data   []model `json:"data"`
	}{Object: "list", Data: []model{}}
	for _, p := range s.gateway().flows(c.Request().Context(), chatFlow) {
		out.Data = append(out.Data, model{ID: p.Flow, Object: "model", OwnedBy: "sluice"})
	}
	return c.JSON(http.StatusOK, out)
}

// chatMessages turns the request's messages into the flow's input.
func chatMessages(in []ChatMessageIn) ([]ChatMessage, error) {
	if len(in) == 0 {
		return nil, &flows.Error{Code: flows.Invalid, Path: "messages", Message: "give at least one message"}
	}
	out := make([]ChatMessage, len(in))
	for i, m := range in {
		path := fmt.Sprintf("messages[%d]", i)
		switch m.Role {
		case "system", "developer", "user", "assistant", "tool":
		default:
			return nil, &flows.Error{Code: flows.Invalid, Path: path + ".role", Message: fmt.Sprintf("%q is not a chat role", m.Role)}
		}
		out[i] = ChatMessage{Role: m.Role, Name: m.Name}
		if len(m.Content) == 0 || string(m.Content) == "null" {
			continue
		}
		if json.Unmarshal(m.Content, &out[i].Content) == nil {
			continue
		}
		var parts []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		}
		if err := json.Unmarshal(m.Content, &parts); err != nil {
			return nil, &flows.Error{Code: flows.Invalid, Path: path + ".content", Message: "content is text or a list of parts"}
		}
		var texts []string
		for j, p := range parts {
			if p.Type != "text" {
				return nil, &flows.Error{Code: flows.Unsupported, Path: fmt.Sprintf("%s.content[%d]", path, j), Message: fmt.Sprintf("a flow takes text parts only, not %q", p.Type)}
			}
			texts = append(texts, p.Text)
		}
		out[i].Content = strings.Join(texts, "\n")
	}
	return out, nil
}

// chatCompletions serves POST /v1/chat/completions: runs the flow named by model with
// the messages and answers in the OpenAI format, streamed with stream: true.
func (s *Server) chatCompletions(c echo.Context) error {
	var req ChatCompletionRequest
	b, err := readBody(c)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, &req); err != nil {
		return &flows.Error{Code: flows.Invalid, Message: "the body is not a chat completion request: " + err.Error()}
	}
	if !flows.ValidID(req.Model) {
		return &flows.Error{Code: flows.NotFound, Path: "model", Message: fmt.Sprintf("no flow %q: the model is the id of a flow that takes chat messages (GET /v1/models lists them)", req.Model)}
	}
	msgs, err := chatMessages(req.Messages)
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	g := s.gateway()
	plan, err := g.plan(ctx, req.Model)
	if err != nil {
		return err
	}
	if !chatFlow(plan) {
		return &flows.Error{Code: flows.NotFound, Flow: plan.Flow, Path: "model",
			Message: "this flow does not take chat messages: its input schema needs a \"messages\" property of type array (see docs/api.md)"}
	}
	session, err := sessionOf(c, &req)
	if err != nil {
		return err
	}
	in := map[string]any{"messages": msgs}
	if session != "" {
		in["session_id"] = session
		c.Response().Header().Set(SessionHeader, session)
	}
	input, _ := json.Marshal(in)
	id := "chatcmpl-" + plan.Flow
	// From here on a run is started: a client that retried an error would start another.
	c.Response().Header().Set("X-Should-Retry", "false")
	created := time.Now().Unix()
	if !req.Stream {
		runID, run, err := g.run(ctx, plan, input, nil)
		if err != nil {
			if runID != "" && ctx.Err() != nil {
				g.cancel(plan.Flow, runID)
			}
			return err
		}
		c.Response().Header().Set("X-Sluice-Run", run.ID)
		if err := runOutcome(run); err != nil {
			return err
		}
		return c.JSON(http.StatusOK, map[string]any{
			"id": "chatcmpl-" + run.ID, "object": "chat.completion", "created": created, "model": plan.Flow,
			"choices": []any{map[string]any{"index": 0, "finish_reason": "stop", "logprobs": nil,
				"message": map[string]any{"role": "assistant", "content": answerText(run.Output()), "refusal": nil}}},
			"usage": usageOf(run),
		})
	}

	w := c.Response()
	w.Header().Set(echo.HeaderContentType, "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	send := func(v any) {
		b, _ := json.Marshal(v)
		fmt.Fprintf(w, "data: %s\n\n", b)
		w.Flush()
	}
	chunk := func(delta map[string]any, finish any) map[string]any {
		return map[string]any{"id": id, "object": "chat.completion.chunk", "created": created, "model": plan.Flow,
			"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": nil}}}
	}
	send(chunk(map[string]any{"role": "assistant", "content": ""}, nil))
	var streamed strings.Builder
	runID, run, err := g.run(ctx, plan, input, func(ev store.Event) {
		if ev.Type != "token" {
			return
		}
		var d struct {
			Text string `json:"text"`
		}
		if json.Unmarshal(ev.Data, &d) == nil && d.Text != "" {
			streamed.WriteString(d.Text)
			send(chunk(map[string]any{"content": d.Text}, nil))
		}
	})
	if err == nil {
		err = runOutcome(run)
	}
	if err != nil {
		if runID != "" && ctx.Err() != nil {
			g.cancel(plan.Flow, runID)
			return nil
		}
		send(map[string]any{"error": map[string]any{"message": err.Error(), "type": "server_error", "code": string(flows.ErrorCode(err))}})
		return nil
	}
	// The answer is what the tokens said; whatever of it they did not say comes now.
	// (A flow whose answer is not its streamed text gets it whole when nothing streamed.)
	answer := answerText(run.Output())
	if rest, ok := strings.CutPrefix(answer, streamed.String()); ok && rest != "" {
		send(chunk(map[string]any{"content": rest}, nil))
	} else if !ok && streamed.Len() == 0 {
		send(chunk(map[string]any{"content": answer}, nil))
	}
	send(chunk(map[string]any{}, "stop"))
	if req.StreamOptions != nil && req.StreamOptions.IncludeUsage {
		send(map[string]any{"id": id, "object": "chat.completion.chunk", "created": created, "model": plan.Flow,
			"choices": []any{}, "usage": usageOf(run)})
	}
	fmt.Fprint(w, "data: [DONE]\n\n")
	w.Flush()
	return nil
}

func usageOf(r *store.Run) ChatUsage {
	return ChatUsage{PromptTokens: r.Usage.InputTokens, CompletionTokens: r.Usage.OutputTokens, TotalTokens: r.Usage.Total()}
}

// runOutcome is the error of a run that did not succeed: failed or cancelled (the
// run's error), or waiting for a person (a conflict saying where to approve it).
func runOutcome(r *store.Run) error {
	switch r.Status {
	case store.StatusSucceeded:
		return nil
	case store.StatusWaiting:
		nodes := make([]string, 0, len(r.Waits))
		for n := range r.Waits {
			nodes = append(nodes, n)
		}
		return &flows.Error{Code: flows.Conflict, Flow: r.Flow, Message: fmt.Sprintf(
			"run %s waits for a person's approval (at %s): approve it in Sluice (/flows/%s/runs/%s) and read its output from GET /api/flows/%s/runs/%s",
			r.ID, strings.Join(nodes, ", "), r.Flow, r.ID, r.Flow, r.ID)}
	}
	return &flows.Error{Code: flows.Unavailable, Flow: r.Flow, Node: r.ErrorNode, Message: fmt.Sprintf("run %s %s: %s", r.ID, r.Status, r.Error)}
}
