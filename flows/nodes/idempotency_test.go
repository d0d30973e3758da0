package nodes_test

import (
	"context"
	"net/http"
	"sync"
	"testing"

	"github.com/sluicehq/sluice/flows"
	"github.com/sluicehq/sluice/flows/nodes"
	"github.com/sluicehq/sluice/flows/nodes/llmtest"
	"github.com/sluicehq/sluice/flows/nodes/mcptest"
)

// An http step's requests carry an idempotency key that names the step's call: the same
// for every attempt of the step, another for another run, node, depth, fork branch or
// tool call, the origin's for a replay that keeps it; the header's name is the node's.
func TestHTTPSendsAnIdempotencyKeyPerCall(t *testing.T) {
	var mu sync.Mutex
	var got []http.Header
	srv, _ := countingServer(t, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, r.Header.Clone())
		mu.Unlock()
		w.Write([]byte(`ok`))
	})
	env := httpEnv(nil)
	h := buildIn(t, env, "http", `{"method": "POST", "url": "`+srv.URL+`", "body": "x"}`)
	key := func(edit func(*flows.Step), ctx context.Context) string {
		t.Helper()
		s, _ := newStep(state(t, `{}`))
		edit(s)
		mu.Lock()
		n := len(got)
		mu.Unlock()
		if _, err := h.(flows.Tool).Call(ctx, s, []byte(`{}`)); err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		defer mu.Unlock()
		return got[n].Get("Idempotency-Key")
	}
	bg := context.Background()
	same := func(*flows.Step) {}
	first := key(same, bg)
	if len(first) < 20 {
		t.Fatalf("Idempotency-Key %q", first)
	}
	if again := key(func(s *flows.Step) { s.Attempt = 3 }, bg); again != first {
		t.Errorf("a retried attempt sent %q, the first %q", again, first)
	}
	for name, edit := range map[string]func(*flows.Step){
		"another run":    func(s *flows.Step) { s.Run = "r2" },
		"another node":   func(s *flows.Step) { s.Node = "n2" },
		"another depth":  func(s *flows.Step) { s.Depth = 2 },
		"another branch": func(s *flows.Step) { s.Branch = "f1@2" },
	} {
		if k := key(edit, bg); k == first {
			t.Errorf("%s sent the same key", name)
		}
	}
	call1 := key(same, flows.WithToolCall(bg, "call_1"))
	if call1 == first || key(same, flows.WithToolCall(bg, "call_1")) != call1 || key(same, flows.WithToolCall(bg, "call_2")) == call1 {
		t.Error("tool calls: want one key per call id, the same for the same id")
	}
	if k := key(func(s *flows.Step) { s.Run, s.KeysOf = "replay", "r" }, bg); k != first {
		t.Errorf("a replay keeping its origin's keys sent %q, want %q", k, first)
	}

	named := buildIn(t, env, "http", `{"url": "`+srv.URL+`", "idempotency_header": "X-Request-Id"}`)
	none := buildIn(t, env, "http", `{"url": "`+srv.URL+`", "idempotency_header": ""}`)
	s, _ := newStep(state(t, `{}`))
	named.(flows.Tool).Call(bg, s, []byte(`{}`))
	none.(flows.Tool).Call(bg, s, []byte(`{}`))
	mu.Lock()
	defer mu.Unlock()
	if h := got[len(got)-2]; h.Get("X-Request-Id") != first || h.Get("Idempotency-Key") != "" {
		t.Errorf("idempotency_header X-Request-Id: %v", h)
	}
	if h := got[len(got)-1]; h.Get("Idempotency-Key") != "" {
		t.Errorf(`idempotency_header "": %v`, h)
	}
	if _, err := tryBuildIn(env, "http", `{"url": "`+srv.URL+`", "idempotency_header": "Bad Header"}`); err == nil {
		t.Error("a header name with a space is accepted")
	}
}

// An MCP tool call carries the step's idempotency key in its _meta, the same when the
// step is run again.
func TestMCPToolCallCarriesTheStepsIdempotencyKey(t *testing.T) {
	srv := llmtest.New(t)
	env := mcpEnv(t, srv)
	mcpSrv := mcptest.StartHTTP(t)
	answerWithResults(srv, llmtest.Call("c1", "add", `{"a": 1, "b": 2}`))
	for range 2 {
		a, s := mcpAgentStep(t, env, `{"url": "`+mcpSrv.URL+`", "tools": ["add"]}`, "")
		if _, err := a.Run(context.Background(), s); err != nil {
			t.Fatal(err)
		}
	}
	metas := mcpSrv.Metas()
	if len(metas) != 2 {
		t.Fatalf("%d calls", len(metas))
	}
	k1, _ := metas[0][nodes.MCPIdempotencyMeta].(string)
	k2, _ := metas[1][nodes.MCPIdempotencyMeta].(string)
	if k1 == "" || k1 != k2 {
		t.Errorf("the calls' %s: %q and %q; want the step's key, the same both times", nodes.MCPIdempotencyMeta, k1, k2)
	}
}
