package langflow_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/flows"
	"github.com/sluicehq/sluice/flows/langflow"
	"github.com/sluicehq/sluice/flows/langflow/langflowtest"
	"github.com/sluicehq/sluice/flows/nodes"
	"github.com/sluicehq/sluice/store"
)

// starter converts the fixture of a starter project.
func starter(t *testing.T, file string) *langflow.Result {
	t.Helper()
	for _, s := range langflowtest.Starters {
		if s.File == file {
			r, err := langflow.Convert(context.Background(), s.Export(), langflow.Options{})
			if err != nil {
				t.Fatal(err)
			}
			return r
		}
	}
	t.Fatalf("no fixture %q", file)
	return nil
}

func mustRun(t *testing.T, w *world, doc []byte, input string) *store.Run {
	t.Helper()
	var in json.RawMessage
	if input != "" {
		in = json.RawMessage(input)
	}
	run, problem := w.run(w.localise(doc), in)
	if problem != "" {
		t.Fatal(problem)
	}
	if run.Status != store.StatusSucceeded {
		t.Fatalf("run %s: %s", run.Status, run.Error)
	}
	return run
}

func nodeParams(t *testing.T, doc []byte, id string) map[string]any {
	t.Helper()
	var d flows.Document
	json.Unmarshal(doc, &d)
	for _, n := range d.Nodes {
		if n.ID == id {
			var p map[string]any
			json.Unmarshal(n.Params, &p)
			return p
		}
	}
	t.Fatalf("no node %s in %s", id, doc)
	return nil
}

// Langflow's Message History reads what the chat input and output stored in the
// session; the converted flow remembers the conversation across runs of one session,
// and another session starts afresh.
func TestMemoryChatbotRemembersTheSessionAcrossRuns(t *testing.T) {
	w := newWorld(t)
	doc := starter(t, "Memory Chatbot").Document
	mustRun(t, w, doc, `{"chat_input": "My name is Ada.", "session_id": "s-ada"}`)
	mustRun(t, w, doc, `{"chat_input": "What is my name?", "session_id": "s-ada"}`)
	mustRun(t, w, doc, `{"chat_input": "Who am I?", "session_id": "s-other"}`)
	reqs := w.llm.Requests()
	if len(reqs) != 3 {
		t.Fatalf("%d model calls, want 3", len(reqs))
	}
	second, third := reqs[1].Messages[0].Text(), reqs[2].Messages[0].Text()
	if !strings.Contains(second, "User: My name is Ada.\nAI: An answer from the test model.") {
		t.Errorf("the second turn's prompt does not hold the first exchange:\n%s", second)
	}
	if strings.Contains(third, "Ada") {
		t.Errorf("another session sees the first one's messages:\n%s", third)
	}
}

// Vector Store RAG ingests the run's file (read, split, embedded into the collection)
// before it searches the collection with the question, and the model is given the
// passages found.
func TestVectorStoreRAGAnswersFromTheIngestedFile(t *testing.T) {
	w := newWorld(t)
	r := starter(t, "Vector Store RAG")
	mustRun(t, w, r.Document, "")
	reqs := w.llm.Requests()
	if len(reqs) != 1 || !strings.Contains(reqs[0].Last().Text(), "Sluice runs flows on Redis Streams") {
		t.Fatalf("the model was not given the ingested passage: %+v", reqs)
	}
	if len(w.llm.EmbeddingRequests()) < 2 {
		t.Errorf("embeddings requests %d, want the ingest's and the query's", len(w.llm.EmbeddingRequests()))
	}
	search := nodeParams(t, r.Document, "astra_db_2")
	if search["operation"] != "search" || search["shared"] != "langflow" || search["model"] != "text-embedding-3-small" {
		t.Errorf("search node %v", search)
	}
}

// Knowledge Ingestion fills a knowledge base that Knowledge Retrieval, another flow,
// searches: both are the shared collection of the same name.
func TestKnowledgeBasesAreSharedBetweenTheIngestionAndTheRetrievalFlow(t *testing.T) {
	w := newWorld(t)
	mustRun(t, w, starter(t, "Knowledge Ingestion").Document, "")
	run := mustRun(t, w, starter(t, "Knowledge Retrieval").Document, `{"text_input": "Redis Streams"}`)
	if !strings.Contains(string(run.Output()), "Redis Streams") {
		t.Errorf("retrieval found nothing of what was ingested: %s", run.Output())
	}
}

