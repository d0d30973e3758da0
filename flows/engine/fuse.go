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
	for k <= maxFused && len(n.Edges) == 1 {
		if n = plan.Nodes[n.Edges[0].To]; !n.Pure() {
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

// fuse runs, right after a step, its single successor when that is a pure step (and the
// successor's, and so on), and adds them to the same commit: one checkpoint, state and
// event per step, as if each had been its own activation, but no stream entry, read or
// round trip in between. Such steps have no side effects, so if the worker dies before
// the commit, running them again with the step before is harmless; and the step before
// may be any step, one with side effects (a model call, an agent, an HTTP request)
// included: if the worker dies before the commit, that step runs again anyway, as it
// would alone. Fusing stops at a
// join, an approval that parks, the end of the branch, a step that fails (it then runs on
// its own and fails as usual), a node the worker does not serve (a pool's), or max_steps.
// At a fork, the branches run inline as far as they can (fuseBranches). A join's step,
// which only merges its branches, starts a chain too: the commit keeps its CloseFork.
func (w *Worker) fuse(j *job, c *store.Commit, b *built) []fusedStep {
	var keep []store.Transition // the join's CloseFork, first in its transitions
	if j.node.IsJoin() {
		if len(c.Transitions) == 0 {
			return nil
		}
		if _, ok := c.Transitions[0].(store.CloseFork); !ok {
			return nil
		}
		keep = c.Transitions[:1:1]
	}
	var fused []fusedStep
	if n := cap(c.Steps) - 1; n > 0 {
		fused = make([]fusedStep, 0, n) // sized as the commit's steps (chainLen)
	}
	a, state, stateJSON := j.a, b.newState, b.step.State
	for k := 1; k <= maxFused; k++ {
		if len(c.Transitions) != len(keep)+1 {
			return w.fuseBranches(j, c, a.Depth+k, state, stateJSON, fused)
		}
		act, ok := c.Transitions[len(keep)].(store.Activate)
		if !ok || act.From != 0 {
			return fused
		}
		nj, nb := w.runFused(j, act, a.Depth+k, state, stateJSON)
		if nb == nil {
			return fused
		}
		endStep(nj, outcomeFusedSpan, nil, nb.usage)
		nb.step.Checkpoint.Parent = "" // the step before, in the same commit
		c.Steps = append(c.Steps, nb.step)
		if keep != nil {
			c.Transitions = append(keep, nb.trans...) // keep has no room: a new array
		} else {
			c.Transitions = nb.trans
		}
		state = nb.newState
		b.newState, b.newJSON = nb.newState, nb.step.State
		stateJSON = nb.step.State
		fused = append(fused, fusedStep{node: act.Node, component: componentOf(nj.node), dur: nb.dur, usage: nb.usage})
	}
	return fused
}

// runFused runs inline the step of act's node at depth d on state, for a commit it may
// join: nil when the node may not run here (not pure, deeper than max_steps, a node of
// another worker pool; after a step with side effects, one that may not finish in
// bounded time) or its input mapping or component failed (it then runs on its own and
// fails there). Its caller ends the step, once it knows whether the commit takes it.
func (w *Worker) runFused(j *job, act store.Activate, d int, state map[string]any, stateJSON []byte) (*job, *built) {
	node := j.plan.Nodes[act.Node]
	if !node.Pure() || d > j.plan.Settings.MaxSteps || !w.servesNode(act.Node) {
		return nil, nil
	}
	if !j.node.Pure() && !j.node.IsJoin() && !node.StepBounded() {
		// The step with side effects may have run for most of its timeout, which its
		// heartbeats cover: a pure step after it that may take its own timeout too
		// runs on its own, so that the entry is not taken for abandoned meanwhile.
		return nil, nil
	}
	a := j.a
	na := store.Activation{Flow: a.Flow, Part: a.Part, Node: act.Node, ID: a.ID, Run: a.Run, Version: a.Version,
		Tok: act.Tokens, Depth: d, Deliveries: 1, Trace: a.Trace}
	nj := w.e.newJob(na, j.plan, node, state)
	nj.stateJSON, nj.stateChecked = stateJSON, true
	if node.Input != nil {
		in, err := node.Input.First(w.hard, state, state)
		if err != nil {
			return nil, nil
		}
		nj.step.Input = in
	}
	w.beginStep(nj, time.Now(), true)
	nb, err := w.execute(nj)
	if err != nil {
		endStep(nj, outcomeLeft, nil, flows.Usage{}) // it runs again on its own
		return nil, nil
	}
	return nj, nb
}

// maxBranchSteps bounds the steps a commit runs inline along its fork's branches, all
// branches together.
const maxBranchSteps = 64

// fuseBranches runs inline, after the commit's last step, the branches of the fork that
// step opened (its transitions: an OpenFork and an Activate or Arrive per branch), each
// as far as a chain fuses: pure steps the worker serves, within max_steps, each with a
// single successor. A branch's steps are committed as a store.Branch (one checkpoint
// entry after the commit's, the first step's parent the fork's checkpoint, a state, a
// live event per step) and what ends the branch reads its last step: its Arrive at the
// join (which counts it in and fires the join when it is the last, as an arrival of its
// own commit would), the Activate of the node it stops before, or its GiveBack. A branch
// whose first node does not fuse keeps its Activate. depth is the depth of the
// activations the commit adds (the branches' first steps'); state and stateJSON are the
// state after the last step. Forks of fanouts (seeds), branches that fork again and
// forks that do not meet at a join are left as they are.
func (w *Worker) fuseBranches(j *job, c *store.Commit, depth int, state map[string]any, stateJSON []byte, fused []fusedStep) []fusedStep {
	open := false
	for _, t := range c.Transitions {
		switch t := t.(type) {
		case store.OpenFork:
			open = t.Base == 0
		case store.CloseFork:
		case store.Activate:
			if t.From != 0 {
				return fused
			}
		case store.Arrive:
			if t.From != 0 {
				return fused
			}
		default:
			return fused
		}
	}
	if !open {
		return fused
	}
	// A branch's steps are at most maxFused after the commit's first step, as far as
	// chainBounded looked when it let that step run on its reader's goroutine.
	perBranch := maxFused + 1 - len(c.Steps)
	if perBranch <= 0 {
		return fused
	}
	if c.KeepLast > 0 {
		// keep_last stores every step's state, and a branch entry holds its last's.
		perBranch = 1
	}
	budget := maxBranchSteps
	var out []store.Transition
	refs := 0
	for i, t := range c.Transitions {
		act, ok := t.(store.Activate)
		if !ok || budget == 0 {
			if out != nil {
				out = append(out, t)
			}
			continue
		}
		steps, end, fs := w.runBranch(j, act, depth, state, stateJSON, min(perBranch, budget))
		if len(steps) == 0 {
			if out != nil {
				out = append(out, t)
			}
			continue
		}
		if out == nil {
			out = make([]store.Transition, 0, len(c.Transitions)+len(c.Transitions)-i)
			out = append(out, c.Transitions[:i]...)
		}
		budget -= len(steps)
		refs++
		ref := store.Ref(refs)
		switch e := end.(type) {
		case store.Arrive:
			e.From = ref
			end = e
		case store.Activate:
			e.From = ref
			end = e
		}
		if _, reads := end.(store.Activate); !reads && c.KeepLast == 0 {
			// Nothing reads the state after the branch: its join merges the branch's
			// updates, and the history computes it when asked.
			steps[len(steps)-1].State = nil
		}
		out = append(out, store.Branch{Steps: steps}, end)
		fused = append(fused, fs...)
	}
	if out != nil {
		c.Transitions = out
	}
	return fused
}

// runBranch runs the branch that act starts inline: its steps (none when its first node
// does not fuse), the transition that ends it (reading checkpoint 0: the caller makes it
// read the branch's entry), and what the observer hears of them.
func (w *Worker) runBranch(j *job, act store.Activate, depth int, state map[string]any, stateJSON []byte, limit int) ([]store.CommitStep, store.Transition, []fusedStep) {
	var steps []store.CommitStep
	var fs []fusedStep
	for k := 0; k < limit; k++ {
		nj, nb := w.runFused(j, act, depth+k, state, stateJSON)
		if nb == nil {
			break
		}
		// What the step does next: on along the branch, its arrival at the join, or its
		// end elsewhere. Anything else (a park, a fork in the branch) and it runs again on
		// its own.
		var next store.Transition
		if len(nb.trans) == 1 {
			switch t := nb.trans[0].(type) {
			case store.Activate:
				if t.From == 0 {
					next = t
				}
			case store.Arrive:
				if t.From == 0 {
					next = t
				}
			case store.GiveBack:
				next = t
			}
		}
		if next == nil {
			endStep(nj, outcomeLeft, nil, flows.Usage{})
			break
		}
		endStep(nj, outcomeFusedSpan, nil, nb.usage)
		nb.step.Checkpoint.Parent = "" // the step before (the fork's, for the first)
		steps = append(steps, nb.step)
		fs = append(fs, fusedStep{node: act.Node, component: componentOf(nj.node), dur: nb.dur, usage: nb.usage})
		state, stateJSON = nb.newState, nb.step.State
		nt, ok := next.(store.Activate)
		if !ok {
			return steps, next, fs
		}
		act = nt
	}
	return steps, act, fs
}
