package server_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/sluicehq/sluice/flows/nodes/llmtest"
	"github.com/sluicehq/sluice/server"
	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/storetest"
)

// chatFlow is a flow that takes chat messages and answers with a model, streaming.
const chatFlow = `{"sluice": 1, "id": "chat", "description": "Answers like a support desk.",
  "nodes": [
    {"id": "in", "type": "input", "params": {"schema": {"type": "object", "required": ["messages"], "properties": {"messages": {"type": "array"}}}}},
    {"id": "ask", "type": "llm", "params": {"model": "m", "stream": true, "system": "You are a support desk.",
      "user": "{{range .messages}}{{.role}}: {{.content}}\n{{end}}"}},
    {"id": "out", "type": "output", "params": {"value": "{answer}"}}
  ],
  "edges": [{"from": "in", "to": "ask"}, {"from": "ask", "to": "out"}]}`

func openaiClient(a *api) openai.Client {
	return openai.NewClient(option.WithBaseURL(a.base+"/v1/"), option.WithAPIKey(a.token), option.WithMaxRetries(0))
}

// openai-go pointed at Sluice gets a completion and a stream from a flow.
func TestOpenAICompatibleEndpointRunsAFlowAsAModel(t *testing.T) {
	model := llmtest.New(t)
	hold := make(chan struct{})
	var calls atomic.Int32
	model.Respond(func(r llmtest.Request) llmtest.Reply {
		reply := llmtest.Reply{Content: "Hello Ada, your order ships today.", PromptTokens: 30, CompletionTokens: 9}
		if calls.Add(1) == 2 {
			// The streamed completion's answer pauses after its first pieces until the
			// client has them.
			reply.Hold, reply.HoldAfter = hold, 2
		}
		return reply
	})
	a := newAPIWith(t, storetest.Real(t), model.Env(0))
	flow := a.saveFlow(chatFlow, nil)
	plain := a.saveFlow("linear", nil)
	c := openaiClient(a)
	ctx := context.Background()

	models, err := c.Models.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, m := range models.Data {
		ids = append(ids, m.ID)
	}
	if strings.Join(ids, ",") != flow {
		t.Errorf("models %v, want only %s (linear %s takes no messages)", ids, flow, plain)
	}

	params := openai.ChatCompletionNewParams{Model: flow, Messages: []openai.ChatCompletionMessageParamUnion{
		openai.SystemMessage("Be kind."), openai.UserMessage("Where is my order? I am Ada."),
	}}
	res, err := c.Chat.Completions.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Choices) != 1 || res.Choices[0].Message.Content != "Hello Ada, your order ships today." || res.Choices[0].FinishReason != "stop" {
		t.Errorf("completion %+v", res.Choices)
	}
	if res.Usage.PromptTokens != 30 || res.Usage.CompletionTokens != 9 || res.Model != flow {
		t.Errorf("usage %+v, model %q", res.Usage, res.Model)
	}
	if got := model.Requests()[0].Last().Text(); got != "system: Be kind.\nuser: Where is my order? I am Ada.\n" {
		t.Errorf("the flow's model saw %q", got)
	}

	params.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
	stream := c.Chat.Completions.NewStreaming(ctx, params)
	var text strings.Builder
	chunks := 0
	var usage int64
	for stream.Next() {
		ch := stream.Current()
		if len(ch.Choices) > 0 {
			text.WriteString(ch.Choices[0].Delta.Content)
			if ch.Choices[0].Delta.Content != "" {
				chunks++
				if chunks == 1 {
					close(hold) // the first tokens came while the model was still answering
				}
			}
		}
		usage += ch.Usage.TotalTokens
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if text.String() != "Hello Ada, your order ships today." || usage != 39 {
		t.Errorf("streamed %q (usage %d)", text.String(), usage)
	}
	if chunks < 2 {
		t.Errorf("the answer came in %d chunk(s), want the run's token events as they came", chunks)
	}

	// A flow that takes no messages is not a model.
	_, err = c.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: plain, Messages: params.Messages})
	var apiErr *openai.Error
	if !asAPIError(err, &apiErr) || apiErr.StatusCode != http.StatusNotFound || !strings.Contains(apiErr.Message, "does not take chat messages") {
		t.Errorf("a flow without messages: %v", err)
	}
}

