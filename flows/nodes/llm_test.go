package nodes_test

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/flows"
	"github.com/sluicehq/sluice/flows/nodes"
	"github.com/sluicehq/sluice/flows/nodes/llmtest"
)

func TestLLMAsksOnceWithRenderedMessagesAndRecordsUsage(t *testing.T) {
	srv := llmtest.New(t)
	env := srv.Env(0)
	env.Providers["keyed"] = srv.Provider("keyed", 0)
	env.Providers["keyed"].APIKey = "test-key-123"
	srv.Reply(llmtest.Reply{Content: "Paris.", PromptTokens: 21, CompletionTokens: 3})
	l := buildIn(t, env, "llm", `{"provider": "keyed", "model": "m1", "system": "Answer briefly.", "user": "Capital of {{.country}}?", "temperature": 0.2, "max_tokens": 50, "as": "capital"}`)
	s, _ := newStep(state(t, `{"country": "France"}`))
	res, err := l.Run(context.Background(), s)
	if err != nil {
		t.Fatal(err)
	}
	if res.Output != "Paris." || !reflect.DeepEqual(res.Update, map[string]any{"capital": "Paris."}) {
		t.Errorf("output %v, update %v", res.Output, res.Update)
	}
	if res.Usage != (flows.Usage{InputTokens: 21, OutputTokens: 3}) {
		t.Errorf("usage %+v, want 21 in and 3 out", res.Usage)
	}
	req := srv.Requests()[0]
	if req.Model != "m1" || len(req.Messages) != 2 || req.Messages[0].Role != "system" || req.Messages[0].Text() != "Answer briefly." ||
		req.Messages[1].Role != "user" || req.Messages[1].Text() != "Capital of France?" {
		t.Errorf("request %+v", req)
	}
	if req.Temperature == nil || *req.Temperature != 0.2 || req.MaxTokens == nil || *req.MaxTokens != 50 {
		t.Errorf("temperature %v, max_tokens %v; want 0.2 and 50", req.Temperature, req.MaxTokens)
	}
	if req.Authorization != "Bearer test-key-123" {
		t.Errorf("Authorization %q, want the provider's key", req.Authorization)
	}
	if res.StateBytes != len("Answer briefly.")+len("Capital of France?") {
		t.Errorf("state bytes %d, want the rendered prompt's length", res.StateBytes)
	}
}

// A provider is built from its own settings only: a key in OPENAI_API_KEY never goes to
// a provider configured without one.
func TestLLMSendsNoKeyToAProviderWithoutOne(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "sk-from-the-environment-must-not-leak")
	t.Setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
	srv := llmtest.New(t)
	srv.Reply(llmtest.Text("ok"))
	l := buildIn(t, srv.Env(0), "llm", `{"provider": "fake", "model": "m", "user": "hi"}`)
	s, _ := newStep(state(t, `{}`))
	if _, err := l.Run(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	if got := srv.Requests()[0].Authorization; got != "" {
		t.Errorf("Authorization %q sent to a provider without a key", got)
	}
}

