package engine_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/flows"
	"github.com/sluicehq/sluice/flows/engine"
	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/storetest"
)

// A flow whose partition count changes while runs wait keeps every run: each finishes
// where it started, and listings, counts and lookups see all of them.
func TestChangingPartitionsLosesNoRunInFlight(t *testing.T) {
	storetest.Each(t, func(t *testing.T, r *store.Redis) {
		v := newEnv(t, r)
		ctx := context.Background()
		doc := strings.Replace(approvalFlow, "TIMEOUT", "", 1)
		one := v.compile(doc)
		v.work(one)
		withParts := func(n int) *flows.Plan {
			d := strings.Replace(doc, `"id": "FLOW"`, `"id": "`+one.Flow+`"`, 1)
			d = strings.Replace(d, `"settings": {`, fmt.Sprintf(`"settings": {"partitions": %d, `, n), 1)
			p, probs, err := v.e.Compile([]byte(d))
			if err != nil {
				t.Fatalf("compile: %v %v", err, probs)
			}
			if err := v.e.Publish(ctx, p); err != nil {
				t.Fatal(err)
			}
			return p
		}
		waiting := func(p *flows.Plan, n int) map[string]int {
			runs := map[string]int{}
			for i := range n {
				id := v.start(p, fmt.Sprintf(`{"customer": "c%d"}`, i))
				run := v.wait(p, id)
				mustStatus(t, run, store.StatusWaiting)
				runs[id] = run.Part
			}
			return runs
		}
		all := waiting(one, 3)
		for id, part := range all {
			if part != 0 {
				t.Errorf("run %s of one partition is on partition %d, want 0", id, part)
			}
		}
		four := withParts(4)
		seen := map[int]bool{}
		for id, part := range waiting(four, 12) {
			if part < 1 || part > 4 {
				t.Errorf("run %s of four partitions is on partition %d", id, part)
			}
			seen[part] = true
			all[id] = part
		}
		if len(seen) < 2 {
			t.Errorf("12 runs over 4 partitions used only %v", seen)
		}
		two := withParts(2)
		for id, part := range waiting(two, 4) {
			all[id] = part
		}

		list, total, err := v.e.List(ctx, one.Flow, engine.ListQuery{Limit: 100})
		if err != nil || total != int64(len(all)) || len(list) != len(all) {
			t.Fatalf("listing: %d runs, total %d, %v; want %d", len(list), total, err, len(all))
		}
		for id, part := range all {
			got, err := v.e.Get(ctx, one.Flow, id)
			if err != nil || got.Part != part {
				t.Fatalf("run %s: %+v %v, want it on partition %d", id, got, err, part)
			}
			if err := v.e.Resume(ctx, one.Flow, id, "", json.RawMessage(`{"decision": "approve"}`)); err != nil {
				t.Fatalf("resume %s: %v", id, err)
			}
		}
		for id := range all {
			mustStatus(t, v.wait(one, id), store.StatusSucceeded)
		}
		evs, err := r.EventsAfter(ctx, one.Flow, "0-0", 10000)
		if err != nil {
			t.Fatal(err)
		}
		done := map[string]bool{}
		for _, ev := range evs {
			if ev.Type == "run" && strings.Contains(string(ev.Data), store.StatusSucceeded) {
				done[ev.Run] = true
			}
		}
		if len(done) != len(all) {
			t.Errorf("the flow's events say %d runs succeeded, want %d", len(done), len(all))
		}
		v.drained(one)
	})
}

// On a cluster every key of one run is in one slot — so each commit is one script on one
// shard — and the runs of one flow spread over every master.
func TestOneRunsKeysShareASlotAndAFlowsRunsSpreadOverTheMasters(t *testing.T) {
	c := storetest.SharedCluster(t)
	r := storetest.Open(t, storetest.KindCluster)
	v := newEnv(t, r)
	p := v.example("linear")
	v.work(p)
	ctx := context.Background()
	masters := map[string]int{}
	for i := range 48 {
		run := v.run(p, fmt.Sprintf(`{"name": "n%d"}`, i))
		mustStatus(t, run, store.StatusSucceeded)
		k := store.PartKeys(p.Flow, run.Part)
		keys := append(k.RunKeys(run.ID), k.Runs(), k.Events(), k.Results(), k.Expiry())
		for _, n := range p.NodeIDs() {
			keys = append(keys, k.In(n))
		}
		slot := c.KeySlot(keys[0])
		for _, key := range keys[1:] {
			if s := c.KeySlot(key); s != slot {
				t.Fatalf("run %s: %s is in slot %d, %s in %d", run.ID, keys[0], slot, key, s)
			}
		}
		masters[c.MasterOf(slot)]++
		if n, _ := r.Client.Exists(ctx, k.Run(run.ID)).Result(); n != 1 {
			t.Fatalf("run %s: no hash at %s", run.ID, k.Run(run.ID))
		}
	}
	if len(masters) != 3 {
		t.Errorf("48 runs landed on %d masters (%v), want all 3", len(masters), masters)
	}
	v.drained(p)
}

