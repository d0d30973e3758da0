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

// agentStep is a step whose tools are the data tool "query" and an http tool "lookup".
func agentStep(t *testing.T, env *nodes.Env, st map[string]any, lookupURL string) (*flows.Step, *recorder) {
	t.Helper()
	s, rec := newStep(st)
	data := buildIn(t, env, "data", `{"tool_name": "query"}`).(flows.Tool)
	lookup := buildIn(t, env, "http", `{"url": "`+lookupURL+`/users/{{.id}}", "tool_name": "lookup", "tool_parameters": {"type": "object", "properties": {"id": {"type": "string"}}}}`).(flows.Tool)
	s.Tools = map[string]flows.Tool{"query": data, "lookup": lookup}
	return s, rec
}

func TestAgentCallsToolsAcrossTurnsAndSavesEveryTurn(t *testing.T) {
	srv := llmtest.New(t)
	api, apiHits := countingServer(t, func(w http.ResponseWriter, r *http.Request) { w.Write([]byte(`{"name": "Ada"}`)) })
	env := srv.Env(0)
	env.HTTP = loopbackOK()
	srv.Reply(
		llmtest.Reply{ToolCalls: []llmtest.ToolCall{llmtest.Call("c1", "query", `{"query": ".orders[0].user"}`)}, PromptTokens: 100, CompletionTokens: 10},
		llmtest.Reply{ToolCalls: []llmtest.ToolCall{llmtest.Call("c2", "lookup", `{"id": "u1"}`)}, PromptTokens: 120, CompletionTokens: 10},
		llmtest.Reply{Content: "Order 1 belongs to Ada.", PromptTokens: 140, CompletionTokens: 8},
	)
	a := buildIn(t, env, "agent", `{"model": "m", "system": "You help.", "user": "Whose is order 1?", "as": "answer"}`)
	big := strings.Repeat("x", 5000)
	s, rec := agentStep(t, env, state(t, `{"orders": [{"id": 1, "user": "u1"}], "blob": "`+big+`"}`), api.URL)
	res, err := a.Run(context.Background(), s)
	if err != nil {
		t.Fatal(err)
	}
	if res.Output != "Order 1 belongs to Ada." || res.Update["answer"] != res.Output {
		t.Errorf("output %v, update %v", res.Output, res.Update)
	}
	if res.Usage != (flows.Usage{InputTokens: 360, OutputTokens: 28}) {
		t.Errorf("usage %+v, want the sum of three turns", res.Usage)
	}
	reqs := srv.Requests()
	if len(reqs) != 3 || apiHits.Load() != 1 {
		t.Fatalf("%d model calls, %d API calls; want 3 and 1", len(reqs), apiHits.Load())
	}
	if names := reqs[0].ToolNames(); strings.Join(names, ",") != "lookup,query" {
		t.Errorf("tools offered %v, want lookup and query", names)
	}
	if m := reqs[1].Last(); m.Role != "tool" || m.ToolCallID != "c1" || m.Text() != `"u1"` {
		t.Errorf("second call's last message %+v, want the data tool's result for c1", m)
	}
	if m := reqs[2].Last(); m.Role != "tool" || m.ToolCallID != "c2" || !strings.Contains(m.Text(), `"name":"Ada"`) {
		t.Errorf("third call's last message %+v, want the http tool's result for c2", m)
	}
	// Every model reply and tool result is saved: one by one up to the last paid-for or
	// effectful one (the http tool's result), the final reply with the step's commit.
	kinds := func(turns []json.RawMessage) string {
		var ks []string
		for _, raw := range turns {
			var turn struct{ Kind string }
			json.Unmarshal(raw, &turn)
			ks = append(ks, turn.Kind)
		}
		return strings.Join(ks, ",")
	}
	var later []json.RawMessage
	for _, t := range res.Turns {
		raw, _ := json.Marshal(t)
		later = append(later, raw)
	}
	if got, with := kinds(rec.turns), kinds(later); got != "model,tool,model,tool" || with != "model" {
		t.Errorf("saved turns %s, then %s with the commit; want model,tool,model,tool then model", got, with)
	}
	// What the model saw of the state: the prompt and the data tool's slice, not the blob.
	if want := len("You help.") + len("Whose is order 1?") + len(`"u1"`); res.StateBytes != want {
		t.Errorf("state bytes %d, want %d", res.StateBytes, want)
	}
}

