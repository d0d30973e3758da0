package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sluicehq/sluice/flows/nodes/llmtest"
	"github.com/sluicehq/sluice/observe/otlptest"
	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/storetest"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
)

// One run whose steps execute in two worker processes, started through the API with a
// traceparent, comes back from a real OTLP/HTTP receiver as one trace: the API request's
// span under the caller's, the run span under it, every step (in whichever process)
// under the run span, model calls under their steps with the GenAI attributes and the
// token counts the model server reported, and the result webhook carrying the trace.
// Without prompt capture, no prompt, reply or secret is in any span.
func TestTraceOneRunAcrossTwoWorkerProcesses(t *testing.T) {
	r := storetest.Real(t)
	id := storetest.FlowID(t)
	storetest.DeleteFlowKeys(t, r, id)
	canary := "canary-" + strings.ReplaceAll(id, "-", "")

	rcv := otlptest.New(t)
	model := llmtest.New(t)
	model.Reply(
		llmtest.Reply{Content: "REPLY-MARKER-draft", PromptTokens: 111, CompletionTokens: 22},
		llmtest.Reply{Content: "REPLY-MARKER-final", PromptTokens: 333, CompletionTokens: 44},
	)
	var hookMu sync.Mutex
	var hookTraceparent string
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.URL.Path == "/done" {
			hookMu.Lock()
			hookTraceparent = req.Header.Get("traceparent")
			hookMu.Unlock()
		}
	}))
	defer hook.Close()

	dir := t.TempDir()
	providers := filepath.Join(dir, "providers.json")
	os.WriteFile(providers, []byte(`{"providers": {"default": {"base_url": "`+model.URL+`", "prices": {"fake-model": {"input": 1, "output": 2}}}}}`), 0o600)
	flowDir := filepath.Join(dir, "flows")
	os.Mkdir(flowDir, 0o755)
	flowFile := filepath.Join(flowDir, id+".json")
	os.WriteFile(flowFile, []byte(`{"sluice": 1, "id": "`+id+`",
	 "nodes": [
	  {"id": "in", "type": "input"},
	  {"id": "ask", "type": "llm", "params": {"model": "fake-model", "user": "PROMPT-MARKER about {{.topic}}", "as": "draft"}},
	  {"id": "key", "type": "http", "params": {"url": "`+hook.URL+`/key", "headers": {"Authorization": {"$env": "SLUICE_SECRET_CANARY", "prefix": "Bearer "}}}},
	  {"id": "review", "type": "approval", "params": {"prompt": "Publish it?", "data": "{draft}"}},
	  {"id": "polish", "type": "llm", "params": {"model": "fake-model", "user": "PROMPT-MARKER polish {{.draft}}", "as": "final"}},
	  {"id": "out", "type": "output", "params": {"value": ".final"}}
	 ],
	 "edges": [{"from": "in", "to": "ask"}, {"from": "ask", "to": "key"}, {"from": "key", "to": "review"},
	  {"from": "review", "port": "approved", "to": "polish"}, {"from": "polish", "to": "out"}]}`), 0o644)

	env := func(service string) []string {
		return []string{"REDIS_URL=" + storetest.URL(), "SLUICE_PROVIDERS=" + providers, "SLUICE_HTTP_ALLOW=127.0.0.1",
			"SLUICE_SECRET_CANARY=" + canary, "SLUICE_TOKEN=trace-test-token", "SLUICE_LOG_LEVEL=debug",
			"OTEL_EXPORTER_OTLP_ENDPOINT=" + rcv.URL, "OTEL_SERVICE_NAME=" + service, "OTEL_BSP_SCHEDULE_DELAY=50",
			"OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT="}
	}
	stop := func(p *process, what string) {
		t.Helper()
		p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(30 * time.Second):
			t.Fatalf("%s did not stop on SIGTERM", what)
		}
	}
	srv := start(t, env("sluice-serve"), "serve", "--addr", "127.0.0.1:0", "--flows", flowDir, "--workers", "0")
	base := srv.waitLine(t, servingLine, 30*time.Second)[1]
	api := &apiClient{t: t, base: base, token: "trace-test-token"}
	workerA := start(t, env("worker-a"), "worker", flowFile)
	workerA.waitLine(t, regexpServing, 30*time.Second)

	// The caller's trace: the run becomes part of it.
	const callerTrace, callerSpan = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	body, _ := json.Marshal(map[string]any{"input": map[string]any{"topic": "otters"}, "webhook": hook.URL + "/done"})
	req, _ := http.NewRequest("POST", base+"/api/flows/"+id+"/runs", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer trace-test-token")
	req.Header.Set("traceparent", "00-"+callerTrace+"-"+callerSpan+"-01")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var started struct{ Run string }
	json.NewDecoder(res.Body).Decode(&started)
	res.Body.Close()
	if res.StatusCode != http.StatusAccepted || started.Run == "" {
		t.Fatalf("start: %d %+v", res.StatusCode, started)
	}
	runStatus := func() store.Run {
		_, b := api.json("GET", "/api/flows/"+id+"/runs/"+started.Run, nil)
		var run store.Run
		json.Unmarshal(b, &run)
		return run
	}
	waitUntil(t, "the run to wait for the review", 60*time.Second, func() bool { return runStatus().Status == store.StatusWaiting })
	stop(workerA, "worker A")

	// The rest of the run happens in another process.
	workerB := start(t, env("worker-b"), "worker", flowFile)
	workerB.waitLine(t, regexpServing, 30*time.Second)
	if st, b := api.json("POST", "/api/flows/"+id+"/runs/"+started.Run+"/resume", map[string]any{"decision": "approve"}); st != 200 {
		t.Fatalf("resume: %d %s", st, b)
	}
	waitUntil(t, "the run to succeed", 60*time.Second, func() bool { return runStatus().Status == store.StatusSucceeded })
	waitUntil(t, "the result webhook", 60*time.Second, func() bool { hookMu.Lock(); defer hookMu.Unlock(); return hookTraceparent != "" })
	stop(workerB, "worker B")
	stop(srv, "serve")

	spans := rcv.Spans()
	byName := map[string][]otlptest.Span{}
	byID := map[string]otlptest.Span{}
	for _, s := range spans {
		if s.TraceID == callerTrace {
			byName[s.Name] = append(byName[s.Name], s)
			byID[s.SpanID] = s
		}
	}
	one := func(name string) otlptest.Span {
		t.Helper()
		if len(byName[name]) != 1 {
			t.Fatalf("%d spans named %q in the run's trace, want 1; the trace has: %v", len(byName[name]), name, names(byName))
		}
		return byName[name][0]
	}
	api1 := one("POST /api/flows/:flow/runs")
	if api1.ParentID != callerSpan || api1.Service != "sluice-serve" || api1.Kind != tracepb.Span_SPAN_KIND_SERVER {
		t.Errorf("the API request's span: parent %s, service %s, kind %v; want a server span of sluice-serve under the caller's %s", api1.ParentID, api1.Service, api1.Kind, callerSpan)
	}
	run := one("run " + id)
	if run.ParentID != api1.SpanID {
		t.Errorf("the run span's parent is %s, want the API request's span %s", run.ParentID, api1.SpanID)
	}
	if run.Str("sluice.run") != started.Run || run.Str("sluice.run.status") != "succeeded" || run.Int("gen_ai.usage.input_tokens") != 444 || run.Int("gen_ai.usage.output_tokens") != 66 {
		t.Errorf("the run span's attributes: %v", run.Attrs)
	}
	if !run.End.After(run.Start) || run.Start.After(api1.End) {
		t.Errorf("the run span runs from %s to %s; it starts when the API creates the run (request ended %s)", run.Start, run.End, api1.End)
	}

	// Every step, in either process, is a child of the run span.
	services := map[string]map[string]bool{} // node -> services that ran it
	for _, s := range spans {
		if !strings.HasPrefix(s.Name, "step ") || s.Str("sluice.run") != started.Run {
			continue
		}
		if s.TraceID != callerTrace || s.ParentID != run.SpanID {
			t.Errorf("step span %s (%s): trace %s parent %s; want the run span %s of trace %s", s.Name, s.Service, s.TraceID, s.ParentID, run.SpanID, callerTrace)
		}
		if s.Str("sluice.flow") != id || s.Str("sluice.component") == "" || s.Int("sluice.attempt") < 1 || s.Attrs["sluice.partition"] != int64(0) || s.Attrs["sluice.fused"] == nil {
			t.Errorf("step span %s lacks its attributes: %v", s.Name, s.Attrs)
		}
		node := s.Str("sluice.node")
		if services[node] == nil {
			services[node] = map[string]bool{}
		}
		services[node][s.Service] = true
	}
	for node, want := range map[string]string{"in": "worker-a", "ask": "worker-a", "key": "worker-a", "polish": "worker-b", "out": "worker-b"} {
		if !services[node][want] || len(services[node]) != 1 {
			t.Errorf("node %s ran in %v, want %s only", node, services[node], want)
		}
	}
	if !services["review"]["worker-a"] || !services["review"]["worker-b"] {
		t.Errorf("the approval's steps ran in %v, want both workers (it parked in A and resumed in B)", services["review"])
	}

	// Model calls: under their steps, with the GenAI attributes and the server's counts.
	chats := byName["chat fake-model"]
	if len(chats) != 2 {
		t.Fatalf("%d model call spans, want 2; the trace has: %v", len(chats), names(byName))
	}
	want := map[string][3]int64{"ask": {111, 22, 155}, "polish": {333, 44, 421}}
	for _, c := range chats {
		step, ok := byID[c.ParentID]
		if !ok || !strings.HasPrefix(step.Name, "step ") {
			t.Errorf("model call span's parent %s is not a step span", c.ParentID)
			continue
		}
		w := want[step.Str("sluice.node")]
		if c.Str("gen_ai.system") != "openai" || c.Str("gen_ai.operation.name") != "chat" || c.Str("gen_ai.request.model") != "fake-model" ||
			c.Int("gen_ai.usage.input_tokens") != w[0] || c.Int("gen_ai.usage.output_tokens") != w[1] || c.Kind != tracepb.Span_SPAN_KIND_CLIENT {
			t.Errorf("model call of %s: %v, want %d input and %d output tokens", step.Str("sluice.node"), c.Attrs, w[0], w[1])
		}
		if fr, _ := c.Attrs["gen_ai.response.finish_reasons"].([]any); len(fr) != 1 || fr[0] != "stop" {
			t.Errorf("model call of %s: finish reasons %v", step.Str("sluice.node"), c.Attrs["gen_ai.response.finish_reasons"])
		}
		if cost, _ := c.Attrs["sluice.cost_usd"].(float64); fmt.Sprintf("%.6f", cost) != fmt.Sprintf("%.6f", float64(w[2])/1e6) {
			t.Errorf("model call of %s costs %v, want %g", step.Str("sluice.node"), c.Attrs["sluice.cost_usd"], float64(w[2])/1e6)
		}
	}
	// The HTTP request and the commits are spans of their steps too.
	for _, s := range byName["commit"] {
		if p, ok := byID[s.ParentID]; !ok || !strings.HasPrefix(p.Name, "step ") {
			t.Errorf("a commit span's parent %s is not a step", s.ParentID)
		}
	}
	if len(byName["commit"]) == 0 {
		t.Error("no commit spans")
	}
	// The http component's request is a client span of its step; the result webhook's
	// delivery one of the run.
	get, post := one("HTTP GET"), one("HTTP POST")
	if p := byID[get.ParentID]; p.Str("sluice.node") != "key" || get.Kind != tracepb.Span_SPAN_KIND_CLIENT {
		t.Errorf("the http component's request span's parent is %q (%s), want step key", p.Name, get.ParentID)
	}
	if post.ParentID != run.SpanID || post.Kind != tracepb.Span_SPAN_KIND_CLIENT {
		t.Errorf("the result webhook's span's parent is %s, want the run span %s", post.ParentID, run.SpanID)
	}
	// The result webhook carries the run's trace.
	hookMu.Lock()
	if want := "00-" + callerTrace + "-" + post.SpanID + "-01"; hookTraceparent != want {
		t.Errorf("the result webhook's traceparent is %q, want %s (its delivery span)", hookTraceparent, want)
	}
	hookMu.Unlock()

	// Nothing of the prompts, the replies or the secret left in a span.
	raw := rcv.Raw()
	for _, secret := range []string{"PROMPT-MARKER", "REPLY-MARKER", "otters", canary} {
		if bytes.Contains(raw, []byte(secret)) {
			t.Errorf("%q is in an exported span", secret)
		}
	}
}

var regexpServing = regexp.MustCompile(`msg="serving flow"`)

func names(m map[string][]otlptest.Span) []string {
	var out []string
	for n, s := range m {
		out = append(out, fmt.Sprintf("%s×%d", n, len(s)))
	}
	return out
}

// waitUntil polls cond until it holds, or fails the test after d.
func waitUntil(t *testing.T, what string, d time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", d, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
