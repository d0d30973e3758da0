package langflow_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/flows"
	"github.com/sluicehq/sluice/flows/engine"
	"github.com/sluicehq/sluice/flows/langflow"
	"github.com/sluicehq/sluice/flows/langflow/langflowtest"
	"github.com/sluicehq/sluice/flows/nodes"
	"github.com/sluicehq/sluice/flows/nodes/llmtest"
	"github.com/sluicehq/sluice/flows/nodes/mcptest"
	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/storetest"
)

// starterResult is what importing one Langflow flow came to.
type starterResult struct {
	File      string
	Imported  bool // converted without gaps, so without --partial
	Mapped    int  // component nodes with a Sluice equivalent
	Total     int  // component nodes (sticky notes aside)
	Validates bool
	Ran       bool   // succeeded end to end against the local servers
	Problem   string // why not, when it did not
}

func (r starterResult) row() string {
	yes := func(b bool) string {
		if b {
			return "yes"
		}
		return "no"
	}
	ran := yes(r.Ran)
	if !r.Imported {
		ran = "—"
	}
	return fmt.Sprintf("| %s | %s | %d/%d | %s |", r.File, yes(r.Imported), r.Mapped, r.Total, ran)
}

// world is the local servers a converted flow runs against: the OpenAI-protocol and
// Anthropic test servers as its models, a web server for every page, API and search it
// reaches, an MCP server, and Redis (embedded) for memory, files and vectors.
type world struct {
	t     *testing.T
	llm   *llmtest.Server
	claud *llmtest.Anthropic
	web   *httptest.Server
	mcp   *mcptest.HTTP
	env   *nodes.Env
	r     *store.Redis
	eng   *engine.Engine
}

// page is what the web server answers for any page.
const page = `<html><head><title>Sluice notes</title></head><body><article><h1>Sluice notes</h1>
<p>Sluice runs flows on Redis Streams. Every step is a checkpoint; a crashed worker's run resumes where it stopped.</p>
<p>Retries back off exponentially, and a step that keeps failing goes to the dead letters.</p></article></body></html>`

func newWorld(t *testing.T) *world {
	w := &world{t: t, llm: llmtest.New(t), claud: llmtest.NewAnthropic(t), mcp: mcptest.StartHTTP(t)}
	w.web = httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		switch {
		case r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/search"): // Tavily
			rw.Header().Set("Content-Type", "application/json")
			rw.Write([]byte(`{"results": [{"title": "Sluice", "url": "https://example.com/sluice", "content": "Durable flows on Redis Streams."}]}`))
		case strings.Contains(r.URL.Path, "/api/"):
			rw.Header().Set("Content-Type", "application/json")
			rw.Write([]byte(`{"name": "pikachu", "types": ["electric"]}`))
		default:
			rw.Header().Set("Content-Type", "text/html; charset=utf-8")
			rw.Write([]byte(page))
		}
	}))
	t.Cleanup(w.web.Close)
	w.llm.Respond(w.answer)
	w.claud.Respond(func(r llmtest.AnthropicRequest) llmtest.Reply {
		return llmtest.Text("An answer from the Anthropic test server.")
	})
	w.r = storetest.Embedded(t)
	files, err := store.NewFiles(w.r, store.FilesOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w.env = w.llm.Env(0)
	w.env.Providers["anthropic"] = w.claud.Provider("anthropic", 0)
	w.env.HTTP = &nodes.HTTPPolicy{Allow: []nodes.AllowRule{{Prefix: netip.MustParsePrefix("127.0.0.0/8")}}}
	w.env.LookupEnv = func(name string) (string, bool) {
		if strings.HasPrefix(name, flows.SecretPrefix) {
			return "test-secret-value", true
		}
		return "", false
	}
	w.env.Memory, w.env.Files, w.env.Vectors = store.NewMemory(w.r), files, store.NewVectors(w.r)
	w.eng = engine.New(w.r, nodes.NewRegistry(w.env), engine.Options{})
	return w
}

