package langflow_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/flows"
	"github.com/sluicehq/sluice/flows/langflow"
	"github.com/sluicehq/sluice/flows/langflow/langflowtest"
	"github.com/sluicehq/sluice/flows/nodes"
	"github.com/sluicehq/sluice/flows/nodes/llmtest"
	"github.com/sluicehq/sluice/store"
)

// pollBudget is a context that ends once a conversion has asked it limit times whether
// it has. The conversion asks as it walks the export, so a budget proportional to the
// export bounds the steps of its walks, with no clock involved.
type pollBudget struct {
	context.Context
	polls, limit int
}

func (b *pollBudget) Err() error {
	if b.polls++; b.polls > b.limit {
		return context.Canceled
	}
	return nil
}

func exportSize(t *testing.T, export []byte) (nodes, edges int) {
	t.Helper()
	var ex struct {
		Data struct {
			Nodes []json.RawMessage `json:"nodes"`
			Edges []json.RawMessage `json:"edges"`
		} `json:"data"`
	}
	if err := json.Unmarshal(export, &ex); err != nil {
		t.Fatal(err)
	}
	return len(ex.Data.Nodes), len(ex.Data.Edges)
}

func nodeOf(t *testing.T, doc []byte, typ string) flows.Node {
	t.Helper()
	var d flows.Document
	if err := json.Unmarshal(doc, &d); err != nil {
		t.Fatal(err)
	}
	for _, n := range d.Nodes {
		if n.Type == typ {
			return n
		}
	}
	t.Fatalf("no %s node in %s", typ, doc)
	return flows.Node{}
}

// A chain of text inputs, each fed by the one before through several edges, has
// copies^links paths; the conversion used to follow each of them (22 links of 4 edges,
// a 40 KB export: 4^21 steps, a request that never answered).
func TestChainsOfRepeatedEdgesConvertInStepsLinearInTheExport(t *testing.T) {
	for _, tc := range []struct {
		name   string
		export []byte
		last   string
	}{
		{"22 text inputs fed by 4 identical edges each", langflowtest.Chain(22, 4, true), "text_0"},
		{"200 text inputs fed by 4 edges into different fields each", langflowtest.Chain(200, 4, false), "text_0"},
		{"400 text inputs fed by 4 identical edges each", langflowtest.Chain(400, 4, true), "text_0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nodes, edges := exportSize(t, tc.export)
			// One poll per node and edge allows hundreds of steps for each: far more than a
			// linear walk takes, far fewer than the paths of the chain.
			ctx := &pollBudget{Context: context.Background(), limit: nodes + edges}
			r, err := langflow.Convert(ctx, tc.export, langflow.Options{})
			if err != nil {
				t.Fatalf("conversion of %d nodes and %d edges: %v (after %d polls)", nodes, edges, err, ctx.polls)
			}
			if ps := flows.Validate(r.Document, nodesRegistry(), flows.DefaultLimits).Errors(); len(ps) > 0 {
				t.Errorf("the converted chain does not validate:\n%v", ps)
			}
			// The value is followed back through the whole chain, once.
			var p struct{ Template string }
			json.Unmarshal(nodeOf(t, r.Document, "template").Params, &p)
			if p.Template != "The text: {{."+tc.last+"}}" {
				t.Errorf("prompt %q, want the text of the chain's first input", p.Template)
			}
		})
	}
}

func nodesRegistry() *flows.Registry { return nodes.NewRegistry(nil) }

func TestAConversionStopsWhenItsContextEnds(t *testing.T) {
	export := langflowtest.Chain(400, 4, true)
	// The first poll, before the conversion starts, passes: the stop comes from inside
	// the walks.
	ctx := &pollBudget{Context: context.Background(), limit: 1}
	if _, err := langflow.Convert(ctx, export, langflow.Options{}); !errors.Is(err, context.Canceled) {
		t.Fatalf("conversion under an ended context: %v, want it stopped", err)
	}
	if ctx.polls < 2 {
		t.Errorf("the context was asked %d times, want the walks to ask it", ctx.polls)
	}
	done, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := langflow.Convert(done, export, langflow.Options{}); !errors.Is(err, context.Canceled) {
		t.Errorf("conversion under a cancelled context: %v", err)
	}
}

func TestAnExportTooLargeForAFlowIsRefused(t *testing.T) {
	t.Run("more nodes than a flow holds", func(t *testing.T) {
		_, err := langflow.Convert(context.Background(), langflowtest.Chain(flows.DefaultLimits.MaxNodes, 1, true), langflow.Options{})
		if !errors.Is(err, langflow.ErrTooLarge) || !strings.Contains(err.Error(), fmt.Sprintf("at most %d", flows.DefaultLimits.MaxNodes)) {
			t.Errorf("err = %v", err)
		}
	})
	t.Run("a prompt naming a long value many times", func(t *testing.T) {
		// 100 KB of export would become 100,000 copies of a 1 KB text.
		export := langflowtest.Export("amplified", []langflowtest.Node{
			{ID: "ChatInput-1", Type: "ChatInput", Fields: map[string]any{"input_value": "hi"}},
			{ID: "Prompt-1", Type: "Prompt", Fields: map[string]any{"template": strings.Repeat("{v}", 100_000), "v": strings.Repeat("x", 1000)}},
		}, nil)
		_, err := langflow.Convert(context.Background(), export, langflow.Options{})
		if !errors.Is(err, langflow.ErrTooLarge) || !strings.Contains(err.Error(), "Prompt-1") {
			t.Errorf("err = %v, want too large, naming the node", err)
		}
	})
}

