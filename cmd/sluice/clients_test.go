package main

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/flows/examples"
	"github.com/sluicehq/sluice/flows/nodes/llmtest"
	"github.com/sluicehq/sluice/store/storetest"
)

// shortID is a flow id prefix of this test's own, short enough for the suffixes added
// to it (the runs of earlier tests stay in the shared Redis, and a request seen again
// would join an earlier run).
func shortID(t *testing.T) string {
	var b [4]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	return "c" + hex.EncodeToString(b[:])
}

// The clients scripts (testdata/clients) use the published SDKs from npm: the lock file
// pins them, `make test` installs them with the editor's packages.

// clientFlows writes, for one SDK (prefix), a flow whose model call fails, one that waits
// for an approval and one that streams its model's reply.
func clientFlows(t *testing.T, dir, prefix string) {
	t.Helper()
	chat := func(id, model string) string {
		return `{"sluice": 1, "id": "` + id + `", "nodes": [
			{"id": "in", "type": "input", "params": {"schema": {"type": "object", "required": ["messages"], "properties": {"messages": {"type": "array"}}}}},
			{"id": "ask", "type": "llm", "params": {"model": "` + model + `", "stream": true, "as": "answer",
				"user": "{{range .messages}}{{.role}}: {{.content}}\n{{end}}"}},
			{"id": "out", "type": "output", "params": {"value": ".answer"}}],
			"edges": [{"from": "in", "to": "ask"}, {"from": "ask", "to": "out"}]}`
	}
	files := map[string]string{
		prefix + "fail":   chat(prefix+"fail", "fail"),
		prefix + "stream": chat(prefix+"stream", "stream"),
		prefix + "wait": `{"sluice": 1, "id": "` + prefix + `wait", "nodes": [
			{"id": "in", "type": "input", "params": {"schema": {"type": "object", "properties": {"messages": {"type": "array"}}}}},
			{"id": "ok", "type": "approval", "params": {"prompt": "Answer?"}},
			{"id": "out", "type": "output", "params": {"value": "\"approved\""}}],
			"edges": [{"from": "in", "to": "ok"}, {"from": "ok", "port": "approved", "to": "out"}]}`,
	}
	for id, doc := range files {
		if err := os.WriteFile(filepath.Join(dir, id+".json"), []byte(doc), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// streamedReply is what the model streams to every "stream" flow.
const streamedReply = "Order A-1 ships today from the Lyon warehouse."

// runsOf is how many runs a flow has, through the API.
func runsOf(t *testing.T, base, token, flow string) int {
	t.Helper()
	req, _ := http.NewRequest("GET", base+"/api/flows/"+flow+"/runs", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var list struct {
		Total int `json:"total"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil {
		t.Fatal(err)
	}
	return list.Total
}

// node runs a script of testdata/clients and returns the JSON objects it printed.
func node(t *testing.T, script string, env ...string) []map[string]any {
	t.Helper()
	cmd := exec.Command("node", filepath.Join("..", "..", "testdata", "clients", script))
	cmd.Env = append(os.Environ(), env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node %s: %v\n%s\n%s", script, err, out, stderr.String())
	}
	var objs []map[string]any
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("node %s printed %q: %v", script, sc.Text(), err)
		}
		objs = append(objs, m)
	}
	return objs
}

// The OpenAI JavaScript SDK (7 and 6), the Vercel AI SDK and LangChain JS, with their
// default retries, against a real `sluice serve`: a call to a failing flow is one run
// and an error they do not retry, a call to a flow that waits for an approval parks one
// approval, and a streamed reply comes in several chunks that make the whole reply.
func TestPublishedOpenAIClientsMakeOneRunPerCall(t *testing.T) {
	model := llmtest.New(t)
	model.Respond(func(r llmtest.Request) llmtest.Reply {
		if r.Model == "fail" {
			return llmtest.Reply{Status: http.StatusUnauthorized, Content: "the provider's key is wrong"}
		}
		return llmtest.Reply{Content: streamedReply}
	})
	dir := t.TempDir()
	// Flow ids of this test's own (the runs of earlier ones stay in the shared Redis).
	id := shortID(t)
	sdks := map[string][]string{ // script -> the flow prefixes it uses
		"openai.mjs": {id + "-oai-7-", id + "-oai-6-"}, "vercel.mjs": {id + "-vercel-"}, "langchain.mjs": {id + "-lc-"},
	}
	rdb := storetest.Real(t)
	for _, prefixes := range sdks {
		for _, p := range prefixes {
			clientFlows(t, dir, p)
			for _, kind := range []string{"fail", "stream", "wait"} {
				storetest.DeleteFlowKeys(t, rdb, p+kind)
			}
		}
	}
	const token = "clients-test-token-3c9a71"
	base := serveForBrowserEnv(t, dir, []string{"OPENAI_BASE_URL=" + model.URL, "OPENAI_API_KEY=test-key", "SLUICE_PROVIDERS=", "SLUICE_TOKEN=" + token})
	scriptPrefix := map[string]string{"openai.mjs": id + "-oai-", "vercel.mjs": id + "-vercel-", "langchain.mjs": id + "-lc-"}
	for script, prefixes := range sdks {
		results := node(t, script, "SLUICE_URL="+base, "SLUICE_TOKEN="+token, "FLOW_PREFIX="+scriptPrefix[script])
		if len(results) != len(prefixes) {
			t.Fatalf("%s printed %d results, want %d", script, len(results), len(prefixes))
		}
		for i, res := range results {
			prefix, sdk := prefixes[i], res["sdk"]
			fail, _ := res["fail"].(map[string]any)
			wait, _ := res["wait"].(map[string]any)
			if fail["ok"] != false || fail["status"] != float64(400) || !strings.Contains(fmt.Sprint(fail["message"]), "the provider's key is wrong") {
				t.Errorf("%s, a failing flow: %v; want a 400 saying why", sdk, fail)
			}
			if wait["ok"] != false || wait["status"] != float64(400) || !strings.Contains(fmt.Sprint(wait["message"]), "approval") {
				t.Errorf("%s, a waiting flow: %v; want a 400 saying where to approve", sdk, wait)
			}
			var chunks []string
			for _, c := range res["chunks"].([]any) {
				chunks = append(chunks, c.(string))
			}
			if strings.Join(chunks, "") != streamedReply || len(chunks) < 2 {
				t.Errorf("%s, a streamed reply: %q; want %q in several chunks", sdk, chunks, streamedReply)
			}
			if id, ok := res["id"]; ok && !strings.HasPrefix(fmt.Sprint(id), "chatcmpl-r") {
				t.Errorf("%s, the stream's id %v; want chatcmpl-<run>", sdk, id)
			}
			for _, kind := range []string{"fail", "wait", "stream"} {
				if n := runsOf(t, base, token, prefix+kind); n != 1 {
					t.Errorf("%s: one call to %s made %d runs, want 1", sdk, prefix+kind, n)
				}
			}
		}
	}
}

// The MCP TypeScript SDK lists and calls a flow's tool over stdio (`sluice mcp`) and
// Streamable HTTP (`/mcp` of a real serve).
func TestPublishedMCPClientListsAndCallsToolsOnBothTransports(t *testing.T) {
	dir := t.TempDir()
	b, err := examples.Read("linear")
	if err != nil {
		t.Fatal(err)
	}
	var d map[string]any
	json.Unmarshal(b, &d)
	tool := shortID(t) + "-greet"
	storetest.DeleteFlowKeys(t, storetest.Real(t), tool)
	d["id"], d["settings"] = tool, map[string]any{"mcp": true}
	b, _ = json.Marshal(d)
	if err := os.WriteFile(filepath.Join(dir, tool+".json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	const token = "clients-test-token-mcp-77e1"
	base := serveForBrowserEnv(t, dir, []string{"SLUICE_TOKEN=" + token})
	results := node(t, "mcp.mjs", "SLUICE_URL="+base, "SLUICE_TOKEN="+token, "SLUICE_BIN="+binary, "SLUICE_FLOWS="+dir, "MCP_TOOL="+tool)
	if len(results) != 2 {
		t.Fatalf("%d results, want stdio and http", len(results))
	}
	for _, r := range results {
		tools := fmt.Sprint(r["tools"])
		if tools != "["+tool+"]" || r["isError"] != false || !strings.Contains(fmt.Sprint(r["text"]), "HELLO, ADA!") {
			t.Errorf("%v: %v", r["transport"], r)
		}
	}
}
