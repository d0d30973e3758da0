package engine_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/sluicehq/sluice/flows"
	"github.com/sluicehq/sluice/flows/engine"
	"github.com/sluicehq/sluice/flows/examples"
	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/storetest"
)

// unstored compiles an example flow under a flow id of its own without storing it:
// its first run stores its version, as `sluice test` and `sluice run` do.
func (v *env) unstored(name string) *flows.Plan {
	v.t.Helper()
	b, err := examples.Read(name)
	if err != nil {
		v.t.Fatal(err)
	}
	var d map[string]any
	_ = json.Unmarshal(b, &d)
	d["id"] = storetest.FlowID(v.t)
	b, _ = json.Marshal(d)
	p, probs, err := v.e.Compile(b)
	if err != nil {
		v.t.Fatalf("compile: %v\n%v", err, probs)
	}
	storetest.DeleteFlowKeys(v.t, v.r, p.Flow)
	return p
}

// worker runs a worker with opts until the test ends.
func (v *env) worker(opts engine.WorkerOptions) {
	v.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	w := v.e.NewWorker(opts)
	go func() { done <- w.Run(ctx) }()
	v.t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			v.t.Error("worker did not stop within 10s")
		}
	})
}

// until waits for cond, checking every few milliseconds, for at most 20s.
func until(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("still not true after 20s: %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// A wait must be woken by its run's events, whatever partition the run is on. The
// watcher's blocking read covers the partitions that had waiters when it began; a wait
// on another one (on a Redis Cluster a flow's runs are spread over 16 partitions or
// more, so nearly every wait) woke only when that read ended. Here the read and the
// waiter's own safety reads are an hour apart: only the run's event can wake the wait.
func TestAWaitOnAPartitionTheWatcherIsNotReadingIsWokenByItsRunsEvent(t *testing.T) {
	storetest.Conformance(t, func(t *testing.T, r *store.Redis) {
		v := newEnv(t, r)
		engine.SetWatchTicks(v.e, time.Hour, time.Hour)
		idle := v.example("linear") // no worker: its run stays queued, its waiter waits
		fast := v.example("linear")
		idleRun := v.start(idle, `{"name": "Ada"}`)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		go func() { _, _ = v.e.Wait(ctx, idle.Flow, idleRun) }()
		until(t, "the watcher reads the idle flow's events", func() bool { return engine.WatchReads(v.e, idle.Flow) })

		run := v.start(fast, `{"name": "Ada"}`) // queued until the worker below starts
		got := make(chan *store.Run, 1)
		go func() {
			wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
			defer cancel()
			r, err := v.e.Wait(wctx, fast.Flow, run)
			if err != nil {
				t.Errorf("wait: %v (last seen %+v)", err, r)
			}
			got <- r
		}()
		until(t, "the wait is registered", func() bool { return engine.Waiting(v.e, fast.Flow, run) })
		v.work(fast)
		if r := <-got; r != nil {
			mustStatus(t, r, store.StatusSucceeded)
		}
	})
}

// A worker reads a flow's streams from the moment this process stores the flow's first
// version, not from its next refresh: `sluice test` and `sluice run` start their worker
// before the first run stores the version, and every first case waited for the
// refresh (2 s). The refresh here is an hour away.
func TestAWorkerRunsAFlowItsProcessStoresWithoutWaitingForItsRefresh(t *testing.T) {
	storetest.Conformance(t, func(t *testing.T, r *store.Redis) {
		v := newEnv(t, r)
		p := v.unstored("linear")
		v.worker(engine.WorkerOptions{Flows: []string{p.Flow}, Refresh: time.Hour, Block: 200 * time.Millisecond, Grace: 2 * time.Second})
		mustStatus(t, v.run(p, `{"name": "Ada"}`), store.StatusSucceeded)
	})
}
