package nodes

import (
	"context"

	"github.com/sluicehq/sluice/flows"
)

func joinSpec() flows.Spec {
	return flows.Spec{
		Name:     "join",
		Title:    "Join",
		Category: "flow",
		Description: "Where the branches of a fork meet. It runs once, when every branch has arrived or ended " +
			"elsewhere, with the state at the fork plus each arriving branch's updates merged in branch " +
			"order with the flow's reducers.",
		Ports: []flows.Port{{Name: flows.PortIn, Direction: "in", Type: flows.PortState, Multiple: true, Required: true, Description: "the branches"}, outPort},
		New:   func(*flows.Build) (flows.Component, error) { return Join{}, nil },
	}
}

// Join is where branches meet; the runtime merges their updates before it runs.
type Join struct{}

// Run passes the merged state on.
func (Join) Run(context.Context, *flows.Step) (*flows.Result, error) { return &flows.Result{}, nil }

// Inline reports that a join's step runs without I/O: the engine may run it in the
// commit its branches all arrived in (flows.PlanNode.JoinsInline).
func (Join) Inline() bool { return true }

// Bounded reports that a join's step only passes its merged state on.
func (Join) Bounded() bool { return true }

var _ flows.Component = Join{}
