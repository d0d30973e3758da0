package main

// Proof: a corpus of bad input sent to a running server, and a secret canary that must
// never show up anywhere a user or an operator could see it.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/sluicehq/sluice/observe/otlptest"
	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/storetest"
)

// apiClient calls a running serve with its token.
type apiClient struct {
	t     *testing.T
	base  string
	token string
	mu    sync.Mutex
	seen  bytes.Buffer // every response body, for the canary
}

func (c *apiClient) do(method, path, contentType string, body io.Reader, auth string) (int, []byte) {
	c.t.Helper()
	req, err := http.NewRequest(method, c.base+path, body)
	if err != nil {
		c.t.Fatal(err)
	}
	switch auth {
	case "":
		req.Header.Set("Authorization", "Bearer "+c.token)
	case "wrong":
		req.Header.Set("Authorization", "Bearer not-the-token")
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	c.mu.Lock()
	c.seen.Write(b)
	c.mu.Unlock()
	return res.StatusCode, b
}

// stream reads a streaming response (SSE) for d and keeps what it got.
func (c *apiClient) stream(path string, d time.Duration) []byte {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", c.base+path, nil)
	req.Header.Set("Authorization", "Bearer "+c.token)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatalf("GET %s: %v", path, err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body) // ends when d has passed
	c.mu.Lock()
	c.seen.Write(b)
	c.mu.Unlock()
	return b
}

func (c *apiClient) json(method, path string, body any) (int, []byte) {
	c.t.Helper()
	var r io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		r = bytes.NewReader(b)
	}
	return c.do(method, path, "application/json", r, "")
}

// serveFor starts serve on the real Redis with a token and returns its API client and
// process.
func serveFor(t *testing.T, dir string, extraEnv ...string) (*apiClient, *process) {
	t.Helper()
	const token = "proof-test-token"
	env := append([]string{"REDIS_URL=" + storetest.URL(), "SLUICE_TOKEN=" + token}, extraEnv...)
	p := start(t, env, "serve", "--addr", "127.0.0.1:0", "--flows", dir)
	base := p.waitLine(t, servingLine, 20*time.Second)[1]
	return &apiClient{t: t, base: base, token: token}, p
}

