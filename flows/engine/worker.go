package engine

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/sluicehq/sluice/flows"
)

// WorkerOptions configure a worker.
type WorkerOptions struct {
	// Flows the worker serves. It reads the streams of every node any stored version of
	// these flows has.
	Flows []string
	// Grace is how long in-flight steps may run after the worker is told to stop;
	// steps still running then are abandoned, left pending for another worker.
	Grace time.Duration
	// Block is how long one read waits for activations (default 1s).
	Block time.Duration
	// Refresh is how often the worker looks whether versions changed (default 2s).
	Refresh time.Duration
	// Nodes, when set, are the only node ids the worker runs steps of (a worker pool:
	// other nodes are served by other processes).
	Nodes []string
	// Prune is how often the worker removes expired runs from its flows' run index
	// (default 30s).
	Prune time.Duration
}

// Worker reads and runs activations of some flows until its context ends. One worker
// has one consumer name, one reader per group of at most maxReadStreams streams, and
// runs each step in a goroutine of its own, at most each node's concurrency at once.
type Worker struct {
	e        *Engine
	opts     WorkerOptions
	consumer string
	inflight *inflight

	// The execute stage's middleware chains (execute.go).
	run, runPure, runBounded runFunc

	// Each concern has its own state and lock: the flows served (cat), the readers
	// (rs), the entries left pending (leftPending, for the sweeper), the steps in flight
	// (inflight); mu guards only whether the worker runs.
	cat         catalog
	rs          readerSet
	leftPending leftMark
	// loadHook, set by tests only, is called by load with a flow id and the load's
	// ticket before it applies what it read ("read") and after ("done").
	loadHook func(flow, stage string, ticket uint64)

	mu      sync.Mutex
	running bool
	ctx     context.Context // the Run context; nil before Run
	hard    context.Context // ends Grace after ctx
	pureSem chan struct{}   // one token per pure step in flight
	steps   sync.WaitGroup
	bg      sync.WaitGroup
}

// catalog is what a worker knows of the flows it serves, under its own lock.
type catalog struct {
	mu     sync.Mutex
	served map[string]*served
	gen    string // the version generation the served flows were loaded at
}

// readerSet counts a worker's readers. A reader that waits for room (a step to end)
// waits on wake, which the next poke closes: every reader waiting then reads again, not
// just one of them (a single wake-up taken by a reader whose nodes were still full left
// the reader of the node a step freed asleep until its Block ran out). busyBlock is how
// long a reader waits, while a node is left out of its reads for lack of room, before it
// reads again (the const busyBlock; tests set it).
type readerSet struct {
	mu        sync.Mutex
	n         int
	wake      chan struct{} // closed by the next poke; nil when no reader took it since
	busyBlock time.Duration
	// maxStreams is the most streams one reader reads (the const maxReadStreams; tests
	// set it).
	maxStreams int
}

// wakeup returns what the next poke closes. A reader takes it before it plans a read,
// so that a step that ends while it reads wakes it as soon as it waits.
func (rs *readerSet) wakeup() <-chan struct{} {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if rs.wake == nil {
		rs.wake = make(chan struct{})
	}
	return rs.wake
}

// poke wakes every reader waiting on wakeup.
func (rs *readerSet) poke() {
	rs.mu.Lock()
	if rs.wake != nil {
		close(rs.wake)
		rs.wake = nil
	}
	rs.mu.Unlock()
}

// leftMark is when an entry was last left pending for this worker while it ran on (a
// commit Redis could not take): the sweeper then looks for such entries (sweep.go).
type leftMark struct {
	mu sync.Mutex
	at time.Time
}

func (l *leftMark) mark() {
	l.mu.Lock()
	l.at = time.Now()
	l.mu.Unlock()
}

func (l *leftMark) get() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.at
}

// clear forgets the mark if it is still the one read at t.
func (l *leftMark) clear(t time.Time) {
	l.mu.Lock()
	if l.at == t {
		l.at = time.Time{}
	}
	l.mu.Unlock()
}

// maxPureSteps bounds the pure steps (jq, templates) a worker has in flight, per node
// and in all: those that run on goroutines of their own (so a slow one delays only
// itself) and, most of them under load, those that wait for their commit. A reader
// reads a node when half its limit is free, and otherwise comes back when a step ends
// (it came back after busyBlock then): with 256, a node's steps could not pass 128 per
// 20 ms, which held one worker process near 7k fused runs/s on a box where two did 11k
// (docs/benchmarks.md, issue 29).
const maxPureSteps = 1024