// The turns after which nothing is paid for or done — a data tool's result, the final
// reply — are not saved one by one: they go with the step's commit (Result.Turns), or
// are saved before the next turn saved alone or a tool with effects, or when the step
// fails, so that its history shows what it failed on. The history's order is the
// conversation's either way.
func TestAgentKeepsTurnsNothingFollowsForItsCommitAndSavesThemWhenItFails(t *testing.T) {
	query := llmtest.Call("q", "query", `{"query": ".n"}`)
	lookup := llmtest.Call("l", "lookup", `{"id": "u1"}`)
	for _, c := range []struct {
		name, params string
		replies      []llmtest.Reply
		saved, later string // "model", "tool:NAME", comma-separated
		fails        string // in the error, when the step fails
	}{
		{"answered after a data tool", ``, []llmtest.Reply{llmtest.Calls(query), llmtest.Text("7")},
			"model", "tool:query,model", ""},
		{"a data tool, then an http tool in the same reply", ``, []llmtest.Reply{llmtest.Calls(query, lookup), llmtest.Text("7")},
			"model,tool:query,tool:lookup", "model", ""},
		{"the answer refused (not JSON)", `, "json": true`, []llmtest.Reply{llmtest.Calls(query), llmtest.Text("seven")},
			"model,tool:query,model", "", "JSON"},
		{"max_iterations", `, "max_iterations": 1`, []llmtest.Reply{llmtest.Calls(query)},
			"model,tool:query", "", "max_iterations"},
		{"the model call fails", ``, []llmtest.Reply{llmtest.Calls(query), llmtest.Error(400, "context too long")},
			"model,tool:query", "", "context too long"},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv := llmtest.New(t)
			api, _ := countingServer(t, func(w http.ResponseWriter, r *http.Request) { w.Write([]byte(`{"name": "Ada"}`)) })
			env := srv.Env(0)
			env.HTTP = loopbackOK()
			srv.Reply(c.replies...)
			a := buildIn(t, env, "agent", `{"model": "m", "user": "n?"`+c.params+`}`)
			s, rec := agentStep(t, env, state(t, `{"n": 7}`), api.URL)
			res, err := a.Run(context.Background(), s)
			if c.fails == "" && err != nil || c.fails != "" && (err == nil || !strings.Contains(err.Error(), c.fails)) {
				t.Fatalf("error %v, want one about %q", err, c.fails)
			}
			names := func(turns []json.RawMessage) string {
				var ks []string
				for _, raw := range turns {
					var turn struct{ Kind, Tool string }
					json.Unmarshal(raw, &turn)
					if turn.Tool != "" {
						turn.Kind += ":" + turn.Tool
					}
					ks = append(ks, turn.Kind)
				}
				return strings.Join(ks, ",")
			}
			var later []json.RawMessage
			if res != nil {
				for _, t := range res.Turns {
					raw, _ := json.Marshal(t)
					later = append(later, raw)
				}
			}
			if got, with := names(rec.turns), names(later); got != c.saved || with != c.later {
				t.Errorf("saved %q, then %q with the commit; want %q, then %q", got, with, c.saved, c.later)
			}
		})
	}
}

