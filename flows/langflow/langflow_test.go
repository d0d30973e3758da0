package langflow_test

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/flows"
	"github.com/sluicehq/sluice/flows/engine"
	"github.com/sluicehq/sluice/flows/langflow"
	"github.com/sluicehq/sluice/flows/nodes"
	"github.com/sluicehq/sluice/flows/nodes/llmtest"
	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/storetest"
)

var update = flag.Bool("update", false, "rewrite the golden files")

// The fixtures in testdata are Langflow exports written for these tests in Langflow's
// format (nodes with data.type and data.node.template.<field>.value, edges with
// data.sourceHandle.name and data.targetHandle.fieldName, handles also as œ-strings).
var fixtures = []string{"basic_prompting", "prompt_chaining", "agent_with_tool", "conditional_router", "structured_output", "unmapped"}

func convert(t *testing.T, name string) *langflow.Result {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name+".json"))
	if err != nil {
		t.Fatal(err)
	}
	if !langflow.IsExport(b) {
		t.Fatalf("%s is not recognised as a Langflow export", name)
	}
	r, err := langflow.Convert(context.Background(), b, langflow.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestConversionsMatchTheirGoldenFiles pins each converted document with its report.
func TestConversionsMatchTheirGoldenFiles(t *testing.T) {
	for _, name := range fixtures {
		t.Run(name, func(t *testing.T) {
			r := convert(t, name)
			var b bytes.Buffer
			b.Write(r.Document)
			for _, g := range r.Gaps {
				fmt.Fprintf(&b, "gap: %s\n", g)
			}
			for _, n := range r.Notes {
				fmt.Fprintf(&b, "note: %s\n", n)
			}
			path := filepath.Join("testdata", name+".golden")
			if *update {
				if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (go test ./flows/langflow -update writes it)", err)
			}
			if !bytes.Equal(b.Bytes(), want) {
				t.Errorf("%s differs (go test ./flows/langflow -update, then review the diff):\n%s", path, b.Bytes())
			}
		})
	}
}

func TestMappedFlowsValidateWithoutProblems(t *testing.T) {
	reg := nodes.NewRegistry(nil)
	for _, name := range fixtures[:5] {
		r := convert(t, name)
		if len(r.Gaps) > 0 {
			t.Errorf("%s: gaps %v", name, r.Gaps)
		}
		if ps := flows.Validate(r.Document, reg, flows.DefaultLimits); len(ps) > 0 {
			t.Errorf("%s: problems:\n%v", name, ps)
		}
	}
}

func TestEveryUnmappedNodeIsReportedOnceAndItsPlaceholderFailsValidation(t *testing.T) {
	r := convert(t, "unmapped")
	want := map[string]string{
		"AssemblyAITranscriptionJobPoller-m1": "a hosted service",
		"CustomComponent-x1":                  "custom Python code",
		"YouTubeTranscripts-t1":               "a hosted service",
	}
	if len(r.Gaps) != len(want) {
		t.Errorf("%d gaps, want %d: %v", len(r.Gaps), len(want), r.Gaps)
	}
	placeholders := map[string]bool{}
	for _, g := range r.Gaps {
		if !strings.Contains(g.Why, want[g.Node]) || g.Type == "" || g.Placeholder == "" {
			t.Errorf("gap %+v: want node, type, a reason mentioning %q and its placeholder", g, want[g.Node])
		}
		placeholders[g.Placeholder] = true
	}
	var doc flows.Document
	if err := json.Unmarshal(r.Document, &doc); err != nil {
		t.Fatal(err)
	}
	for _, n := range doc.Nodes {
		if placeholders[n.ID] != strings.HasPrefix(n.Type, langflow.PlaceholderPrefix) {
			t.Errorf("node %s (%s): placeholder=%t", n.ID, n.Type, placeholders[n.ID])
		}
		if placeholders[n.ID] && (!strings.HasPrefix(n.Label, "Replace: ") || !strings.Contains(n.Description, "does not validate")) {
			t.Errorf("placeholder %s is not clearly marked: label %q, description %q", n.ID, n.Label, n.Description)
		}
	}
	errs := flows.Validate(r.Document, nodes.NewRegistry(nil), flows.DefaultLimits).Errors()
	failing := map[string]bool{}
	for _, p := range errs {
		if p.Code != flows.CodeUnknownType {
			t.Errorf("unexpected error %s", p)
		}
		failing[p.Node] = true
	}
	if len(failing) != len(placeholders) {
		t.Errorf("validation fails on %v, want exactly the placeholders %v", failing, placeholders)
	}
}

func TestCredentialsAreNeverCopied(t *testing.T) {
	for _, name := range fixtures {
		r := convert(t, name)
		for _, secret := range []string{"sk-proj-abcdefghijklmnop", "wx-live-9f8e7d6c5b4a", "Bearer wx"} {
			if bytes.Contains(r.Document, []byte(secret)) {
				t.Errorf("%s: the document holds %q", name, secret)
			}
		}
	}
	var doc flows.Document
	json.Unmarshal(convert(t, "agent_with_tool").Document, &doc)
	for _, n := range doc.Nodes {
		var c bytes.Buffer
		json.Compact(&c, n.Params)
		if n.ID == "weather_api" && !bytes.Contains(c.Bytes(), []byte(`"Authorization":{"$env":"SLUICE_SECRET_WEATHER_API_AUTHORIZATION","prefix":"Bearer "}`)) {
			t.Errorf("the Authorization header is not an environment reference: %s", n.Params)
		}
	}
}

func TestPositionsCarryOver(t *testing.T) {
	var doc flows.Document
	json.Unmarshal(convert(t, "prompt_chaining").Document, &doc)
	got := map[string]flows.Position{}
	for _, n := range doc.Nodes {
		got[n.ID] = *n.Position
	}
	for id, want := range map[string]flows.Position{"chat_input": {X: 0, Y: 300}, "translate": {X: 1200, Y: 200}, "chat_output": {X: 2000, Y: 220}} {
		if got[id] != want {
			t.Errorf("%s at %+v, want %+v", id, got[id], want)
		}
	}
}

func TestASluiceDocumentIsNotTakenForAnExport(t *testing.T) {
	if langflow.IsExport([]byte(`{"sluice": 1, "id": "x", "nodes": [], "edges": []}`)) {
		t.Error("a Sluice document is taken for a Langflow export")
	}
	if _, err := langflow.Convert(context.Background(), []byte(`{"name": "x"}`), langflow.Options{}); err == nil {
		t.Error("an object without data converted")
	}
}

// flowRunner runs converted flows on the embedded Redis against the fake OpenAI server.
type flowRunner struct {
	t   *testing.T
	e   *engine.Engine
	env *nodes.Env
}

func newRunner(t *testing.T, srv *llmtest.Server, lookup map[string]string) *flowRunner {
	env := srv.Env(0)
	env.HTTP = &nodes.HTTPPolicy{Allow: []nodes.AllowRule{{Prefix: netip.MustParsePrefix("127.0.0.0/8")}}}
	env.LookupEnv = func(name string) (string, bool) { v, ok := lookup[name]; return v, ok }
	r := storetest.Embedded(t)
	files, err := store.NewFiles(r, store.FilesOptions{})
	if err != nil {
		t.Fatal(err)
	}
	env.Memory, env.Files, env.Vectors = store.NewMemory(r), files, store.NewVectors(r)
	return &flowRunner{t: t, env: env, e: engine.New(r, nodes.NewRegistry(env), engine.Options{})}
}

func (fr *flowRunner) run(doc []byte, input string) *store.Run {
	fr.t.Helper()
	p, probs, err := fr.e.Compile(doc)
	if err != nil {
		fr.t.Fatalf("compile: %v\n%v", err, probs)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := fr.e.Publish(ctx, p); err != nil {
		fr.t.Fatal(err)
	}
	wctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- fr.e.NewWorker(engine.WorkerOptions{Flows: []string{p.Flow}, Block: 100 * time.Millisecond}).Run(wctx)
	}()
	defer func() { stop(); <-done }()
	id, err := fr.e.Start(ctx, p, json.RawMessage(input), engine.StartOptions{})
	if err != nil {
		fr.t.Fatal(err)
	}
	run, err := fr.e.Wait(ctx, p.Flow, id)
	if err != nil {
		fr.t.Fatal(err)
	}
	return run
}

func TestConvertedFlowsRunAgainstTheFakeOpenAIServer(t *testing.T) {
	t.Run("basic prompting", func(t *testing.T) {
		srv := llmtest.New(t)
		srv.Reply(llmtest.Text("Arr, I be an assistant."))
		run := newRunner(t, srv, nil).run(convert(t, "basic_prompting").Document, `{"chat_input": "Who are you?"}`)
		if run.Status != store.StatusSucceeded || string(run.Output()) != `"Arr, I be an assistant."` {
			t.Fatalf("run %s: output %s, error %s", run.Status, run.Output(), run.Error)
		}
		req := srv.Requests()[0]
		if req.Model != "gpt-4o-mini" || req.Messages[0].Text() != "You answer in one short paragraph." || !strings.Contains(req.Last().Text(), "User: Who are you?") {
			t.Errorf("request %+v", req)
		}
	})
	t.Run("prompt chaining", func(t *testing.T) {
		srv := llmtest.New(t)
		srv.Reply(llmtest.Text("Streams are logs with groups."), llmtest.Text("Les streams sont des journaux."))
		run := newRunner(t, srv, nil).run(convert(t, "prompt_chaining").Document, `{}`)
		if run.Status != store.StatusSucceeded || string(run.Output()) != `"Les streams sont des journaux."` {
			t.Fatalf("run %s: output %s, error %s", run.Status, run.Output(), run.Error)
		}
		reqs := srv.Requests()
		if len(reqs) != 2 || !strings.Contains(reqs[0].Last().Text(), "append-only log") {
			t.Fatalf("requests %+v", reqs)
		}
		if got := reqs[1].Last().Text(); got != "Rewrite this summary in a friendly tone, in French: Streams are logs with groups.. Keep {braces} as they are." || reqs[1].Model != "gpt-4o" {
			t.Errorf("second prompt %q (model %s)", got, reqs[1].Model)
		}
	})
	t.Run("agent with a tool", func(t *testing.T) {
		var mu sync.Mutex
		var auth string
		api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			auth = r.Header.Get("Authorization")
			mu.Unlock()
			w.Header().Set("Content-Type", "application/json")
			w.Write([]byte(`{"city": "Paris", "rain": true}`))
		}))
		defer api.Close()
		srv := llmtest.New(t)
		srv.Respond(func(r llmtest.Request) llmtest.Reply {
			if r.Last().Role != "tool" {
				return llmtest.Calls(llmtest.Call("c1", "weather_api", `{}`))
			}
			return llmtest.Text("Yes, take an umbrella: " + r.Last().Text())
		})
		doc := bytes.ReplaceAll(convert(t, "agent_with_tool").Document, []byte("https://api.example.com"), []byte(api.URL))
		run := newRunner(t, srv, map[string]string{"SLUICE_SECRET_WEATHER_API_AUTHORIZATION": "token-123"}).run(doc, `{}`)
		if run.Status != store.StatusSucceeded || !strings.Contains(string(run.Output()), `\"rain\":true`) {
			t.Fatalf("run %s: output %s, error %s", run.Status, run.Output(), run.Error)
		}
		// The API request, and Langflow's built-in current-date tool.
		if names := srv.Requests()[0].ToolNames(); strings.Join(names, ",") != "get_current_date,weather_api" && strings.Join(names, ",") != "weather_api,get_current_date" {
			t.Errorf("tools offered %v", names)
		}
		mu.Lock()
		defer mu.Unlock()
		if auth != "Bearer token-123" {
			t.Errorf("the API got Authorization %q, want it from the environment", auth)
		}
	})
	t.Run("conditional router", func(t *testing.T) {
		for _, tc := range []struct{ class, want string }{
			{"Billing", `"We are sorry about the double charge."`},
			{"other", `"My parcel is late."`},
		} {
			srv := llmtest.New(t)
			srv.Reply(llmtest.Text(tc.class), llmtest.Text("We are sorry about the double charge."))
			run := newRunner(t, srv, nil).run(convert(t, "conditional_router").Document, `{"chat_input": "My parcel is late."}`)
			if run.Status != store.StatusSucceeded || string(run.Output()) != tc.want {
				t.Errorf("classified %s: %s, output %s, error %s", tc.class, run.Status, run.Output(), run.Error)
			}
		}
	})
	t.Run("structured output", func(t *testing.T) {
		srv := llmtest.New(t)
		srv.Reply(llmtest.Text(`{"sentiment": "neutral", "score": 0.6, "topics": ["battery", "screen"]}`))
		run := newRunner(t, srv, nil).run(convert(t, "structured_output").Document, `{}`)
		if run.Status != store.StatusSucceeded || string(run.Output()) != `{"score":0.6,"sentiment":"neutral","topics":["battery","screen"]}` {
			t.Fatalf("run %s: output %s, error %s", run.Status, run.Output(), run.Error)
		}
		if rf := string(srv.Requests()[0].ResponseFormat); !strings.Contains(rf, "json_schema") || !strings.Contains(rf, "topics") {
			t.Errorf("response format %s", rf)
		}
	})
}
