package engine

import (
	"context"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/sluicehq/sluice/flows"
	"github.com/sluicehq/sluice/store"
)

// maxReadStreams bounds the streams one blocking read covers: a worker serving more
// runs one reader per group of them. Readers, not flows, hold connections.
const maxReadStreams = 256

// readGroups splits the streams of the served nodes into the readers' groups — on one
// server any streams, on a cluster the streams of one hash tag (a command reaches one
// slot) — at most maxReadStreams each, and says how many groups read each node and the
// nodes' limits. Every
// partition of a flow is read; partitions 1..P carry tags every flow shares, so on a
// cluster a worker has about one reader per partition, whatever the number of flows.
func (w *Worker) readGroups() ([][]store.NodeRef, map[nodeKey]int, map[nodeKey]int) {
	w.cat.mu.Lock()
	var all []store.NodeRef
	limits := map[nodeKey]int{}
	for _, id := range sortedKeys(w.cat.served) {
		s := w.cat.served[id]
		parts := s.parts
		if len(parts) == 0 {
			parts = []int{0}
		}
		for _, n := range s.nodes {
			if !w.servesNode(n) {
				continue
			}
			limits[nodeKey{id, n}] = s.limit(n)
			for _, p := range parts {
				all = append(all, store.NodeRef{Flow: id, Node: n, Part: p})
			}
		}
	}
	w.cat.mu.Unlock()
	var groups [][]store.NodeRef
	if w.e.rdb.Cluster() {
		sort.SliceStable(all, func(i, j int) bool { return all[i].Tag() < all[j].Tag() })
	}
	for len(all) > 0 {
		n := min(len(all), w.rs.maxStreams)
		if w.e.rdb.Cluster() {
			tag := all[0].Tag()
			n = 1
			for n < len(all) && n < w.rs.maxStreams && all[n].Tag() == tag {
				n++
			}
		}
		groups = append(groups, all[:n:n])
		all = all[n:]
	}
	readers := map[nodeKey]int{}
	for _, g := range groups {
		seen := map[nodeKey]bool{}
		for _, r := range g {
			if k := (nodeKey{r.Flow, r.Node}); !seen[k] {
				seen[k] = true
				readers[k]++
			}
		}
	}
	return groups, readers, limits
}

// servesNode reports whether the worker serves node (WorkerOptions.Nodes).
func (w *Worker) servesNode(node string) bool {
	return len(w.opts.Nodes) == 0 || slices.Contains(w.opts.Nodes, node)
}

// ensureReaders starts readers until there is one per read group.
func (w *Worker) ensureReaders() {
	groups, _, _ := w.readGroups()
	w.mu.Lock()
	ctx := w.ctx
	w.mu.Unlock()
	w.rs.mu.Lock()
	want := max(1, len(groups))
	var start []int
	for w.rs.n < want {
		start = append(start, w.rs.n)
		w.rs.n++
	}
	w.rs.mu.Unlock()
	for _, i := range start {
		w.bg.Add(1)
		go func() { defer w.bg.Done(); w.readLoop(ctx, i) }()
	}
}

// aRead is what one read asks for: its streams, the COUNT for each, and the room it
// reserved per node (released once the read's steps are counted in flight).
type aRead struct {
	streams  []store.NodeRef
	count    int
	reserved map[nodeKey]int
	busy     bool // a node was left out because its steps fill it
	// topUp says the read is of starved nodes only, and does not block.
	topUp bool
}

