package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/flows"
	"github.com/sluicehq/sluice/flows/engine"
	"github.com/sluicehq/sluice/flows/langflow/langflowtest"
	"github.com/sluicehq/sluice/store/storetest"
)

// Three `sluice worker` processes serve a flow with a schedule of every second; one is
// killed with SIGKILL along the way. Each tick from the first to the last still has
// exactly one run.
func TestScheduleRunsOncePerTickAcrossWorkerProcessesOneOfThemKilled(t *testing.T) {
	r := storetest.Real(t)
	id := storetest.FlowID(t)
	storetest.DeleteFlowKeys(t, r, id)
	path := filepath.Join(t.TempDir(), id+".json")
	doc := fmt.Sprintf(`{"sluice": 1, "id": %q, "settings": {"schedules": [{"cron": "@every 1s", "input": {"n": 1}}]},
		"nodes": [{"id": "in", "type": "input"}, {"id": "out", "type": "output", "params": {"value": ".n"}}],
		"edges": [{"from": "in", "to": "out"}]}`, id)
	if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	env := []string{"REDIS_URL=" + storetest.URL()}
	var ws []*process
	for range 3 {
		w := start(t, env, "worker", path)
		w.waitLine(t, regexp.MustCompile(`msg="serving flow"`), 20*time.Second)
		ws = append(ws, w)
	}
	e := engine.New(r, registry(nil), engine.Options{})
	ctx := context.Background()
	ticks := func() map[int64][]string {
		runs, _, err := e.List(ctx, id, engine.ListQuery{Limit: 500})
		if err != nil {
			t.Fatal(err)
		}
		out := map[int64][]string{}
		for _, run := range runs {
			if run.Tick == nil || run.Trigger != "schedule:0" {
				t.Fatalf("run %s: trigger %q, tick %v", run.ID, run.Trigger, run.Tick)
			}
			out[run.Tick.UnixMilli()] = append(out[run.Tick.UnixMilli()], run.ID)
		}
		return out
	}
	waitUntil := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(60 * time.Second)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s", what)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	waitUntil("3 ticks", func() bool { return len(ticks()) >= 3 })
	ws[0].cmd.Process.Kill()
	<-ws[0].done
	before := len(ticks())
	waitUntil("3 more ticks after the kill", func() bool { return len(ticks()) >= before+3 })
	byTick := ticks()
	var ts []int64
	for tick := range byTick {
		ts = append(ts, tick)
	}
	sort.Slice(ts, func(i, j int) bool { return ts[i] < ts[j] })
	for i, tick := range ts {
		if i > 0 && tick-ts[i-1] != 1000 {
			t.Errorf("no run for the tick(s) between %d and %d", ts[i-1], tick)
		}
		if n := len(byTick[tick]); n != 1 {
			t.Errorf("tick %d has %d runs %v, want exactly 1", tick, n, byTick[tick])
		}
	}
	// Each run finishes: the workers that are left run them.
	for _, tick := range ts {
		wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		run, err := e.Wait(wctx, id, byTick[tick][0])
		cancel()
		if err != nil || run.Status != "succeeded" || string(run.Output()) != "1" {
			t.Errorf("run of tick %d: %+v, %v", tick, run, err)
		}
	}
	// The processes that started runs said so.
	started := 0
	for _, w := range ws {
		for _, l := range w.allLines() {
			if strings.Contains(l, `msg="schedule started a run"`) {
				started++
			}
		}
	}
	if started < len(ts)-3 { // the killed process's log may miss a few
		t.Errorf("%d log lines about started runs for %d ticks", started, len(ts))
	}
}