// answer is the test model: it calls every tool it is offered once, answers JSON that
// fits a response format, and otherwise a sentence.
func (w *world) answer(r llmtest.Request) llmtest.Reply {
	if len(r.ResponseFormat) > 0 && strings.Contains(string(r.ResponseFormat), "json_schema") {
		var rf struct {
			JSONSchema struct {
				Schema map[string]any `json:"schema"`
			} `json:"json_schema"`
		}
		json.Unmarshal(r.ResponseFormat, &rf)
		b, _ := json.Marshal(example(rf.JSONSchema.Schema))
		return llmtest.Text(string(b))
	}
	called := false
	for _, m := range r.Messages {
		called = called || m.Role == "tool"
	}
	if len(r.Tools) > 0 && !called {
		var calls []llmtest.ToolCall
		for i, tool := range r.Tools {
			var schema map[string]any
			json.Unmarshal(tool.Function.Parameters, &schema)
			args := map[string]any{}
			req, _ := schema["required"].([]any)
			props, _ := schema["properties"].(map[string]any)
			for _, k := range req {
				name := k.(string)
				p, _ := props[name].(map[string]any)
				args[name] = w.argument(name, p)
			}
			b, _ := json.Marshal(args)
			calls = append(calls, llmtest.Call(fmt.Sprintf("call_%d", i), tool.Function.Name, string(b)))
		}
		return llmtest.Calls(calls...)
	}
	return llmtest.Text("An answer from the test model.")
}

func (w *world) argument(name string, p map[string]any) any {
	switch {
	case name == "expression":
		return "2 + 3 * 4"
	case strings.Contains(name, "url"):
		return w.web.URL + "/api/pokemon/pikachu"
	case p["type"] == "integer" || p["type"] == "number":
		return 1
	case p["type"] == "boolean":
		return true
	case p["type"] == "array":
		return []any{}
	case p["type"] == "object":
		return map[string]any{}
	}
	return "sluice"
}

// example is a value that fits a JSON schema.
func example(s map[string]any) any {
	switch s["type"] {
	case "object":
		out := map[string]any{}
		props, _ := s["properties"].(map[string]any)
		for k, p := range props {
			ps, _ := p.(map[string]any)
			out[k] = example(ps)
		}
		return out
	case "array":
		items, _ := s["items"].(map[string]any)
		return []any{example(items)}
	case "integer", "number":
		return 7
	case "boolean":
		return true
	}
	return "a value"
}

// localise points what a flow reaches at the local servers: pages, APIs and web
// searches at the web server, MCP servers at the MCP server.
func (w *world) localise(doc []byte) []byte {
	var d flows.Document
	if err := json.Unmarshal(doc, &d); err != nil {
		w.t.Fatal(err)
	}
	for i := range d.Nodes {
		n := &d.Nodes[i]
		var p map[string]any
		if json.Unmarshal(n.Params, &p) != nil || p == nil {
			continue
		}
		switch n.Type {
		case "url", "http":
			if u, ok := p["url"].(string); ok {
				u = strings.NewReplacer("https://", w.web.URL+"/https/", "http://", w.web.URL+"/http/").Replace(u)
				p["url"] = u
			}
		case "web_search":
			p["base_url"] = w.web.URL
		case "mcp":
			// The test server's tools (one of which kills it) stand for the server's.
			p["url"] = w.mcp.URL
			p["tools"] = []string{"add"}
			delete(p, "headers")
		}
		n.Params, _ = json.Marshal(p)
	}
	b, err := d.Marshal()
	if err != nil {
		w.t.Fatal(err)
	}
	return b
}

// input is a run input for the flow: a session, and a Markdown file under each key its
// input takes files.
func (w *world) input(ctx context.Context, flow string, doc []byte) json.RawMessage {
	var d flows.Document
	json.Unmarshal(doc, &d)
	in := map[string]any{"session_id": "session-1"}
	for _, n := range d.Nodes {
		if n.Type != flows.EntryType {
			continue
		}
		var p struct {
			Schema struct {
				Properties map[string]struct {
					Type string `json:"type"`
				} `json:"properties"`
			} `json:"schema"`
		}
		json.Unmarshal(n.Params, &p)
		for k, prop := range p.Schema.Properties {
			if prop.Type != "array" {
				continue
			}
			info, err := w.env.Files.Put(ctx, flow, "notes.md", "text/markdown",
				[]byte("# Sluice notes\n\nSluice runs flows on Redis Streams.\n\n## Retries\n\nA failing step is retried, then dead-lettered.\n"))
			if err != nil {
				w.t.Fatal(err)
			}
			in[k] = []any{info.Ref()}
		}
	}
	b, _ := json.Marshal(in)
	return b
}