// planRead chooses what reader i reads next. COUNT applies to every stream of a read, so a
// node is read with the others only when at least half of its limit is free, and its
// room is reserved for the read: a node read by several readers (its partitions on
// several slots of a cluster) never has more steps in flight than its limit. A node
// with room for fewer than that — starved: with a limit of 4 and 3 steps of it in
// flight, say; pure nodes never are — is read on every other turn in a read of the starved nodes alone, which
// does not block, so that its limit is used without shrinking the others' batches.
// Each reader may take a share of the limit (the limit over the readers of the node, at
// least one); a node with several streams in the group and less room than streams has
// some of them read, in turn.
func (w *Worker) planRead(i, turn int) aRead {
	groups, readers, limits := w.readGroups()
	if i >= len(groups) {
		return aRead{}
	}
	byNode := map[nodeKey][]store.NodeRef{}
	var order []nodeKey
	for _, r := range groups[i] {
		k := nodeKey{r.Flow, r.Node}
		if byNode[k] == nil {
			order = append(order, k)
		}
		byNode[k] = append(byNode[k], r)
	}
	rd := aRead{count: 64, reserved: map[nodeKey]int{}}
	type pick struct {
		k       nodeKey
		streams []store.NodeRef
		room    int
	}
	var picks []pick
	// Pure nodes' limit is the executor's bound (maxPureSteps): they are read in
	// batches, never starved.
	starved := func(k nodeKey) bool {
		limit := limits[k]
		free := limit - w.inflight.count(k.flow, k.node)
		return limit < maxPureSteps && free >= 1 && free < max(limit/2, 1)
	}
	if turn%2 == 1 {
		for _, k := range order {
			if starved(k) {
				rd.topUp, rd.busy = true, true
				break
			}
		}
	}
	for _, k := range order {
		limit := limits[k]
		if rd.topUp != starved(k) || (!rd.topUp && limit-w.inflight.count(k.flow, k.node) < max(limit/2, 1)) {
			rd.busy = true
			continue
		}
		share := max(1, (limit+readers[k]-1)/readers[k])
		room := w.inflight.reserve(k.flow, k.node, limit, share)
		if room == 0 {
			// Other readers hold the room; they give it back within a read, which may
			// block: come back soon rather than block on the other streams meanwhile.
			rd.busy = true
			continue
		}
		streams := byNode[k]
		if len(streams) > room {
			off := turn % len(streams)
			streams = append(append([]store.NodeRef(nil), streams[off:]...), streams[:off]...)[:room]
		}
		picks = append(picks, pick{k, streams, room})
		rd.count = min(rd.count, room/len(streams))
	}
	for _, p := range picks {
		rd.streams = append(rd.streams, p.streams...)
		used := rd.count * len(p.streams)
		rd.reserved[p.k] = used
		if p.room > used {
			w.inflight.release(p.k.flow, p.k.node, p.room-used)
		}
	}
	return rd
}

// done gives back the room a read reserved.
func (w *Worker) done(rd aRead) {
	for k, n := range rd.reserved {
		w.inflight.release(k.flow, k.node, n)
	}
}

// busyBlock is how long a reader waits, after a read that found nothing while some node
// was left out of it for lack of room, before it reads again if no step ended meanwhile.
// Such a read does not block: a read blocked in Redis cannot be told that room was made,
// only that an entry came to one of its streams. (It blocked for busyBlock: when the
// steps that filled the node ended their runs, adding no entry anywhere, a join with
// its room full was read again once Redis timed the BLOCK out, about every 50 ms (a
// timed-out BLOCK ends when Redis's event loop next wakes, at worst its 10 hz cron),
// 16 steps at a time: ~400 fork runs/s instead of ~5,000.)
const busyBlock = 20 * time.Millisecond

// readAhead is how many read batches a reader has between its read and their steps'
// start (their preload round trip) while it reads on: the read, the preload and the
// start of the last batch's steps overlap instead of taking turns.
const readAhead = 2

// readLoop is reader i: it reads activations and starts their steps until ctx ends. A
// batch's preload and start run beside the reader, at most readAhead batches at once;
// the room a read reserved is held until its steps are counted in flight, so the
// nodes' limits hold across the batches in between.
func (w *Worker) readLoop(ctx context.Context, i int) {
	backoff := 50 * time.Millisecond
	ahead := make(chan struct{}, readAhead)
	var batches sync.WaitGroup
	defer batches.Wait()
	for turn := 0; ctx.Err() == nil; turn++ {
		wake := w.rs.wakeup()
		rd := w.planRead(i, turn)
		if rd.topUp && len(rd.streams) == 0 {
			continue // other readers hold the starved nodes' room: read the others
		}
		if len(rd.streams) == 0 {
			// Nothing to read, or every node is busy: wait for a step to finish.
			select {
			case <-ctx.Done():
			case <-wake:
			case <-time.After(w.opts.Block):
			}
			continue
		}
		block := w.opts.Block
		if rd.busy {
			// No BLOCK: a node left out is read again as soon as a step ends (below),
			// the other nodes next turn (a top-up's) or then.
			block = -1
		}
		dials := w.e.rdb.Dials()
		acts, err := w.e.rdb.ReadNodes(ctx, w.consumer, rd.streams, rd.count, block)
		if err == nil && w.e.rdb.Dials() != dials {
			// The read dialled: go-redis may have sent it again after Redis delivered
			// it and lost its reply (store/dials.go). What that first read delivered is
			// pending for this worker, which does not run it: the sweeper takes it back
			// after claim_after, as for a read that failed.
			w.left()
		}
		if err != nil {
			w.done(rd)
			if ctx.Err() != nil {
				return
			}
			w.e.log.Warn("worker: read failed; backing off", "error", err, "backoff", backoff)
			// Redis may have delivered the read's entries and lost the reply: they are
			// pending for this worker, which does not run them. The sweeper takes them
			// back after claim_after, as it does steps left pending.
			w.left()
			select {
			case <-ctx.Done():
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, 5*time.Second)
			continue
		}
		backoff = 50 * time.Millisecond
		if len(acts) == 0 && rd.busy && !rd.topUp {
			// Nothing for the nodes read, and some node waits for room: wait for a step
			// to end (the room it frees), or busyBlock for new entries of the others.
			// No poke: this reader would wake itself.
			w.done(rd)
			select {
			case <-ctx.Done():
			case <-wake:
			case <-time.After(w.rs.busyBlock):
			}
			continue
		}
		if len(acts) == 0 {
			w.done(rd)
			if len(rd.reserved) > 0 {
				w.poke()
			}
			continue
		}
		ahead <- struct{}{}
		batches.Add(1)
		go func() {
			defer batches.Done()
			defer func() { <-ahead }()
			pre := w.preload(acts)
			for k, a := range acts {
				w.start(a, pre[k])
			}
			w.done(rd)
			if len(rd.reserved) > 0 {
				w.poke() // readers left out for lack of room may read now
			}
		}()
	}
}

