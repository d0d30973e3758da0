// Package nodes holds the built-in components, one file each. Register adds them all to
// a registry; nothing is registered implicitly.
//
// Constructors (Spec.New) only check and compile their params: they open no connections
// and start no goroutines, because validation calls them too.
package nodes

import (
	"github.com/sluicehq/sluice/flows"
)

// Env is what components need from the process that runs them.
type Env struct{}

// Register adds every built-in component to reg.
func Register(reg *flows.Registry, env *Env) {
	if env == nil {
		env = &Env{}
	}
	for _, s := range []flows.Spec{
		inputSpec(),
		outputSpec(),
		transformSpec(),
		routerSpec(),
		fanoutSpec(),
		joinSpec(),
		approvalSpec(),
	} {
		reg.Register(s)
	}
}

// NewRegistry returns a registry holding the built-in components.
func NewRegistry(env *Env) *flows.Registry {
	reg := flows.NewRegistry()
	Register(reg, env)
	return reg
}

var (
	inPort  = flows.Port{Name: flows.PortIn, Direction: "in", Type: flows.PortState, Multiple: true, Description: "the run state"}
	outPort = flows.Port{Name: flows.PortOut, Direction: "out", Type: flows.PortState, Description: "the state after this step"}
)
