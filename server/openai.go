package server

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"
	"unicode"

	"github.com/labstack/echo/v4"
	"github.com/openai/openai-go/v3"
	"github.com/sluicehq/sluice/flows"
	"github.com/sluicehq/sluice/flows/engine"
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
	out := struct {
		Object string         `json:"object"`
		Data   []openai.Model `json:"data"`
	}{Object: "list", Data: []openai.Model{}}
	for _, p := range s.gateway().flows(c.Request().Context(), chatFlow) {
		out.Data = append(out.Data, modelOf(p))
	}
	return c.JSON(http.StatusOK, out)
}

// getModel serves GET /v1/models/{model}: a flow that takes chat messages.
func (s *Server) getModel(c echo.Context) error {
	id := c.Param("model")
	if flows.ValidFlowID(id) {
		if p, err := s.gateway().plan(c.Request().Context(), id); err == nil && chatFlow(p) {
			return c.JSON(http.StatusOK, modelOf(p))
		}
	}
	return &flows.Error{Code: flows.NotFound, Path: "model", Message: fmt.Sprintf("no model %q: a model is the id of a flow that takes chat messages (GET /v1/models lists them)", id)}
}

func modelOf(p *flows.Plan) openai.Model {
	return openai.Model{ID: p.Flow, Object: "model", OwnedBy: "sluice"}
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
//
// One call is one run. A run's outcome is final (the flow retried its own steps), so a
// run that failed or waits for a person is answered with a status no OpenAI client
// retries (400, see runOutcome); and a request seen again from the same caller — the
// same Idempotency-Key, or without one the same body within ChatDedupe — is answered
// from the run the first one started instead of starting another (the SDKs retry
// timeouts and dropped connections whatever the status).
func (s *Server) chatCompletions(c echo.Context) error {
	var req ChatCompletionRequest
	b, err := readBody(c)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, &req); err != nil {
		return &flows.Error{Code: flows.Invalid, Message: "the body is not a chat completion request: " + err.Error()}
	}
	if !flows.ValidFlowID(req.Model) {
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
	// A conversation's session is part of what makes two requests the same one (its id
	// may come in a header, outside the body).
	same := append(b[:len(b):len(b)], "\nsession:"+session...)
	runID, seen, err := s.dedupeChat(c, plan.Flow, same)
	if err != nil {
		return err
	}
	// From here on a run is started: a client that retried an error would start another.
	c.Response().Header().Set("X-Should-Retry", "false")
	created := time.Now().Unix()
	last := ""
	if !seen {
		if runID, last, err = g.start(ctx, plan, input, engine.StartOptions{RunID: runID}, req.Stream); err != nil {
			s.forgetChat(c, plan.Flow, same)
			return err
		}
	} else if err := s.awaitRun(ctx, plan.Flow, runID); err != nil {
		return err
	}
	c.Response().Header().Set("X-Sluice-Run", runID)
	id := "chatcmpl-" + runID
	if !req.Stream {
		run, err := g.follow(ctx, plan, runID, last, nil)
		if err != nil {
			if ctx.Err() != nil && !seen {
				g.cancel(plan.Flow, runID)
			}
			return err
		}
		if err := runOutcome(run); err != nil {
			return err
		}
		return c.JSONBlob(http.StatusOK, wireJSON(openai.ChatCompletion{
			ID: id, Created: created, Model: plan.Flow, Usage: usageOf(run),
			Choices: []openai.ChatCompletionChoice{{Index: 0, FinishReason: "stop",
				Message: openai.ChatCompletionMessage{Role: "assistant", Content: answerText(run.Output())}}},
		}, "usage"))
	}

	w := c.Response()
	w.Header().Set(echo.HeaderContentType, "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	send := func(b []byte) {
		fmt.Fprintf(w, "data: %s\n\n", b)
		w.Flush()
	}
	chunk := func(delta openai.ChatCompletionChunkChoiceDelta, finish string) []byte {
		return wireJSON(openai.ChatCompletionChunk{ID: id, Created: created, Model: plan.Flow,
			Choices: []openai.ChatCompletionChunkChoice{{Index: 0, Delta: delta, FinishReason: finish}}})
	}
	send(chunk(openai.ChatCompletionChunkChoiceDelta{Role: "assistant"}, ""))
	var streamed strings.Builder
	var onEvent func(store.Event)
	if !seen { // a retry joins the run late: it gets the answer whole
		onEvent = func(ev store.Event) {
			if ev.Type != "token" {
				return
			}
			var d struct {
				Text string `json:"text"`
			}
			if json.Unmarshal(ev.Data, &d) == nil && d.Text != "" {
				streamed.WriteString(d.Text)
				send(chunk(openai.ChatCompletionChunkChoiceDelta{Content: d.Text}, ""))
			}
		}
	}
	run, err := g.follow(ctx, plan, runID, last, onEvent)
	if err == nil {
		err = runOutcome(run)
	}
	if err != nil {
		if ctx.Err() != nil {
			if !seen {
				g.cancel(plan.Flow, runID)
			}
			return nil
		}
		send(wireJSON(map[string]any{"error": map[string]any{"message": err.Error(), "type": "server_error", "code": string(flows.ErrorCode(err))}}))
		return nil
	}
	// The answer is what the tokens said; whatever of it they did not say comes now.
	// (A flow whose answer is not its streamed text gets it whole when nothing streamed.)
	answer := answerText(run.Output())
	if rest, ok := strings.CutPrefix(answer, streamed.String()); ok && rest != "" {
		send(chunk(openai.ChatCompletionChunkChoiceDelta{Content: rest}, ""))
	} else if !ok && streamed.Len() == 0 {
		send(chunk(openai.ChatCompletionChunkChoiceDelta{Content: answer}, ""))
	}
	send(chunk(openai.ChatCompletionChunkChoiceDelta{}, "stop"))
	if req.StreamOptions != nil && req.StreamOptions.IncludeUsage {
		send(wireJSON(openai.ChatCompletionChunk{ID: id, Created: created, Model: plan.Flow,
			Choices: []openai.ChatCompletionChunkChoice{}, Usage: usageOf(run)}, "usage"))
	}
	fmt.Fprint(w, "data: [DONE]\n\n")
	w.Flush()
	return nil
}

// dedupeKey is the hash a chat request is known by: its caller (the credential it sent
// and its address) with its Idempotency-Key, or else its body.
func dedupeKey(c echo.Context, body []byte) (key string, ttl time.Duration, byKey bool) {
	h := sha256.New()
	fmt.Fprintf(h, "%s\n%s\n", c.Request().Header.Get(echo.HeaderAuthorization), c.RealIP())
	if env := environmentFrom(c.Request().Context()); env != "" {
		fmt.Fprintf(h, "env\n%s\n", env) // the same call in another environment is another run
	}
	if k := c.Request().Header.Get("Idempotency-Key"); k != "" {
		fmt.Fprintf(h, "key\n%s", k)
		return hex.EncodeToString(h.Sum(nil)), idempotencyKeyTTL, true
	}
	fmt.Fprintf(h, "body\n%s", body)
	return hex.EncodeToString(h.Sum(nil)), 0, false
}

// idempotencyKeyTTL is how long an Idempotency-Key names its run (as Stripe keeps keys).
const idempotencyKeyTTL = 24 * time.Hour

// dedupeChat returns the run a chat request is: a new run id, or (seen) the run an
// earlier, identical request started. An Idempotency-Key sent with another body is
// refused.
func (s *Server) dedupeChat(c echo.Context, flow string, body []byte) (string, bool, error) {
	runID := engine.NewRunID()
	if s.rdb == nil {
		return runID, false, nil
	}
	key, ttl, byKey := dedupeKey(c, body)
	if !byKey {
		ttl = s.cfg.ChatDedupe
	}
	if ttl <= 0 {
		return runID, false, nil
	}
	sum := sha256.Sum256(body)
	bodyHash := hex.EncodeToString(sum[:8])
	prev, claimed, err := s.rdb.Claim(c.Request().Context(), flow, key, runID+" "+bodyHash, ttl)
	if err != nil || claimed {
		return runID, false, err
	}
	prevRun, prevBody, _ := strings.Cut(prev, " ")
	if byKey && prevBody != bodyHash {
		return "", false, &flows.Error{Code: flows.Invalid, Flow: flow, Path: "Idempotency-Key",
			Message: fmt.Sprintf("this Idempotency-Key was used for another request (run %s): send a new key for a new request", prevRun)}
	}
	return prevRun, true, nil
}

// forgetChat drops a request's claim when its run could not be started, so that a retry
// tries again instead of waiting for a run that never came.
func (s *Server) forgetChat(c echo.Context, flow string, body []byte) {
	if s.rdb == nil {
		return
	}
	key, _, _ := dedupeKey(c, body)
	ctx, cancel := context.WithTimeout(context.WithoutCancel(c.Request().Context()), 5*time.Second)
	defer cancel()
	if err := s.rdb.Unclaim(ctx, flow, key); err != nil {
		s.log.Warn("cannot drop the dedupe claim of a chat request", "flow", flow, "error", err)
	}
}

// awaitRun waits until run exists: the first of two identical requests claims its id
// before it starts the run.
func (s *Server) awaitRun(ctx context.Context, flow, run string) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	for {
		_, err := s.runs().Info(ctx, flow, run)
		if flows.ErrorCode(err) != flows.NotFound {
			return err
		}
		select {
		case <-ctx.Done():
			return &flows.Error{Code: flows.Unavailable, Flow: flow, Message: fmt.Sprintf("the same request started run %s, which has not appeared; try again", run)}
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// wireJSON is v as the OpenAI API sends it. The openai-go types that describe the wire
// objects marshal every field, set or not; the API leaves out (or sends null) what is
// not set, and clients read a zero-valued audio or function_call as one. So members
// that are null, empty strings (but content) or objects with nothing set are dropped,
// except the objects a client looks for even when empty (delta, message, choices) and
// those named in keep (a completion's usage, which a chunk has only at the end).
func wireJSON(v any, keep ...string) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		return []byte(`{"error": {"message": "internal error: the answer could not be encoded"}}`)
	}
	var tree any
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if err := dec.Decode(&tree); err != nil {
		return b
	}
	kept := map[string]bool{"delta": true, "message": true, "choices": true, "content": true}
	for _, k := range keep {
		kept[k] = true
	}
	out, _ := json.Marshal(prune(tree, kept))
	return out
}

// prune drops the unset members of every object in v but those in kept.
func prune(v any, kept map[string]bool) any {
	obj, ok := v.(map[string]any)
	if !ok {
		if list, ok := v.([]any); ok {
			for i := range list {
				list[i] = prune(list[i], kept)
			}
		}
		return v
	}
	for k, x := range obj {
		x = prune(x, kept)
		obj[k] = x
		if kept[k] {
			continue
		}
		if unset(x) {
			delete(obj, k)
		}
	}
	return obj
}

// unset reports whether a pruned value says nothing: null, "", or an object of zeros.
func unset(v any) bool {
	switch x := v.(type) {
	case nil:
		return true
	case string:
		return x == ""
	case json.Number:
		return false
	case map[string]any:
		for _, y := range x {
			if !unset(y) && !isZero(y) {
				return false
			}
		}
		return true
	}
	return false
}

func isZero(v any) bool {
	switch x := v.(type) {
	case json.Number:
		return x.String() == "0"
	case bool:
		return !x
	case []any:
		return len(x) == 0
	}
	return unset(v)
}

func usageOf(r *store.Run) openai.CompletionUsage {
	return openai.CompletionUsage{PromptTokens: r.Usage.InputTokens, CompletionTokens: r.Usage.OutputTokens, TotalTokens: r.Usage.Total()}
}

// runOutcome is the error of a run that did not succeed: failed or cancelled (the
// run's error), or waiting for a person (saying where to approve it). Both are 400s
// (codeRunFailed, codeRunWaiting): the OpenAI SDK retries 408, 409, 429 and 5xx unless
// told X-Should-Retry: false, the Vercel AI SDK retries 408, 409, 429 and 5xx whatever it
// is told, LangChain retries everything but 400 to 407 and 409; a retry cannot help a
// run that failed after its own retries or waits for a person.
func runOutcome(r *store.Run) error {
	switch r.Status {
	case store.StatusSucceeded:
		return nil
	case store.StatusWaiting:
		nodes := make([]string, 0, len(r.Waits))
		for n := range r.Waits {
			nodes = append(nodes, n)
		}
		return &flows.Error{Code: codeRunWaiting, Flow: r.Flow, Message: fmt.Sprintf(
			"run %s waits for a person's approval (at %s): approve it in Sluice (/flows/%s/runs/%s) and read its output from GET /api/flows/%s/runs/%s",
			r.ID, strings.Join(nodes, ", "), r.Flow, r.ID, r.Flow, r.ID)}
	}
	return &flows.Error{Code: codeRunFailed, Flow: r.Flow, Node: r.ErrorNode, Message: fmt.Sprintf("run %s %s: %s", r.ID, r.Status, r.Error)}
}
