package main

import (
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/flows/engine"
	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/storetest"
)

// A headless worker serves its own metrics, health and readiness on --metrics-addr: the
// steps it runs, the queues of every flow, its state cache.
func TestWorkerServesMetricsOnItsOwnPort(t *testing.T) {
	r := storetest.Real(t)
	id := storetest.FlowID(t)
	storetest.DeleteFlowKeys(t, r, id)
	dir := t.TempDir()
	flowFile := filepath.Join(dir, id+".json")
	os.WriteFile(flowFile, []byte(`{"sluice": 1, "id": "`+id+`", "nodes": [{"id": "in", "type": "input"}, {"id": "greet", "type": "transform", "params": {"expr": "{greeting: (\"hi \" + .name)}"}},
	 {"id": "out", "type": "output", "params": {"value": ".greeting"}}], "edges": [{"from": "in", "to": "greet"}, {"from": "greet", "to": "out"}]}`), 0o644)
	env := []string{"REDIS_URL=" + storetest.URL(), "SLUICE_TOKEN=metrics-test-token"}
	w := start(t, env, "worker", "--metrics-addr", "127.0.0.1:0", flowFile)
	url := w.waitLine(t, regexp.MustCompile(`msg="serving metrics" url=(http://\S+)/metrics`), 30*time.Second)[1]
	get := func(path string) (int, string) {
		t.Helper()
		res, err := http.Get(url + path)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b)
	}
	waitUntil(t, "the worker to be ready", 30*time.Second, func() bool { st, _ := get("/readyz"); return st == http.StatusOK })
	if st, b := get("/healthz"); st != http.StatusOK || !strings.Contains(b, `"ok"`) {
		t.Errorf("/healthz: %d %s", st, b)
	}
	srv := start(t, env, "serve", "--addr", "127.0.0.1:0", "--flows", dir, "--workers", "0")
	api := &apiClient{t: t, base: srv.waitLine(t, servingLine, 30*time.Second)[1], token: "metrics-test-token"}
	if st, b := api.json("POST", "/api/flows/"+id+"/runs?wait=30s", map[string]any{"input": map[string]any{"name": "Ada"}}); st != 200 || !strings.Contains(string(b), `"`+store.StatusSucceeded+`"`) {
		t.Fatalf("run: %d %s", st, b)
	}
	// The worker counts a step when its commit's reply comes back, which may be a moment
	// after the run's waiter saw the run finish.
	steps := `sluice_steps_total{flow="` + id + `",node="greet"} 1`
	waitUntil(t, "the worker to count the run's steps", 30*time.Second, func() bool { _, m := get("/metrics"); return strings.Contains(m, steps) })
	_, m := get("/metrics")
	for _, want := range []string{
		`sluice_steps_total{flow="` + id + `",node="greet"} 1`,
		`sluice_step_duration_seconds_count{component="transform",flow="` + id + `",node="greet"} 1`,
		`sluice_queue_lag{flow="` + id + `",node="greet"} 0`,
		"sluice_state_cache_bytes", "sluice_commit_duration_seconds_count", "sluice_redis_up 1",
	} {
		if !strings.Contains(m, want) {
			t.Errorf("the worker's /metrics lacks %s", want)
		}
	}
}

// A worker's scheduler counts the runs it starts on the worker's own /metrics, as serve's does.
func TestWorkerCountsTheRunsItsSchedulerStarts(t *testing.T) {
	r := storetest.Real(t)
	id := storetest.FlowID(t)
	storetest.DeleteFlowKeys(t, r, id)
	flowFile := filepath.Join(t.TempDir(), id+".json")
	os.WriteFile(flowFile, []byte(`{"sluice": 1, "id": "`+id+`", "settings": {"schedules": [{"cron": "@every 1s"}]},
	 "nodes": [{"id": "in", "type": "input"}, {"id": "out", "type": "output"}], "edges": [{"from": "in", "to": "out"}]}`), 0o644)
	w := start(t, []string{"REDIS_URL=" + storetest.URL()}, "worker", "--metrics-addr", "127.0.0.1:0", flowFile)
	url := w.waitLine(t, regexp.MustCompile(`msg="serving metrics" url=(http://\S+)/metrics`), 30*time.Second)[1]
	counted := regexp.MustCompile(`(?m)^sluice_schedule_runs_total\{flow="` + regexp.QuoteMeta(id) + `"\} (\d+)$`)
	started := func() int {
		t.Helper()
		res, err := http.Get(url + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		m := counted.FindSubmatch(b)
		if m == nil {
			return 0
		}
		n, _ := strconv.Atoi(string(m[1]))
		return n
	}
	waitUntil(t, "the worker to count two scheduled runs", 30*time.Second, func() bool { return started() >= 2 })
	// The worker is the only scheduler: every run it counted is a run of the flow.
	n := started()
	runs, _, err := engine.New(r, registry(nil), engine.Options{}).List(context.Background(), id, engine.ListQuery{Trigger: "schedule", Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	if n > len(runs) {
		t.Errorf("the worker counted %d scheduled runs; the flow has %d", n, len(runs))
	}
}

// Runs are counted by the process whose dispatcher takes their results, so a worker that
// dispatches without a metrics port says at start that the runs it takes go uncounted;
// one that does not dispatch has nothing to warn about.
func TestAWorkerDispatchingWithoutAMetricsPortWarnsThatItsRunsGoUncounted(t *testing.T) {
	r := storetest.Real(t)
	id := storetest.FlowID(t)
	storetest.DeleteFlowKeys(t, r, id)
	flowFile := filepath.Join(t.TempDir(), id+".json")
	os.WriteFile(flowFile, []byte(`{"sluice": 1, "id": "`+id+`", "nodes": [{"id": "in", "type": "input"}, {"id": "out", "type": "output"}], "edges": [{"from": "in", "to": "out"}]}`), 0o644)
	env := []string{"REDIS_URL=" + storetest.URL()}
	warning := "without --metrics-addr: the runs it takes are missing from sluice_runs_finished_total"
	for _, c := range []struct {
		args []string
		warn bool
	}{
		{[]string{"worker", flowFile}, true},
		{[]string{"worker", "--dispatch=false", flowFile}, false},
		{[]string{"worker", "--metrics-addr", "127.0.0.1:0", flowFile}, false},
	} {
		w := start(t, env, c.args...)
		w.waitLine(t, regexp.MustCompile(`msg="serving flow"`), 30*time.Second)
		if got := strings.Contains(strings.Join(w.allLines(), "\n"), warning); got != c.warn {
			t.Errorf("%v: warned %v, want %v:\n%s", c.args, got, c.warn, strings.Join(w.allLines(), "\n"))
		}
		w.cmd.Process.Kill()
		<-w.done
	}
}
