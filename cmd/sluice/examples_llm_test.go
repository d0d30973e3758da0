package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/sluicehq/sluice/flows/nodes/llmtest"
	"github.com/sluicehq/sluice/flows/nodes/mcptest"
)

// fakeModel answers like a model that follows the examples' prompts: the classifier
// names a route, an agent first queries its data tool and then answers from the result.
func fakeModel(t *testing.T) (*llmtest.Server, func() []string) {
	srv := llmtest.New(t)
	var mu sync.Mutex
	var toolResults []string
	srv.Respond(func(r llmtest.Request) llmtest.Reply {
		sys := r.Messages[0].Text()
		last := r.Last()
		switch {
		case strings.HasPrefix(sys, "Classify"):
			switch t := strings.ToLower(last.Text()); {
			case strings.Contains(t, "query"):
				return llmtest.Text("database")
			case strings.Contains(t, "build"):
				return llmtest.Text("Code.")
			}
			return llmtest.Text("billing") // not a route: the default port
		case slices.Contains(r.ToolNames(), "lookup_order") && last.Role != "tool":
			return llmtest.Calls(llmtest.Call("call_1", "lookup_order", `{"id": "A-1"}`))
		case len(r.Tools) > 0 && last.Role != "tool":
			query := ".context.tables.orders"
			switch {
			case strings.Contains(sys, "FDA"):
				query = `[.pdf_data.sections[] | select(.type == "ingredients") | .text]`
			case strings.Contains(sys, "EU"):
				query = `[.pdf_data.claims[] | select(.regulatory_relevant == true) | {text, page}]`
			case strings.Contains(sys, "images"):
				query = `[.images[] | select(.dimensions.width > 1000) | {url, format}]`
			}
			args, _ := json.Marshal(map[string]string{"query": query})
			return llmtest.Calls(llmtest.Call("call_1", r.Tools[0].Function.Name, string(args)))
		case last.Role == "tool":
			mu.Lock()
			toolResults = append(toolResults, last.Text())
			mu.Unlock()
			switch {
			case strings.Contains(sys, "FDA"), strings.Contains(sys, "EU"):
				return llmtest.Text(`{"compliant": true, "issues": []}`)
			case strings.Contains(sys, "images"):
				return llmtest.Text(`{"compliant": false, "issues": ["only one print-quality image"]}`)
			}
			return llmtest.Text("Add an index on orders.created_at; the table has no index for the report's filter.")
		}
		return llmtest.Text("Billing questions go to billing@example.com.")
	})
	return srv, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), toolResults...)
	}
}

func runExample(t *testing.T, srv *llmtest.Server, name, input string, env ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(binary, "run", filepath.Join("..", "..", "flows", "examples", name+".json"), "--input", input)
	cmd.Env = append(os.Environ(), "REDIS_URL=", "OPENAI_BASE_URL="+srv.URL, "OPENAI_API_KEY=test-key", "SLUICE_PROVIDERS=")
	cmd.Env = append(cmd.Env, env...)
	out, err := cmd.Output()
	return strings.TrimSpace(string(out)), err
}