// A retried step resumes from the turns an earlier attempt saved: finished model turns
// and tool calls are not repeated.
func TestAgentResumesFromSavedTurns(t *testing.T) {
	srv := llmtest.New(t)
	api, apiHits := countingServer(t, func(w http.ResponseWriter, r *http.Request) { w.Write([]byte(`{"name": "Ada"}`)) })
	env := srv.Env(0)
	env.HTTP = loopbackOK()
	srv.Reply(llmtest.Text("Done: Ada and Bob."))
	a := buildIn(t, env, "agent", `{"model": "m", "user": "Who?"}`)
	s, rec := agentStep(t, env, state(t, `{"orders": []}`), api.URL)
	s.Attempt = 2
	// The first attempt asked for two lookups and finished the first before it crashed.
	s.Turns = []json.RawMessage{
		json.RawMessage(`{"kind": "model", "message": {"role": "assistant", "tool_calls": [{"id": "a", "name": "lookup", "arguments": "{\"id\": \"u1\"}"}, {"id": "b", "name": "lookup", "arguments": "{\"id\": \"u2\"}"}]}, "usage": {"input_tokens": 50, "output_tokens": 5}}`),
		json.RawMessage(`{"kind": "tool", "tool_call_id": "a", "tool": "lookup", "content": "{\"name\":\"Ada\"}"}`),
	}
	res, err := a.Run(context.Background(), s)
	if err != nil {
		t.Fatal(err)
	}
	if apiHits.Load() != 1 || srv.Calls() != 1 {
		t.Errorf("%d lookups and %d model calls; want only the unfinished lookup (b) and the next model turn", apiHits.Load(), srv.Calls())
	}
	msgs := srv.Requests()[0].Messages
	if len(msgs) != 4 || msgs[2].ToolCallID != "a" || msgs[3].ToolCallID != "b" {
		t.Errorf("the resumed conversation %+v, want user, the saved model turn, then the results of a and b", msgs)
	}
	if res.Usage != (flows.Usage{InputTokens: 60, OutputTokens: 10}) {
		t.Errorf("usage %+v, want the saved turn's plus the new one's", res.Usage)
	}
	var later struct{ Kind string }
	if len(res.Turns) == 1 {
		raw, _ := json.Marshal(res.Turns[0])
		json.Unmarshal(raw, &later)
	}
	if len(rec.turns) != 1 || !strings.Contains(string(rec.turns[0]), `"tool_call_id":"b"`) || later.Kind != "model" {
		t.Errorf("saved %d turns on resume (%s) and %d with the commit (%+v), want the tool result for b, then the model's answer", len(rec.turns), rec.turns, len(res.Turns), later)
	}
}

func TestAgentGivesToolMistakesBackToTheModel(t *testing.T) {
	srv := llmtest.New(t)
	env := srv.Env(0)
	srv.Reply(
		llmtest.Calls(llmtest.Call("c1", "nope", `{}`), llmtest.Call("c2", "query", `{"query": "[range(1e9)]"}`), llmtest.Call("c3", "query", `not json`)),
		llmtest.Text("I could not."),
	)
	a := buildIn(t, env, "agent", `{"model": "m", "user": "go"}`)
	s, _ := agentStep(t, env, state(t, `{}`), "http://127.0.0.1:9")
	res, err := a.Run(context.Background(), s)
	if err != nil || res.Output != "I could not." {
		t.Fatalf("%v %v", res, err)
	}
	msgs := srv.Requests()[1].Messages
	results := map[string]string{}
	for _, m := range msgs {
		if m.Role == "tool" {
			results[m.ToolCallID] = m.Text()
		}
	}
	for id, want := range map[string]string{
		"c1": `error: there is no tool "nope"; the tools are: lookup, query`,
		"c2": "error: jq expression ran past its deadline",
		"c3": "error: the arguments are not valid JSON",
	} {
		if !strings.HasPrefix(results[id], want) {
			t.Errorf("result of %s: %q, want %q", id, results[id], want)
		}
	}
}

func TestAgentStopsAfterMaxIterations(t *testing.T) {
	srv := llmtest.New(t)
	env := srv.Env(0)
	srv.Respond(func(llmtest.Request) llmtest.Reply {
		return llmtest.Calls(llmtest.Call("", "query", `{"query": "."}`))
	})
	a := buildIn(t, env, "agent", `{"model": "m", "user": "loop", "max_iterations": 3}`)
	s, _ := agentStep(t, env, state(t, `{}`), "http://127.0.0.1:9")
	_, err := a.Run(context.Background(), s)
	wantPermanent(t, err, "params.max_iterations", "still calling tools after 3 model turns")
	if srv.Calls() != 3 {
		t.Errorf("%d model calls, want max_iterations (3)", srv.Calls())
	}
}