func TestBadInputCorpus(t *testing.T) {
	r := storetest.Real(t)
	dir := t.TempDir()
	// Flow documents.
	files, _ := filepath.Glob(filepath.Join("..", "..", "testdata", "bad", "flows", "*.json"))
	if len(files) < 10 {
		t.Fatalf("only %d bad flow documents", len(files))
	}
	// The flows that fail only when they run are saved and run, each under an id of this
	// test's own (another test process may run the corpus on the same Redis): their keys
	// and audit entries go once the server has stopped.
	runtimeIDs := map[string]string{} // file -> the id it is saved under
	for _, f := range files {
		data, _ := os.ReadFile(f)
		var head struct{ ID, Description string }
		json.Unmarshal(data, &head)
		if strings.TrimSpace(strings.TrimPrefix(head.Description, "expect:")) == "runtime" {
			runtimeIDs[f] = head.ID + "-" + strings.TrimPrefix(storetest.FlowID(t), "t-testbadinputcorpus-")
			storetest.DeleteFlowKeys(t, r, runtimeIDs[f])
		}
	}
	// Something accepted before the bad input: a flow and a run that waits for a person.
	good, goodPath := writeExampleFlow(t, t.TempDir(), "approval", nil)
	storetest.DeleteFlowKeys(t, r, good)
	api, _ := serveFor(t, dir)
	gb, _ := os.ReadFile(goodPath)
	if st, b := api.do("PUT", "/api/flows/"+good, "application/json", bytes.NewReader(gb), ""); st/100 != 2 {
		t.Fatalf("saving a good flow: %d %s", st, b)
	}
	st, b := api.json("POST", "/api/flows/"+good+"/runs?wait=20s", map[string]any{"input": map[string]any{"customer": "Ada"}})
	var waiting store.Run
	json.Unmarshal(b, &waiting)
	if st != 200 || waiting.Status != store.StatusWaiting {
		t.Fatalf("a run that waits: %d %s", st, b)
	}

	var runtimeFailures []string
	for _, f := range files {
		data, _ := os.ReadFile(f)
		var head struct{ ID, Description string }
		json.Unmarshal(data, &head)
		expect := strings.TrimSpace(strings.TrimPrefix(head.Description, "expect:"))
		t.Run(filepath.Base(f), func(t *testing.T) {
			st, body := api.do("POST", "/api/flows/validate", "application/json", bytes.NewReader(data), "")
			if expect == "runtime" {
				if st != 200 {
					t.Fatalf("validate: %d %s, want it valid (it fails only when it runs)", st, body)
				}
				id := runtimeIDs[f]
				var doc map[string]any
				if err := json.Unmarshal(data, &doc); err != nil {
					t.Fatal(err)
				}
				doc["id"] = id
				data, _ = json.Marshal(doc)
				if st, body := api.do("PUT", "/api/flows/"+id, "application/json", bytes.NewReader(data), ""); st/100 != 2 {
					t.Fatalf("save: %d %s", st, body)
				}
				runtimeFailures = append(runtimeFailures, id)
				return
			}
			if st != 200 && st != 400 {
				t.Fatalf("validate: %d %s, want 200 with problems or 400", st, body)
			}
			if !strings.Contains(string(body), `"code":"`+expect+`"`) {
				t.Errorf("validate did not report %s: %s", expect, body)
			}
			id := head.ID
			if !validPathID(id) {
				id = "bad-save-target"
			}
			if st, body := api.do("PUT", "/api/flows/"+id, "application/json", bytes.NewReader(data), ""); st/100 != 4 {
				t.Errorf("save: %d %s, want a 4xx", st, body)
			}
		})
	}
	// Documents too big to commit.
	huge := map[string]string{
		"10 MB string":        fmt.Sprintf(`{"sluice": 1, "id": "huge-string", "nodes": [{"id": "in", "type": "input", "params": {"example": %q}}], "edges": []}`, strings.Repeat("x", 10<<20)),
		"100,000 nodes":       hundredThousandNodes(),
		"nested 100,000 deep": `{"sluice": 1, "id": "deep", "nodes": [{"id": "in", "type": "input", "params": {"example": ` + strings.Repeat("[", 100000) + strings.Repeat("]", 100000) + `}}], "edges": []}`,
	}
	for name, body := range huge {
		for _, path := range []string{"/api/flows/validate", "/api/flows/huge"} {
			method := "POST"
			if path == "/api/flows/huge" {
				method = "PUT"
			}
			st, b := api.do(method, path, "application/json", strings.NewReader(body), "")
			if st/100 != 4 && !(st == 200 && bytes.Contains(b, []byte(`"valid":false`))) {
				t.Errorf("%s to %s: %d %.200s, want a 4xx or a validation error", name, path, st, b)
			}
		}
	}

	// Requests.
	var reqs []struct {
		Name, Method, Path, Body, Auth string
		ContentType                    string `json:"content_type"`
		BodyBytes                      int    `json:"body_bytes"`
		Status                         any
	}
	rb, _ := os.ReadFile(filepath.Join("..", "..", "testdata", "bad", "requests.json"))
	if err := json.Unmarshal(rb, &reqs); err != nil {
		t.Fatal(err)
	}
	for _, q := range reqs {
		var body io.Reader
		if q.Body != "" {
			body = strings.NewReader(q.Body)
		}
		if q.BodyBytes > 0 {
			body = strings.NewReader(`{"x": "` + strings.Repeat("y", q.BodyBytes) + `"}`)
		}
		st, b := api.do(q.Method, q.Path, q.ContentType, body, q.Auth)
		if !statusIn(st, q.Status) {
			t.Errorf("%s: %s %s answered %d %.200s, want %v", q.Name, q.Method, q.Path, st, b, q.Status)
		}
		if st >= 500 {
			t.Errorf("%s: a server error", q.Name)
		}
	}
	// A websocket from a foreign origin is refused.
	h := http.Header{"Authorization": {"Bearer " + api.token}, "Origin": {"https://evil.example"}}
	if ws, res, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(api.base, "http")+"/ws?flow="+good, h); err == nil {
		ws.Close()
		t.Error("a websocket from a foreign origin was accepted")
	} else if res == nil || res.StatusCode != http.StatusForbidden {
		st := 0
		if res != nil {
			st = res.StatusCode
		}
		t.Errorf("foreign origin: %v (status %d), want 403", err, st)
	}

	// The runs of the flows that fail only when they run fail with a reason.
	for _, id := range runtimeFailures {
		st, b := api.json("POST", "/api/flows/"+id+"/runs?wait=30s", map[string]any{"input": map[string]any{}})
		var run store.Run
		json.Unmarshal(b, &run)
		if st != 200 || run.Status != store.StatusFailed || run.Error == "" {
			t.Errorf("run of %s: %d %s, want failed with a reason", id, st, b)
		}
	}

	// Everything still works and nothing accepted was lost.
	if st, _ := api.do("GET", "/healthz", "", nil, "none"); st != 200 {
		t.Errorf("healthz %d after the corpus", st)
	}
	if st, b := api.json("GET", "/api/flows/"+good, nil); st != 200 || !bytes.Contains(b, []byte(`"review"`)) {
		t.Errorf("the good flow after the corpus: %d %.200s", st, b)
	}
	if st, b := api.json("POST", "/api/flows/"+good+"/runs/"+waiting.ID+"/resume", map[string]any{"decision": "approve"}); st/100 != 2 {
		t.Fatalf("resume the waiting run: %d %s", st, b)
	}
	st, b = api.json("GET", "/api/flows/"+good+"/runs/"+waiting.ID+"?wait=20s", nil)
	var done store.Run
	json.Unmarshal(b, &done)
	if done.Status != store.StatusSucceeded {
		t.Errorf("the run accepted before the corpus: %d %s, want succeeded", st, b)
	}

	// Repeated wrong tokens are rate limited.
	limited := false
	for i := 0; i < 40 && !limited; i++ {
		st, _ := api.do("GET", "/api/flows", "", nil, "wrong")
		limited = st == http.StatusTooManyRequests
	}
	if !limited {
		t.Error("40 wrong tokens in a row were never answered 429")
	}
}

