package main

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sluicehq/sluice/flows"
	"github.com/sluicehq/sluice/flows/engine"
	"github.com/sluicehq/sluice/flows/examples"
	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/storetest"
)

func TestRunPrintsTheOutputOfEveryExampleThatNeedsNoLLM(t *testing.T) {
	cases := map[string]struct{ input, want string }{
		"linear": {`{"name": "Ada"}`, `{"greeting":"HELLO, ADA!"}`},
		"triage": {`{"intent": "code", "ticket": "build broken"}`, `{"answer":"Ticket for coding: build broken","log":["routed to coding"],"team":"coding"}`},
		"fanout": {`{"documents": ["a", "bb", "ccc"]}`, `{"results":[{"doc":"a","length":1},{"doc":"bb","length":2},{"doc":"ccc","length":3}],"total":6}`},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			cmd := exec.Command(binary, "run", filepath.Join("..", "..", "flows", "examples", name+".json"), "--input", tc.input)
			cmd.Env = append(os.Environ(), "REDIS_URL=")
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("sluice run: %v\n%s", err, stderrOf(err))
			}
			if got := strings.TrimSpace(string(out)); got != tc.want {
				t.Errorf("output %s, want %s", got, tc.want)
			}
		})
	}
	// Every example that needs no LLM is covered above.
	for _, id := range examples.IDs() {
		b, _ := examples.Read(id)
		if _, ok := cases[id]; !ok && !strings.Contains(string(b), `"llm"`) && !strings.Contains(string(b), `"agent"`) && !strings.Contains(string(b), `"approval"`) {
			t.Errorf("example %s needs no LLM but has no sluice run case", id)
		}
	}
}

func stderrOf(err error) string {
	if ee, ok := err.(*exec.ExitError); ok {
		return string(ee.Stderr)
	}
	return ""
}

func TestRunExitsNonZeroWithTheReasonWhenTheRunFails(t *testing.T) {
	cmd := exec.Command(binary, "run", "--input", `{"nome": "Ada"}`, filepath.Join("..", "..", "flows", "examples", "linear.json"))
	cmd.Env = append(os.Environ(), "REDIS_URL=")
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 || !strings.Contains(string(out), "missing property 'name'") {
		t.Fatalf("err %v, output %q; want exit 1 naming the missing input field", err, out)
	}
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.json")
	os.WriteFile(bad, []byte(`{"sluice": 1, "id": "bad", "nodes": [{"id": "in", "type": "input"}, {"id": "t", "type": "transform", "params": {"expr": "error(\"boom\")"}}], "edges": [{"from": "in", "to": "t"}]}`), 0o644)
	cmd = exec.Command(binary, "run", bad)
	cmd.Env = append(os.Environ(), "REDIS_URL=")
	out, err = cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 || !strings.Contains(string(out), `failed at node "t"`) || !strings.Contains(string(out), "boom") {
		t.Fatalf("err %v, output %q; want exit 1 saying the run failed at node t with boom", err, out)
	}
}

func TestWorkerRefusesTheEmbeddedRedis(t *testing.T) {
	cmd := exec.Command(binary, "worker", filepath.Join("..", "..", "flows", "examples", "linear.json"))
	cmd.Env = append(os.Environ(), "REDIS_URL=")
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 || !strings.Contains(string(out), "REDIS_URL") {
		t.Fatalf("err %v, output %q; want exit 2 asking for REDIS_URL", err, out)
	}
}

// writeFlow writes an example under a fresh flow id into dir and returns the id and path.
func writeExampleFlow(t *testing.T, dir, example string, edit func(map[string]any)) (string, string) {
	t.Helper()
	b, err := examples.Read(example)
	if err != nil {
		t.Fatal(err)
	}
	var d map[string]any
	json.Unmarshal(b, &d)
	id := storetest.FlowID(t)
	d["id"] = id
	if edit != nil {
		edit(d)
	}
	b, _ = json.MarshalIndent(d, "", "  ")
	path := filepath.Join(dir, id+".json")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return id, path
}

