package cases

import (
	"context"

	"github.com/sluicehq/sluice/flows"
	"github.com/sluicehq/sluice/store"
)

// Gate runs the cases of f on plan for a promotion (docs/environments.md) and says what
// the promotion records: "passed" when every case passed, "failed" with the failing
// cases named, "no cases" when the flow has none (f nil or empty). The report is nil
// when no case ran.
func Gate(ctx context.Context, e Runner, plan *flows.Plan, f *File, opts Options) (*store.PromotionTest, *Report, error) {
	if f == nil || len(f.Cases) == 0 {
		return &store.PromotionTest{Gate: "no cases"}, nil, nil
	}
	opts.Only = nil
	rs, err := Run(ctx, e, plan, f, opts)
	if err != nil {
		return nil, nil, err
	}
	rep := NewReport(plan.Flow, plan.Version, rs)
	t := &store.PromotionTest{Gate: "passed", Cases: rep.Cases, Passed: rep.Passed, Failing: rep.Failing}
	if rep.Failed > 0 {
		t.Gate = "failed"
	}
	return t, rep, nil
}
