package nodes_test

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/sluicehq/sluice/flows"
	"github.com/sluicehq/sluice/flows/nodes"
	"github.com/sluicehq/sluice/flows/nodes/llmtest"
	"github.com/sluicehq/sluice/observe"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

type modelCalls struct {
	mu    sync.Mutex
	calls []nodes.ModelCall
}

func (m *modelCalls) ModelCall(c nodes.ModelCall) {
	m.mu.Lock()
	m.calls = append(m.calls, c)
	m.mu.Unlock()
}
func (m *modelCalls) CacheLookup(string, string, bool) {}

// A model call's span follows the GenAI conventions and carries its prompt and reply
// only when the operator opted in, with secret values taken out even then; the observer
// hears the call with its usage and cost.
func TestModelCallSpansRecordContentOnlyOnRequestAndNeverASecret(t *testing.T) {
	const secret = "s3cr3t-value-for-the-span-test"
	rule, err := flows.NewSecrets(flows.SecretsConfig{Lookup: func(n string) (string, bool) { return secret, n == "SLUICE_SECRET_SPAN" }})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := rule.Lookup("SLUICE_SECRET_SPAN"); err != nil {
		t.Fatal(err)
	}
	flows.UseSecrets(rule)
	t.Cleanup(func() { flows.UseSecrets(nil) })

	for _, capture := range []bool{false, true} {
		mem := tracetest.NewInMemoryExporter()
		observe.UseProvider(observe.NewTestProvider(mem), capture)
		t.Cleanup(func() { observe.UseProvider(nil, false) })
		srv := llmtest.New(t)
		srv.Reply(llmtest.Reply{Content: "the reply mentions " + secret, PromptTokens: 1000, CompletionTokens: 100, CacheReadTokens: 400})
		env := srv.Env(0)
		env.Providers["fake"].Prices = map[string]*nodes.Price{"m1": {Input: 2, Output: 10}}
		obs := &modelCalls{}
		env.Observer = obs
		l := buildIn(t, env, "llm", `{"provider": "fake", "model": "m1", "user": "PROMPT-TEXT {{.key}}"}`)
		s, _ := newStep(state(t, `{"key": "`+secret+`"}`))
		res, err := l.Run(context.Background(), s)
		if err != nil {
			t.Fatal(err)
		}
		// 600 plain input tokens at $2/M, 400 cached at the input price (none set), 100 out at $10/M.
		if want := (1000*2.0 + 100*10.0) / 1e6; res.Usage.CostUSD != want || res.Usage.CacheReadTokens != 400 {
			t.Errorf("usage %+v, want cost %g and 400 cached tokens", res.Usage, want)
		}
		if len(obs.calls) != 1 || obs.calls[0].Model != "m1" || obs.calls[0].Node != "n" || obs.calls[0].Usage != res.Usage || obs.calls[0].Failed {
			t.Errorf("the observer heard %+v", obs.calls)
		}
		spans := mem.GetSpans()
		if len(spans) != 1 || spans[0].Name != "chat m1" {
			t.Fatalf("capture %v: spans %v", capture, spans)
		}
		attrs := map[string]string{}
		all := ""
		for _, kv := range spans[0].Attributes {
			attrs[string(kv.Key)] = kv.Value.String()
			all += kv.Value.String() + " "
		}
		if attrs["gen_ai.system"] != "openai" || attrs["gen_ai.usage.input_tokens"] != "1000" || attrs["gen_ai.usage.output_tokens"] != "100" ||
			attrs["gen_ai.usage.cache_read.input_tokens"] != "400" || attrs["gen_ai.response.finish_reasons"] != `["stop"]` {
			t.Errorf("capture %v: attributes %v", capture, attrs)
		}
		if strings.Contains(all, secret) {
			t.Errorf("capture %v: the secret is in the span: %s", capture, all)
		}
		_, in := attrs["gen_ai.input.messages"]
		_, out := attrs["gen_ai.output.messages"]
		if in != capture || out != capture || strings.Contains(all, "PROMPT-TEXT") != capture {
			t.Errorf("capture %v: input messages %v, output messages %v, prompt text in the span %v", capture, in, out, strings.Contains(all, "PROMPT-TEXT"))
		}
		if capture && !strings.Contains(attrs["gen_ai.input.messages"], "[redacted:SLUICE_SECRET_SPAN]") {
			t.Errorf("the captured prompt does not show the secret taken out: %s", attrs["gen_ai.input.messages"])
		}
	}
}

// spanAttrs returns a span's attributes as text by key, and all their values joined.
func spanAttrs(s tracetest.SpanStub) (map[string]string, string) {
	attrs := map[string]string{}
	all := ""
	for _, kv := range s.Attributes {
		attrs[string(kv.Key)] = kv.Value.String()
		all += kv.Value.String() + " "
	}
	return attrs, all
}