func TestRouterLLMModeTakesTheNamedRouteElseDefault(t *testing.T) {
	srv := llmtest.New(t)
	r := buildIn(t, srv.Env(0), "router", `{"mode": "llm", "model": "m", "prompt": "{{.ticket}}", "as": "intent",
		"routes": {"code": "Bugs and builds.", "database": "SQL and schemas."}}`)
	for _, tc := range []struct{ answer, want string }{
		{"code", "code"}, {" Database.\n", "database"}, {`"code"`, "code"}, {"billing", "default"}, {"code or database", "default"},
	} {
		srv.Reply(llmtest.Text(tc.answer))
		s, _ := newStep(state(t, `{"ticket": "the build is red"}`))
		res, err := r.Run(context.Background(), s)
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Ports) != 1 || res.Ports[0] != tc.want || res.Update["intent"] != tc.want {
			t.Errorf("answer %q: ports %v, update %v; want %s", tc.answer, res.Ports, res.Update, tc.want)
		}
	}
	req := srv.Requests()[0]
	if sys := req.Messages[0].Text(); !strings.Contains(sys, "- code: Bugs and builds.") || !strings.Contains(sys, "- database: SQL and schemas.") {
		t.Errorf("system prompt %q does not list the routes", sys)
	}
	if req.Last().Text() != "the build is red" {
		t.Errorf("classified %q", req.Last().Text())
	}
}

func TestRouterModesValidateTheirOwnParams(t *testing.T) {
	doc := func(params string) string {
		return `{"sluice": 1, "id": "x", "nodes": [{"id": "in", "type": "input"}, {"id": "r", "type": "router", "params": ` + params + `}, {"id": "o", "type": "output"}],
		 "edges": [{"from": "in", "to": "r"}, {"from": "r", "port": "a", "to": "o"}, {"from": "r", "port": "default", "to": "o"}]}`
	}
	reg := nodes.NewRegistry(nil)
	for _, tc := range []struct{ name, params, code, path string }{
		{"llm needs a model", `{"mode": "llm", "routes": {"a": "anything"}}`, flows.CodeMissingField, "nodes[1].params.model"},
		{"rules need jq", `{"routes": {"a": "not jq ("}}`, flows.CodeJQSyntax, "nodes[1].params.routes.a"},
		{"llm names a known provider", `{"mode": "llm", "model": "m", "provider": "x", "routes": {"a": "d"}}`, flows.CodeInvalidParams, "nodes[1].params.provider"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ps := flows.Validate([]byte(doc(tc.params)), reg, flows.DefaultLimits).Errors()
			if len(ps) != 1 || ps[0].Code != tc.code || ps[0].Path != tc.path {
				t.Errorf("problems %v, want %s at %s", ps, tc.code, tc.path)
			}
		})
	}
	if ps := flows.Validate([]byte(doc(`{"mode": "llm", "model": "m", "routes": {"a": "free text, not jq ("}}`)), reg, flows.DefaultLimits).Errors(); len(ps) != 0 {
		t.Errorf("an llm router's descriptions were checked as jq: %v", ps)
	}
}

func TestDataQueriesTheStateAsAStepAndAsATool(t *testing.T) {
	st := state(t, `{"pdf_data": {"sections": [{"type": "ingredients", "text": "salt"}, {"type": "other", "text": "x"}]}}`)
	d := buildIn(t, nil, "data", `{"query": ".pdf_data.sections[] | select(.type == \"ingredients\") | .text", "as": "ingredients"}`)
	res, err := run(t, d, st)
	if err != nil || res.Output != "salt" || res.Update["ingredients"] != "salt" || res.StateBytes != len(`"salt"`) {
		t.Fatalf("step: %+v %v", res, err)
	}
	tool := d.(flows.Tool)
	s, _ := newStep(st)
	out, err := tool.Call(context.Background(), s, json.RawMessage(`{"query": "[.pdf_data.sections[].type]"}`))
	if b, _ := json.Marshal(out); err != nil || string(b) != `["ingredients","other"]` {
		t.Errorf("tool: %s %v", b, err)
	}
	small := buildIn(t, nil, "data", `{"max_bytes": 10}`).(flows.Tool)
	if _, err := small.Call(context.Background(), s, json.RawMessage(`{"query": "."}`)); err == nil || !strings.Contains(err.Error(), "ask for a smaller slice") {
		t.Errorf("an oversized result: %v", err)
	}
	if _, err := run(t, small.(flows.Component), st); err == nil || !strings.Contains(err.Error(), "a data step needs a query") {
		t.Errorf("a data step without a query: %v", err)
	}
}