func TestLLMParsesJSONOutputAndChecksItsSchema(t *testing.T) {
	srv := llmtest.New(t)
	env := srv.Env(0)
	t.Run("json object", func(t *testing.T) {
		srv.Reply(llmtest.Text("```json\n{\"intent\": \"code\", \"score\": 0.9}\n```"))
		l := buildIn(t, env, "llm", `{"model": "m", "user": "{{.q}}", "json": true, "as": "c"}`)
		s, _ := newStep(state(t, `{"q": "x"}`))
		res, err := l.Run(context.Background(), s)
		if err != nil {
			t.Fatal(err)
		}
		if want := map[string]any{"intent": "code", "score": num("0.9")}; !reflect.DeepEqual(res.Output, want) {
			t.Errorf("output %#v, want %#v", res.Output, want)
		}
		if rf := string(srv.Requests()[len(srv.Requests())-1].ResponseFormat); !strings.Contains(rf, `"json_object"`) {
			t.Errorf("response_format %s, want json_object", rf)
		}
	})
	schema := `{"type": "object", "required": ["intent"], "properties": {"intent": {"enum": ["code", "database"]}}}`
	t.Run("schema", func(t *testing.T) {
		srv.Reply(llmtest.Text(`{"intent": "database"}`))
		l := buildIn(t, env, "llm", `{"model": "m", "user": "q", "schema": `+schema+`}`)
		s, _ := newStep(state(t, `{}`))
		res, err := l.Run(context.Background(), s)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(res.Output, map[string]any{"intent": "database"}) {
			t.Errorf("output %#v", res.Output)
		}
		if rf := string(srv.Requests()[len(srv.Requests())-1].ResponseFormat); !strings.Contains(rf, `"json_schema"`) || !strings.Contains(rf, `"database"`) {
			t.Errorf("response_format %s, want the json_schema with the schema", rf)
		}
	})
	for _, tc := range []struct{ name, reply, want string }{
		{"a reply that is not JSON", "Sure! The intent is code.", "the model's reply is not valid JSON"},
		{"a reply that misses the schema", `{"intent": "billing"}`, "the model's reply does not match the schema"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv.Reply(llmtest.Text(tc.reply))
			l := buildIn(t, env, "llm", `{"model": "m", "user": "q", "schema": `+schema+`}`)
			s, _ := newStep(state(t, `{}`))
			_, err := l.Run(context.Background(), s)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want %q", err, tc.want)
			}
			if flows.IsPermanent(err) || flows.ErrorCode(err) == flows.Invalid {
				t.Errorf("%v fails for good; a model may answer better on the next attempt", err)
			}
		})
	}
}

func TestLLMStreamsTokensAsEvents(t *testing.T) {
	srv := llmtest.New(t)
	answer := "Streaming works, token by token — même en UTF-8."
	srv.Reply(llmtest.Reply{Content: answer, PromptTokens: 7, CompletionTokens: 12})
	l := buildIn(t, srv.Env(0), "llm", `{"model": "m", "user": "go", "stream": true}`)
	s, rec := newStep(state(t, `{}`))
	res, err := l.Run(context.Background(), s)
	if err != nil {
		t.Fatal(err)
	}
	if res.Output != answer {
		t.Errorf("output %q, want %q", res.Output, answer)
	}
	var got []string
	for _, e := range rec.events {
		if e.kind == "token" {
			got = append(got, e.data["text"].(string))
		}
	}
	if want := llmtest.Pieces(answer); !reflect.DeepEqual(got, want) {
		t.Errorf("token events %q, want one per streamed chunk %q", got, want)
	}
	if res.Usage != (flows.Usage{InputTokens: 7, OutputTokens: 12}) {
		t.Errorf("usage %+v from the stream's last chunk, want 7 and 12", res.Usage)
	}
	if !srv.Requests()[0].Stream {
		t.Error("the request did not ask to stream")
	}
}

func TestLLMRetriesRateLimitsAndServerErrors(t *testing.T) {
	srv := llmtest.New(t)
	srv.Reply(llmtest.Error(429, "slow down"), llmtest.Error(500, "oops"), llmtest.Text("finally"))
	l := buildIn(t, srv.Env(2), "llm", `{"model": "m", "user": "q"}`)
	s, _ := newStep(state(t, `{}`))
	res, err := l.Run(context.Background(), s)
	if err != nil {
		t.Fatal(err)
	}
	if res.Output != "finally" || srv.Calls() != 3 {
		t.Errorf("output %v after %d calls, want the third call's answer", res.Output, srv.Calls())
	}

	// Out of retries: the step fails, and the runtime retries it later.
	srv.Reply(llmtest.Error(503, "overloaded"), llmtest.Error(503, "overloaded"), llmtest.Error(503, "overloaded"))
	_, err = l.Run(context.Background(), s)
	if err == nil || !strings.Contains(err.Error(), `LLM provider "default" answered 503: overloaded`) {
		t.Fatalf("got %v, want the provider's 503", err)
	}
	if flows.IsPermanent(err) || flows.ErrorCode(err) != flows.Unavailable {
		t.Errorf("%v: a 503 must be retried later (unavailable, not permanent)", err)
	}
}

