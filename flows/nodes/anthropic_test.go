package nodes_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/flows"
	"github.com/sluicehq/sluice/flows/nodes"
	"github.com/sluicehq/sluice/flows/nodes/llmtest"
)

func anthropicEnv(srv *llmtest.Anthropic) *nodes.Env {
	return &nodes.Env{Providers: map[string]*nodes.Provider{"claude": srv.Provider("claude", 0)}}
}

// An llm node on an Anthropic provider: the system prompt is cached (a breakpoint after
// it), the key goes in x-api-key, and the step records every input token with the cache's
// share of them.
func TestAnthropicLLMCachesTheSystemPromptAndRecordsCacheTokens(t *testing.T) {
	srv := llmtest.NewAnthropic(t)
	srv.Reply(llmtest.Reply{Content: "Paris.", PromptTokens: 12, CompletionTokens: 3, CacheWriteTokens: 1500})
	l := buildIn(t, anthropicEnv(srv), "llm", `{"provider": "claude", "model": "claude-sonnet", "system": "You answer briefly.", "user": "Capital of {{.country}}?", "temperature": 0.3, "as": "capital"}`)
	s, _ := newStep(state(t, `{"country": "France"}`))
	res, err := l.Run(context.Background(), s)
	if err != nil {
		t.Fatal(err)
	}
	if res.Output != "Paris." {
		t.Errorf("output %v", res.Output)
	}
	if want := (flows.Usage{InputTokens: 1512, OutputTokens: 3, CacheWriteTokens: 1500}); res.Usage != want {
		t.Errorf("usage %+v, want %+v", res.Usage, want)
	}
	req := srv.Requests()[0]
	if req.APIKey != "test-key" || req.Version == "" {
		t.Errorf("x-api-key %q, anthropic-version %q", req.APIKey, req.Version)
	}
	if len(req.System) != 1 || req.System[0].Text != "You answer briefly." || len(req.Messages) != 1 ||
		req.Messages[0].Role != "user" || req.Messages[0].Content[0].Text != "Capital of France?" {
		t.Errorf("request %s", req.Raw)
	}
	if got := strings.Join(req.Breakpoints(), ","); got != "system" {
		t.Errorf("cache breakpoints %q, want after the system prompt", got)
	}
	if req.MaxTokens != 4096 || req.Temperature == nil || *req.Temperature != 0.3 {
		t.Errorf("max_tokens %d temperature %v, want the default 4096 and 0.3", req.MaxTokens, req.Temperature)
	}
}

// An agent on an Anthropic provider runs its tool loop with tool_use and tool_result
// blocks, streaming its replies; the tool definitions and the conversation are cached,
// and the cached tokens the provider read are recorded.
func TestAnthropicAgentUsesToolsStreamsAndCachesToolsAndConversation(t *testing.T) {
	srv := llmtest.NewAnthropic(t)
	env := anthropicEnv(srv)
	srv.Reply(
		llmtest.Reply{ToolCalls: []llmtest.ToolCall{llmtest.Call("toolu_1", "query", `{"query": ".orders[0].user"}`)}, PromptTokens: 20, CompletionTokens: 7, CacheWriteTokens: 2000},
		llmtest.Reply{Content: "Order 1 is Ada's.", PromptTokens: 30, CompletionTokens: 6, CacheReadTokens: 2000},
	)
	a := buildIn(t, env, "agent", `{"provider": "claude", "model": "claude-sonnet", "system": "You help.", "user": "Whose is order 1?", "stream": true}`)
	s, rec := newStep(state(t, `{"orders": [{"user": "Ada"}]}`))
	s.Tools = map[string]flows.Tool{"query": buildIn(t, env, "data", `{"tool_name": "query"}`).(flows.Tool)}
	res, err := a.Run(context.Background(), s)
	if err != nil {
		t.Fatal(err)
	}
	if res.Output != "Order 1 is Ada's." {
		t.Errorf("output %v", res.Output)
	}
	want := flows.Usage{InputTokens: 2020 + 2030, OutputTokens: 13, CacheReadTokens: 2000, CacheWriteTokens: 2000}
	if res.Usage != want {
		t.Errorf("usage %+v, want %+v", res.Usage, want)
	}
	reqs := srv.Requests()
	if len(reqs) != 2 || !reqs[0].Stream {
		t.Fatalf("%d requests (stream %v), want 2 streamed", len(reqs), len(reqs) > 0 && reqs[0].Stream)
	}
	if len(reqs[0].Tools) != 1 || reqs[0].Tools[0].Name != "query" || !strings.Contains(string(reqs[0].Tools[0].InputSchema), `"query"`) {
		t.Errorf("tools offered %+v", reqs[0].Tools)
	}
	second := reqs[1]
	if len(second.Messages) != 3 {
		t.Fatalf("second request's messages %s, want user, assistant tool_use, user tool_result", second.Raw)
	}
	use, result := second.Messages[1].Content[0], second.Messages[2].Content[0]
	if second.Messages[1].Role != "assistant" || use.Type != "tool_use" || use.ID != "toolu_1" || use.Name != "query" || !strings.Contains(string(use.Input), ".orders[0].user") {
		t.Errorf("the model's turn %+v", second.Messages[1])
	}
	if second.Messages[2].Role != "user" || result.Type != "tool_result" || result.ToolUseID != "toolu_1" || !strings.Contains(string(result.Content), "Ada") {
		t.Errorf("the tool's result %+v", second.Messages[2])
	}
	if got := strings.Join(second.Breakpoints(), ","); got != "system,tools,messages[2]" {
		t.Errorf("cache breakpoints %q, want after the system prompt, the tools and the conversation", got)
	}
	var text strings.Builder
	for _, ev := range rec.events {
		if ev.kind == "token" {
			text.WriteString(ev.data["text"].(string))
		}
	}
	if text.String() != "Order 1 is Ada's." {
		t.Errorf("streamed tokens %q", text.String())
	}
}