// jq bombs end at the deadline, as a step and as a tool, and what runs them lives on.
func TestDataJQBombsEndAtTheDeadline(t *testing.T) {
	st := state(t, `{"a": 1}`)
	for _, bomb := range []string{"[range(1e9)]", "def f: f; f"} {
		d := buildIn(t, nil, "data", `{"query": `+quote(bomb)+`}`)
		_, err := run(t, d, st)
		wantPermanent(t, err, "params.query", "ran past its deadline")
		s, _ := newStep(st)
		if _, err := d.(flows.Tool).Call(context.Background(), s, json.RawMessage(`{"query": `+quote(bomb)+`}`)); err == nil || !strings.Contains(err.Error(), "deadline") {
			t.Errorf("%s as a tool: %v", bomb, err)
		}
	}
	res, err := run(t, buildIn(t, nil, "data", `{"query": ".a"}`), st)
	if err != nil || res.Output != num("1") {
		t.Errorf("after the bombs: %v %v", res, err)
	}
}

func TestTemplateWritesTextUnderAs(t *testing.T) {
	res, err := run(t, build(t, "template", `{"template": "{{range .items}}- {{.}}\n{{end}}{{join \", \" .items}}", "as": "report"}`), state(t, `{"items": ["a", "b"]}`))
	if err != nil || res.Output != "- a\n- b\na, b" || res.Update["report"] != res.Output {
		t.Fatalf("%+v %v", res, err)
	}
	_, err = run(t, build(t, "template", `{"template": "{{.a.b}}"}`), state(t, `{"a": "s"}`))
	wantPermanent(t, err, "params.template", "can't evaluate field b")
}

func TestSubflowRefusesToRunItsOwnFlowAndNeedsARunner(t *testing.T) {
	if _, err := tryBuild("subflow", `{"flow": "f"}`); err == nil || !strings.Contains(err.Error(), "cannot run itself") {
		t.Errorf("a subflow of its own flow: %v", err)
	}
	_, err := run(t, build(t, "subflow", `{"flow": "other"}`), state(t, `{}`))
	if !flows.IsPermanent(err) || !strings.Contains(err.Error(), "cannot run subflows") {
		t.Errorf("without a runner: %v", err)
	}
}

func TestParseProvidersReadsKeysFromTheEnvironmentOnly(t *testing.T) {
	env := func(k string) (string, bool) {
		if k == "LOCAL_KEY" {
			return "k-123", true
		}
		return "", false
	}
	ps, err := nodes.ParseProviders([]byte(`{"providers": {"local": {"base_url": "http://127.0.0.1:11434/v1", "api_key_env": "LOCAL_KEY", "max_retries": 4, "timeout": "2m"}, "open": {"base_url": "https://api.example.com/v1"}}}`), env)
	if err != nil {
		t.Fatal(err)
	}
	if p := ps["local"]; p == nil || p.APIKey != "k-123" || p.Name != "local" || *p.MaxRetries != 4 || p.Timeout.D().Minutes() != 2 || strings.Contains(p.String(), "k-123") {
		t.Errorf("local provider %+v (%s)", ps["local"], ps["local"])
	}
	for body, want := range map[string]string{
		`{"providers": {"x": {"base_url": "http://h/v1", "api_key": "sk-literal"}}}`: "never written in the file",
		`{"providers": {"x": {"base_url": "http://h/v1", "api_key_env": "UNSET"}}}`:  "UNSET (api_key_env) is not set",
		`{"providers": {"x": {"base_url": "ftp://h"}}}`:                              "want an http(s) URL",
		`{"providers": {"X Y": {"base_url": "http://h"}}}`:                           "use lower-case letters",
	} {
		if _, err := nodes.ParseProviders([]byte(body), env); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", body, err, want)
		}
	}
}
