package bench_test

import (
	"context"
	"testing"
	"time"

	"github.com/sluicehq/sluice/flows/engine/bench"
	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/storetest"
)

// TestBenchShapesFinishEveryRunAndDrain drives a few runs through each shape the bench
// offers, fused and not, and checks what the bench itself reports: every run finished
// and succeeded, each step counted, and every stream drained (nothing queued or pending).
func TestBenchShapesFinishEveryRunAndDrain(t *testing.T) {
	storetest.Each(t, func(t *testing.T, r *store.Redis) {
		for _, o := range []bench.Options{
			{Shape: "linear", Nodes: 3},
			{Shape: "linear", Nodes: 3, NoFuse: true},
			{Shape: "fork", Branches: 3},
			{Shape: "agent"},
		} {
			name := o.Shape
			if o.NoFuse {
				name += " unfused"
			}
			t.Run(name, func(t *testing.T) {
				o.Runs, o.Submitters, o.StateBytes = 20, 4, 64
				ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
				defer cancel()
				f, err := bench.Run(ctx, r, o)
				if err != nil {
					t.Fatal(err)
				}
				if f.Failed != 0 || f.DeadLetters != 0 || !f.Drained {
					t.Errorf("failed runs %d, dead letters %d, drained %v (%s)", f.Failed, f.DeadLetters, f.Drained, f.Leftover)
				}
				if f.RunsPerSec <= 0 || f.Steps == 0 {
					t.Errorf("runs/s %v, steps %d", f.RunsPerSec, f.Steps)
				}
			})
		}
	})
}

// TestBareLoopHasAStagePerNodeOfTheFlow pins the baseline issue 29 asks for: the raw loop
// has as many stages as the flow (not as Sluice's commits, one for a fused flow).
func TestBareLoopHasAStagePerNodeOfTheFlow(t *testing.T) {
	for _, tc := range []struct {
		o    bench.Options
		want int
	}{
		{bench.Options{Shape: "linear", Nodes: 3}, 3},
		{bench.Options{Shape: "linear", Nodes: 3, NoFuse: true}, 3},
		{bench.Options{Shape: "linear", Nodes: 10}, 10},
		{bench.Options{Shape: "fork", Branches: 3}, 6},
		{bench.Options{Shape: "agent"}, 3},
	} {
		if got := bench.Stages(tc.o); got != tc.want {
			t.Errorf("%+v: %d stages, want %d", tc.o, got, tc.want)
		}
	}
}
