package engine_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/flows"
	"github.com/sluicehq/sluice/flows/engine"
	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/storetest"
)

const scheduledFrom = `{"sluice": 1, "id": "FLOW",
 "settings": {"schedules": [{"cron": "@every 1s", "input": {"from": "FROM"}}]},
 "nodes": [{"id": "in", "type": "input"}, {"id": "out", "type": "output", "params": {"value": ".from"}}],
 "edges": [{"from": "in", "to": "out"}]}`

const unscheduled = `{"sluice": 1, "id": "FLOW",
 "nodes": [{"id": "in", "type": "input"}, {"id": "out", "type": "output", "params": {"value": "\"unscheduled\""}}],
 "edges": [{"from": "in", "to": "out"}]}`

// Schedules follow their environment: once prod has a version, prod's schedules run
// (on prod's version, the runs say prod) whatever is saved to dev — a save without
// schedules does not stop them, and a save with others does not start those — until
// another version is promoted to prod.
func TestSchedulesFollowTheirEnvironment(t *testing.T) {
	r := storetest.Real(t)
	v := newEnv(t, r)
	ctx := context.Background()
	v1 := v.compile(strings.Replace(scheduledFrom, "FROM", "v1", 1))
	if err := v.e.Publish(ctx, v1); err != nil {
		t.Fatal(err)
	}
	if _, err := v.e.Promote(ctx, v1.Flow, "prod", engine.PromoteOptions{By: "test", Test: &store.PromotionTest{Gate: "no cases"}}); err != nil {
		t.Fatal(err)
	}
	// dev moves on twice: a version without schedules, then one with another schedule.
	for _, doc := range []string{unscheduled, strings.Replace(scheduledFrom, "FROM", "dev", 1)} {
		if err := v.e.Publish(ctx, v.version(v1, doc)); err != nil {
			t.Fatal(err)
		}
	}
	v3 := v.version(v1, strings.Replace(scheduledFrom, "FROM", "v3", 1))
	if err := v.e.Publish(ctx, v3); err != nil { // in the history, so that it can be promoted
		t.Fatal(err)
	}
	if err := v.e.Publish(ctx, v.version(v1, unscheduled)); err != nil {
		t.Fatal(err)
	}
	v.work(v1)
	v.scheduler(v1, engine.SchedulerOptions{})

	outputs := func() map[string][]*store.Run {
		runs, _, err := v.e.List(ctx, v1.Flow, engine.ListQuery{Limit: 500})
		if err != nil {
			t.Fatal(err)
		}
		out := map[string][]*store.Run{}
		for _, run := range runs {
			got := v.wait(v1, run.ID)
			out[string(got.Output())] = append(out[string(got.Output())], got)
		}
		return out
	}
	waitFor(t, "two scheduled runs of prod's version", 30*time.Second, func() bool { return len(outputs()[`"v1"`]) >= 2 })
	for out, runs := range outputs() {
		for _, run := range runs {
			if out != `"v1"` || run.Version != v1.Version || run.Environment != "prod" {
				t.Errorf("scheduled run %s: output %s, version %.12s, environment %q; want prod's v1 only", run.ID, out, run.Version, run.Environment)
			}
		}
	}
	if _, env, err := v.e.SchedulePlan(ctx, v1.Flow); err != nil || env != "prod" {
		t.Errorf("SchedulePlan: %q, %v", env, err)
	}

	// Promoting v3 to prod moves the schedules with it.
	if _, err := v.e.Promote(ctx, v1.Flow, "prod", engine.PromoteOptions{Version: v3.Version, By: "test", Test: &store.PromotionTest{Gate: "passed"}}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "a scheduled run of v3", 30*time.Second, func() bool { return len(outputs()[`"v3"`]) >= 1 })
	for _, run := range outputs()[`"v3"`] {
		if run.Version != v3.Version || run.Environment != "prod" {
			t.Errorf("run %s of v3's schedule: version %.12s in %q", run.ID, run.Version, run.Environment)
		}
	}
	if got := outputs()[`"dev"`]; len(got) > 0 {
		t.Errorf("dev's schedule ran %d times; only prod's may", len(got))
	}
}

// A gated environment refuses a promotion without a passing test, naming the failing
// cases; the first environment (where saving lands) needs none.
func TestTheEngineRefusesAGatedPromotionWithoutAPassingTest(t *testing.T) {
	storetest.Each(t, func(t *testing.T, r *store.Redis) {
		v := newEnv(t, r)
		ctx := context.Background()
		p := v.compile(unscheduled)
		if err := v.e.Publish(ctx, p); err != nil {
			t.Fatal(err)
		}
		for _, c := range []struct {
			test *store.PromotionTest
			want string
		}{
			{nil, "must pass"},
			{&store.PromotionTest{Gate: "failed", Cases: 3, Failing: []string{"a", "c"}}, "2 of 3 test cases fail on " + p.Version[:12] + ": a, c"},
		} {
			_, err := v.e.Promote(ctx, p.Flow, "prod", engine.PromoteOptions{Test: c.test})
			if flows.ErrorCode(err) != flows.Conflict || !strings.Contains(err.Error(), c.want) {
				t.Errorf("promotion with test %+v: %v, want a conflict saying %q", c.test, err, c.want)
			}
		}
		if _, err := v.e.EnvVersion(ctx, p.Flow, "prod"); flows.ErrorCode(err) != flows.NotFound {
			t.Errorf("prod after refused promotions: %v, want no version", err)
		}
		if _, err := v.e.Promote(ctx, p.Flow, "staging", engine.PromoteOptions{}); flows.ErrorCode(err) != flows.NotFound || !strings.Contains(err.Error(), "it has dev, prod") {
			t.Errorf("promotion to an environment the workspace lacks: %v", err)
		}
		if _, err := v.e.Promote(ctx, p.Flow, "dev", engine.PromoteOptions{}); flows.ErrorCode(err) != flows.Invalid {
			t.Errorf("promotion to the first environment without a version: %v, want invalid", err)
		}
	})
}