// A run that fails is an error no client retries (it would start another run): a 400.
func TestOpenAICompatibleEndpointReportsAFailedRun(t *testing.T) {
	model := llmtest.New(t)
	model.Respond(func(llmtest.Request) llmtest.Reply {
		return llmtest.Reply{Status: http.StatusUnauthorized, Content: "bad key"}
	})
	a := newAPIWith(t, storetest.Real(t), model.Env(0))
	flow := a.saveFlow(chatFlow, nil)
	r := a.do("POST", "/v1/chat/completions", map[string]any{"model": flow, "messages": []any{map[string]any{"role": "user", "content": "hi"}}})
	if r.status != http.StatusBadRequest || r.header.Get("X-Should-Retry") != "false" || !strings.Contains(string(r.body), "answered 401: bad key") ||
		!strings.Contains(string(r.body), `"code":"run_failed"`) {
		t.Errorf("a failed run: %d %s (x-should-retry %q)", r.status, r.body, r.header.Get("X-Should-Retry"))
	}
}

func asAPIError(err error, target **openai.Error) bool {
	return err != nil && errors.As(err, target)
}

// runCount is how many runs flow has.
func (a *api) runCount(flow string) int64 {
	a.t.Helper()
	var list server.RunList
	a.must(http.StatusOK, "GET", "/api/flows/"+flow+"/runs", nil).into(a.t, &list)
	return list.Total
}

// One call is one run: a request the client sends again (a retry after a timeout or a
// dropped connection, whatever the status) joins the run the first one started — the
// same body from the same caller within the window, or the same Idempotency-Key.
func TestOpenAIRetriesOfOneCallJoinItsRun(t *testing.T) {
	model := llmtest.New(t)
	hold := make(chan struct{})
	model.Respond(func(llmtest.Request) llmtest.Reply {
		return llmtest.Reply{Content: "Shipped.", Hold: hold}
	})
	a := newAPIWith(t, storetest.Real(t), model.Env(0))
	flow := a.saveFlow(chatFlow, nil)
	body := map[string]any{"model": flow, "messages": []any{map[string]any{"role": "user", "content": "where is my order?"}}}
	answers := make(chan res, 3)
	for range 3 { // the first call and two retries while its run is under way
		go func() { answers <- a.do("POST", "/v1/chat/completions", body) }()
	}
	<-model.Arrived()
	close(hold)
	var runs []string
	for range 3 {
		r := <-answers
		if r.status != http.StatusOK || !strings.Contains(r.String(), "Shipped.") {
			t.Errorf("answer %d %s", r.status, r.body)
		}
		runs = append(runs, r.header.Get("X-Sluice-Run"))
	}
	if runs[0] == "" || runs[0] != runs[1] || runs[1] != runs[2] {
		t.Errorf("X-Sluice-Run of the three calls: %v, want one run", runs)
	}
	if n := a.runCount(flow); n != 1 {
		t.Errorf("%d runs for one call and its retries, want 1", n)
	}
	if model.Calls() != 1 {
		t.Errorf("the model was called %d times, want once", model.Calls())
	}

	// After it finished, a retry gets the same answer from the same run.
	r := a.must(http.StatusOK, "POST", "/v1/chat/completions", body)
	if r.header.Get("X-Sluice-Run") != runs[0] || !strings.Contains(r.String(), `"id":"chatcmpl-`+runs[0]+`"`) {
		t.Errorf("a late retry: run %s, %s", r.header.Get("X-Sluice-Run"), r.body)
	}

	// An Idempotency-Key names the call: the same key joins, a new key is a new run,
	// the same key with another body is refused.
	keyed := map[string]any{"model": flow, "messages": []any{map[string]any{"role": "user", "content": "and my refund?"}}}
	first := a.must(http.StatusOK, "POST", "/v1/chat/completions", keyed, "Idempotency-Key", "k-1").header.Get("X-Sluice-Run")
	again := a.must(http.StatusOK, "POST", "/v1/chat/completions", keyed, "Idempotency-Key", "k-1").header.Get("X-Sluice-Run")
	other := a.must(http.StatusOK, "POST", "/v1/chat/completions", keyed, "Idempotency-Key", "k-2").header.Get("X-Sluice-Run")
	if first == "" || first != again || other == first {
		t.Errorf("runs by key: k-1 %s then %s, k-2 %s", first, again, other)
	}
	e := a.must(http.StatusBadRequest, "POST", "/v1/chat/completions", body, "Idempotency-Key", "k-1").errorBody(t)
	if e.Path != "Idempotency-Key" || !strings.Contains(e.Message, "another request") {
		t.Errorf("a key used for another body: %+v", e)
	}
	if n := a.runCount(flow); n != 3 {
		t.Errorf("%d runs, want 3 (the call, k-1, k-2)", n)
	}
}