// served is what a worker knows of one flow it serves.
type served struct {
	flow     string
	nodes    []string // node ids with streams, over every stored version
	parts    []int    // the partitions that may hold runs
	limits   map[string]int
	settings flows.Settings
	janitor  janitor
	// reload is set while a reload this process asked for (changed) has not begun.
	reload bool
	// Loads of a flow may overlap (the worker's first one and one changed asked for):
	// each takes a ticket when it begins reading, and one that began before the last
	// applied load is stale and is not applied.
	tickets, applied uint64
}

// NewWorker returns a worker for the given flows.
func (e *Engine) NewWorker(opts WorkerOptions) *Worker {
	if opts.Grace == 0 {
		opts.Grace = 10 * time.Second
	}
	if opts.Block == 0 {
		opts.Block = time.Second
	}
	if opts.Refresh == 0 {
		opts.Refresh = 2 * time.Second
	}
	if opts.Prune == 0 {
		opts.Prune = 30 * time.Second
	}
	w := &Worker{e: e, opts: opts, consumer: e.consumerName(), inflight: newInflight(),
		cat: catalog{served: map[string]*served{}}, rs: readerSet{busyBlock: busyBlock, maxStreams: maxReadStreams}, pureSem: make(chan struct{}, maxPureSteps)}
	w.run = chain(component, w.withCancel, e.withAnnounce, withDeadline, withRecover)
	w.runPure = chain(component, withDeadline, withRecover)
	w.runBounded = chain(component, withRecover)
	return w
}

// Add makes the worker serve another flow, also while it runs. Adding a flow it
// already serves does nothing.
func (w *Worker) Add(flow string) {
	w.cat.mu.Lock()
	if _, ok := w.cat.served[flow]; ok {
		w.cat.mu.Unlock()
		return
	}
	w.cat.served[flow] = &served{flow: flow, settings: flows.DefaultSettings}
	w.cat.mu.Unlock()
	w.mu.Lock()
	running := w.running && w.ctx.Err() == nil
	w.mu.Unlock()
	if running {
		w.load(w.ctx, []string{flow})
		w.ensureReaders()
		w.poke()
	}
}

// Run works until ctx ends, then stops reading, gives in-flight steps opts.Grace to
// finish and returns. Steps it abandons stay pending; the sweeper of any worker hands
// them on after claim_after.
func (w *Worker) Run(ctx context.Context) error {
	// hard ends opts.Grace after ctx: in-flight steps and their commits stop then.
	hard, cancelHard := context.WithCancel(context.Background())
	defer cancelHard()
	go func() {
		select {
		case <-ctx.Done():
			select {
			case <-time.After(w.opts.Grace):
				cancelHard()
			case <-hard.Done():
			}
		case <-hard.Done():
		}
	}()

	w.mu.Lock()
	if w.running {
		w.mu.Unlock()
		return fmt.Errorf("worker is already running")
	}
	w.running, w.ctx, w.hard = true, ctx, hard
	w.mu.Unlock()
	w.cat.mu.Lock()
	for _, f := range w.opts.Flows {
		if _, ok := w.cat.served[f]; !ok {
			w.cat.served[f] = &served{flow: f, settings: flows.DefaultSettings}
		}
	}
	w.cat.mu.Unlock()
	w.e.attach(w)
	defer w.e.detach(w)

	bgCtx, stopBG := context.WithCancel(context.Background())
	var bg sync.WaitGroup
	bg.Add(2 + startPipelines)
	go func() { defer bg.Done(); w.e.commits.run(bgCtx) }()
	for range startPipelines {
		go func() { defer bg.Done(); w.e.startCommits.run(bgCtx) }()
	}
	go func() { defer bg.Done(); w.e.events.run(bgCtx) }()

	w.load(ctx, nil)
	// Alive before the first read: a worker killed mid-step is then known to be gone.
	if err := w.e.rdb.WorkerAlive(ctx, w.consumer); err != nil && ctx.Err() == nil {
		w.e.log.Warn("cannot record that the worker is alive", "error", err)
	}
	w.ensureReaders()
	w.bg.Add(4)
	go func() { defer w.bg.Done(); w.refreshLoop(ctx) }()
	go func() { defer w.bg.Done(); w.sweepLoop(ctx) }()
	go func() { defer w.bg.Done(); w.heartbeatLoop(ctx) }()
	go func() { defer w.bg.Done(); w.cancelWatch(ctx) }()

	<-ctx.Done()
	w.bg.Wait()
	w.steps.Wait()
	// The worker's record stays and ages: the sweepers of other workers then claim the
	// steps it abandoned, once they have been idle for claim_after.
	stopBG()
	bg.Wait()
	return nil
}