// A node's prompt_cache overrides Sluice's breakpoints; [] turns caching off.
func TestAnthropicPromptCacheIsOverriddenPerNode(t *testing.T) {
	srv := llmtest.NewAnthropic(t)
	env := anthropicEnv(srv)
	for _, tc := range []struct{ param, want string }{
		{`[]`, ""},
		{`["tools"]`, ""},                    // no tools here, so nothing is marked
		{`["system", "messages"]`, "system"}, // one message only: nothing before it to cache
	} {
		srv.Reply(llmtest.Text("ok"))
		l := buildIn(t, env, "llm", `{"provider": "claude", "model": "m", "system": "S", "user": "U", "prompt_cache": `+tc.param+`}`)
		s, _ := newStep(state(t, `{}`))
		if _, err := l.Run(context.Background(), s); err != nil {
			t.Fatal(err)
		}
		reqs := srv.Requests()
		if got := strings.Join(reqs[len(reqs)-1].Breakpoints(), ","); got != tc.want {
			t.Errorf("prompt_cache %s: breakpoints %q, want %q", tc.param, got, tc.want)
		}
	}
}

// Errors: a 400 fails the step for good, a 529 (overloaded) is retried.
func TestAnthropicErrorsFailPermanentlyOrAreRetried(t *testing.T) {
	srv := llmtest.NewAnthropic(t)
	env := anthropicEnv(srv)
	l := buildIn(t, env, "llm", `{"provider": "claude", "model": "m", "user": "U"}`)
	srv.Reply(llmtest.Reply{Status: http.StatusBadRequest, Content: "max_tokens: too large"})
	s, _ := newStep(state(t, `{}`))
	_, err := l.Run(context.Background(), s)
	if !flows.IsPermanent(err) || !strings.Contains(err.Error(), "answered 400: max_tokens: too large") {
		t.Errorf("a 400: %v, want a permanent error with the provider's message", err)
	}
	srv.Reply(llmtest.Reply{Status: 529, Content: "Overloaded"})
	_, err = l.Run(context.Background(), s)
	if err == nil || flows.IsPermanent(err) || !strings.Contains(err.Error(), "529") {
		t.Errorf("a 529: %v, want a retried error", err)
	}
}

func TestParseProvidersKnowsAnthropicRateLimitsAndPrices(t *testing.T) {
	env := func(string) (string, bool) { return "k", true }
	ps, err := nodes.ParseProviders([]byte(`{"providers": {"claude": {"type": "anthropic", "api_key_env": "ANTHROPIC_API_KEY",
		"rate_limit": {"requests": 50, "tokens": 40000, "models": {"claude-opus": {"requests": 5}}},
		"prices": {"claude-sonnet": {"input": 3, "output": 15, "cache_read": 0.3, "cache_write": 3.75}}}}}`), env)
	if err != nil {
		t.Fatal(err)
	}
	c := ps["claude"]
	if c.Type != nodes.ProviderAnthropic || c.BaseURL != nodes.AnthropicBaseURL || c.RateLimit.Models["claude-opus"].Requests != 5 || c.Prices["claude-sonnet"].Output != 15 {
		b, _ := json.Marshal(c)
		t.Errorf("parsed %s", b)
	}
	for body, want := range map[string]string{
		`{"providers": {"x": {"type": "gemini", "base_url": "http://h"}}}`:                                                    `type "gemini"`,
		`{"providers": {"x": {"base_url": "http://h", "rate_limit": {}}}}`:                                                    "give requests, tokens or models",
		`{"providers": {"x": {"base_url": "http://h", "rate_limit": {"requests": 5, "per": "1ms"}}}}`:                         "not between 100ms and 24h",
		`{"providers": {"x": {"base_url": "http://h", "rate_limit": {"models": {"m": {"models": {"n": {"requests": 1}}}}}}}}`: "no models of its own",
		`{"providers": {"x": {"base_url": "http://h", "prices": {"m": {"input": -1}}}}}`:                                      "not negative",
	} {
		if _, err := nodes.ParseProviders([]byte(body), env); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want an error saying %q", body, err, want)
		}
	}
}
