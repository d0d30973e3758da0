package engine_test

import (
	"context"
	"encoding/json"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/flows"
	"github.com/sluicehq/sluice/flows/engine"
	"github.com/sluicehq/sluice/flows/examples"
	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/storetest"
)

// unstored compiles an example flow under a flow id of its own without storing it:
// its first run stores its version, as `sluice test` and `sluice run` do. A partition
// count, if given, is the flow's settings.partitions.
func (v *env) unstored(name string, partitions ...int) *flows.Plan {
	v.t.Helper()
	b, err := examples.Read(name)
	if err != nil {
		v.t.Fatal(err)
	}
	var d map[string]any
	_ = json.Unmarshal(b, &d)
	d["id"] = storetest.FlowID(v.t)
	if len(partitions) > 0 {
		set, _ := d["settings"].(map[string]any)
		if set == nil {
			set = map[string]any{}
		}
		set["partitions"] = partitions[0]
		d["settings"] = set
	}
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

// A worker's loads of a flow can overlap: the one it begins with, and the one this
// process asks for when it stores the flow's version and places its first run. The first
// read the flow before it had a partition, so it read partition 0; ending last, it put
// the worker back on partition 0 while the run waited on partition 3, queued until the
// next refresh (an hour here; on a cluster, where flows have many partitions, about one
// run in a few hundred of the test above). A load that began before the last one applied
// is not applied.
func TestALoadThatReadTheFlowFirstButEndsLastDoesNotUndoANewerOne(t *testing.T) {
	storetest.Conformance(t, func(t *testing.T, r *store.Redis) {
		v := newEnv(t, r)
		p := v.unstored("linear", 4)
		first, release := make(chan struct{}), make(chan struct{})
		var reads atomic.Int32
		var firstDone, laterDone atomic.Bool
		w := v.e.NewWorker(engine.WorkerOptions{Flows: []string{p.Flow}, Refresh: time.Hour, Block: 200 * time.Millisecond, Grace: 2 * time.Second})
		engine.SetLoadHook(w, func(flow, stage string, ticket uint64) {
			if flow != p.Flow {
				return
			}
			if stage == "done" {
				if ticket == 1 {
					firstDone.Store(true)
				} else {
					laterDone.Store(true)
				}
				return
			}
			if reads.Add(1) == 1 {
				close(first)
				<-release // the worker's first load, which read the flow before it had a version
			}
		})
		ctx, cancel := context.WithCancel(context.Background())
		stopped := make(chan error, 1)
		go func() { stopped <- w.Run(ctx) }()
		defer func() { cancel(); <-stopped }()
		releaseFirst := sync.OnceFunc(func() { close(release) })
		defer releaseFirst()

		<-first
		run := v.start(p, `{"name": "Ada"}`)
		got, err := v.e.Get(context.Background(), p.Flow, run)
		if err != nil {
			t.Fatal(err)
		}
		if got.Part == 0 {
			t.Fatalf("run %s is on partition 0: the test needs it elsewhere", run)
		}
		// The start's loads (one when it stores the version, another when it places the
		// run, if the first read the flow before that) end with the run's partition read.
		until(t, "a load the start asked for has applied the run's partition", func() bool {
			return laterDone.Load() && slices.Contains(engine.ServedParts(w, p.Flow), got.Part)
		})
		releaseFirst()
		until(t, "the first load has ended", firstDone.Load)
		if parts := engine.ServedParts(w, p.Flow); !slices.Contains(parts, got.Part) {
			t.Fatalf("the worker reads partitions %v of the flow, not %d, where its run waits", parts, got.Part)
		}
		mustStatus(t, v.wait(p, run), store.StatusSucceeded)
	})
}

// On a Redis Cluster, whose XREAD takes the streams of one slot only, the run watcher
// reads each hash tag's partitions with a blocking read of their own: one read of the
// partitions of several slots could only poll them, waking waiters up to 100 ms late.
// The runs of a flow of four partitions are waited on at once; every read the watcher
// makes covers one tag, and every wait is woken by its run's event (the reads and the
// waiters' own safety reads are an hour apart).
func TestOnAClusterTheRunWatcherBlocksOnEachSlotApart(t *testing.T) {
	r, err := store.Open(context.Background(), store.Options{URL: storetest.SharedCluster(t).URL()})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	v := newEnv(t, r)
	engine.SetWatchTicks(v.e, time.Hour, time.Hour)
	reads := engine.RecordWatchReads(v.e)
	p := v.unstored("linear", 4)
	var runs []string
	tags := map[string]bool{}
	for len(tags) < 2 {
		id := v.start(p, `{"name": "Ada"}`)
		runs = append(runs, id)
		ref, err := r.FindRun(context.Background(), p.Flow, id)
		if err != nil {
			t.Fatal(err)
		}
		tags[store.PartRef{Flow: p.Flow, Part: ref.Part}.Tag()] = true
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	got := make(chan *store.Run, len(runs))
	for _, id := range runs {
		go func() {
			r, err := v.e.Wait(ctx, p.Flow, id)
			if err != nil {
				t.Errorf("wait for %s: %v (last seen %+v)", id, err, r)
			}
			got <- r
		}()
	}
	for _, id := range runs {
		until(t, "the wait for "+id+" is registered", func() bool { return engine.Waiting(v.e, p.Flow, id) })
	}
	read := map[string]bool{}
	until(t, "the watcher reads every waited-on tag", func() bool {
		for _, parts := range reads() {
			for _, pr := range parts {
				read[pr.Tag()] = true
			}
		}
		return len(read) >= len(tags)
	})
	v.work(p)
	for range runs {
		if r := <-got; r != nil {
			mustStatus(t, r, store.StatusSucceeded)
		}
	}
	for _, parts := range reads() {
		for _, pr := range parts[1:] {
			if pr.Tag() != parts[0].Tag() {
				t.Fatalf("one read of the watcher covers the partitions of two slots (%v): a cluster can only poll them", parts)
			}
		}
	}
}