// The articles' pipelines run with `sluice run` against an OpenAI-compatible endpoint.
func TestRunSupportExampleRoutesByTheModelsClassification(t *testing.T) {
	srv, toolResults := fakeModel(t)
	for _, tc := range []struct{ name, ticket, want string }{
		{"database agent with its data tool", "The report query on orders is slow",
			`{"intent":"database","reply":"[database] Add an index on orders.created_at; the table has no index for the report's filter."}`},
		{"coding agent", "The build fails on main",
			`{"intent":"code","reply":"[code] Add an index on orders.created_at; the table has no index for the report's filter."}`},
		{"an answer that is no route goes to default", "Where is my invoice?",
			`{"intent":"default","reply":"[general] Billing questions go to billing@example.com."}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in, _ := json.Marshal(map[string]any{"ticket": tc.ticket, "context": map[string]any{
				"tables": map[string]any{"orders": map[string]any{"rows": 120000000, "indexes": []string{"id"}}, "customers": map[string]any{"rows": 90000}}}})
			out, err := runExample(t, srv, "support", string(in))
			if err != nil {
				t.Fatalf("sluice run: %v\n%s", err, stderrOf(err))
			}
			if out != tc.want {
				t.Errorf("output %s\nwant   %s", out, tc.want)
			}
		})
	}
	for _, r := range toolResults() {
		if r != `{"indexes":["id"],"rows":120000000}` {
			t.Errorf("an agent got %s from its data tool, want only the orders table", r)
		}
	}
	for _, r := range srv.Requests() {
		if r.Authorization != "Bearer test-key" {
			t.Fatalf("a request carried %q, want the key from OPENAI_API_KEY", r.Authorization)
		}
	}
}

// The support example's MCP variant: the database agent looks the order up with the
// MCP server's tool; the rest is the support example (a ticket no route takes is
// answered as [general], and the answers stream).
func TestRunSupportExampleWithAnMCPToolServer(t *testing.T) {
	srv, toolResults := fakeModel(t)
	orders := mcptest.StartHTTP(t)
	in := `{"ticket": "The report query on orders A-1 is slow", "context": {"tables": {"orders": {"rows": 120000000, "indexes": ["id"]}}}}`
	out, err := runExample(t, srv, "support-mcp", in, "SLUICE_SECRET_SUPPORT_MCP_URL="+orders.URL, "SLUICE_HTTP_ALLOW=127.0.0.1")
	if err != nil {
		t.Fatalf("sluice run: %v\n%s", err, stderrOf(err))
	}
	if want := `{"intent":"database","reply":"[database] Add an index on orders.created_at; the table has no index for the report's filter."}`; out != want {
		t.Errorf("output %s\nwant   %s", out, want)
	}
	out, err = runExample(t, srv, "support-mcp", `{"ticket": "Where is my invoice?"}`, "SLUICE_SECRET_SUPPORT_MCP_URL="+orders.URL, "SLUICE_HTTP_ALLOW=127.0.0.1")
	if err != nil {
		t.Fatalf("sluice run: %v\n%s", err, stderrOf(err))
	}
	if want := `{"intent":"default","reply":"[general] Billing questions go to billing@example.com."}`; out != want {
		t.Errorf("a ticket no route takes: output %s\nwant   %s", out, want)
	}
	for _, r := range srv.Requests() {
		if !strings.HasPrefix(r.Messages[0].Text(), "Classify") && !r.Stream {
			t.Errorf("a request of an agent or the general answer did not stream (system %.40q)", r.Messages[0].Text())
		}
	}
	if orders.Calls("lookup_order") != 1 {
		t.Errorf("the MCP server's lookup_order was called %d times, want once", orders.Calls("lookup_order"))
	}
	got := toolResults()
	if len(got) != 1 || !strings.Contains(got[0], `"id":"A-1"`) || !strings.Contains(got[0], `"status":"report slow"`) {
		t.Errorf("the agent got %q from its tool, want the MCP server's order", got)
	}
	// Only the allowed tool was offered.
	for _, r := range srv.Requests() {
		if names := r.ToolNames(); slices.Contains(names, "lookup_order") && len(names) != 2 {
			t.Errorf("the database agent was offered %v, want lookup_order and query_ticket", names)
		}
	}
}

func TestRunComplianceExampleRunsThreeAgentsOnSlicesOfTheDocument(t *testing.T) {
	srv, toolResults := fakeModel(t)
	in := `{"pdf_data": {"title": "Daily Greens", "sections": [{"type": "ingredients", "text": "Spinach, stevia."}, {"type": "directions", "text": "One scoop daily."}],
	  "claims": [{"text": "Boosts immunity", "page": 1, "regulatory_relevant": true}, {"text": "Tastes great", "page": 2, "regulatory_relevant": false}]},
	  "images": [{"url": "s3://front.png", "format": "png", "dimensions": {"width": 2400, "height": 1600}}, {"url": "s3://thumb.png", "format": "png", "dimensions": {"width": 200, "height": 120}}]}`
	out, err := runExample(t, srv, "compliance", in)
	if err != nil {
		t.Fatalf("sluice run: %v\n%s", err, stderrOf(err))
	}
	want := `{"compliant":false,"findings":{"eu":{"compliant":true,"issues":[]},"fda":{"compliant":true,"issues":[]},"images":{"compliant":false,"issues":["only one print-quality image"]}}}`
	if out != want {
		t.Errorf("output %s\nwant   %s", out, want)
	}
	got := toolResults()
	wantSlices := map[string]bool{
		`["Spinach, stevia."]`:                      true,
		`[{"page":1,"text":"Boosts immunity"}]`:     true,
		`[{"format":"png","url":"s3://front.png"}]`: true,
	}
	if len(got) != 3 {
		t.Fatalf("tool results %q, want one slice per agent", got)
	}
	for _, r := range got {
		if !wantSlices[r] {
			t.Errorf("an agent got %s from the data tool; want only its slice", r)
		}
		if len(r) >= len(in)/4 {
			t.Errorf("a slice of %d bytes is not much smaller than the %d-byte document", len(r), len(in))
		}
	}
}