// A run that waits for an approval is answered with a status no client retries, once,
// and its retries park no second approval.
func TestOpenAIWaitingRunIsOneRunAnd400(t *testing.T) {
	a := newAPI(t, storetest.Embedded(t)) // the dedupe claim on the embedded Redis too
	flow := a.saveFlow(`{"sluice": 1, "id": "x", "nodes": [
		{"id": "in", "type": "input", "params": {"schema": {"type": "object", "properties": {"messages": {"type": "array"}}}}},
		{"id": "ok", "type": "approval", "params": {"prompt": "Send it?"}},
		{"id": "out", "type": "output"}],
		"edges": [{"from": "in", "to": "ok"}, {"from": "ok", "port": "approved", "to": "out"}]}`, nil)
	body := map[string]any{"model": flow, "messages": []any{map[string]any{"role": "user", "content": "send the refund"}}}
	for range 2 {
		e := a.must(http.StatusBadRequest, "POST", "/v1/chat/completions", body).errorBody(t)
		if e.Code != "run_waiting" || !strings.Contains(e.Message, "approval") {
			t.Errorf("a waiting run: %+v", e)
		}
	}
	if n := a.runCount(flow); n != 1 {
		t.Errorf("%d runs, want 1", n)
	}
}

// Streamed and whole completions carry their run: the id chatcmpl-<run>, the header
// X-Sluice-Run; the wire objects hold only what is set; a model can be got by id; a
// system message is taken.
func TestOpenAIAnswersNameTheirRunAndModelsCanBeGotById(t *testing.T) {
	model := llmtest.New(t)
	model.Respond(func(llmtest.Request) llmtest.Reply { return llmtest.Reply{Content: "Hello there, friend."} })
	a := newAPIWith(t, storetest.Real(t), model.Env(0))
	flow := a.saveFlow(chatFlow, nil)
	r := a.do("POST", "/v1/chat/completions", map[string]any{"model": flow, "stream": true,
		"messages": []any{map[string]any{"role": "system", "content": "Be brief."}, map[string]any{"role": "user", "content": "hi"}}})
	runID := r.header.Get("X-Sluice-Run")
	if r.status != http.StatusOK || runID == "" {
		t.Fatalf("stream: %d, X-Sluice-Run %q", r.status, runID)
	}
	chunks := 0
	for _, line := range strings.Split(r.String(), "\n") {
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok || data == "[DONE]" {
			continue
		}
		chunks++
		var ch map[string]any
		if err := json.Unmarshal([]byte(data), &ch); err != nil {
			t.Fatalf("chunk %s: %v", data, err)
		}
		if ch["id"] != "chatcmpl-"+runID || ch["object"] != "chat.completion.chunk" {
			t.Errorf("chunk %s: want the id chatcmpl-%s", data, runID)
		}
		for _, unset := range []string{`"audio"`, `"function_call"`, `"moderation"`, `"obfuscation"`, `"finish_reason":""`, `"usage"`} {
			if strings.Contains(data, unset) {
				t.Errorf("chunk %s has %s, which the API leaves out unset", data, unset)
			}
		}
	}
	if chunks < 3 {
		t.Errorf("%d chunks", chunks)
	}

	c := openaiClient(a)
	m, err := c.Models.Get(context.Background(), flow)
	if err != nil || m.ID != flow || m.Object != "model" {
		t.Errorf("GET /v1/models/%s: %+v %v", flow, m, err)
	}
	_, err = c.Models.Get(context.Background(), "no-such-flow")
	var apiErr *openai.Error
	if !asAPIError(err, &apiErr) || apiErr.StatusCode != http.StatusNotFound {
		t.Errorf("an unknown model: %v", err)
	}
}

