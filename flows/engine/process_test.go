package engine_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sluicehq/sluice/flows/engine"
	"github.com/sluicehq/sluice/flows/nodes/nodetest"
	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/storetest"
)

// TestMain lets the test binary act as a worker process: with SLUICE_TEST_WORKER set it
// serves the flows named there from REDIS_URL until SIGTERM, logging to stderr.
func TestMain(m *testing.M) {
	if flowsEnv := os.Getenv("SLUICE_TEST_WORKER"); flowsEnv != "" {
		os.Exit(workerMain(strings.Split(flowsEnv, ",")))
	}
	if flowsEnv := os.Getenv("SLUICE_TEST_SCHEDULER"); flowsEnv != "" {
		os.Exit(schedulerMain(strings.Split(flowsEnv, ","))) // schedules_test.go
	}
	code := m.Run()
	storetest.StopShared()
	os.Exit(code)
}

func workerMain(flowIDs []string) int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	r, err := store.Open(ctx, store.Options{URL: os.Getenv("REDIS_URL")})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer r.Close()
	e := engine.New(r, nodetest.Registry(r.Client), engine.Options{Logger: log})
	log.Info("worker ready", "pid", os.Getpid())
	if err := e.NewWorker(engine.WorkerOptions{Flows: flowIDs, Block: 200 * time.Millisecond, Grace: 2 * time.Second}).Run(ctx); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// child is a worker process of this test binary.
type child struct {
	cmd *exec.Cmd
	mu  sync.Mutex
	out bytes.Buffer
}

func (c *child) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.out.Write(p)
}

func (c *child) log() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.out.String()
}