// The Pokédex agent's API request takes its URL from the model, as in Langflow's tool
// mode; the request reaches the API and its answer goes back to the model.
func TestPokedexAgentsToolCallsTheURLTheModelGives(t *testing.T) {
	w := newWorld(t)
	r := starter(t, "Pokédex Agent")
	p := nodeParams(t, r.Document, "api_request")
	if p["url"] != "{{.url_input}}" {
		t.Fatalf("the tool's URL is %v", p["url"])
	}
	mustRun(t, w, r.Document, "")
	var toolResult string
	for _, m := range w.llm.Requests()[1].Messages {
		if m.Role == "tool" && strings.Contains(m.Text(), "pikachu") {
			toolResult = m.Text()
		}
	}
	if toolResult == "" {
		t.Errorf("no tool result from the API in %+v", w.llm.Requests()[1].Messages)
	}
}

// Financial Report Parser: the structured output's fields reach the Parser's pattern.
func TestParserWritesThePatternOverTheStructuredOutput(t *testing.T) {
	w := newWorld(t)
	run := mustRun(t, w, starter(t, "Financial Report Parser").Document, "")
	if got := string(run.Output()); got != `"EBITDA=a value | NET_INCOME=a value | GROSS_PROFIT=a value"` {
		t.Errorf("output %s", got)
	}
}

// A Langflow Loop over the chunks of a file: one branch per chunk, whose results the
// loop's done output gathers, in order.
func TestALoopRunsItsBodyOncePerItemAndGathersTheResults(t *testing.T) {
	export := langflowtest.Export("Loop over chunks", []langflowtest.Node{
		{ID: "ChatInput-1", Type: "ChatInput", Title: "Chat Input", Fields: map[string]any{"input_value": "Summarise each chunk."}},
		{ID: "File-1", Type: "File", Title: "Read File", Fields: map[string]any{"separator": "\n\n"}, X: 200},
		{ID: "SplitText-1", Type: "SplitText", Title: "Split Text", Fields: map[string]any{"chunk_size": 40, "chunk_overlap": 0, "separator": "\n\n"}, X: 400},
		{ID: "LoopComponent-1", Type: "LoopComponent", Title: "Loop", X: 600},
		{ID: "ParserComponent-1", Type: "ParserComponent", Title: "Parser", Fields: map[string]any{"mode": "Parser", "pattern": "Chunk: {text}", "sep": "\n"}, X: 800},
		{ID: "LanguageModelComponent-1", Type: "LanguageModelComponent", Title: "Language Model", Fields: map[string]any{"model": []any{map[string]any{"name": "gpt-4o-mini", "provider": "OpenAI"}}}, X: 1000},
		{ID: "ChatOutput-1", Type: "ChatOutput", Title: "Chat Output", X: 1200},
	}, []langflowtest.Edge{
		{From: "File-1", Output: "message", To: "SplitText-1", Field: "data_inputs"},
		{From: "SplitText-1", Output: "dataframe", To: "LoopComponent-1", Field: "data"},
		{From: "LoopComponent-1", Output: "item", To: "ParserComponent-1", Field: "input_data"},
		{From: "ParserComponent-1", Output: "parsed_text", To: "LanguageModelComponent-1", Field: "input_value"},
		{From: "LanguageModelComponent-1", Output: "text_output", To: "LoopComponent-1"},
		{From: "LoopComponent-1", Output: "done", To: "ChatOutput-1", Field: "input_value"},
	})
	r, err := langflow.Convert(context.Background(), export, langflow.Options{})
	if err != nil || len(r.Gaps) > 0 {
		t.Fatalf("%v %v", err, r.Gaps)
	}
	w := newWorld(t)
	run := mustRun(t, w, r.Document, "")
	var out []map[string]string
	json.Unmarshal(run.Output(), &out)
	reqs := w.llm.Requests()
	if len(out) < 2 || len(out) != len(reqs) {
		t.Fatalf("output %s after %d model calls, want one result per chunk", run.Output(), len(reqs))
	}
	for _, o := range out {
		if o["text"] != "An answer from the test model." {
			t.Errorf("output %s", run.Output())
		}
	}
	for _, q := range reqs {
		if !strings.HasPrefix(q.Last().Text(), "Chunk: ") {
			t.Errorf("the parser did not write the chunk: %q", q.Last().Text())
		}
	}
}