const testKey = "sk-proj-Abcdefghijklmnopqrstuvwx1234"

// leaks says where a result holds the key, in any case (node ids are lower-cased names).
func leaks(r *langflow.Result, key string) []string {
	var where []string
	low := strings.ToLower(key)
	if strings.Contains(strings.ToLower(string(r.Document)), low) {
		where = append(where, "the document")
	}
	for _, g := range r.Gaps {
		if strings.Contains(strings.ToLower(g.String()+g.Placeholder), low) {
			where = append(where, "gap "+g.Node)
		}
	}
	for _, n := range r.Notes {
		if strings.Contains(strings.ToLower(n.String()), low) {
			where = append(where, "note "+n.Node)
		}
	}
	return where
}

func TestACredentialInAnyFieldIsDroppedAndReported(t *testing.T) {
	for _, tc := range []struct {
		name     string
		unmapped bool
	}{{"full conversion", false}, {"partial conversion with placeholders", true}} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := langflow.Convert(context.Background(), langflowtest.Credentials(testKey, tc.unmapped), langflow.Options{})
			if err != nil {
				t.Fatal(err)
			}
			if w := leaks(r, testKey); len(w) > 0 {
				t.Errorf("the key is in %v:\n%s", w, r.Document)
			}
			var notes []string
			for _, n := range r.Notes {
				notes = append(notes, n.String())
			}
			for _, g := range r.Gaps {
				notes = append(notes, "gap "+g.String())
			}
			all := strings.Join(notes, "\n")
			want := []string{
				"Prompt-p (Prompt): field template holds what looks like a credential; it was not copied",
				"OpenAIModel-m (OpenAIModel): field system_message holds what looks like a credential",
				"OpenAIModel-m (OpenAIModel): field openai_api_base holds what looks like a credential",
				"OpenAIModel-g (OpenAIModel): the API key was not copied",
				"APIRequest-r (APIRequest): its name looks like a credential",
				"APIRequest-r (APIRequest): field urls holds what looks like a credential",
				"APIRequest-r (APIRequest): query parameter q holds what looks like a credential",
				"APIRequest-r (APIRequest): query parameter api_key holds what looks like a credential",
				"APIRequest-r (APIRequest): body field note holds what looks like a credential",
				"the flow's description held what looks like a credential",
			}
			if tc.unmapped {
				want = append(want, "OpenAIModel-n (OpenAIModel): field model_name holds what looks like a credential",
					"Memory-k (Memory): field session_id holds what looks like a credential",
					"gap Agent-a (Agent): the agent uses [credential not copied] models")
			}
			for _, w := range want {
				if !strings.Contains(all, w) {
					t.Errorf("no note %q in:\n%s", w, all)
				}
			}
			probs := flows.Validate(r.Document, nodesRegistry(), flows.DefaultLimits)
			for _, p := range probs {
				if p.Code == flows.CodeLiteralSecret {
					t.Errorf("validation still finds a secret: %s", p)
				}
			}
			if !tc.unmapped {
				// The API request's URL held the key and was left out: the request
				// cannot be sent until it is written again, and validation says where.
				errs := probs.Errors()
				if len(r.Gaps) > 0 || len(errs) != 1 || errs[0].Node != "apirequest" || !strings.Contains(errs[0].Path, "params.url") {
					t.Errorf("gaps %v, problems:\n%v", r.Gaps, probs)
				}
				return
			}
			if len(r.Gaps) != 2 {
				t.Fatalf("gaps %v, want the transcription service and the agent", r.Gaps)
			}
			var doc flows.Document
			json.Unmarshal(r.Document, &doc)
			for _, n := range doc.Nodes {
				if strings.HasPrefix(n.Type, langflow.PlaceholderPrefix) && len(n.Params) > 0 {
					t.Errorf("placeholder %s carries params %s", n.ID, n.Params)
				}
			}
		})
	}
}

// state is the run state the rendering tests use: a key a template could leak.
var renderState = map[string]any{"chat_input": "VALUE", "secret": "LEAK"}

// render runs the converted prompt with the real template component.
func render(t *testing.T, doc []byte) string {
	t.Helper()
	n := nodeOf(t, doc, "template")
	spec, _ := nodesRegistry().Lookup("template")
	p, err := spec.WithDefaults(n.Params)
	if err != nil {
		t.Fatal(err)
	}
	comp, err := spec.New(&flows.Build{Flow: &flows.Document{ID: "f"}, Node: &n, Params: p})
	if err != nil {
		t.Fatalf("the converted template does not build: %v\n%s", err, n.Params)
	}
	res, err := comp.Run(context.Background(), &flows.Step{Node: n.ID, Input: renderState})
	if err != nil {
		t.Fatalf("the converted template does not render: %v\n%s", err, n.Params)
	}
	return res.Output.(string)
}