// poke wakes the readers that wait for room.
func (w *Worker) poke() { w.rs.poke() }

// flowsServed returns the ids of the served flows, sorted.
func (w *Worker) flowsServed() []string {
	w.cat.mu.Lock()
	defer w.cat.mu.Unlock()
	ids := make([]string, 0, len(w.cat.served))
	for id := range w.cat.served {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

// load reads the node ids, partitions and the current version's limits of some served
// flows (nil: all) and creates their consumer groups. When any of it fails (a master
// down, a failover under way), the next refresh loads every flow again, whatever the
// version generation says: a worker must not stay on a flow's old partitions.
func (w *Worker) load(ctx context.Context, ids []string) {
	if ids == nil {
		ids = w.flowsServed()
	}
	failed := func() {
		w.cat.mu.Lock()
		w.cat.gen = ""
		w.cat.mu.Unlock()
	}
	for _, id := range ids {
		w.cat.mu.Lock()
		var ticket uint64
		if s := w.cat.served[id]; s != nil {
			s.tickets++
			ticket = s.tickets
		}
		w.cat.mu.Unlock()
		nodes, err := w.e.rdb.FlowNodes(ctx, id)
		if err != nil {
			if ctx.Err() == nil {
				w.e.log.Warn("worker: cannot read the flow's nodes", "flow", id, "error", err)
			}
			failed()
			continue
		}
		sort.Strings(nodes)
		var parts []int
		// On an error the partitions read before are kept (below), never shrunk.
		if ps, err := w.e.rdb.FreshParts(ctx, id); err == nil {
			for _, p := range ps {
				parts = append(parts, p.Part)
			}
		} else if ctx.Err() == nil {
			w.e.log.Warn("worker: cannot read the flow's partitions", "flow", id, "error", err)
			failed()
		}
		limits := map[string]int{}
		settings := flows.DefaultSettings
		// Which versions decide: the last environment's first (environments.go).
		plans, _ := w.e.CatalogPlans(ctx, id)
		for i, p := range plans {
			if i == 0 {
				settings = p.Settings
			}
			for nid, n := range p.Nodes {
				if _, ok := limits[nid]; ok {
					continue
				}
				limits[nid] = n.Concurrency
				if n.Pure() {
					// Pure steps are bounded by the worker's executor, not by their node.
					limits[nid] = maxPureSteps
				}
			}
		}
		if w.loadHook != nil {
			w.loadHook(id, "read", ticket)
		}
		w.cat.mu.Lock()
		s := w.cat.served[id]
		if s == nil || ticket < s.applied {
			// A load that began later has applied what it read, which is newer: a
			// flow's first load, which found no partitions and read [0], must not
			// put the worker back on partition 0 after the load this process asked
			// for when it placed the flow's first run on partition 4.
			w.cat.mu.Unlock()
			if w.loadHook != nil {
				w.loadHook(id, "done", ticket)
			}
			continue
		}
		s.applied = ticket
		if len(nodes) == 0 {
			// Redis lost the set (restarted empty): keep reading the nodes we know, so
			// that their groups are created again.
			nodes = s.nodes
		}
		if len(parts) == 0 {
			parts = s.parts
		}
		if len(parts) == 0 {
			parts = []int{0}
		}
		s.nodes, s.parts, s.limits, s.settings = nodes, parts, limits, settings
		w.cat.mu.Unlock()
		if err := w.e.rdb.EnsureGroups(ctx, id, nodes); err != nil && ctx.Err() == nil {
			w.e.log.Warn("worker: cannot create consumer groups", "flow", id, "error", err)
			failed()
		}
		if w.loadHook != nil {
			w.loadHook(id, "done", ticket)
		}
	}
}

// refreshLoop loads the served flows again when a version was stored or made current
// anywhere (one read of the version generation every opts.Refresh).
func (w *Worker) refreshLoop(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(w.opts.Refresh):
		}
		g, err := w.e.rdb.Generation(ctx)
		if err != nil {
			continue
		}
		w.cat.mu.Lock()
		changed := g != w.cat.gen || g == ""
		w.cat.gen = g
		w.cat.mu.Unlock()
		if changed {
			w.load(ctx, nil)
			w.ensureReaders()
			w.poke() // a reader with nothing to read waits for this
		}
	}
}