// MCP Tools attached to an agent become an mcp node whose server address comes from the
// environment (Langflow keeps the server in its settings); its tools reach the model.
func TestMCPToolsBecomeAnMCPNodeOfTheAgent(t *testing.T) {
	export := langflowtest.Export("MCP agent", []langflowtest.Node{
		{ID: "ChatInput-1", Type: "ChatInput", Title: "Chat Input", Fields: map[string]any{"input_value": "Add 2 and 3."}},
		{ID: "MCPTools-1", Type: "MCPTools", Title: "MCP Tools", ToolMode: true, Fields: map[string]any{
			"mcp_server":     map[string]any{"name": "calculator"},
			"tools_metadata": []any{map[string]any{"name": "add", "status": true}, map[string]any{"name": "fail", "status": false}}}},
		{ID: "Agent-1", Type: "Agent", Title: "Agent", Fields: map[string]any{"model": []any{map[string]any{"name": "gpt-4o-mini", "provider": "OpenAI"}},
			"add_current_date_tool": false, "n_messages": 0}, X: 300},
		{ID: "ChatOutput-1", Type: "ChatOutput", Title: "Chat Output", X: 600},
	}, []langflowtest.Edge{
		{From: "ChatInput-1", Output: "message", To: "Agent-1", Field: "input_value"},
		{From: "MCPTools-1", Output: "component_as_tool", To: "Agent-1", Field: "tools"},
		{From: "Agent-1", Output: "response", To: "ChatOutput-1", Field: "input_value"},
	})
	r, err := langflow.Convert(context.Background(), export, langflow.Options{})
	if err != nil || len(r.Gaps) > 0 {
		t.Fatalf("%v %v", err, r.Gaps)
	}
	p := nodeParams(t, r.Document, "mcp_tools")
	if u, _ := p["url"].(map[string]any); u["$env"] != "SLUICE_SECRET_MCP_TOOLS_URL" || len(p["tools"].([]any)) != 1 {
		t.Fatalf("mcp node %v", p)
	}
	if ps := flows.Validate(r.Document, nodes.NewRegistry(nil), flows.DefaultLimits); ps.HasErrors() {
		t.Fatalf("problems %v", ps)
	}
	w := newWorld(t)
	mustRun(t, w, r.Document, "")
	if w.mcp.Calls("add") != 1 {
		t.Errorf("the MCP server's add was called %d times", w.mcp.Calls("add"))
	}
}

// An Anthropic model becomes an llm node of the anthropic provider.
func TestAnAnthropicModelRunsOnTheAnthropicProvider(t *testing.T) {
	export := langflowtest.Export("Claude", []langflowtest.Node{
		{ID: "ChatInput-1", Type: "ChatInput", Title: "Chat Input", Fields: map[string]any{"input_value": "Hello"}},
		{ID: "AnthropicModel-1", Type: "AnthropicModel", Title: "Anthropic", Fields: map[string]any{"model_name": "claude-sonnet-4-5", "max_tokens": 512,
			"api_key": "ANTHROPIC_API_KEY"}, LoadFromDB: map[string]bool{"api_key": true}, X: 300},
		{ID: "ChatOutput-1", Type: "ChatOutput", Title: "Chat Output", X: 600},
	}, []langflowtest.Edge{
		{From: "ChatInput-1", Output: "message", To: "AnthropicModel-1", Field: "input_value"},
		{From: "AnthropicModel-1", Output: "text_output", To: "ChatOutput-1", Field: "input_value"},
	})
	r, err := langflow.Convert(context.Background(), export, langflow.Options{})
	if err != nil || len(r.Gaps) > 0 {
		t.Fatalf("%v %v", err, r.Gaps)
	}
	if p := nodeParams(t, r.Document, "anthropic"); p["provider"] != "anthropic" || p["model"] != "claude-sonnet-4-5" {
		t.Fatalf("llm node %v", p)
	}
	w := newWorld(t)
	run := mustRun(t, w, r.Document, "")
	if string(run.Output()) != `"An answer from the Anthropic test server."` || len(w.claud.Requests()) != 1 {
		t.Errorf("output %s, %d requests to the Anthropic server", run.Output(), len(w.claud.Requests()))
	}
}