func promptExport(template string, fields map[string]any) []byte {
	f := map[string]any{"template": template, "q": ""}
	for k, v := range fields {
		f[k] = v
	}
	return langflowtest.Export("braces", []langflowtest.Node{
		{ID: "ChatInput-1", Type: "ChatInput", Title: "Chat Input", Fields: map[string]any{"input_value": "hi"}},
		{ID: "Prompt-1", Type: "Prompt", Title: "Prompt", X: 200, Fields: f},
		{ID: "ChatOutput-1", Type: "ChatOutput", Title: "Chat Output", X: 400, Fields: map[string]any{"input_value": ""}},
	}, []langflowtest.Edge{
		{From: "ChatInput-1", Output: "message", To: "Prompt-1", Field: "q"},
		{From: "Prompt-1", Output: "prompt", To: "ChatOutput-1", Field: "input_value"},
	})
}

// Langflow's prompt syntax: {q} is a variable, {{ and }} are literal braces. Whatever
// braces the text holds, the converted template prints them and runs nothing.
func TestLangflowTextReachesTheTemplateAsText(t *testing.T) {
	for _, tc := range []struct{ name, langflow, want string }{
		{"escaped braces around json stay text", "Reply as {{{{json .}}}} to {q}", "Reply as {{json .}} to VALUE"},
		{"escaped braces around a state key stay text", "{{{{.secret}}}}", "{{.secret}}"},
		{"a Go action written in Langflow braces is text", "{{.secret}} and {{json .}}", "{.secret} and {json .}"},
		{"define and template stay text", `{{{{define "x"}}}}LEAK{{{{end}}}}{{{{template "x"}}}}`, `{{define "x"}}LEAK{{end}}{{template "x"}}`},
		{"a brace right before a variable", "{{{q}}}", "{VALUE}"},
		{"two braces right before a variable", "a{{{{{q}", "a{{VALUE"},
		{"odd runs of braces", "{{{{{ }}}}} {{{", "{{{ }}} {{"},
		{"a lone brace at the end", "{q}{", "VALUE{"},
		{"trim markers stay text", "x {{{{- .secret -}}}} y", "x {{- .secret -}} y"},
		{"comments stay text", "{{{{/* c */}}}}", "{{/* c */}}"},
		{"braces that are no variable", "{not a var} {1} }", "{not a var} {1} }"},
		{"a variable's own value is text", "{v}", "{{.secret}}{{"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := langflow.Convert(context.Background(), promptExport(tc.langflow, map[string]any{"v": "{{.secret}}{{"}), langflow.Options{})
			if err != nil {
				t.Fatal(err)
			}
			if got := render(t, r.Document); got != tc.want {
				t.Errorf("Langflow %q renders %q, want %q", tc.langflow, got, tc.want)
			}
		})
	}
	t.Run("a literal field other than a prompt is text", func(t *testing.T) {
		text := `{{.secret}} {{template "x"}} {{{ }}} {`
		export := langflowtest.Export("system", []langflowtest.Node{
			{ID: "ChatInput-1", Type: "ChatInput", Fields: map[string]any{"input_value": "hi"}},
			{ID: "OpenAIModel-1", Type: "OpenAIModel", Fields: map[string]any{"model_name": "gpt-4o-mini", "system_message": text, "input_value": ""}},
		}, []langflowtest.Edge{{From: "ChatInput-1", Output: "message", To: "OpenAIModel-1", Field: "input_value"}})
		r, err := langflow.Convert(context.Background(), export, langflow.Options{})
		if err != nil {
			t.Fatal(err)
		}
		var p struct{ System string }
		json.Unmarshal(nodeOf(t, r.Document, "llm").Params, &p)
		tpl, err := flows.ParseTemplate(p.System)
		if err != nil {
			t.Fatalf("system %q: %v", p.System, err)
		}
		if got, err := tpl.Execute(context.Background(), renderState); err != nil || got != text {
			t.Errorf("system message renders %q (%v), want %q", got, err, text)
		}
	})
	t.Run("a run of the imported prompt sends the text, not the state", func(t *testing.T) {
		srv := llmtest.New(t)
		r, err := langflow.Convert(context.Background(), promptExport("Reply as {{{{json .}}}} to {q}", nil), langflow.Options{})
		if err != nil {
			t.Fatal(err)
		}
		run := newRunner(t, srv, nil).run(r.Document, `{"chat_input": "VALUE", "secret": "LEAK"}`)
		if run.Status != store.StatusSucceeded || string(run.Output()) != `"Reply as {{json .}} to VALUE"` {
			t.Errorf("run %s: output %s, error %s", run.Status, run.Output(), run.Error)
		}
	})
}