// limit is a node's concurrency in a served flow.
func (s *served) limit(node string) int {
	if n, ok := s.limits[node]; ok && n > 0 {
		return n
	}
	return flows.DefaultConcurrency
}

// claimAfter is the shortest claim_after of the served flows: it paces the worker's
// heartbeats and sweeps.
func (w *Worker) claimAfter() time.Duration {
	d, _ := w.claimAfterRange()
	return d
}

// claimAfterRange returns the shortest and the longest claim_after of the served flows.
func (w *Worker) claimAfterRange() (shortest, longest time.Duration) {
	w.cat.mu.Lock()
	defer w.cat.mu.Unlock()
	shortest = flows.DefaultSettings.ClaimAfter.D()
	longest = shortest
	first := true
	for _, s := range w.cat.served {
		c := s.settings.ClaimAfter.D()
		if first || c < shortest {
			shortest = c
		}
		if first || c > longest {
			longest = c
		}
		first = false
	}
	return shortest, longest
}

// settingsOf returns a served flow's settings.
func (w *Worker) settingsOf(flow string) flows.Settings {
	w.cat.mu.Lock()
	defer w.cat.mu.Unlock()
	if s, ok := w.cat.served[flow]; ok {
		return s.settings
	}
	return flows.DefaultSettings
}

// tellWorkers tells this process's running workers that it stored a version of flow,
// made one current, or placed a run on partition part of it (-1: a version): a worker
// that serves the flow and does not read that partition yet loads the flow again at
// once, instead of at its next refresh (WorkerOptions.Refresh, which other processes
// still wait for). A flow's first run in `sluice test` or `sluice run` waited for it.
// It reports whether any of them serves the flow.
func (e *Engine) tellWorkers(flow string, part int) (served bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for w := range e.workers {
		if w.changed(flow, part) {
			served = true
		}
	}
	return served
}

// changed starts a reload of a served flow when this process stored a version of it
// (part -1) or placed a run on a partition the worker does not read. A reload asked for
// while one waits to begin is that one.
// It reports whether the worker serves the flow.
func (w *Worker) changed(flow string, part int) bool {
	w.cat.mu.Lock()
	s := w.cat.served[flow]
	need := s != nil && !s.reload && (part < 0 || !slices.Contains(s.parts, part))
	if need {
		s.reload = true
	}
	w.cat.mu.Unlock()
	if !need {
		return s != nil
	}
	w.mu.Lock()
	ctx := w.ctx
	w.mu.Unlock()
	go func() {
		w.cat.mu.Lock()
		s.reload = false // a change from now on is read by this load, or starts another
		w.cat.mu.Unlock()
		if ctx == nil || ctx.Err() != nil {
			return
		}
		w.load(ctx, []string{flow})
		w.ensureReaders()
		w.poke() // a reader with nothing to read waits for this
	}()
	return true
}

// attach and detach keep the engine's list of running workers, which Cancel tells.
func (e *Engine) attach(w *Worker) {
	e.mu.Lock()
	e.workers[w] = true
	e.mu.Unlock()
}

func (e *Engine) detach(w *Worker) {
	e.mu.Lock()
	delete(e.workers, w)
	e.mu.Unlock()
}

// cancelLocal cancels the steps of a run in flight in this process, and remembers the
// run so that its queued pure steps are dropped too.
func (e *Engine) cancelLocal(flow, run string) {
	e.cancelled.add(flow, run)
	e.mu.Lock()
	ws := make([]*Worker, 0, len(e.workers))
	for w := range e.workers {
		ws = append(ws, w)
	}
	e.mu.Unlock()
	for _, w := range ws {
		w.inflight.cancelRun(flow, run)
	}
}