func TestTwoWorkerProcessesShareRunsAndStopOnSIGTERM(t *testing.T) {
	r := storetest.Real(t)
	id, path := writeExampleFlow(t, t.TempDir(), "linear", nil)
	storetest.DeleteFlowKeys(t, r, id)
	env := []string{"REDIS_URL=" + storetest.URL()}
	w1 := start(t, env, "worker", path)
	w2 := start(t, env, "worker", path)
	for _, w := range []*process{w1, w2} {
		w.waitLine(t, regexp.MustCompile(`msg="serving flow"`), 20*time.Second)
	}
	e := engine.New(r, registry(nil), engine.Options{})
	plan, err := e.CurrentPlan(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for i := 0; i < 200; i++ {
		run, err := e.Start(context.Background(), plan, json.RawMessage(`{"name": "x"}`), engine.StartOptions{})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, run)
	}
	workers := map[string]bool{}
	for _, run := range ids {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		got, err := e.Wait(ctx, id, run)
		cancel()
		if err != nil || got.Status != store.StatusSucceeded {
			t.Fatalf("run %s: %v %+v", run, err, got)
		}
		cps, _ := r.Checkpoints(context.Background(), got.Ref(), "-", 0)
		for _, c := range cps {
			if c.Worker != "" {
				workers[strings.Join(strings.Split(c.Worker, "-")[:2], "-")] = true
			}
		}
	}
	if len(workers) != 2 {
		t.Errorf("steps ran in %d worker processes (%v), want both", len(workers), workers)
	}
	for _, w := range []*process{w1, w2} {
		w.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case err := <-w.done:
			if err != nil {
				t.Errorf("worker exited with %v after SIGTERM, want 0", err)
			}
		case <-time.After(15 * time.Second):
			t.Fatal("worker did not stop within 15s of SIGTERM")
		}
	}
}

func TestServeServesTheLibrarysFlowsAndTheirNewVersionsWithoutRestart(t *testing.T) {
	r := storetest.Real(t)
	dir := t.TempDir()
	p := start(t, []string{"REDIS_URL=" + storetest.URL()}, "serve", "--addr", "127.0.0.1:0", "--flows", dir)
	p.waitLine(t, servingLine, 20*time.Second)
	id, path := writeExampleFlow(t, dir, "linear", nil)
	storetest.DeleteFlowKeys(t, r, id)
	e := engine.New(r, registry(nil), engine.Options{})

	runOnce := func() string {
		t.Helper()
		var plan *flows.Plan
		deadline := time.Now().Add(15 * time.Second)
		data, _ := os.ReadFile(path)
		want, _, err := e.Compile(data)
		if err != nil {
			t.Fatal(err)
		}
		for {
			plan, err = e.CurrentPlan(context.Background(), id)
			if err == nil && plan.Version == want.Version {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("serve did not publish version %.12s of the saved file (current: %v)", want.Version, err)
			}
			time.Sleep(50 * time.Millisecond)
		}
		run, err := e.Start(context.Background(), plan, json.RawMessage(`{"name": "Ada"}`), engine.StartOptions{})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		got, err := e.Wait(ctx, id, run)
		if err != nil || got.Status != store.StatusSucceeded {
			t.Fatalf("run: %v %+v", err, got)
		}
		return string(got.Output())
	}
	if got := runOnce(); got != `{"greeting":"HELLO, ADA!"}` {
		t.Fatalf("first version: %s", got)
	}
	editFlow(t, path, func(d map[string]any) {
		d["nodes"].([]any)[3].(map[string]any)["params"] = map[string]any{"value": "{shouted: .greeting}"}
	})
	if got := runOnce(); got != `{"shouted":"HELLO, ADA!"}` {
		t.Fatalf("after saving a new version: %s", got)
	}
}

// editFlow rewrites the flow file at path through edit.
func editFlow(t *testing.T, path string, edit func(map[string]any)) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var d map[string]any
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatal(err)
	}
	edit(d)
	b, _ = json.MarshalIndent(d, "", "  ")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestRunPausesAtAnApprovalAndResumeContinuesIt(t *testing.T) {
	r := storetest.Real(t)
	id, path := writeExampleFlow(t, t.TempDir(), "approval", nil)
	storetest.DeleteFlowKeys(t, r, id)
	env := append(os.Environ(), "REDIS_URL="+storetest.URL())
	cmd := exec.Command(binary, "run", path, "--input", `{"customer": "Ada"}`)
	cmd.Env = env
	out, err := cmd.Output()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 3 || !strings.Contains(string(ee.Stderr), `waits for approval at node "review": Send this reply to Ada?`) {
		t.Fatalf("sluice run: %v, stdout %s; want exit 3 naming the approval", err, out)
	}
	var waiting struct{ Run, Status string }
	if err := json.Unmarshal(out, &waiting); err != nil || waiting.Status != "waiting" {
		t.Fatalf("stdout %q, want {run, status: waiting}", out)
	}
	cmd = exec.Command(binary, "resume", path, waiting.Run, "--input", `{"decision": "approve", "value": {"reply": "Hi Ada"}}`)
	cmd.Env = env
	out, err = cmd.Output()
	if err != nil {
		t.Fatalf("sluice resume: %v\n%s", err, stderrOf(err))
	}
	if got := strings.TrimSpace(string(out)); got != `{"decision":"approve","sent":"Hi Ada"}` {
		t.Errorf("resumed output %s", got)
	}
	cmd = exec.Command(binary, "resume", path, waiting.Run)
	cmd.Env = env
	if out, err := cmd.CombinedOutput(); err == nil || !strings.Contains(string(out), "not waiting") {
		t.Errorf("resuming a finished run: %v %s, want an error saying it is not waiting", err, out)
	}
}