// preload reads, in one round trip for a whole read, what the activations' steps need
// from Redis and this process does not have: their states, and for steps with side
// effects their runs' statuses (the gate drops a cancelled run's step before it runs).
// A run's status comes with every state read, so a pure step gets it too when its
// state was not here; a pure step that needs nothing from Redis costs no round trip.
func (w *Worker) preload(acts []store.Activation) []preloaded {
	out := make([]preloaded, len(acts))
	var ks []int
	for k, a := range acts {
		if a.Join == "" {
			if s, raw, ok := w.e.cache.get(a.Flow, a.Run, a.Ckpt); ok {
				out[k].state, out[k].raw = s, raw
			}
		}
		needState := a.Join == "" && out[k].state == nil
		needStatus := !w.planNode(a).Pure()
		if needState || needStatus {
			ks = append(ks, k)
		}
	}
	if len(ks) > 0 {
		refs := make([]store.StateRef, len(ks))
		want := make([]bool, len(ks))
		for i, k := range ks {
			refs[i] = store.StateRef{RunRef: acts[k].Ref(), Ckpt: acts[k].Ckpt, First: acts[k].Depth == 1}
			want[i] = acts[k].Join == "" && out[k].state == nil
		}
		got, err := w.e.rdb.LoadStepInputs(w.hard, refs, want)
		if err != nil {
			return out // the gate reads what it needs one by one
		}
		for i, k := range ks {
			if b := got[i].State; b != nil {
				if s, err := flows.DecodeState(b); err == nil {
					out[k].state, out[k].raw = s, b
					w.e.cache.putJSON(acts[k].Flow, acts[k].Run, acts[k].Ckpt, s, b)
				}
			}
			out[k].status, out[k].pins, out[k].keysOf, out[k].known = got[i].Status, got[i].Pins, got[i].KeysOf, true
		}
	}
	return out
}

// planNode returns an activation's node if its plan is compiled in this process.
func (w *Worker) planNode(a store.Activation) *flows.PlanNode {
	if p := w.e.cachedPlan(a.Flow, a.Version); p != nil {
		return p.Nodes[a.Node]
	}
	return nil
}

// start runs an activation's step, counted against its node's limit, in a goroutine of
// its own — or, for a bounded pure step, on the calling goroutine up to its commit
// (inline.go) — and retries it as its node's policy says.
func (w *Worker) start(a store.Activation, pre preloaded) {
	n := w.planNode(a)
	timeout := flows.DefaultSettings.StepTimeout.D()
	if n != nil {
		timeout = n.Timeout
	}
	isPure := n.Pure()
	if !w.inflight.add(a, timeout, !isPure) {
		// The sweeper claimed a step this worker is still running (its heartbeats did
		// not get through); the running one will commit.
		return
	}
	if isPure {
		w.pureSem <- struct{}{} // the executor's bound: the reader waits for room
	}
	w.steps.Add(1)
	release := func(out stepOutcome) {
		if out == outcomeLeft && w.ctx.Err() == nil {
			// Redis could not take its commit or failure: the sweeper takes it back
			// once it has been idle for claim_after.
			w.left()
		}
		w.inflight.remove(a)
		if isPure {
			<-w.pureSem
		}
		w.poke()
		w.steps.Done()
	}
	if w.inlines(a, pre) {
		w.runInline(a, pre, release)
		return
	}
	go func() { release(w.withRetries(a, pre, time.Now())) }()
}

// left records that an entry may be pending for this worker while it does not run it
// (sweep.go).
func (w *Worker) left() { w.leftPending.mark() }

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
