package server_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/sluicehq/sluice/flows/nodes/llmtest"
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

// A run that fails is an error the client does not retry (it would start another run).
func TestOpenAICompatibleEndpointReportsAFailedRun(t *testing.T) {
	model := llmtest.New(t)
	model.Respond(func(llmtest.Request) llmtest.Reply {
		return llmtest.Reply{Status: http.StatusUnauthorized, Content: "bad key"}
	})
	a := newAPIWith(t, storetest.Real(t), model.Env(0))
	flow := a.saveFlow(chatFlow, nil)
	r := a.do("POST", "/v1/chat/completions", map[string]any{"model": flow, "messages": []any{map[string]any{"role": "user", "content": "hi"}}})
	if r.status != http.StatusServiceUnavailable || r.header.Get("X-Should-Retry") != "false" || !strings.Contains(string(r.body), "answered 401: bad key") {
		t.Errorf("a failed run: %d %s (x-should-retry %q)", r.status, r.body, r.header.Get("X-Should-Retry"))
	}
}

func asAPIError(err error, target **openai.Error) bool {
	return err != nil && errors.As(err, target)
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
