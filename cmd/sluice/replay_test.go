package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/sluicehq/sluice/flows/engine"
	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/storetest"
)

func discountFile(id, expr string) string {
	return `{"sluice": 1, "id": "` + id + `", "settings": {"claim_after": "1s"},
	 "nodes": [{"id": "in", "type": "input"},
	  {"id": "price", "type": "transform", "params": {"expr": "` + expr + `"}},
	  {"id": "out", "type": "output", "params": {"value": "{tier, discount}"}}],
	 "edges": [{"from": "in", "to": "price"}, {"from": "price", "to": "out"}]}`
}

var jobLine = regexp.MustCompile(`bulk replay job (\S+)`)

// A bulk replay after a fix — `sluice replay FLOW --status failed --since 1h --version
// current --yes` — with a worker SIGKILLed twice while it goes on (and, at full size,
// the replay command itself, taken over by another): every run is accounted for once in
// the report and none is replayed twice. make test replays 60 runs; SLUICE_FAULTS=full
// (make test-faults) 1,000.
func TestFaultBulkReplayOfFailedRunsWithWorkersKilled(t *testing.T) {
	n := 60
	if os.Getenv("SLUICE_FAULTS") == "full" {
		n = 1000
	}
	rdb := storetest.Real(t)
	id := storetest.FlowID(t)
	storetest.DeleteFlowKeys(t, rdb, id)
	dir := t.TempDir()
	path := filepath.Join(dir, id+".json")
	if err := os.WriteFile(path, []byte(discountFile(id, `{tier: \"small\", discount: (.customer | tonumber)}`)), 0o644); err != nil {
		t.Fatal(err)
	}
	env := []string{"REDIS_URL=" + storetest.URL()}
	serving := regexp.MustCompile(`msg="serving flow"`)
	worker := func() *process {
		w := start(t, env, "worker", "--grace", "1s", path)
		w.waitLine(t, serving, 20*time.Second)
		return w
	}
	w1, w2 := worker(), worker()

	ctx := context.Background()
	e := engine.New(rdb, registry(nil), engine.Options{})
	broken, err := e.CurrentPlan(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	runs := make([]string, n)
	for i := range runs {
		if runs[i], err = e.Start(ctx, broken, []byte(fmt.Sprintf(`{"customer": "c%d", "amount": %d}`, i, 10*i)), engine.StartOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, r := range runs {
		wctx, cancel := context.WithTimeout(ctx, 60*time.Second)
		got, err := e.Wait(wctx, id, r)
		cancel()
		if err != nil || got.Status != store.StatusFailed {
			t.Fatalf("run %s: %v %v, want failed", r, got, err)
		}
	}
	// The fix, made current (as saving it in the editor does).
	fixed, probs, err := e.Compile([]byte(discountFile(id, `{tier: \"small\", discount: (.amount / 10)}`)))
	if err != nil {
		t.Fatal(err, probs)
	}
	if err := e.Publish(ctx, fixed); err != nil {
		t.Fatal(err)
	}

	args := []string{"replay", id, "--status", "failed", "--since", "1h", "--version", "current", "--yes", "--rate", "500", "--concurrency", "16"}
	p := start(t, env, args...)
	job := p.waitLine(t, jobLine, 60*time.Second)[1]
	progress := func() int {
		rep, err := e.BulkReport(ctx, id, job)
		if err != nil {
			t.Fatal(err)
		}
		return len(rep.Results)
	}
	waitProgress := func(k int) {
		deadline := time.Now().Add(5 * time.Minute)
		for progress() < k {
			if time.Now().After(deadline) {
				t.Fatalf("bulk replay stuck at %d of %d", progress(), n)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	waitProgress(n / 4)
	w1.cmd.Process.Kill() // SIGKILL
	<-w1.done
	w3 := worker()
	waitProgress(n / 2)
	w2.cmd.Process.Kill()
	<-w2.done
	worker()
	if os.Getenv("SLUICE_FAULTS") == "full" {
		// The replay command dies too; another takes the job over once its lease lapses.
		waitProgress(3 * n / 4)
		p.cmd.Process.Kill()
		<-p.done
		p = start(t, env, "replay", id, "--job", job)
	}
	_ = w3
	select {
	case err := <-p.done:
		if err != nil {
			t.Fatalf("sluice replay: %v\n%v", err, p.allLines())
		}
	case <-time.After(10 * time.Minute):
		t.Fatal("sluice replay did not finish")
	}

	rep, err := e.BulkReport(ctx, id, job)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Status != store.JobDone || rep.Total != n || rep.Done != n || len(rep.Results) != n {
		t.Fatalf("report: %s, total %d, done %d, failed %d, skipped %d, %d results; want all %d done", rep.Status, rep.Total, rep.Done, rep.Failed, rep.Skipped, len(rep.Results), n)
	}
	seen := map[string]bool{}
	for _, res := range rep.Results {
		if seen[res.Run] {
			t.Errorf("run %s twice in the report", res.Run)
		}
		seen[res.Run] = true
		if res.Summary != "1 same, 1 fixed, 1 new" {
			t.Errorf("result %+v, want 1 same, 1 fixed, 1 new", res)
		}
	}
	for _, r := range runs {
		if !seen[r] {
			t.Errorf("run %s missing from the report", r)
		}
		o, err := e.Get(ctx, id, r)
		if err != nil || len(o.ReplayedAs) != 1 {
			t.Errorf("run %s replayed as %v (%v), want once", r, o.ReplayedAs, err)
		}
	}
	// No replay run beyond one per original.
	replays, err := e.SelectRuns(ctx, id, engine.BulkQuery{Trigger: "replay"})
	if err != nil {
		t.Fatal(err)
	}
	if len(replays) != n {
		t.Errorf("%d replay runs of %d originals, want one each", len(replays), n)
	}
	t.Logf("bulk replay of %d failed runs, 2 workers SIGKILLed: %d done, each once", n, rep.Done)
}