// Langflow's Write File has no file to write in Sluice: its content becomes the run's
// output, and the report says so, not that loading files has no component.
func TestSaveToFileBecomesAnOutputWithItsOwnReason(t *testing.T) {
	export := langflowtest.Export("Save", []langflowtest.Node{
		{ID: "ChatInput-1", Type: "ChatInput", Title: "Chat Input", Fields: map[string]any{"input_value": "Hello"}},
		{ID: "SaveToFile-1", Type: "SaveToFile", Title: "Write File", Fields: map[string]any{"file_name": "report", "local_format": "json"}, X: 300},
	}, []langflowtest.Edge{{From: "ChatInput-1", Output: "message", To: "SaveToFile-1", Field: "input"}})
	r, err := langflow.Convert(context.Background(), export, langflow.Options{})
	if err != nil || len(r.Gaps) > 0 {
		t.Fatalf("%v %v", err, r.Gaps)
	}
	var notes []string
	for _, n := range r.Notes {
		notes = append(notes, n.String())
	}
	all := strings.Join(notes, "\n")
	if !strings.Contains(all, `SaveToFile-1 (SaveToFile): Sluice writes no files on the server: what Langflow saved to "report.json" is the output of the run`) || strings.Contains(all, "loading files") {
		t.Errorf("notes:\n%s", all)
	}
	run := mustRun(t, newWorld(t), r.Document, "")
	if string(run.Output()) != `"Hello"` {
		t.Errorf("output %s", run.Output())
	}
}

// A node in a cycle is reported once however many reasons it has, and the nodes that
// only wait for the cycle are told so; edges to nodes missing from the export are
// reported, not dropped silently.
func TestCyclesCountEachNodeOnceAndDanglingEdgesAreReported(t *testing.T) {
	var ns []langflowtest.Node
	var es []langflowtest.Edge
	ns = append(ns, langflowtest.Node{ID: "ChatInput-1", Type: "ChatInput", Title: "Chat Input", Fields: map[string]any{"input_value": "hi"}})
	// A cycle of six: three prompts and three hosted services.
	cycle := []langflowtest.Node{
		{ID: "Prompt-1", Type: "Prompt", Title: "P1", Fields: map[string]any{"template": "{a}", "a": ""}},
		{ID: "AgentQL-1", Type: "AgentQL", Title: "Q1"},
		{ID: "Prompt-2", Type: "Prompt", Title: "P2", Fields: map[string]any{"template": "{a}", "a": ""}},
		{ID: "ApifyActors-1", Type: "ApifyActors", Title: "A1"},
		{ID: "Prompt-3", Type: "Prompt", Title: "P3", Fields: map[string]any{"template": "{a} {b}", "a": "", "b": ""}},
		{ID: "needle-1", Type: "needle", Title: "N1"},
	}
	ns = append(ns, cycle...)
	for i := range cycle {
		es = append(es, langflowtest.Edge{From: cycle[i].ID, Output: "out", To: cycle[(i+1)%len(cycle)].ID, Field: "a"})
	}
	ns = append(ns, langflowtest.Node{ID: "ChatOutput-1", Type: "ChatOutput", Title: "Chat Output"})
	es = append(es,
		langflowtest.Edge{From: "ChatInput-1", Output: "message", To: "Prompt-3", Field: "b"},
		langflowtest.Edge{From: "Prompt-3", Output: "prompt", To: "ChatOutput-1", Field: "input_value"},
		langflowtest.Edge{From: "Prompt-9", Output: "prompt", To: "ChatOutput-1", Field: "input_value"},
		langflowtest.Edge{From: "ChatInput-1", Output: "message", To: "Gone-1", Field: "input_value"})
	r, err := langflow.Convert(context.Background(), langflowtest.Export("cycle", ns, es), langflow.Options{})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	for _, g := range r.Gaps {
		seen[g.Node]++
	}
	if len(r.Gaps) != 7 || len(seen) != 7 {
		t.Errorf("%d gaps for %d nodes, want the 6 of the cycle and the output once each: %v", len(r.Gaps), len(seen), r.Gaps)
	}
	for _, g := range r.Gaps {
		switch {
		case g.Node == "ChatOutput-1" && !strings.Contains(g.Why, "waits for a cycle"),
			strings.HasPrefix(g.Node, "Prompt") && !strings.Contains(g.Why, "part of a cycle"),
			!strings.HasPrefix(g.Node, "Prompt") && g.Node != "ChatOutput-1" && !strings.Contains(g.Why, "hosted service"):
			t.Errorf("gap %s", g)
		}
	}
	var notes []string
	for _, n := range r.Notes {
		notes = append(notes, n.String())
	}
	all := strings.Join(notes, "\n")
	for _, want := range []string{
		"ChatOutput-1 (ChatOutput): an edge from Prompt-9 (output prompt) into ChatOutput-1 (field input_value) was left out: node Prompt-9 is not in the export",
		"ChatInput-1 (ChatInput): an edge from ChatInput-1 (output message) into Gone-1 (field input_value) was left out: node Gone-1 is not in the export",
	} {
		if !strings.Contains(all, want) {
			t.Errorf("no note %q in:\n%s", want, all)
		}
	}
}