func TestLLMRefusedRequestsFailForGood(t *testing.T) {
	srv := llmtest.New(t)
	l := buildIn(t, srv.Env(2), "llm", `{"model": "no-such-model", "user": "q"}`)
	for _, status := range []int{400, 401, 404} {
		srv.Reply(llmtest.Error(status, "model not found"))
		s, _ := newStep(state(t, `{}`))
		before := srv.Calls()
		_, err := l.Run(context.Background(), s)
		if !flows.IsPermanent(err) || !strings.Contains(err.Error(), "model not found") {
			t.Errorf("%d: got %v, want a permanent error with the provider's message", status, err)
		}
		if srv.Calls()-before != 1 {
			t.Errorf("%d was retried %d times by the client; retrying sends the same request", status, srv.Calls()-before-1)
		}
	}
}

func TestLLMMalformedRepliesAreClearStepErrors(t *testing.T) {
	for _, tc := range []struct {
		name, body string
		stream     bool
		want       string
	}{
		{"a body that is not JSON", `<html>gateway</html>`, false, "not a chat completion"},
		{"a completion with no choices", `{"id": "x", "object": "chat.completion", "choices": []}`, false, "it has no choices"},
		{"a stream with a broken chunk", "data: {\"choices\": [{\"index\": 0, \"delta\": {\"content\": \"a\"\n\n", true, "not a chat completion"},
		{"a stream that ends at once", "data: [DONE]\n\n", true, "the stream ended without a chunk"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := llmtest.New(t)
			srv.Reply(llmtest.Reply{Body: tc.body})
			params := `{"model": "m", "user": "q"}`
			if tc.stream {
				params = `{"model": "m", "user": "q", "stream": true}`
			}
			l := buildIn(t, srv.Env(0), "llm", params)
			s, _ := newStep(state(t, `{}`))
			_, err := l.Run(context.Background(), s)
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), `node "n"`) {
				t.Fatalf("got %v, want a step error at node n saying %q", err, tc.want)
			}
		})
	}
}

func TestLLMNamingAnUnknownProviderFailsValidation(t *testing.T) {
	env := &nodes.Env{Providers: map[string]*nodes.Provider{"local": {Name: "local", BaseURL: "http://127.0.0.1:9/v1"}}}
	doc := `{"sluice": 1, "id": "x", "nodes": [{"id": "in", "type": "input"}, {"id": "ask", "type": "llm", "params": {"provider": "azure", "model": "m", "user": "q"}}], "edges": [{"from": "in", "to": "ask"}]}`
	ps := flows.Validate([]byte(doc), nodes.NewRegistry(env), flows.DefaultLimits).Errors()
	if len(ps) != 1 || ps[0].Node != "ask" || ps[0].Path != "nodes[1].params.provider" || ps[0].Code != flows.CodeInvalidParams ||
		!strings.Contains(ps[0].Message, `no LLM provider "azure"`) || !strings.Contains(ps[0].Message, "default, local") {
		t.Fatalf("problems %v; want one at nodes[1].params.provider naming the known providers", ps)
	}
}

func TestLLMCachesIdenticalRequests(t *testing.T) {
	srv := llmtest.New(t)
	srv.Respond(func(llmtest.Request) llmtest.Reply { return llmtest.Text("cached answer") })
	env := srv.Env(0)
	l := buildCached(t, env, "llm", `{"model": "m", "user": "{{.q}}"}`, "1h")
	for _, q := range []string{"same", "same", "other"} {
		s, _ := newStep(state(t, `{"q": "`+q+`"}`))
		res, err := l.Run(context.Background(), s)
		if err != nil || res.Output != "cached answer" {
			t.Fatalf("%v %v", res, err)
		}
		if q == "same" && srv.Calls() == 2 {
			t.Fatal("the identical request was sent twice")
		}
	}
	if srv.Calls() != 2 {
		t.Errorf("%d calls for two distinct requests", srv.Calls())
	}
	if st := env.CacheStats(); st.Hits != 1 || st.Misses != 2 {
		t.Errorf("cache stats %+v, want 1 hit and 2 misses", st)
	}
}

func TestLLMStepErrorsNameTheNode(t *testing.T) {
	srv := llmtest.New(t)
	l := buildIn(t, srv.Env(0), "llm", `{"model": "m", "user": "{{.a.b}}"}`)
	s, _ := newStep(state(t, `{"a": "text"}`))
	_, err := l.Run(context.Background(), s)
	var fe *flows.Error
	if !errors.As(err, &fe) || fe.Node != "n" || fe.Path != "params.user" || !flows.IsPermanent(err) {
		t.Errorf("got %v, want a permanent error at node n params.user", err)
	}
}