func validPathID(id string) bool {
	return id != "" && !strings.ContainsAny(id, "/.%")
}

func statusIn(st int, want any) bool {
	switch w := want.(type) {
	case float64:
		return st == int(w)
	case []any:
		for _, x := range w {
			if f, ok := x.(float64); ok && st == int(f) {
				return true
			}
		}
	}
	return false
}

func hundredThousandNodes() string {
	var b strings.Builder
	b.WriteString(`{"sluice": 1, "id": "many", "nodes": [`)
	for i := 0; i < 100000; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"id": "n%d", "type": "transform", "params": {"expr": "{}"}}`, i)
	}
	b.WriteString(`], "edges": []}`)
	return b.String()
}

func TestSecretCanaryAppearsNowhere(t *testing.T) {
	r := storetest.Real(t)
	canary := "canary-" + strings.ReplaceAll(storetest.FlowID(t), "-", "")
	// The upstream echoes every request header back: in a 200 answer, in a 400 (which
	// fails the step for good) and in a 500 (retried, then dead-lettered).
	var received sync.Map
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		received.Store(req.URL.Path, req.Header.Get("Authorization"))
		echo, _ := json.Marshal(map[string]any{"you_sent": req.Header})
		switch {
		case strings.HasSuffix(req.URL.Path, "/bad"):
			http.Error(w, "bad request, you sent "+string(echo), http.StatusBadRequest)
		case strings.HasSuffix(req.URL.Path, "/fail"):
			http.Error(w, "upstream says no to "+req.Header.Get("Authorization"), http.StatusInternalServerError)
		default:
			w.Header().Set("Content-Type", "application/json")
			w.Write(echo)
		}
	}))
	defer upstream.Close()

	dir := t.TempDir()
	// Traces go to a receiver: the canary must not be in any span either.
	spans := otlptest.New(t)
	api, srv := serveFor(t, dir, "SLUICE_SECRET_CANARY="+canary, "SLUICE_HTTP_ALLOW=127.0.0.1", "SLUICE_LOG_LEVEL=debug",
		"OTEL_EXPORTER_OTLP_ENDPOINT="+spans.URL, "OTEL_BSP_SCHEDULE_DELAY=50")
	id := storetest.FlowID(t)
	storetest.DeleteFlowKeys(t, r, id)
	flow := func(env string) map[string]any {
		return map[string]any{"sluice": 1, "id": id,
			"settings": map[string]any{"max_attempts": 2, "claim_after": "1s"},
			"nodes": []any{
				map[string]any{"id": "in", "type": "input"},
				map[string]any{"id": "call", "type": "http", "params": map[string]any{
					"url":     upstream.URL + "/{{.path}}",
					"headers": map[string]any{"Authorization": map[string]any{"$env": env, "prefix": "Bearer "}}}},
				map[string]any{"id": "out", "type": "output"},
			},
			"edges": []any{map[string]any{"from": "in", "to": "call"}, map[string]any{"from": "call", "to": "out"}}}
	}
	// The server's own settings cannot be read into a flow.
	for _, env := range []string{"SLUICE_TOKEN", "REDIS_URL", "SLUICE_HOOK_SECRET_" + strings.ToUpper(strings.ReplaceAll(id, "-", "_")), "PATH"} {
		if st, b := api.json("PUT", "/api/flows/"+id, flow(env)); st != 400 || !strings.Contains(string(b), `"code":"secret_not_allowed"`) || !strings.Contains(string(b), `"node":"call"`) {
			t.Errorf("a flow reading %s: %d %s, want 400 secret_not_allowed at node call", env, st, b)
		}
	}
	if st, b := api.json("PUT", "/api/flows/"+id, flow("SLUICE_SECRET_CANARY")); st/100 != 2 {
		t.Fatalf("save: %d %s", st, b)
	}

	// A websocket watches everything the flow does.
	var mu sync.Mutex
	var frames bytes.Buffer
	h := http.Header{"Authorization": {"Bearer " + api.token}}
	ws, _, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(api.base, "http")+"/ws?flow="+id, h)
	if err != nil {
		t.Fatal(err)
	}
	wsDone := make(chan struct{})
	go func() {
		defer close(wsDone)
		for {
			_, b, err := ws.ReadMessage()
			if err != nil {
				return
			}
			mu.Lock()
			frames.Write(b)
			frames.WriteByte('\n')
			mu.Unlock()
		}
	}()

	var runs []string
	for _, path := range []string{"ok", "bad", "fail"} {
		st, b := api.json("POST", "/api/flows/"+id+"/runs?wait=30s", map[string]any{"input": map[string]any{"path": path}})
		var run store.Run
		json.Unmarshal(b, &run)
		if st != 200 || !store.Finished(run.Status) {
			t.Fatalf("run %s: %d %s", path, st, b)
		}
		if want := map[string]string{"ok": store.StatusSucceeded, "bad": store.StatusFailed, "fail": store.StatusFailed}[path]; run.Status != want {
			t.Errorf("run %s: %s (%s), want %s", path, run.Status, run.Error, want)
		}
		if path != "ok" && !strings.Contains(run.Error, "[redacted:SLUICE_SECRET_CANARY]") {
			t.Errorf("run %s: error %q does not show where the secret was taken out", path, run.Error)
		}
		runs = append(runs, run.ID)
	}
	for _, path := range []string{"/ok", "/bad", "/fail"} {
		if got, _ := received.Load(path); got != "Bearer "+canary {
			t.Fatalf("the upstream got Authorization %q on %s: the secret was not used", got, path)
		}
	}
	// Every read a user can make of the runs, pages included.
	for _, run := range runs {
		for _, p := range []string{"", "/checkpoints"} {
			api.json("GET", "/api/flows/"+id+"/runs/"+run+p, nil)
		}
		api.stream("/api/flows/"+id+"/runs/"+run+"/events", time.Second) // SSE: what it sends in a second
		_, b := api.json("GET", "/api/flows/"+id+"/runs/"+run+"/checkpoints", nil)
		var hist struct{ Checkpoints []struct{ ID string } }
		json.Unmarshal(b, &hist)
		for _, c := range hist.Checkpoints {
			api.json("GET", "/api/flows/"+id+"/runs/"+run+"/checkpoints/"+c.ID, nil)
		}
		api.do("GET", "/flows/"+id+"/runs/"+run, "", nil, "")
	}
	for _, p := range []string{"/api/flows/" + id, "/api/flows/" + id + "/export", "/api/flows/" + id + "/queues", "/api/flows/" + id + "/deadletters",
		"/api/flows/" + id + "/runs", "/api/flows", "/metrics", "/runs?flow=" + id, "/queues?flow=" + id, "/"} {
		api.json("GET", p, nil)
	}
	if st, b := api.json("GET", "/api/flows/"+id+"/deadletters", nil); st != 200 || !bytes.Contains(b, []byte("[redacted:SLUICE_SECRET_CANARY]")) {
		t.Errorf("dead letters: %d %s, want the failed steps with the secret taken out", st, b)
	}
	// The websocket has seen every run finish and a queue-stats frame.
	deadline := time.Now().Add(30 * time.Second)
	for {
		mu.Lock()
		seen := frames.String()
		mu.Unlock()
		done := strings.Contains(seen, `"type":"queues"`)
		for _, run := range runs {
			done = done && strings.Contains(seen, run)
		}
		if done {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the websocket did not see every run and a queue-stats frame:\n%.2000s", seen)
		}
		time.Sleep(50 * time.Millisecond)
	}
	ws.Close()
	<-wsDone

	if strings.Contains(api.seen.String(), canary) {
		t.Error("the canary is in an API response or page")
	}
	if strings.Contains(frames.String(), canary) {
		t.Error("the canary is in a websocket frame")
	}
	// Every key of the flow and every value in it, and every key of the cache.
	ctx := context.Background()
	keys, _ := r.Client.Keys(ctx, "*"+id+"*").Result()
	if len(keys) == 0 {
		t.Fatal("no keys for the flow")
	}
	for _, k := range keys {
		if strings.Contains(k, canary) {
			t.Errorf("the canary is in a key name: %s", k)
		}
		if dump := dumpKey(ctx, r, k); strings.Contains(dump, canary) {
			t.Errorf("the canary is in the value of %s", k)
		}
	}
	// The server's log, at debug level, all of it: the process is stopped first.
	srv.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-srv.done:
	case <-time.After(30 * time.Second):
		t.Fatal("serve did not stop on SIGTERM")
	}
	log := srv.allLines()
	if len(log) == 0 {
		t.Fatal("no log lines captured")
	}
	for _, l := range log {
		if strings.Contains(l, canary) {
			t.Errorf("the canary is in a log line: %s", l)
		}
	}
	// Every span serve exported (flushed when it stopped): the steps that failed with
	// the secret in their error show where it was taken out.
	raw := spans.Raw()
	if bytes.Contains(raw, []byte(canary)) {
		t.Error("the canary is in an exported span")
	}
	failedSteps := 0
	for _, s := range spans.Spans() {
		if s.Name == "step call" && strings.Contains(s.Message, "[redacted:SLUICE_SECRET_CANARY]") {
			failedSteps++
		}
	}
	if failedSteps == 0 {
		t.Errorf("no span of a failed call step shows the redacted secret in its status; %d spans received", len(spans.Spans()))
	}
}

// dumpKey renders a key's whole value as text, whatever its type.
func dumpKey(ctx context.Context, r *store.Redis, k string) string {
	var b strings.Builder
	switch r.Client.Type(ctx, k).Val() {
	case "string":
		b.WriteString(r.Client.Get(ctx, k).Val())
	case "hash":
		for f, v := range r.Client.HGetAll(ctx, k).Val() {
			b.WriteString(f + "=" + v + "\n")
		}
	case "stream":
		for _, m := range r.Client.XRange(ctx, k, "-", "+").Val() {
			fmt.Fprintf(&b, "%v\n", m.Values)
		}
	case "set":
		b.WriteString(strings.Join(r.Client.SMembers(ctx, k).Val(), "\n"))
	case "zset":
		b.WriteString(strings.Join(r.Client.ZRange(ctx, k, 0, -1).Val(), "\n"))
	case "list":
		b.WriteString(strings.Join(r.Client.LRange(ctx, k, 0, -1).Val(), "\n"))
	}
	return b.String()
}