// An API request tool whose URL held a key keeps no URL (validation then refuses it at
// the node) rather than taking one from the model: only a URL left empty in Langflow is
// the model's to give.
func TestAToolWhoseURLHeldAKeyDoesNotTakeTheModelsURL(t *testing.T) {
	export := langflowtest.Export("key in url", []langflowtest.Node{
		{ID: "ChatInput-1", Type: "ChatInput", Title: "Chat Input", Fields: map[string]any{"input_value": "hi"}},
		{ID: "APIRequest-1", Type: "APIRequest", Title: "Weather", ToolMode: true, Fields: map[string]any{"method": "GET", "mode": "URL",
			"url_input": "https://api.example.com/v1/sk-proj-abcdefghijklmnop1234"}},
		{ID: "Agent-1", Type: "Agent", Title: "Agent", Fields: map[string]any{"add_current_date_tool": false}},
		{ID: "ChatOutput-1", Type: "ChatOutput", Title: "Chat Output"},
	}, []langflowtest.Edge{
		{From: "ChatInput-1", Output: "message", To: "Agent-1", Field: "input_value"},
		{From: "APIRequest-1", Output: "component_as_tool", To: "Agent-1", Field: "tools"},
		{From: "Agent-1", Output: "response", To: "ChatOutput-1", Field: "input_value"},
	})
	r, err := langflow.Convert(context.Background(), export, langflow.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if p := nodeParams(t, r.Document, "weather"); p["url"] != "" || p["tool_parameters"] != nil {
		t.Errorf("tool %v", p)
	}
	errs := flows.Validate(r.Document, nodes.NewRegistry(nil), flows.DefaultLimits).Errors()
	if len(errs) != 1 || errs[0].Node != "weather" || !strings.Contains(errs[0].Path, "params.url") {
		t.Errorf("problems %v", errs)
	}
}

// Batch Run asks the model once per row, each row gaining the answer as a column.
func TestBatchRunAsksTheModelOncePerRow(t *testing.T) {
	export := langflowtest.Export("Batch", []langflowtest.Node{
		{ID: "ChatInput-1", Type: "ChatInput", Title: "Chat Input", Fields: map[string]any{"input_value": "go"}},
		{ID: "File-1", Type: "File", Title: "Read File", X: 200},
		{ID: "SplitText-1", Type: "SplitText", Title: "Split Text", Fields: map[string]any{"chunk_size": 40, "chunk_overlap": 0, "separator": "\n\n"}, X: 400},
		{ID: "BatchRunComponent-1", Type: "BatchRunComponent", Title: "Batch Run", X: 600, Fields: map[string]any{
			"model": []any{map[string]any{"name": "gpt-4o-mini", "provider": "OpenAI"}}, "system_message": "Classify the row.",
			"column_name": "text", "output_column_name": "label"}},
		{ID: "ChatOutput-1", Type: "ChatOutput", Title: "Chat Output", X: 800},
	}, []langflowtest.Edge{
		{From: "File-1", Output: "message", To: "SplitText-1", Field: "data_inputs"},
		{From: "SplitText-1", Output: "dataframe", To: "BatchRunComponent-1", Field: "df"},
		{From: "BatchRunComponent-1", Output: "batch_results", To: "ChatOutput-1", Field: "input_value"},
	})
	r, err := langflow.Convert(context.Background(), export, langflow.Options{})
	if err != nil || len(r.Gaps) > 0 {
		t.Fatalf("%v %v", err, r.Gaps)
	}
	w := newWorld(t)
	run := mustRun(t, w, r.Document, "")
	var rows []map[string]any
	json.Unmarshal(run.Output(), &rows)
	reqs := w.llm.Requests()
	if len(rows) < 2 || len(rows) != len(reqs) {
		t.Fatalf("output %s after %d model calls, want one row per chunk", run.Output(), len(reqs))
	}
	asked := map[string]bool{}
	for _, q := range reqs {
		asked[q.Last().Text()] = true
	}
	for i, row := range rows {
		text, _ := row["text"].(string)
		if row["label"] != "An answer from the test model." || !asked[text] {
			t.Errorf("row %d: %v, the model was asked %v", i, row, asked)
		}
	}
	if reqs[0].Messages[0].Text() != "Classify the row." {
		t.Errorf("system %q", reqs[0].Messages[0].Text())
	}
}