// importStarter imports one export, validates it and, when it imported whole, runs it.
func importStarter(t *testing.T, w *world, file string, data []byte) starterResult {
	t.Helper()
	res := starterResult{File: file}
	r, err := langflow.Convert(context.Background(), data, langflow.Options{})
	if err != nil {
		res.Problem = err.Error()
		return res
	}
	var ex struct {
		Data struct {
			Nodes []struct {
				Type string `json:"type"`
				Data struct {
					Type string `json:"type"`
				} `json:"data"`
			} `json:"nodes"`
		} `json:"data"`
	}
	json.Unmarshal(data, &ex)
	for _, n := range ex.Data.Nodes {
		if n.Type != "noteNode" && n.Data.Type != "note" && n.Data.Type != "Note" {
			res.Total++
		}
	}
	res.Mapped = res.Total - len(r.Gaps)
	res.Imported = len(r.Gaps) == 0
	if !res.Imported {
		var why []string
		for _, g := range r.Gaps {
			why = append(why, g.String())
		}
		res.Problem = strings.Join(why, "; ")
		return res
	}
	probs := flows.Validate(r.Document, nodes.NewRegistry(w.env), flows.DefaultLimits)
	res.Validates = !probs.HasErrors()
	if !res.Validates {
		res.Problem = fmt.Sprint(probs.Errors())
		return res
	}
	doc := w.localise(r.Document)
	run, problem := w.run(doc, nil)
	res.Ran = run != nil && run.Status == store.StatusSucceeded
	switch {
	case problem != "":
		res.Problem = problem
	case !res.Ran:
		res.Problem = fmt.Sprintf("run %s: %s", run.Status, run.Error)
	}
	return res
}

// run runs a (localised) flow once with input, or with the input w.input makes when nil.
func (w *world) run(doc []byte, input json.RawMessage) (*store.Run, string) {
	w.t.Helper()
	p, probs, err := w.eng.Compile(doc)
	if err != nil {
		return nil, fmt.Sprintf("compile: %v %v", err, probs)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := w.eng.Publish(ctx, p); err != nil {
		w.t.Fatal(err)
	}
	wctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- w.eng.NewWorker(engine.WorkerOptions{Flows: []string{p.Flow}, Block: 100 * time.Millisecond}).Run(wctx)
	}()
	defer func() { stop(); <-done }()
	if input == nil {
		input = w.input(ctx, p.Flow, doc)
	}
	id, err := w.eng.Start(ctx, p, input, engine.StartOptions{})
	if err != nil {
		return nil, "start: " + err.Error()
	}
	run, err := w.eng.Wait(ctx, p.Flow, id)
	if err != nil {
		w.t.Fatal(err)
	}
	return run, ""
}

// TestLangflowStarterProjects measures the importer on Langflow's own starter projects,
// which are not in this repository (they embed Langflow's code): point
// SLUICE_LANGFLOW_STARTERS at a checkout's
// src/backend/base/langflow/initial_setup/starter_projects (docs/import-langflow.md).
func TestLangflowStarterProjects(t *testing.T) {
	dir := os.Getenv("SLUICE_LANGFLOW_STARTERS")
	if dir == "" {
		t.Skip("SLUICE_LANGFLOW_STARTERS is not set")
	}
	paths, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no exports in %s: %v", dir, err)
	}
	sort.Strings(paths)
	w := newWorld(t)
	var results []starterResult
	for _, path := range paths {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		results = append(results, importStarter(t, w, strings.TrimSuffix(filepath.Base(path), ".json"), data))
	}
	t.Log("\n" + table(results))
}

