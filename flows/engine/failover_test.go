package engine_test

import (
	"context"
	"encoding/json"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/flows"
	"github.com/sluicehq/sluice/flows/engine"
	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/storetest"
)

const failoverFlow = `{"sluice": 1, "id": "FLOW", "settings": {"claim_after": "1s", "max_attempts": 10},
 "nodes": [{"id": "in", "type": "input"},
  {"id": "a", "type": "transform", "params": {"expr": "{n: (.n + 1)}"}},
  {"id": "b", "type": "transform", "params": {"expr": "{n: (.n * 2)}"}},
  {"id": "out", "type": "output", "params": {"value": "{n}"}}],
 "edges": [{"from": "in", "to": "a"}, {"from": "a", "to": "b"}, {"from": "b", "to": "out"}]}`

// failoverOutcome is what became of the runs a failover test started.
type failoverOutcome struct {
	promised, refused    int // starts that returned a run id, and that returned an error
	succeeded, vanished  int // promised runs that finished, and that Redis no longer has
	stuck                []string
	promotedIn, settleIn time.Duration
}

// underFailover starts runs of a small flow from four callers while a worker runs them,
// calls kill (a master killed with SIGKILL, returning once a replica took over) after a
// third of them, and waits until every run that was promised (its start returned an id)
// has finished or is gone.
func underFailover(t *testing.T, url string, runs int, kill func()) failoverOutcome {
	ctx := context.Background()
	r, err := store.Open(ctx, store.Options{URL: url})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	v := newEnv(t, r)
	p := v.compile(failoverFlow)
	v.work(p)

	var out failoverOutcome
	var mu sync.Mutex
	var ids []string
	var started atomic.Int64
	killAt := int64(runs / 3)
	killed := make(chan struct{})
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for started.Add(1) <= int64(runs) {
				sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
				id, err := v.e.Start(sctx, p, json.RawMessage(`{"n": 1}`), engine.StartOptions{})
				cancel()
				mu.Lock()
				n := 0 // the count of promised starts this one made, if it made one
				if err != nil {
					out.refused++
				} else {
					out.promised++
					n = out.promised
					ids = append(ids, id)
				}
				mu.Unlock()
				if int64(n) == killAt {
					close(killed)
				}
			}
		}()
	}
	<-killed
	t0 := time.Now()
	kill()
	out.promotedIn = time.Since(t0)
	wg.Wait()
	// After the failover, callers and workers reach the new master.
	var after string
	var lastErr error
	deadline := time.Now().Add(20 * time.Second)
	for {
		id, err := v.e.Start(ctx, p, json.RawMessage(`{"n": 1}`), engine.StartOptions{})
		if err == nil {
			after = id
			break
		}
		if lastErr = err; time.Now().After(deadline) {
			t.Fatalf("no run could start on the new master: %v", lastErr)
		}
		time.Sleep(50 * time.Millisecond)
	}
	ids = append(ids, after)
	out.promised++

	t0 = time.Now()
	pending := map[string]bool{}
	for _, id := range ids {
		pending[id] = true
	}
	deadline = time.Now().Add(90 * time.Second)
	for len(pending) > 0 && time.Now().Before(deadline) {
		for id := range pending {
			run, err := v.e.Get(ctx, p.Flow, id)
			switch {
			case flows.ErrorCode(err) == flows.NotFound:
				out.vanished++
				delete(pending, id)
			case err != nil:
			case run.Status == store.StatusSucceeded:
				if got := string(run.Output()); got != `{"n":4}` {
					t.Errorf("run %s: output %s, want {\"n\":4}", id, got)
				}
				out.succeeded++
				delete(pending, id)
			case store.Finished(run.Status):
				t.Errorf("run %s ended %s: %s", id, run.Status, run.Error)
				delete(pending, id)
			}
		}
		if len(pending) > 0 {
			time.Sleep(100 * time.Millisecond)
		}
	}
	out.settleIn = time.Since(t0)
	for id := range pending {
		out.stuck = append(out.stuck, id)
	}
	t.Logf("%s: %d runs promised, %d starts refused during the failover; %d succeeded, %d vanished, %d stuck; replica promoted in %s, every run settled %s later",
		url, out.promised, out.refused, out.succeeded, out.vanished, len(out.stuck), out.promotedIn.Round(time.Millisecond), out.settleIn.Round(time.Millisecond))
	return out
}

// A master killed under load: its replica takes over, the workers follow, and every run
// finishes. With wait_replicas=1 a start is answered only once a replica has it, so no
// run the caller was given can vanish; without it the figure is what asynchronous
// replication lost in this run (see docs/reliability.md).
func TestClusterFailoverUnderLoadFinishesEveryRun(t *testing.T) {
	c := storetest.StartCluster(t)
	var victim string
	for _, mode := range []struct {
		name  string
		query string
	}{{"async", ""}, {"wait-replicas", "?wait_replicas=1&wait_timeout=500ms"}} {
		t.Run(mode.name, func(t *testing.T) {
			victim = c.Masters()[0]
			out := underFailover(t, c.URL()+mode.query, 300, func() { c.KillMaster(victim) })
			if len(out.stuck) > 0 {
				t.Errorf("%d runs never finished: %v", len(out.stuck), out.stuck)
			}
			if mode.query != "" && out.vanished > 0 {
				t.Errorf("%d runs vanished although their starts waited for a replica", out.vanished)
			}
			if out.succeeded == 0 {
				t.Errorf("no run finished")
			}
		})
		// The killed node comes back as a replica: the next mode has a healthy cluster.
		c.Restart(victim)
	}
}

// Sentinel: the master killed under load, the sentinels promote its replica, and the
// workers and callers follow the new master; every promised run finishes.
func TestSentinelFailoverUnderLoadFinishesEveryRun(t *testing.T) {
	s := storetest.StartSentinel(t)
	// Asynchronous replication: with its only replica promoted, the new master has none,
	// and wait_replicas=1 would refuse every start until the old master is back.
	out := underFailover(t, s.URL(), 200, func() { s.KillMaster() })
	if len(out.stuck) > 0 {
		t.Errorf("%d runs never finished: %v", len(out.stuck), out.stuck)
	}
	if out.succeeded == 0 {
		t.Errorf("no run finished")
	}
}