// A worker pool serves only its nodes: a run whose next node has no live worker says
// so, and goes on once a worker of that node's pool starts.
func TestWorkerPoolsServeOnlyTheirNodes(t *testing.T) {
	storetest.Each(t, func(t *testing.T, r *store.Redis) {
		v := newEnv(t, r)
		ctx := context.Background()
		p := v.compile(`{"sluice": 1, "id": "FLOW", "nodes": [{"id": "in", "type": "input"},
		  {"id": "coding", "type": "transform", "params": {"expr": "{code: (.task + \" done\")}"}},
		  {"id": "database", "type": "transform", "params": {"expr": "{saved: .code}"}},
		  {"id": "out", "type": "output", "params": {"value": "{saved}"}}],
		 "edges": [{"from": "in", "to": "coding"}, {"from": "coding", "to": "database"}, {"from": "database", "to": "out"}]}`)
		pool := func(nodes ...string) {
			wctx, stop := context.WithCancel(ctx)
			done := make(chan error, 1)
			w := v.e.NewWorker(engine.WorkerOptions{Flows: []string{p.Flow}, Nodes: nodes, Block: 200 * time.Millisecond})
			go func() { done <- w.Run(wctx) }()
			t.Cleanup(func() { stop(); <-done })
		}
		pool("in", "coding", "out")
		id := v.start(p, `{"task": "t1"}`)
		waitFor(t, "the run to wait for a worker of node database", 20*time.Second, func() bool {
			run, err := v.e.Get(ctx, p.Flow, id)
			if err != nil || run.Status != store.StatusRunning {
				return false
			}
			nodes, err := r.WaitingForWorker(ctx, run.Ref(), run.Created)
			return err == nil && len(nodes) == 1 && nodes[0] == "database"
		})
		if n := v.calls(p, id, "database"); n != 0 {
			t.Fatalf("database ran %d times without its pool", n)
		}
		pool("database")
		run := v.wait(p, id)
		mustStatus(t, run, store.StatusSucceeded)
		if got := string(run.Output()); got != `{"saved":"t1 done"}` {
			t.Errorf("output %s", got)
		}
		workers := map[string]string{}
		for _, c := range v.checkpoints(p, id) {
			if c.Node != "" {
				workers[c.Node] = c.Worker
			}
		}
		if workers["coding"] == "" || workers["coding"] == workers["database"] {
			t.Errorf("coding and database ran on %q and %q, want two pools' workers", workers["coding"], workers["database"])
		}
		v.drained(p)
	})
}

// On a Redis Cluster a flow that sets no partitions gets as many as spread evenly over
// the cluster's masters: on 6 masters 32 (5 or 6 a master), where the fixed 16 left two
// masters with 2 and four with 3; on the 3 masters of the shared cluster still 16.
func TestTheDefaultPartitionsSpreadEvenlyOverTheClustersMasters(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		name    string
		cluster func() *storetest.Cluster
		want    int
		lo, hi  int
		masters int
	}{
		{"3 masters", func() *storetest.Cluster { return storetest.SharedCluster(t) }, 16, 5, 6, 3},
		{"6 masters", func() *storetest.Cluster { return storetest.StartClusterOf(t, 6, 0) }, 32, 5, 6, 6},
	} {
		t.Run(c.name, func(t *testing.T) {
			cl := c.cluster()
			r, err := store.Open(ctx, store.Options{URL: cl.URL()})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { r.Close() })
			v := newEnv(t, r)
			p := v.example("linear")
			v.work(p)
			mustStatus(t, v.run(p, `{"name": "n"}`), store.StatusSucceeded)
			counts, err := r.PartitionCounts(ctx, p.Flow)
			if err != nil {
				t.Fatal(err)
			}
			if len(counts) != 1 || counts[0] != c.want {
				t.Fatalf("a flow without settings.partitions was placed over %v partitions, want %d", counts, c.want)
			}
			per := map[string]int{}
			for _, part := range store.PartitionsOf(c.want) {
				per[cl.MasterOfKey(store.PartKeys(p.Flow, part).Runs())]++
			}
			lo, hi := c.want, 0
			for _, n := range per {
				lo, hi = min(lo, n), max(hi, n)
			}
			if len(per) != c.masters || lo != c.lo || hi != c.hi {
				t.Errorf("%d partitions on the masters: %v; want all %d with %d to %d each", c.want, per, c.masters, c.lo, c.hi)
			}
			v.drained(p)
		})
	}
}