func TestImportLangflowCommand(t *testing.T) {
	dir := t.TempDir()
	fixture := func(name string) string {
		return filepath.Join("..", "..", "flows", "langflow", "testdata", name+".json")
	}
	out := filepath.Join(dir, "flow.json")
	cmd := exec.Command(binary, "import", "langflow", fixture("conditional_router"), "-o", out)
	msg, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("import: %v\n%s", err, msg)
	}
	if cmd := exec.Command(binary, "validate", out); cmd.Run() != nil {
		t.Errorf("the imported flow does not validate")
	}

	// Nodes without an equivalent: one line each, exit 1, nothing written.
	out2 := filepath.Join(dir, "gaps.json")
	cmd = exec.Command(binary, "import", "langflow", fixture("unmapped"), "-o", out2)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err = cmd.Run()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 {
		t.Fatalf("import of unmapped nodes: %v, want exit 1\n%s", err, stderr.String())
	}
	lines := regexp.MustCompile(`(?m)^(\S+) \((\w+)\): .+$`).FindAllStringSubmatch(stderr.String(), -1)
	if len(lines) != 3 {
		t.Errorf("want one line per unmapped node (3), got:\n%s", stderr.String())
	}
	if _, err := os.Stat(out2); err == nil {
		t.Error("a file was written despite the gaps")
	}
	// --partial writes placeholders that fail validation.
	cmd = exec.Command(binary, "import", "langflow", "--partial", fixture("unmapped"), "-o", out2)
	if msg, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("import --partial: %v\n%s", err, msg)
	}
	b, _ := os.ReadFile(out2)
	if !bytes.Contains(b, []byte(`"type": "langflow:AssemblyAITranscriptionJobPoller"`)) {
		t.Errorf("no placeholder in %s", b)
	}
	cmd = exec.Command(binary, "validate", out2)
	vout, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 || strings.Count(string(vout), "[unknown_type]") != 3 {
		t.Errorf("validate of the partial import: %v\n%s", err, vout)
	}
	// Not a Langflow export.
	cmd = exec.Command(binary, "import", "langflow", filepath.Join("..", "..", "flows", "examples", "linear.json"))
	if err := cmd.Run(); err == nil {
		t.Error("a Sluice flow was accepted as a Langflow export")
	}
}

// The CLI's import of a chain of text inputs fed by 4 identical edges each used to run
// for good (4^21 paths); it converts and validates.
func TestImportLangflowCommandConvertsAChainOfRepeatedEdges(t *testing.T) {
	dir := t.TempDir()
	in, out := filepath.Join(dir, "chain.json"), filepath.Join(dir, "flow.json")
	if err := os.WriteFile(in, langflowtest.Chain(22, 4, true), 0o644); err != nil {
		t.Fatal(err)
	}
	if msg, err := exec.Command(binary, "import", "langflow", in, "-o", out).CombinedOutput(); err != nil {
		t.Fatalf("import: %v\n%s", err, msg)
	}
	if msg, err := exec.Command(binary, "validate", out).CombinedOutput(); err != nil {
		t.Errorf("the imported chain does not validate: %v\n%s", err, msg)
	}
}

// A credential in an export is not printed, not written, and is reported, whether the
// flow converts fully or with placeholders (--partial), to a file or to standard output.
func TestImportLangflowCommandNeverCopiesACredential(t *testing.T) {
	const key = "sk-proj-Qwertyuiopasdfghjklz5678"
	dir := t.TempDir()
	for _, tc := range []struct {
		name     string
		unmapped bool
		args     []string
	}{
		// The API request's URL held the key: without it the flow does not validate,
		// and --partial writes it to be finished.
		{"full conversion, refused as invalid", false, []string{"-o", "flow.json"}},
		{"full conversion to a file", false, []string{"--partial", "-o", "flow.json"}},
		{"full conversion to standard output", false, []string{"--partial"}},
		{"partial conversion to a file", true, []string{"--partial", "-o", "flow.json"}},
		{"partial conversion to standard output", true, []string{"--partial"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sub := t.TempDir()
			in := filepath.Join(dir, fmt.Sprintf("export-%t.json", tc.unmapped))
			if err := os.WriteFile(in, langflowtest.Credentials(key, tc.unmapped), 0o644); err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command(binary, append([]string{"import", "langflow"}, append(tc.args, in)...)...)
			cmd.Dir = sub
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			err := cmd.Run()
			refused := tc.name == "full conversion, refused as invalid"
			if ee, ok := err.(*exec.ExitError); refused && (!ok || ee.ExitCode() != 1 || !strings.Contains(stderr.String(), `node "apirequest"`)) {
				t.Fatalf("import: %v, want exit 1 at the request's empty URL\n%s", err, stderr.String())
			} else if !refused && err != nil {
				t.Fatalf("import: %v\n%s", err, stderr.String())
			}
			file, _ := os.ReadFile(filepath.Join(sub, "flow.json"))
			for where, b := range map[string][]byte{"standard output": stdout.Bytes(), "standard error": stderr.Bytes(), "the file": file} {
				if bytes.Contains(bytes.ToLower(b), bytes.ToLower([]byte(key))) {
					t.Errorf("%s holds the key:\n%s", where, b)
				}
			}
			if !strings.Contains(stderr.String(), "note: Prompt-p (Prompt): field template holds what looks like a credential; it was not copied") {
				t.Errorf("the dropped key is not reported:\n%s", stderr.String())
			}
			if wrote := len(file)+stdout.Len() > 0; wrote == refused {
				t.Errorf("flow written: %t, refused: %t", wrote, refused)
			}
		})
	}
}