func startChild(t *testing.T, flows ...string) *child {
	t.Helper()
	c := &child{}
	c.cmd = exec.Command(os.Args[0], "-test.run=^$")
	c.cmd.Env = append(os.Environ(), "SLUICE_TEST_WORKER="+strings.Join(flows, ","), "REDIS_URL="+storetest.URL())
	c.cmd.Stderr = c
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(c.log(), "worker ready") {
		if time.Now().After(deadline) {
			t.Fatalf("worker process did not start:\n%s", c.log())
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Cleanup(func() {
		c.cmd.Process.Signal(syscall.SIGCONT)
		c.cmd.Process.Kill()
		c.cmd.Wait()
	})
	return c
}

func waitFor(t *testing.T, what string, d time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", d, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

const slowStep = `{"sluice": 1, "id": "FLOW",
 "settings": {"claim_after": "CLAIM", "max_attempts": 5},
 "nodes": [
  {"id": "in", "type": "input"},
  {"id": "slow", "type": "script", "params": {"sleep": "SLEEP"}},
  {"id": "after", "type": "script", "params": {"update": {"done": true}}},
  {"id": "out", "type": "output", "params": {"value": ".done"}}
 ],
 "edges": [{"from": "in", "to": "slow"}, {"from": "slow", "to": "after"}, {"from": "after", "to": "out"}]}`

func resultsOf(t *testing.T, r *store.Redis, flow, run string) int {
	t.Helper()
	ref, err := r.FindRun(context.Background(), flow, run)
	if err != nil {
		t.Fatal(err)
	}
	msgs, err := r.Client.XRange(context.Background(), store.PartKeys(flow, ref.Part).Results(), "-", "+").Result()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, m := range msgs {
		if m.Values["run"] == run {
			n++
		}
	}
	return n
}

func TestWorkerKilledMidStepAnotherWorkerFinishesTheRun(t *testing.T) {
	for _, k := range []storetest.Kind{storetest.KindReal, storetest.KindCluster} {
		t.Run(string(k), func(t *testing.T) { killedWorker(t, newEnv(t, storetest.Open(t, k)), storetest.URLOf(t, k)) })
	}
}

// killedWorker: a worker process killed (SIGKILL) mid-step; another worker's sweeper
// takes the step over and finishes the run.
func killedWorker(t *testing.T, v *env, url string) {
	r := v.r
	p := v.compile(strings.NewReplacer("CLAIM", "500ms", "SLEEP", "1s").Replace(slowStep))
	t.Setenv("REDIS_URL", url)
	a := startChild(t, p.Flow)
	id := v.start(p, `{}`)
	waitFor(t, "the slow step to start in the worker process", 10*time.Second, func() bool { return v.calls(p, id, "slow") == 1 })
	if err := a.cmd.Process.Kill(); err != nil { // SIGKILL mid-step
		t.Fatal(err)
	}
	a.cmd.Wait()
	v.work(p)
	run := v.wait(p, id)
	mustStatus(t, run, store.StatusSucceeded)
	if got := v.calls(p, id, "slow"); got != 2 {
		t.Errorf("slow ran %d times, want 2 (the killed attempt and the one that finished)", got)
	}
	if got := v.calls(p, id, "after"); got != 1 {
		t.Errorf("after ran %d times, want once", got)
	}
	if n := resultsOf(t, r, p.Flow, id); n != 1 {
		t.Errorf("%d results for the run, want exactly 1", n)
	}
	v.drained(p)
}

func TestPausedWorkersLateCommitIsRefused(t *testing.T) {
	for _, k := range []storetest.Kind{storetest.KindReal, storetest.KindCluster} {
		t.Run(string(k), func(t *testing.T) { pausedWorker(t, newEnv(t, storetest.Open(t, k)), storetest.URLOf(t, k)) })
	}
}

// pausedWorker: a worker process stopped (SIGSTOP) past claim_after while another
// finishes its step, then continued: its late commit is refused.
func pausedWorker(t *testing.T, v *env, url string) {
	r := v.r
	p := v.compile(strings.NewReplacer("CLAIM", "300ms", "SLEEP", "1s").Replace(slowStep))
	t.Setenv("REDIS_URL", url)
	a := startChild(t, p.Flow)
	id := v.start(p, `{}`)
	waitFor(t, "the slow step to start in the worker process", 10*time.Second, func() bool { return v.calls(p, id, "slow") == 1 })
	if err := a.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	v.work(p) // claims the step after claim_after and finishes the run
	run := v.wait(p, id)
	mustStatus(t, run, store.StatusSucceeded)
	if err := a.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the resumed worker to try its late commit", 10*time.Second, func() bool {
		return strings.Contains(a.log(), `msg="step result dropped"`) && strings.Contains(a.log(), "why=stale")
	})
	if got := v.calls(p, id, "after"); got != 1 {
		t.Errorf("after ran %d times, want once: the late commit must not add a second successor", got)
	}
	slow := 0
	for _, c := range v.checkpoints(p, id) {
		if c.Node == "slow" {
			slow++
		}
	}
	if slow != 1 {
		t.Errorf("%d checkpoints of slow, want 1", slow)
	}
	if n := resultsOf(t, r, p.Flow, id); n != 1 {
		t.Errorf("%d results for the run, want exactly 1", n)
	}
	v.drained(p)
}

func TestThreeWorkerProcessesShareAThousandRuns(t *testing.T) {
	r := storetest.Real(t)
	v := newEnv(t, r)
	p := v.compile(`{"sluice": 1, "id": "FLOW",
	 "nodes": [
	  {"id": "in", "type": "input"},
	  {"id": "a", "type": "script", "params": {"tally": true, "sleep": "1ms"}},
	  {"id": "b", "type": "transform", "params": {"expr": "{n: .n}"}},
	  {"id": "out", "type": "output", "params": {"value": ".n"}}
	 ],
	 "edges": [{"from": "in", "to": "a"}, {"from": "a", "to": "b"}, {"from": "b", "to": "out"}]}`)
	for i := 0; i < 3; i++ {
		startChild(t, p.Flow)
	}
	const n = 1000
	ids := make([]string, n)
	for i := range ids {
		ids[i] = v.start(p, fmt.Sprintf(`{"n": %d}`, i))
	}
	for i, id := range ids {
		run := v.wait(p, id)
		mustStatus(t, run, store.StatusSucceeded)
		if got := string(run.Output()); got != fmt.Sprint(i) {
			t.Fatalf("run %d output %s", i, got)
		}
	}
	msgs, err := r.Client.XRange(context.Background(), store.FlowKeys(p.Flow).Results(), "-", "+").Result()
	if err != nil {
		t.Fatal(err)
	}
	per := map[string]int{}
	for _, m := range msgs {
		per[m.Values["run"].(string)]++
	}
	for _, id := range ids {
		if per[id] != 1 {
			t.Fatalf("run %s has %d results, want exactly 1", id, per[id])
		}
	}
	tally, _ := r.Client.HGetAll(context.Background(), nodetest.TallyKey(p.Flow)).Result()
	if len(tally) != 3 {
		t.Errorf("steps of node a ran in %d processes (%v), want all 3", len(tally), tally)
	}
	v.drained(p)
}

const threeSteps = `{"sluice": 1, "id": "FLOW",
 "settings": {"claim_after": "500ms", "max_attempts": 5},
 "nodes": [
  {"id": "in", "type": "input"},
  {"id": "a", "type": "script", "params": {}},
  {"id": "b", "type": "script", "params": {"sleep": "1s"}},
  {"id": "c", "type": "script", "params": {"update": {"done": true}}},
  {"id": "out", "type": "output", "params": {"value": ".done"}}
 ],
 "edges": [{"from": "in", "to": "a"}, {"from": "a", "to": "b"}, {"from": "b", "to": "c"}, {"from": "c", "to": "out"}]}`

func TestRunResumesAfterEveryWorkerIsKilledWithoutRedoingCommittedSteps(t *testing.T) {
	r := storetest.Real(t)
	v := newEnv(t, r)
	p := v.compile(threeSteps)
	w1, w2 := startChild(t, p.Flow), startChild(t, p.Flow)
	id := v.start(p, `{}`)
	waitFor(t, "step b to start", 10*time.Second, func() bool { return v.calls(p, id, "b") == 1 })
	for _, w := range []*child{w1, w2} {
		w.cmd.Process.Kill()
		w.cmd.Wait()
	}
	if run, _ := v.e.Get(context.Background(), p.Flow, id); run.Status != store.StatusRunning {
		t.Fatalf("after the crash the run is %s, want running", run.Status)
	}
	startChild(t, p.Flow) // everything restarts
	run := v.wait(p, id)
	mustStatus(t, run, store.StatusSucceeded)
	if a := v.calls(p, id, "a"); a != 1 {
		t.Errorf("a ran %d times, want once: it had committed before the crash", a)
	}
	if c := v.calls(p, id, "c"); c != 1 {
		t.Errorf("c ran %d times, want once", c)
	}
	v.drained(p)
}

func TestWaitingRunSurvivesRestartsAndContinuesOnItsOwnVersion(t *testing.T) {
	r := storetest.Real(t)
	v := newEnv(t, r)
	p := v.compile(strings.Replace(approvalFlow, "TIMEOUT", "", 1))
	w := startChild(t, p.Flow)
	id := v.start(p, `{"customer": "Ada"}`)
	mustStatus(t, v.wait(p, id), store.StatusWaiting)
	w.cmd.Process.Kill()
	w.cmd.Wait()

	// A new version of the flow is published meanwhile: "send" now shouts.
	newer, _, err := v.e.Compile([]byte(strings.Replace(strings.ReplaceAll(strings.Replace(approvalFlow, "TIMEOUT", "", 1), `"FLOW"`, `"`+p.Flow+`"`),
		`{sent: .reply}`, `{sent: (.reply | ascii_upcase)}`, 1)))
	if err != nil {
		t.Fatal(err)
	}
	if err := v.e.Publish(context.Background(), newer); err != nil {
		t.Fatal(err)
	}
	if err := v.e.Resume(context.Background(), p.Flow, id, "", json.RawMessage(`{"decision": "approve"}`)); err != nil {
		t.Fatal(err)
	}
	startChild(t, p.Flow) // a fresh process: it loads the run's version from Redis
	run := v.wait(p, id)
	mustStatus(t, run, store.StatusSucceeded)
	if got := string(run.Output()); got != `{"approval":{"decision":"approve"},"sent":"Dear Ada"}` {
		t.Errorf("output %s: the run must finish on the version it started with", got)
	}
	if run.Version != p.Version {
		t.Errorf("run version %.12s, want %.12s", run.Version, p.Version)
	}
	// A new run takes the new version.
	id2, err := v.e.Start(context.Background(), newer, json.RawMessage(`{"customer": "Bo"}`), engine.StartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	mustStatus(t, v.wait(p, id2), store.StatusWaiting)
	v.e.Resume(context.Background(), p.Flow, id2, "", json.RawMessage(`{"decision": "approve"}`))
	if got := string(v.wait(p, id2).Output()); got != `{"approval":{"decision":"approve"},"sent":"DEAR BO"}` {
		t.Errorf("new run on the new version: %s", got)
	}
}
