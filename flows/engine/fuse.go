package engine

import (
	"sort"
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
			return w.fuseBranches(j, c, b, a.Depth+k, state, stateJSON, fused)
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
	if (j.boundedOnly || (!j.node.Pure() && !j.node.IsJoin())) && !node.StepBounded() {
		// A step with side effects may have run for most of its timeout, which its
		// heartbeats cover: a pure step after it that may take its own timeout too
		// runs on its own, so that the entry is not taken for abandoned meanwhile. A
		// step on a reader's goroutine or in a start holds up what waits for it.
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

// MaxFusedSteps and MaxBranchSteps are maxFused and maxBranchSteps, for what describes
// fusion (the queues page's notes).
const (
	MaxFusedSteps  = maxFused
	MaxBranchSteps = maxBranchSteps
)

// fuseBranches runs inline, after the commit's last step, the branches of the fork that
// step opened (its transitions: an OpenFork and an Activate or Arrive per branch), each
// as far as a chain fuses: pure steps the worker serves, within max_steps, each with a
// single successor. A branch's steps are committed as a store.Branch (one checkpoint
// entry after the commit's, the first step's parent the checkpoint it read, a state, a
// live event per step) and what ends the branch reads its last step: its Arrive at the
// join (which counts it in and fires the join when it is the last, as an arrival of its
// own commit would), the Activate of the node it stops before, or its GiveBack. A branch
// whose first node does not fuse keeps its Activate, and so do the other branches that
// start at that node (a fanout's other items: their first steps would not fuse for the
// same reason, and trying costs a seed's decoding and a step each). depth is the depth
// of the activations the commit adds (the branches' first steps'); state and stateJSON
// are the state after the last step. A fanout's item's branch starts from its seed (the
// Seed's state; its first step's parent the seed's checkpoint). Branches that fork again
// and forks that do not meet at a join are left as they are.
func (w *Worker) fuseBranches(j *job, c *store.Commit, b *built, depth int, state map[string]any, stateJSON []byte, fused []fusedStep) []fusedStep {
	open := false
	var seeds []store.Seed // a fanout's items, ref k the k-th: each starts a branch
	for _, t := range c.Transitions {
		switch t := t.(type) {
		case store.Seed:
			seeds = append(seeds, t)
		case store.OpenFork:
			open = t.Base == 0
		case store.CloseFork:
		case store.Activate:
			if int(t.From) > len(seeds) {
				return fused
			}
		case store.Arrive:
			if int(t.From) > len(seeds) {
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
	refs := len(seeds) // the seeds come first: the branches are numbered after them
	var notInline map[string]bool
	for i, t := range c.Transitions {
		var steps []store.CommitStep
		var end store.Transition
		var fs []fusedStep
		act, isAct := t.(store.Activate)
		if isAct && budget > 0 && !notInline[act.Node] {
			if from, fromJSON, ok := branchStart(j.plan, act, seeds, state, stateJSON); ok {
				steps, end, fs, _ = w.runBranch(j, act, depth, from, fromJSON, min(perBranch, budget))
			}
			if len(steps) == 0 {
				if notInline == nil {
					notInline = map[string]bool{}
				}
				notInline[act.Node] = true
			}
		}
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
		end = reading(end, store.Ref(refs))
		if _, reads := end.(store.Activate); !reads && c.KeepLast == 0 {
			// Nothing reads the state after the branch: its join merges the branch's
			// updates, and the history computes it when asked.
			steps[len(steps)-1].State = nil
		}
		out = append(out, store.Branch{Steps: steps, From: act.From})
		if end != nil { // a branch ends at its join or elsewhere: never with nothing
			out = append(out, end)
		}
		fused = append(fused, fs...)
	}
	if out != nil {
		c.Transitions = out
	}
	if c.KeepLast == 0 {
		// keep_last stores every step's state, and a Joined holds its last's.
		if trans, fs, last, ok := w.joinInline(j, c.Transitions, depth, state, min(maxFused, budget)); ok {
			c.Transitions = trans
			fused = append(fused, fs...)
			// The run's last checkpoint is the Joined's: the commit's reply names it,
			// and its state is the one to keep at hand.
			b.newState, b.newJSON = last.newState, last.step.State
		}
	}
	return fused
}

// joinInline runs the join of the fork a commit's last step opened, when every branch
// reached it in that commit (fuseBranches ran each there, or it goes straight from the
// last step to the join), in the same commit, and the pure steps after it as far as a
// chain fuses, as a store.Joined: the join merges the branches' updates at hand the way
// its own activation would have read them back (mergeBranches), and the fork needs no
// frame, the join no activation, read or commit of its own. The join's step must be
// bounded (JoinsInline), and the steps after it as runFused says (StepBounded where the
// commit's first step ran on a reader's goroutine or in a start: chainBounded, which
// allowed that, did not look past the join). It returns the commit's transitions trans,
// with the fork's (its OpenFork, Arrives and GiveBacks) replaced by the Joined and the
// transition that ends its chain, what the observer hears of its steps, and the chain's
// last step; or ok false, and the join runs on its own as before: a branch that did not
// run here, a fork that grows from within, a join another pool serves or whose step
// would fork again, park or fail.
func (w *Worker) joinInline(j *job, trans []store.Transition, depth int, state map[string]any, limit int) (_ []store.Transition, _ []fusedStep, last *built, ok bool) {
	type arrival struct {
		branch string
		ref    store.Ref
	}
	var open *store.OpenFork
	var arrivals []arrival
	var branches [][]store.CommitStep // each ref's steps, by ref - 1 (none for a seed)
	ended := 0
	for _, t := range trans {
		switch t := t.(type) {
		case store.Seed:
			branches = append(branches, nil)
		case store.OpenFork:
			if open != nil || t.Base != 0 {
				return nil, nil, nil, false
			}
			open = &t
		case store.Branch:
			branches = append(branches, t.Steps)
		case store.Arrive:
			if open == nil || t.Frame != open.Frame {
				return nil, nil, nil, false
			}
			arrivals = append(arrivals, arrival{t.Branch, t.From})
			ended++
		case store.GiveBack:
			if open == nil || t.Frame != open.Frame {
				return nil, nil, nil, false
			}
			ended++
		case store.CloseFork: // of the fork the commit's first step, a join, closed
		default:
			return nil, nil, nil, false // a branch that runs on its own, a Split, a Park
		}
	}
	if open == nil || ended != open.Branches || len(arrivals) == 0 || limit <= 0 {
		return nil, nil, nil, false
	}
	node := j.plan.Nodes[open.Join]
	if !node.JoinsInline() || depth > j.plan.Settings.MaxSteps || !w.servesNode(open.Join) {
		return nil, nil, nil, false
	}
	sort.SliceStable(arrivals, func(x, y int) bool { return lessBranch(arrivals[x].branch, arrivals[y].branch) })
	refs := make([]store.Ref, len(arrivals))
	var ups []branchUpdate
	for i, ar := range arrivals {
		refs[i] = ar.ref
		if ar.ref > 0 {
			for _, st := range branches[ar.ref-1] {
				ups = append(ups, branchUpdate{of: "step " + st.Node, update: st.Checkpoint.Update})
			}
		}
	}
	merged, delta, err := mergeBranches(j.plan, state, ups)
	if err != nil {
		return nil, nil, nil, false // the join runs on its own, and fails there
	}
	a := j.a
	jj := w.e.newJob(store.Activation{Flow: a.Flow, Part: a.Part, Node: open.Join, ID: a.ID, Run: a.Run, Version: a.Version,
		Tok: open.Outer, Join: open.Frame, Depth: depth, Deliveries: 1, Trace: a.Trace}, j.plan, node, merged)
	jj.join = &joined{state: merged, delta: delta}
	if node.Input != nil {
		in, err := node.Input.First(w.hard, merged, merged)
		if err != nil {
			return nil, nil, nil, false
		}
		jj.step.Input = in
	}
	w.beginStep(jj, time.Now(), true)
	jb, err := w.execute(jj)
	var end store.Transition
	ok = err == nil && len(jb.trans) > 0
	if ok {
		// The join's own transitions: the CloseFork of the fork, which never reaches
		// Redis, then what a fused step may end with.
		c, closes := jb.trans[0].(store.CloseFork)
		end, ok = chainEnd(jb.trans[1:])
		ok = ok && closes && c.Frame == open.Frame
	}
	if !ok {
		endStep(jj, outcomeLeft, nil, flows.Usage{}) // it runs again on its own
		return nil, nil, nil, false
	}
	endStep(jj, outcomeFusedSpan, nil, jb.usage)
	jb.step.Checkpoint.Parent = "" // the commit's last step
	steps := []store.CommitStep{jb.step}
	fs := []fusedStep{{node: open.Join, component: componentOf(node), dur: jb.dur, usage: jb.usage}}
	last = jb
	if act, ok := end.(store.Activate); ok && limit > 1 {
		// The pure steps after the join, as along a branch.
		if more, next, mfs, mlast := w.runBranch(j, act, depth+1, jb.newState, jb.step.State, limit-1); len(more) > 0 {
			steps, fs, end, last = append(steps, more...), append(fs, mfs...), next, mlast
		}
	}
	end = reading(end, store.Ref(len(branches)+1))
	out := make([]store.Transition, 0, len(trans)+2)
	for _, t := range trans {
		switch t.(type) {
		case store.OpenFork, store.Arrive, store.GiveBack: // the fork's: checked above
		default:
			out = append(out, t)
		}
	}
	out = append(out, store.Joined{Steps: steps, Arrivals: refs})
	if end != nil {
		out = append(out, end)
	}
	return out, fs, last, true
}

// reading is t reading checkpoint ref (a Branch or Joined of the same commit) instead
// of the commit's last step, where t reads one (an Activate, an Arrive).
func reading(t store.Transition, ref store.Ref) store.Transition {
	switch e := t.(type) {
	case store.Activate:
		e.From = ref
		return e
	case store.Arrive:
		e.From = ref
		return e
	}
	return t
}

// chainEnd is what a step run inline along a branch or after a join may end with:
// nothing (the end of the run's line), or one activation, arrival or give-back, reading
// the step's checkpoint; ok false for anything else (a fork, a park, a seed), which the
// step's own commit does.
func chainEnd(trans []store.Transition) (store.Transition, bool) {
	switch len(trans) {
	case 0:
		return nil, true
	case 1:
		switch t := trans[0].(type) {
		case store.Activate:
			return t, t.From == 0
		case store.Arrive:
			return t, t.From == 0
		case store.GiveBack:
			return t, true
		}
	}
	return nil, false
}

// branchStart is the state the branch act starts runs from: the state after the
// commit's last step, or a fanout's item's seed state; ok false when its first node
// would not run inline anyway (a step with side effects: no seed is decoded for it) or
// the seed cannot be read.
func branchStart(plan *flows.Plan, act store.Activate, seeds []store.Seed, state map[string]any, stateJSON []byte) (map[string]any, []byte, bool) {
	if act.From == 0 {
		return state, stateJSON, true
	}
	if !plan.Nodes[act.Node].Pure() {
		return nil, nil, false
	}
	b := seeds[act.From-1].State
	s, err := flows.DecodeState(b)
	return s, b, err == nil
}

// runBranch runs the branch that act starts inline: its steps (none when its first node
// does not fuse), the transition that ends it (reading checkpoint 0: the caller makes it
// read the branch's entry; nil at the end of the run's line), what the observer hears of
// them, and its last step.
func (w *Worker) runBranch(j *job, act store.Activate, depth int, state map[string]any, stateJSON []byte, limit int) ([]store.CommitStep, store.Transition, []fusedStep, *built) {
	var steps []store.CommitStep
	var fs []fusedStep
	var last *built
	for k := 0; k < limit; k++ {
		nj, nb := w.runFused(j, act, depth+k, state, stateJSON)
		if nb == nil {
			break
		}
		next, ok := chainEnd(nb.trans)
		if !ok {
			endStep(nj, outcomeLeft, nil, flows.Usage{})
			break
		}
		endStep(nj, outcomeFusedSpan, nil, nb.usage)
		nb.step.Checkpoint.Parent = "" // the step before (the one it read, for the first)
		steps = append(steps, nb.step)
		fs = append(fs, fusedStep{node: act.Node, component: componentOf(nj.node), dur: nb.dur, usage: nb.usage})
		state, stateJSON, last = nb.newState, nb.step.State, nb
		nt, ok := next.(store.Activate)
		if !ok {
			return steps, next, fs, last
		}
		act = nt
	}
	return steps, act, fs, last
}
