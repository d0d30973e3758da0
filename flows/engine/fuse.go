package engine

import (
	"time"

	"github.com/sluicehq/sluice/flows"
	"github.com/sluicehq/sluice/store"
)

// maxFused bounds how many steps one commit carries.
const maxFused = 16

// chainLen is how many steps a commit of a step of n carries at most when every step of
// its chain fuses: n and the pure nodes after it, each the only successor of the one
// before (a bound for sizing, not a promise: fuse decides).
func chainLen(plan *flows.Plan, n *flows.PlanNode) int {
	k := 1
	for k <= maxFused && pure(n) && len(n.Edges) == 1 {
		if n = plan.Nodes[n.Edges[0].To]; !pure(n) {
			break
		}
		k++
	}
	return k
}

// fusedStep is what the observer hears of a step fused into another's commit.
type fusedStep struct {
	node      string
	component string
	dur       time.Duration
	usage     flows.Usage
}

// fuse runs, right after a pure step, its single successor when that is a pure step too
// (and the successor's, and so on), and adds them to the same commit: one checkpoint,
// state and event per step, as if each had been its own activation, but no stream
// entry, read or round trip in between. Such steps have no side effects, so if the
// worker dies before the commit, running them all again is harmless. Fusing stops at a
// fork, a join, an approval that parks, the end of the branch, a step that fails (it then
// runs on its own and fails as usual), a node the worker does not serve (a pool's), or
// max_steps.
func (w *Worker) fuse(j *job, c *store.Commit, b *built) []fusedStep {
	if !pure(j.node) {
		return nil
	}
	var fused []fusedStep
	if n := cap(c.Steps) - 1; n > 0 {
		fused = make([]fusedStep, 0, n) // sized as the commit's steps (chainLen)
	}
	a, state, stateJSON := j.a, b.newState, b.step.State
	for k := 1; k <= maxFused; k++ {
		if len(c.Transitions) != 1 {
			return fused
		}
		act, ok := c.Transitions[0].(store.Activate)
		if !ok || act.From != 0 {
			return fused
		}
		node := j.plan.Nodes[act.Node]
		if !pure(node) || a.Depth+k > j.plan.Settings.MaxSteps || !w.servesNode(act.Node) {
			return fused // a node of another worker pool runs there
		}
		na := store.Activation{Flow: a.Flow, Part: a.Part, Node: act.Node, ID: a.ID, Run: a.Run, Version: a.Version,
			Tok: act.Tokens, Depth: a.Depth + k, Deliveries: 1, Trace: a.Trace}
		nj := w.e.newJob(na, j.plan, node, state)
		nj.stateJSON, nj.stateChecked = stateJSON, true
		if node.Input != nil {
			in, err := node.Input.First(w.hard, state, state)
			if err != nil {
				return fused // it runs on its own, and fails there
			}
			nj.step.Input = in
		}
		w.beginStep(nj, time.Now(), true)
		nb, err := w.execute(nj)
		if err != nil {
			endStep(nj, outcomeLeft, nil, flows.Usage{}) // it runs again on its own
			return fused
		}
		endStep(nj, outcomeFusedSpan, nil, nb.usage)
		nb.step.Checkpoint.Parent = "" // the step before, in the same commit
		c.Steps = append(c.Steps, nb.step)
		c.Transitions = nb.trans
		state = nb.newState
		b.newState, b.newJSON = nb.newState, nb.step.State
		stateJSON = nb.step.State
		fused = append(fused, fusedStep{node: act.Node, component: componentOf(node), dur: nb.dur, usage: nb.usage})
	}
	return fused
}