// The chat example takes the system message the AI SDK's system: and LangChain's
// SystemMessage send: it joins the system prompt.
func TestOpenAIChatExampleTakesASystemMessage(t *testing.T) {
	model := llmtest.New(t)
	model.Respond(func(llmtest.Request) llmtest.Reply { return llmtest.Reply{Content: "A log."} })
	a := newAPIWith(t, storetest.Embedded(t), model.Env(0))
	flow := a.saveFlow("chat", nil)
	r := a.do("POST", "/v1/chat/completions", map[string]any{"model": flow,
		"messages": []any{map[string]any{"role": "system", "content": "Answer in two words."}, map[string]any{"role": "user", "content": "What is a stream?"}}})
	if r.status != http.StatusOK || !strings.Contains(r.String(), "A log.") {
		t.Fatalf("the chat example with a system message: %d %s", r.status, r.body)
	}
	req := model.Requests()[0]
	if sys := req.Messages[0].Text(); req.Messages[0].Role != "system" || !strings.HasSuffix(sys, "\nAnswer in two words.") {
		t.Errorf("system prompt %q", sys)
	}
	if user := req.Last().Text(); user != "user: What is a stream?\nassistant:" {
		t.Errorf("transcript %q", user)
	}
}

// A run's events put every token a step streamed before the step's own event and the
// run's end, so a stream of a fast reply comes in pieces (18 of 20 came whole when the
// tokens reached Redis on a tick after the run had succeeded), and the run's event
// stream reads in order.
func TestOpenAIStreamOfAFastReplyComesInPieces(t *testing.T) {
	model := llmtest.New(t)
	model.Respond(func(llmtest.Request) llmtest.Reply {
		return llmtest.Reply{Content: "Order A-1 ships today from the Lyon warehouse."}
	})
	a := newAPIWith(t, storetest.Real(t), model.Env(0))
	flow := a.saveFlow(chatFlow, nil)
	for i := range 10 {
		r := a.must(http.StatusOK, "POST", "/v1/chat/completions", map[string]any{"model": flow, "stream": true,
			"messages": []any{map[string]any{"role": "user", "content": fmt.Sprintf("question %d", i)}}})
		if n := strings.Count(r.String(), `"content":"`) - 1; n < 3 { // less the first chunk's empty content
			t.Errorf("call %d: the reply came in %d chunk(s):\n%s", i, n, r.body)
		}
		// The run's events, once all its tokens are there: none after the run's end.
		run := r.header.Get("X-Sluice-Run")
		pieces := len(llmtest.Pieces("Order A-1 ships today from the Lyon warehouse."))
		var kinds []string
		eventually(t, 10*time.Second, func() string {
			evs, err := a.r.EventsAfter(context.Background(), flow, "0-0", 10000)
			if err != nil {
				return err.Error()
			}
			kinds = kinds[:0]
			for _, ev := range evs {
				if ev.Run == run {
					kinds = append(kinds, ev.Type)
				}
			}
			if n := strings.Count(strings.Join(kinds, ","), "token"); n != pieces {
				return fmt.Sprintf("%d tokens of %d", n, pieces)
			}
			return ""
		})
		order := strings.Join(kinds, ",")
		if last := strings.LastIndex(order, "token"); last < 0 || last > strings.LastIndex(order, "step") {
			t.Errorf("call %d: events %s; want every token before the steps after it and the run's end", i, order)
		}
	}
}