// Environments on a Redis Cluster: a promotion's writes (the pointer and its record)
// share the flow's slot, so they are one transaction there too.
func TestEnvironmentsOnACluster(t *testing.T) {
	r := storetest.Open(t, storetest.KindCluster)
	v := newEnv(t, r)
	ctx := context.Background()
	v1 := v.compile(strings.Replace(scheduledFrom, "FROM", "v1", 1))
	if err := v.e.Publish(ctx, v1); err != nil {
		t.Fatal(err)
	}
	if _, err := v.e.Promote(ctx, v1.Flow, "prod", engine.PromoteOptions{By: "test", Test: &store.PromotionTest{Gate: "no cases"}}); err != nil {
		t.Fatal(err)
	}
	v2 := v.version(v1, unscheduled)
	if err := v.e.Publish(ctx, v2); err != nil {
		t.Fatal(err)
	}
	for env, want := range map[string]string{"dev": v2.Version, "prod": v1.Version} {
		if got, err := v.e.EnvVersion(ctx, v1.Flow, env); err != nil || got != want {
			t.Errorf("%s: %.12s %v, want %.12s", env, got, err, want)
		}
	}
	if p, env, err := v.e.SchedulePlan(ctx, v1.Flow); err != nil || env != "prod" || p.Version != v1.Version {
		t.Errorf("SchedulePlan: %q %v", env, err)
	}
	if ps, err := v.e.Promotions(ctx, v1.Flow, "", 10); err != nil || len(ps) != 1 || ps[0].Version != v1.Version || ps[0].From != "dev" {
		t.Errorf("promotions: %+v %v", ps, err)
	}
	// A rollback of dev is a promotion into it: the current key moves with its record.
	p, err := v.e.Promote(ctx, v1.Flow, "dev", engine.PromoteOptions{Version: v1.Version, By: "test", Test: &store.PromotionTest{Gate: "skipped"}})
	if err != nil || p.Previous != v2.Version {
		t.Fatalf("rollback of dev: %+v %v; want it to replace %.12s", p, err, v2.Version)
	}
	if got, err := v.e.EnvVersion(ctx, v1.Flow, "dev"); err != nil || got != v1.Version {
		t.Errorf("dev after its rollback: %.12s %v", got, err)
	}
}

// hold is a component whose calls wait until release is closed, counting how many
// are in flight at once.
type hold struct {
	inflight, most atomic.Int32
	release        chan struct{}
}

func (h *hold) spec() flows.Spec {
	return flows.Spec{Name: "hold", Title: "Hold (tests)", Category: "test", Description: "Waits until the test releases it.",
		Ports: []flows.Port{
			{Name: flows.PortIn, Direction: "in", Type: flows.PortState, Multiple: true},
			{Name: flows.PortOut, Direction: "out", Type: flows.PortState},
		},
		Params: json.RawMessage(`{"type": "object", "additionalProperties": false, "properties": {}}`),
		New:    func(*flows.Build) (flows.Component, error) { return h, nil },
	}
}

func (h *hold) Run(ctx context.Context, _ *flows.Step) (*flows.Result, error) {
	n := h.inflight.Add(1)
	defer h.inflight.Add(-1)
	for m := h.most.Load(); n > m && !h.most.CompareAndSwap(m, n); m = h.most.Load() {
	}
	select {
	case <-h.release:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return &flows.Result{Update: map[string]any{"held": true}}, nil
}

const holdFlow = `{"sluice": 1, "id": "FLOW",
 "nodes": [{"id": "in", "type": "input"}, {"id": "hold", "type": "hold", "concurrency": N},
           {"id": "out", "type": "output", "params": {"value": ".held"}}],
 "edges": [{"from": "in", "to": "hold"}, {"from": "hold", "to": "out"}]}`

// A worker runs a node's steps up to the concurrency of the version the last
// environment with a version runs (prod's, once promoted): a version saved to dev with
// another concurrency changes nothing for prod's runs until it is promoted. Runs of
// both versions read the node's one stream, so prod's limit applies to dev's runs too.
func TestWorkerConcurrencyFollowsTheLastEnvironmentWithAVersion(t *testing.T) {
	r := storetest.Real(t)
	v := newEnv(t, r)
	h := &hold{release: make(chan struct{})}
	v.reg.Register(h.spec())
	ctx := context.Background()
	v1 := v.compile(strings.Replace(holdFlow, "N", "4", 1))
	if _, err := v.e.Promote(ctx, v1.Flow, "prod", engine.PromoteOptions{By: "test", Test: &store.PromotionTest{Gate: "no cases"}}); err != nil {
		t.Fatal(err)
	}
	v2 := v.version(v1, strings.Replace(holdFlow, "N", "1", 1))
	if err := v.e.Publish(ctx, v2); err != nil { // dev now runs one step of hold at a time
		t.Fatal(err)
	}
	v.work(v1)
	var runs []string
	for i, p := range []*flows.Plan{v1, v1, v2, v2} {
		runs = append(runs, v.start(p, fmt.Sprintf(`{"n": %d}`, i)))
	}
	waitFor(t, "four steps of hold at once (prod's concurrency 4)", 30*time.Second, func() bool { return h.most.Load() >= 4 })
	close(h.release)
	for _, id := range runs {
		mustStatus(t, v.wait(v1, id), store.StatusSucceeded)
	}
}