func TestVersionsRollbackAndSchedulesCommands(t *testing.T) {
	r := storetest.Real(t)
	dir := t.TempDir()
	id, path := writeExampleFlow(t, dir, "linear", func(d map[string]any) {
		d["settings"] = map[string]any{"schedules": []any{map[string]any{"cron": "0 6 * * *", "input": map[string]any{"name": "cron"}}}}
	})
	storetest.DeleteFlowKeys(t, r, id)
	env := append(os.Environ(), "REDIS_URL="+storetest.URL())
	e := engine.New(r, registry(nil), engine.Options{})
	ctx := context.Background()
	publish := func() *flows.Plan {
		b, _ := os.ReadFile(path)
		p, _, err := e.Compile(b)
		if err != nil {
			t.Fatal(err)
		}
		if err := e.Publish(ctx, p); err != nil {
			t.Fatal(err)
		}
		return p
	}
	v1 := publish()
	b, _ := os.ReadFile(path)
	os.WriteFile(path, bytes.Replace(b, []byte(`"Linear pipeline"`), []byte(`"Linear, renamed"`), 1), 0o644)
	v2 := publish()
	// A note on the canvas after v2: layout, so the rollback keeps it (issue 27).
	b, _ = os.ReadFile(path)
	os.WriteFile(path, bytes.Replace(b, []byte(`"nodes":`), []byte(`"notes": [{"id": "n1", "text": "Renamed on Friday."}], "nodes":`), 1), 0o644)
	sluice := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(binary, args...)
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("sluice %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	if out := sluice("versions", id); !strings.Contains(out, v2.Version[:12]+" (current)") || !strings.Contains(out, v1.Version[:12]) {
		t.Errorf("versions:\n%s", out)
	}
	if out := sluice("versions", id, v1.Version[:9], "current"); !strings.Contains(out, `flow name: "Linear pipeline" → "Linear, renamed"`) {
		t.Errorf("versions diff:\n%s", out)
	}
	if out := sluice("rollback", "--flows", dir, id, v1.Version[:9]); !strings.Contains(out, "is current") {
		t.Errorf("rollback:\n%s", out)
	}
	if got, _ := r.CurrentVersion(ctx, id); got != v1.Version {
		t.Errorf("current %.12s after rollback, want %.12s", got, v1.Version)
	}
	if b, _ := os.ReadFile(path); !bytes.Contains(b, []byte(`"Linear pipeline"`)) {
		t.Errorf("the file was not rolled back: %s", b)
	} else if !bytes.Contains(b, []byte("Renamed on Friday.")) {
		t.Errorf("the rollback dropped the note on the canvas: %s", b)
	}
	if out := sluice("schedules", id); !strings.Contains(out, "0 6 * * * (UTC)  on") || strings.Count(out, "next ") != 3 {
		t.Errorf("schedules:\n%s", out)
	}
	sluice("schedules", id, "pause", "0")
	if out := sluice("schedules", id); !strings.Contains(out, "paused") {
		t.Errorf("after pause:\n%s", out)
	}
	sluice("schedules", id, "resume", "0")
}
