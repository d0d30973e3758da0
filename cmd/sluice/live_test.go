package main

import (
	"encoding/json"
	"io"
	"net/http"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/sluicehq/sluice/server/live"
	"github.com/sluicehq/sluice/store/storetest"
)

// TestLiveViewShowsStepsRunByASeparateWorkerProcess: serve runs no worker; a headless
// `sluice worker` process runs the steps; a websocket client of serve sees every step
// live, because the hub reads the flow's events stream in Redis.
func TestLiveViewShowsStepsRunByASeparateWorkerProcess(t *testing.T) {
	r := storetest.Real(t)
	dir := t.TempDir()
	id, path := writeExampleFlow(t, dir, "linear", nil)
	storetest.DeleteFlowKeys(t, r, id)
	const token = "live-test-token-1"
	env := []string{"REDIS_URL=" + storetest.URL(), "SLUICE_TOKEN=" + token}

	srv := start(t, env, "serve", "--addr", "127.0.0.1:0", "--flows", dir, "--workers", "0")
	base := srv.waitLine(t, servingLine, 20*time.Second)[1]
	worker := start(t, env, "worker", path)
	worker.waitLine(t, regexp.MustCompile(`msg="serving flow"`), 20*time.Second)

	h := http.Header{"Authorization": {"Bearer " + token}}
	ws, _, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(base, "http")+"/ws?flow="+id, h)
	if err != nil {
		t.Fatalf("websocket: %v", err)
	}
	defer ws.Close()
	read := func() live.Envelope {
		t.Helper()
		ws.SetReadDeadline(time.Now().Add(20 * time.Second))
		_, b, err := ws.ReadMessage()
		if err != nil {
			t.Fatalf("websocket read: %v", err)
		}
		var m live.Envelope
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatalf("not JSON: %s", b)
		}
		return m
	}
	if m := read(); m.Type != "subscribed" {
		t.Fatalf("first message = %+v", m)
	}

	req, _ := http.NewRequest("POST", base+"/api/flows/"+id+"/runs", strings.NewReader(`{"input": {"name": "Ada"}}`))
	req.Header = h.Clone()
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("start: %d %s", resp.StatusCode, body)
	}
	var started struct{ Run string }
	json.Unmarshal(body, &started)

	var steps []string
	for {
		m := read()
		if m.Type != "event" || m.Event.Run != started.Run {
			continue
		}
		if m.Event.Type == "step" {
			steps = append(steps, m.Event.Node)
		}
		if m.Event.Type == "run" && strings.Contains(string(m.Event.Data), "succeeded") {
			break
		}
	}
	if got := strings.Join(steps, " "); got != "in greet shout out" {
		t.Errorf("live steps = %q, want in greet shout out", got)
	}

	// The steps ran in the worker process, not in serve.
	req, _ = http.NewRequest("GET", base+"/api/flows/"+id+"/runs/"+started.Run+"/checkpoints", nil)
	req.Header = h.Clone()
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var hist struct {
		Checkpoints []struct{ Node, Worker string }
	}
	json.NewDecoder(resp.Body).Decode(&hist)
	resp.Body.Close()
	pid := "-" + strconv.Itoa(worker.cmd.Process.Pid) + "-"
	for _, c := range hist.Checkpoints {
		if c.Node != "" && !strings.Contains(c.Worker, pid) {
			t.Errorf("step %s ran in %q, not in the worker process (pid %d)", c.Node, c.Worker, worker.cmd.Process.Pid)
		}
	}
	if len(hist.Checkpoints) != 5 {
		t.Errorf("checkpoints = %+v", hist.Checkpoints)
	}
}

func TestServeRefusesToListenBeyondLoopbackWithoutAToken(t *testing.T) {
	cmd := exec.Command(binary, "serve", "--addr", "0.0.0.0:0", "--flows", t.TempDir())
	cmd.Env = append(cmd.Environ(), "REDIS_URL=", "SLUICE_TOKEN=")
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 || !strings.Contains(string(out), "SLUICE_TOKEN") {
		t.Fatalf("err %v, output %q; want exit 2 asking for SLUICE_TOKEN", err, out)
	}
	// With a token it serves, and the token is needed.
	const token = "beyond-loopback-1"
	p := start(t, []string{"REDIS_URL=", "SLUICE_TOKEN=" + token}, "serve", "--addr", "0.0.0.0:0", "--flows", t.TempDir())
	base := p.waitLine(t, servingLine, 20*time.Second)[1]
	for tok, want := range map[string]int{"": 401, token: 200} {
		req, _ := http.NewRequest("GET", base+"/api/flows", nil)
		if tok != "" {
			req.Header.Set("Authorization", "Bearer "+tok)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("token %q: %d, want %d", tok, resp.StatusCode, want)
		}
	}
	// Nothing the server logged shows the token.
	for len(p.lines) > 0 {
		if l := <-p.lines; strings.Contains(l, token) {
			t.Errorf("the log shows the token: %s", l)
		}
	}
}
