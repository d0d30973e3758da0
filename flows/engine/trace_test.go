package engine_test

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/flows/engine"
	"github.com/sluicehq/sluice/flows/nodes/nodetest"
	"github.com/sluicehq/sluice/observe"
	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/storetest"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	oteltrace "go.opentelemetry.io/otel/trace"
)

// A traced run's steps — fanout branches and the join its last branch fires included —
// are children of its run span; an untraced run stores no trace context at all.
func TestEveryStepOfATracedRunIsAChildOfItsRunSpan(t *testing.T) {
	storetest.Each(t, func(t *testing.T, r *store.Redis) {
		ctx := context.Background()
		v := newEnv(t, r)
		p := v.example("fanout")
		v.work(p)

		// Tracing off: nothing in the run hash.
		off := v.run(p, `{"documents": ["a", "b"]}`)
		mustStatus(t, off, store.StatusSucceeded)
		if n, _ := r.Client.HExists(ctx, store.FlowKeys(p.Flow).Run(off.ID), "tp").Result(); n {
			t.Error("an untraced run stores a traceparent")
		}

		mem := tracetest.NewInMemoryExporter()
		observe.UseProvider(observe.NewTestProvider(mem), false)
		t.Cleanup(func() { observe.UseProvider(nil, false) })
		in, _ := json.Marshal(map[string]any{"documents": []string{"x", "y", "z"}})
		run := v.run(p, string(in))
		mustStatus(t, run, store.StatusSucceeded)
		if run.Trace == "" {
			t.Fatal("a traced run has no traceparent in its hash")
		}
		v.e.TraceFinished(ctx, run)
		runSpan, ok := observe.ParseTraceparent(run.Trace)
		if !ok {
			t.Fatalf("the run's traceparent %q does not parse", run.Trace)
		}
		// A step's span ends just after its commit, which may be after the run finished.
		stepSpans(mem, runSpan.TraceID(), p.Order)
		nodes := map[string]int{}
		recorded := false
		for _, s := range mem.GetSpans() {
			switch {
			case s.SpanContext.SpanID() == runSpan.SpanID():
				recorded = s.Name == "run "+p.Flow && s.SpanContext.TraceID() == runSpan.TraceID()
			case strings.HasPrefix(s.Name, "step "):
				if s.SpanContext.TraceID() != runSpan.TraceID() {
					continue // the untraced run's steps (none: tracing was off) or another run's
				}
				nodes[s.Name[5:]]++
				if s.Parent.SpanID() != runSpan.SpanID() {
					t.Errorf("%s: parent %s, want the run span %s", s.Name, s.Parent.SpanID(), runSpan.SpanID())
				}
			}
		}
		if !recorded {
			t.Error("the run span was not recorded with the ids its run carries")
		}
		for _, n := range p.Order {
			if nodes[n] == 0 {
				t.Errorf("no span of node %s in the run's trace (spans by node: %v)", n, nodes)
			}
		}

		// A run started where tracing was off, worked on where it is on: its steps still
		// form one trace, derived from the run id.
		// (A flow no worker serves yet, so that no step runs before tracing is back on.)
		later := v.example("fanout")
		observe.UseProvider(nil, false)
		id := v.start(later, `{"documents": ["q"]}`)
		observe.UseProvider(observe.NewTestProvider(mem), false)
		v.work(later)
		mustStatus(t, v.wait(later, id), store.StatusSucceeded)
		derived := observe.DerivedRunSpan(later.Flow, id)
		got := stepSpans(mem, derived.TraceID(), later.Order)
		steps := 0
		for _, n := range got {
			steps += n
		}
		if steps != len(later.Order) {
			t.Errorf("%d steps of the untraced run are in its derived trace, want all %d", steps, len(later.Order))
		}
	})
}

// stepSpans waits until the exporter holds a step span of a trace for every node given
// (or ten seconds passed) and returns how many spans it holds per node.
func stepSpans(mem *tracetest.InMemoryExporter, trace oteltrace.TraceID, nodes []string) map[string]int {
	deadline := time.Now().Add(10 * time.Second)
	for {
		got := map[string]int{}
		for _, s := range mem.GetSpans() {
			if strings.HasPrefix(s.Name, "step ") && s.SpanContext.TraceID() == trace {
				got[s.Name[5:]]++
			}
		}
		all := true
		for _, n := range nodes {
			all = all && got[n] > 0
		}
		if all || time.Now().After(deadline) {
			return got
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Steps that run fused into the commit of the step before them have spans of their own
// that say so, and every step span carries the partition its run was placed on.
func TestStepSpansSayWhetherTheStepWasFusedAndWhichPartitionItRanOn(t *testing.T) {
	r := storetest.Real(t)
	reg := nodetest.Registry(r.Client)
	v := &env{t: t, r: r, reg: reg, e: engine.New(r, reg, engine.Options{Logger: testLogger(t), Partitions: 3})}
	mem := tracetest.NewInMemoryExporter()
	observe.UseProvider(observe.NewTestProvider(mem), false)
	t.Cleanup(func() { observe.UseProvider(nil, false) })
	p := v.example("linear")
	v.work(p)
	// Runs are placed on partitions 1..3 by a hash of their id: start runs until one
	// lands on a partition other than 1, so that the partition is not a default.
	var run *store.Run
	for i := 0; run == nil || run.Part < 2; i++ {
		if i == 100 {
			t.Fatalf("100 runs, none placed on partition 2 or 3")
		}
		run = v.run(p, `{"name": "Ada"}`)
		mustStatus(t, run, store.StatusSucceeded)
	}
	runSpan, ok := observe.ParseTraceparent(run.Trace)
	if !ok {
		t.Fatalf("the run's traceparent %q does not parse", run.Trace)
	}
	stepSpans(mem, runSpan.TraceID(), p.Order)
	// in is read from its stream; greet, shout and out run fused with it.
	want := map[string]string{"in": "false", "greet": "true", "shout": "true", "out": "true"}
	got := map[string]string{}
	for _, s := range mem.GetSpans() {
		if !strings.HasPrefix(s.Name, "step ") || s.SpanContext.TraceID() != runSpan.TraceID() {
			continue
		}
		attrs := map[string]string{}
		for _, kv := range s.Attributes {
			attrs[string(kv.Key)] = kv.Value.String()
		}
		got[s.Name[5:]] = attrs["sluice.fused"]
		if attrs["sluice.partition"] != strconv.Itoa(run.Part) {
			t.Errorf("%s: sluice.partition %s, want the run's %d", s.Name, attrs["sluice.partition"], run.Part)
		}
	}
	for n, f := range want {
		if got[n] != f {
			t.Errorf("step %s: sluice.fused %q, want %s (all: %v)", n, got[n], f, got)
		}
	}
}
