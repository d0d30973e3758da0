package main

// The hardening of issue 12 as a user meets it: the processes refuse weak settings, sign
// their webhooks alike, and (browser_test's harness) no other web page can drive them.

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/flows/engine"
	"github.com/sluicehq/sluice/server"
	"github.com/sluicehq/sluice/store/storetest"
)

func TestServeRefusesAWeakToken(t *testing.T) {
	for _, tok := range []string{"   ", "\t", "short", "fifteen-chars-x", "has a space in it!"} {
		// A server that starts anyway is stopped after a while, which fails the test.
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, binary, "serve", "--addr", "127.0.0.1:0", "--flows", t.TempDir())
		cmd.Env = append(cmd.Environ(), "REDIS_URL=", "SLUICE_TOKEN="+tok)
		out, err := cmd.CombinedOutput()
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 || !strings.Contains(string(out), "SLUICE_TOKEN") {
			t.Errorf("SLUICE_TOKEN=%q: err %v, output %q; want exit 2 naming SLUICE_TOKEN", tok, err, out)
		}
	}
}

// hookReceiver records the result webhooks it gets.
type hookReceiver struct {
	srv  *httptest.Server
	mu   sync.Mutex
	hdrs []http.Header
	body [][]byte
}

func newHookReceiver(t *testing.T) *hookReceiver {
	rc := &hookReceiver{}
	rc.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		b, _ := io.ReadAll(req.Body)
		rc.mu.Lock()
		rc.hdrs = append(rc.hdrs, req.Header.Clone())
		rc.body = append(rc.body, b)
		rc.mu.Unlock()
	}))
	t.Cleanup(rc.srv.Close)
	return rc
}

// wait returns the first webhook the receiver got.
func (rc *hookReceiver) wait(t *testing.T) (http.Header, []byte) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		rc.mu.Lock()
		if len(rc.hdrs) > 0 {
			defer rc.mu.Unlock()
			return rc.hdrs[0], rc.body[0]
		}
		rc.mu.Unlock()
		if time.Now().After(deadline) {
			t.Fatal("no result webhook arrived")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A result webhook carries the same headers and signature whichever process sends it:
// serve, or a headless worker.
func TestResultWebhooksAreSignedAlikeByServeAndWorker(t *testing.T) {
	r := storetest.Real(t)
	const secret = "hook-secret-signed-alike"
	headers := map[string]http.Header{}
	for _, proc := range []string{"serve", "worker"} {
		t.Run(proc, func(t *testing.T) {
			rc := newHookReceiver(t)
			dir := t.TempDir()
			id, path := writeExampleFlow(t, dir, "linear", func(d map[string]any) {
				for _, n := range d["nodes"].([]any) {
					if n := n.(map[string]any); n["id"] == "out" {
						n["params"].(map[string]any)["webhook"] = rc.srv.URL + "/done"
					}
				}
			})
			storetest.DeleteFlowKeys(t, r, id)
			env := []string{"REDIS_URL=" + storetest.URL(), server.HookSecretEnv(id) + "=" + secret, "SLUICE_HTTP_ALLOW=127.0.0.1"}
			if proc == "serve" {
				p := start(t, env, "serve", "--addr", "127.0.0.1:0", "--flows", dir)
				base := p.waitLine(t, servingLine, 20*time.Second)[1]
				req, _ := http.NewRequest("POST", base+"/api/flows/"+id+"/runs", strings.NewReader(`{"input": {"name": "Ada"}}`))
				req.Header.Set("Content-Type", "application/json")
				res, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				res.Body.Close()
				if res.StatusCode != http.StatusAccepted {
					t.Fatalf("start: %d", res.StatusCode)
				}
			} else {
				w := start(t, env, "worker", path)
				w.waitLine(t, regexp.MustCompile(`msg="serving flow"`), 20*time.Second)
				e := engine.New(r, registry(nil), engine.Options{})
				plan, err := loadPlan(e, path, io.Discard)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := e.Start(context.Background(), plan, json.RawMessage(`{"name": "Ada"}`), engine.StartOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			h, body := rc.wait(t)
			if got, want := h.Get("X-Sluice-Signature"), engine.Sign([]byte(secret), body); got != want {
				t.Errorf("X-Sluice-Signature = %q, want %q (the body signed with the flow's secret)", got, want)
			}
			if !bytes.Contains(body, []byte(`"HELLO, ADA!"`)) {
				t.Errorf("body = %s", body)
			}
			headers[proc] = h
		})
	}
	for _, name := range []string{"Content-Type", "User-Agent", "X-Sluice-Flow", "X-Sluice-Run", "X-Sluice-Delivery", "X-Sluice-Attempt", "X-Sluice-Signature"} {
		for proc, h := range headers {
			if h.Get(name) == "" {
				t.Errorf("the webhook from %s has no %s", proc, name)
			}
		}
	}
}