// memoryChatFlow remembers its conversation by session id: it loads the history, answers
// the last message with it, and appends both.
const memoryChatFlow = `{"sluice": 1, "id": "memchat",
  "nodes": [
    {"id": "in", "type": "input", "params": {"schema": {"type": "object", "required": ["messages", "session_id"], "properties": {"messages": {"type": "array"}, "session_id": {"type": "string"}}}}},
    {"id": "last", "type": "transform", "params": {"expr": "{message: .messages[-1].content}"}},
    {"id": "recall", "type": "memory", "params": {"session": "{{.session_id}}"}},
    {"id": "ask", "type": "llm", "params": {"model": "m", "history": ".history", "user": "{{.message}}", "as": "reply"}},
    {"id": "remember", "type": "memory", "params": {"operation": "append", "session": "{{.session_id}}",
      "messages": "[{role: \"user\", content: .message}, {role: \"assistant\", content: .reply}]"}},
    {"id": "out", "type": "output", "params": {"value": "{reply}"}}
  ],
  "edges": [{"from": "in", "to": "last"}, {"from": "last", "to": "recall"}, {"from": "recall", "to": "ask"},
            {"from": "ask", "to": "remember"}, {"from": "remember", "to": "out"}]}`

// A client that names its session (in the body or the X-Session-Id header) continues
// the conversation across requests, sending only its new message; another session
// starts afresh.
func TestChatCompletionsContinueASessionAcrossRuns(t *testing.T) {
	model := llmtest.New(t)
	var n atomic.Int32
	model.Respond(func(llmtest.Request) llmtest.Reply {
		return llmtest.Text([]string{"Hello Ada.", "Your name is Ada.", "I do not know your name."}[min(int(n.Add(1))-1, 2)])
	})
	r := storetest.Real(t)
	env := model.Env(0)
	env.Memory = store.NewMemory(r)
	a := newAPIWith(t, r, env)
	flow := a.saveFlow(memoryChatFlow, nil)
	c := openaiClient(a)
	ctx := context.Background()
	session := storetest.FlowID(t)
	ask := func(text string, opt option.RequestOption) string {
		t.Helper()
		var header http.Header
		res, err := c.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: flow,
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(text)}}, opt,
			option.WithMiddleware(func(req *http.Request, next option.MiddlewareNext) (*http.Response, error) {
				resp, err := next(req)
				if resp != nil {
					header = resp.Header
				}
				return resp, err
			}))
		if err != nil {
			t.Fatal(err)
		}
		if got := header.Get("X-Session-Id"); got != session && got != session+"-other" {
			t.Errorf("the answer's X-Session-Id is %q", got)
		}
		return res.Choices[0].Message.Content
	}
	ask("I am Ada.", option.WithJSONSet("session_id", session))
	if got := ask("What is my name?", option.WithHeader("X-Session-Id", session)); got != "Your name is Ada." {
		t.Errorf("second answer %q", got)
	}
	var seen []string
	for _, m := range model.Requests()[1].Messages {
		seen = append(seen, m.Role+": "+m.Text())
	}
	if want := "user: I am Ada.|assistant: Hello Ada.|user: What is my name?"; strings.Join(seen, "|") != want {
		t.Errorf("the second run's model saw %q, want the first exchange from memory then the question %q", strings.Join(seen, "|"), want)
	}
	ask("What is my name?", option.WithJSONSet("session_id", session+"-other"))
	if got := len(model.Requests()[2].Messages); got != 1 {
		t.Errorf("another session's model saw %d messages, want only the question", got)
	}
	res := a.do("POST", "/v1/chat/completions", `{"model": "`+flow+`", "messages": [{"role": "user", "content": "hi"}], "session_id": "`+strings.Repeat("x", 300)+`"}`)
	if res.status != http.StatusBadRequest || !strings.Contains(res.String(), "session_id") {
		t.Errorf("a 300-character session id: %d %s", res.status, res)
	}
}
