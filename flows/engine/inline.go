package engine

import (
	"sync"
	"time"

	"github.com/sluicehq/sluice/flows"
	"github.com/sluicehq/sluice/store"
)

// Most steps of a busy flow are pure steps that finish in bounded time (jq of the
// common shapes, templates of them: flows.Bounder) on a state already in this process.
// Such a step needs no goroutine of its own: the goroutine that started its read batch
// runs it, and the fused steps after it, up to its commit, and hands the commit to the
// committer without waiting for it; the committer's goroutine finishes the step when
// the reply comes (commitAsync). A goroutine per step and two hand-offs per commit were
// a fifth of a fused run's Go CPU. Anything off that path — a step that failed, a gate
// that drops or fails the step, a commit Redis did not take — goes on on a goroutine of
// its own, as every step did before.

// inlines reports whether a's step runs inline: its node, its input and output mappings,
// its edges' conditions and every pure step that may fuse after it finish in bounded
// time; its state is at hand; and it is a first delivery that is not a join or a resume
// (the gate then reads nothing from Redis).
func (w *Worker) inlines(a store.Activation, pre preloaded) bool {
	if pre.state == nil || a.Deliveries != 1 || a.Join != "" || a.Resume != "" {
		return false
	}
	p := w.e.cachedPlan(a.Flow, a.Version)
	if p == nil {
		return false
	}
	return w.e.chains.bounded(p, p.Nodes[a.Node])
}

// boundedChains remembers chainBounded of the plan nodes steps started from: plans are
// immutable, and it is asked for every step.
type boundedChains struct {
	mu sync.Mutex
	m  map[*flows.PlanNode]bool
}

// maxBoundedChains bounds what boundedChains keeps (plans come and go with versions).
const maxBoundedChains = 4096

func (c *boundedChains) bounded(p *flows.Plan, n *flows.PlanNode) bool {
	if n == nil {
		return false
	}
	c.mu.Lock()
	b, ok := c.m[n]
	c.mu.Unlock()
	if ok {
		return b
	}
	b = chainBounded(p, n)
	c.mu.Lock()
	if c.m == nil || len(c.m) >= maxBoundedChains {
		c.m = map[*flows.PlanNode]bool{}
	}
	c.m[n] = b
	c.mu.Unlock()
	return b
}

// chainBounded reports whether n's step and every pure step fusing may run after it
// (fuse: successors through pure nodes, at most maxFused more) finish in bounded time.
func chainBounded(p *flows.Plan, n *flows.PlanNode) bool {
	if !n.StepBounded() {
		return false
	}
	seen := map[*flows.PlanNode]bool{n: true}
	next := []*flows.PlanNode{n}
	for depth := 0; depth < maxFused && len(next) > 0; depth++ {
		var more []*flows.PlanNode
		for _, m := range next {
			for _, e := range m.Edges {
				s := p.Nodes[e.To]
				if s == nil || seen[s] || !s.Pure() {
					continue // fusing stops at a step with side effects: it runs on its own
				}
				if !s.StepBounded() {
					return false
				}
				seen[s] = true
				more = append(more, s)
			}
		}
		next = more
	}
	return true
}

// runInline runs a's step on the calling goroutine up to its commit (see inlines);
// release is called once with the step's outcome, when it is known.
func (w *Worker) runInline(a store.Activation, pre preloaded, release func(stepOutcome)) {
	received := time.Now()
	v := w.gate(a, pre)
	if v.kind != verdictRun {
		go func() { release(w.retrying(a, w.apply(a, v), flows.DefaultRetry)) }()
		return
	}
	j := v.job
	j.boundedOnly = true
	w.beginStep(j, received, false)
	started := time.Now()
	b, err := w.execute(j)
	if err != nil {
		go func() {
			out := w.failed(j, err, started)
			endStep(j, out, err, flows.Usage{})
			release(w.retrying(a, out, j.node.Retry))
		}()
		return
	}
	c := w.newCommit(j, b)
	var fused []fusedStep
	if !w.e.opts.NoFuse {
		fused = w.fuse(j, c, b)
	}
	done := traceCommit(j, len(c.Steps))
	w.commitAsync(j.plan, c, b, fused, received, func(out stepOutcome) {
		done(out)
		endStep(j, out, nil, b.usage)
		release(out)
	})
}

// commitAsync hands a step's commit to the committer and returns; finish gets the
// step's outcome on the committer's goroutine. A commit Redis did not take is sent again
// as commit does, on a goroutine of its own.
func (w *Worker) commitAsync(plan *flows.Plan, c *store.Commit, b *built, fused []fusedStep, received time.Time, finish func(stepOutcome)) {
	ok := w.e.commits.submit(w.hard, c, func(r commitResp) {
		if r.err != nil {
			go func() { finish(w.commit(plan, c, b, fused, received)) }()
			return
		}
		finish(w.committed(c.Act, b, c.Transitions, fused, r.res, r.dur, received))
	})
	if !ok {
		finish(outcomeLeft)
	}
}