func table(results []starterResult) string {
	var b strings.Builder
	b.WriteString("| starter project | imports without --partial | nodes mapped | runs end to end |\n|---|---|---|---|\n")
	imported, ran, mapped, total := 0, 0, 0, 0
	for _, r := range results {
		b.WriteString(r.row() + "\n")
		if r.Imported {
			imported++
		}
		if r.Ran {
			ran++
		}
		mapped += r.Mapped
		total += r.Total
	}
	fmt.Fprintf(&b, "\n%d of %d import without --partial, %d of them validate and run end to end; %d of %d component nodes map (%.1f %%)\n",
		imported, len(results), ran, mapped, total, 100*float64(mapped)/float64(max(total, 1)))
	for _, r := range results {
		if r.Problem != "" {
			fmt.Fprintf(&b, "%s: %s\n", r.File, r.Problem)
		}
	}
	return b.String()
}

// The fixtures of Langflow 1.7's starter projects (langflowtest.Starters): each imports
// as pinned here — without --partial or with the gaps listed — and each that imports
// validates and runs end to end against the local servers.
func TestStarterProjectFixturesImportValidateAndRun(t *testing.T) {
	want := map[string]string{ // file -> "imported mapped/total", or the gaps' types
		"Basic Prompt Chaining":            "yes 5/5",
		"Basic Prompting":                  "yes 4/4",
		"Blog Writer":                      "yes 6/6",
		"Custom Component Generator":       "yes 8/8",
		"Document Q&A":                     "yes 5/5",
		"Financial Report Parser":          "yes 4/4",
		"Hybrid Search RAG":                "yes 6/6",
		"Image Sentiment Analysis":         "yes 6/6",
		"Instagram Copywriter":             "yes 10/10",
		"Invoice Summarizer":               "no 4/5 needle",
		"Knowledge Ingestion":              "yes 3/3",
		"Knowledge Retrieval":              "yes 3/3",
		"Market Research":                  "yes 6/6",
		"Meeting Summary":                  "no 10/12 AssemblyAITranscriptionJobPoller AssemblyAITranscriptionJobCreator",
		"Memory Chatbot":                   "yes 5/5",
		"News Aggregator":                  "no 4/5 AgentQL",
		"Nvidia Remix":                     "no 7/8 RemixDocumentation",
		"Pokédex Agent":                    "yes 4/4",
		"Portfolio Website Code Generator": "yes 6/6",
		"Price Deal Finder":                "no 4/5 AgentQL",
		"Research Agent":                   "yes 10/10",
		"Research Translation Loop":        "no 5/6 ArXivComponent",
		"SEO Keyword Generator":            "yes 4/4",
		"SaaS Pricing":                     "yes 4/4",
		"Search agent":                     "yes 4/4",
		"Sequential Tasks Agents":          "no 10/11 YfinanceComponent",
		"Simple Agent":                     "yes 5/5",
		"Social Media Agent":               "no 3/5 ApifyActors ApifyActors",
		"Text Sentiment Analysis":          "yes 9/9",
		"Travel Planning Agents":           "yes 8/8",
		"Twitter Thread Generator":         "yes 10/10",
		"Vector Store RAG":                 "yes 11/11",
		"Youtube Analysis":                 "no 6/8 YouTubeCommentsComponent YouTubeTranscripts",
	}
	if len(langflowtest.Starters) != 33 || len(want) != 33 {
		t.Fatalf("%d fixtures, %d pinned results, want 33 of each", len(langflowtest.Starters), len(want))
	}
	w := newWorld(t)
	var results []starterResult
	imported := 0
	for _, s := range langflowtest.Starters {
		data := s.Export()
		res := importStarter(t, w, s.File, data)
		results = append(results, res)
		r, err := langflow.Convert(context.Background(), data, langflow.Options{})
		if err != nil {
			t.Fatalf("%s: %v", s.File, err)
		}
		got := fmt.Sprintf("%s %d/%d", map[bool]string{true: "yes", false: "no"}[res.Imported], res.Mapped, res.Total)
		for _, g := range r.Gaps {
			got += " " + g.Type
		}
		if got != want[s.File] {
			t.Errorf("%s: %s, want %s (%s)", s.File, got, want[s.File], res.Problem)
		}
		if res.Imported {
			imported++
			if !res.Validates || !res.Ran {
				t.Errorf("%s imports but does not validate and run: %s", s.File, res.Problem)
			}
		}
	}
	if imported < 24 {
		t.Errorf("%d of 33 import without --partial, want at least 24", imported)
	}
	t.Log("\n" + table(results))
}