// A tool call an agent's model asks for is an execute_tool span (GenAI conventions) that
// carries the call's arguments and result only when the operator opted in, with secret
// values taken out even then.
func TestToolCallSpansRecordArgumentsAndResultsOnlyOnRequest(t *testing.T) {
	const secret = "s3cr3t-value-for-the-tool-span"
	rule, err := flows.NewSecrets(flows.SecretsConfig{Lookup: func(n string) (string, bool) { return secret, n == "SLUICE_SECRET_TOOL" }})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := rule.Lookup("SLUICE_SECRET_TOOL"); err != nil {
		t.Fatal(err)
	}
	flows.UseSecrets(rule)
	t.Cleanup(func() { flows.UseSecrets(nil) })

	for _, capture := range []bool{false, true} {
		mem := tracetest.NewInMemoryExporter()
		observe.UseProvider(observe.NewTestProvider(mem), capture)
		t.Cleanup(func() { observe.UseProvider(nil, false) })
		srv := llmtest.New(t)
		srv.Reply(
			llmtest.Reply{ToolCalls: []llmtest.ToolCall{llmtest.Call("c1", "query", `{"query": ".orders[0].user"}`)}},
			llmtest.Reply{Content: "Order 1 belongs to its user."},
		)
		env := srv.Env(0)
		a := buildIn(t, env, "agent", `{"model": "m", "user": "Whose is order 1?"}`)
		s, _ := newStep(state(t, `{"orders": [{"id": 1, "user": "`+secret+`"}]}`))
		s.Tools = map[string]flows.Tool{"query": buildIn(t, env, "data", `{"tool_name": "query"}`).(flows.Tool)}
		if _, err := a.Run(context.Background(), s); err != nil {
			t.Fatal(err)
		}
		var tools []tracetest.SpanStub
		for _, sp := range mem.GetSpans() {
			if strings.HasPrefix(sp.Name, "execute_tool") {
				tools = append(tools, sp)
			}
		}
		if len(tools) != 1 || tools[0].Name != "execute_tool query" {
			t.Fatalf("capture %v: tool spans %v", capture, tools)
		}
		attrs, all := spanAttrs(tools[0])
		if attrs["gen_ai.operation.name"] != "execute_tool" || attrs["gen_ai.tool.name"] != "query" || attrs["gen_ai.tool.call.id"] != "c1" || attrs["gen_ai.tool.type"] != "function" {
			t.Errorf("capture %v: attributes %v", capture, attrs)
		}
		if strings.Contains(all, secret) {
			t.Errorf("capture %v: the secret is in the tool span: %s", capture, all)
		}
		args, hasArgs := attrs["gen_ai.tool.call.arguments"]
		result, hasResult := attrs["gen_ai.tool.call.result"]
		if hasArgs != capture || hasResult != capture {
			t.Errorf("capture %v: arguments recorded %v, result recorded %v", capture, hasArgs, hasResult)
		}
		if capture && (!strings.Contains(args, ".orders[0].user") || result != `"[redacted:SLUICE_SECRET_TOOL]"`) {
			t.Errorf("captured arguments %s and result %s, want the query and the secret taken out", args, result)
		}
	}
}

// A model call on an Anthropic provider names its system "anthropic" in its span.
func TestAnthropicModelCallSpansNameTheirSystem(t *testing.T) {
	mem := tracetest.NewInMemoryExporter()
	observe.UseProvider(observe.NewTestProvider(mem), false)
	t.Cleanup(func() { observe.UseProvider(nil, false) })
	srv := llmtest.NewAnthropic(t)
	srv.Reply(llmtest.Reply{Content: "Paris.", PromptTokens: 12, CompletionTokens: 3, CacheReadTokens: 8})
	l := buildIn(t, anthropicEnv(srv), "llm", `{"provider": "claude", "model": "claude-sonnet", "user": "Capital of France?"}`)
	s, _ := newStep(state(t, `{}`))
	if _, err := l.Run(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	spans := mem.GetSpans()
	if len(spans) != 1 || spans[0].Name != "chat claude-sonnet" {
		t.Fatalf("spans %v", spans)
	}
	attrs, _ := spanAttrs(spans[0])
	if attrs["gen_ai.system"] != "anthropic" || attrs["gen_ai.provider.name"] != "anthropic" || attrs["gen_ai.request.model"] != "claude-sonnet" ||
		attrs["sluice.provider"] != "claude" || attrs["gen_ai.usage.output_tokens"] != "3" || attrs["gen_ai.usage.cache_read.input_tokens"] != "8" {
		t.Errorf("attributes %v", attrs)
	}
}
