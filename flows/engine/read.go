package engine

import (
	"context"
	"sort"
	"time"

	"github.com/sluicehq/sluice/flows"
	"github.com/sluicehq/sluice/store"
)

// maxReadStreams bounds the streams one blocking read covers: a worker serving more
// runs one reader per group of them. Readers, not flows, hold connections.
const maxReadStreams = 256

// ensureReaders starts readers until there is one per group of maxReadStreams streams.
func (w *Worker) ensureReaders() {
	w.mu.Lock()
	n := 0
	for _, s := range w.served {
		n += len(s.nodes)
	}
	want := max(1, (n+maxReadStreams-1)/maxReadStreams)
	ctx := w.ctx
	var start []int
	for w.readers < want {
		start = append(start, w.readers)
		w.readers++
	}
	w.mu.Unlock()
	for _, i := range start {
		w.bg.Add(1)
		go func() { defer w.bg.Done(); w.readLoop(ctx, i) }()
	}
}

// readable returns reader i's streams that have room for more steps, and how many
// entries to ask each for. COUNT applies to every stream of a read, so a node is read
// only when at least half of its capacity is free: reads stay large and no node goes
// over its limit.
func (w *Worker) readable(i int) (nodes []store.NodeRef, count int, busy bool) {
	w.mu.Lock()
	var all []store.NodeRef
	limits := map[store.NodeRef]int{}
	for _, id := range sortedKeys(w.served) {
		s := w.served[id]
		for _, n := range s.nodes {
			r := store.NodeRef{Flow: id, Node: n}
			all = append(all, r)
			limits[r] = s.limit(n)
		}
	}
	w.mu.Unlock()
	lo, hi := i*maxReadStreams, min((i+1)*maxReadStreams, len(all))
	if lo >= hi {
		return nil, 0, false
	}
	count = 64
	for _, r := range all[lo:hi] {
		limit := limits[r]
		free := limit - w.inflight.count(r.Flow, r.Node)
		if free >= max(limit/2, 1) {
			nodes = append(nodes, r)
			count = min(count, free)
		} else {
			busy = true
		}
	}
	return nodes, count, busy
}

// busyBlock is how long a read blocks while some node is left out of it for lack of
// room: a blocking read cannot be told that room was made, so it must come back soon.
const busyBlock = 20 * time.Millisecond

// readLoop is reader i: it reads activations and starts their steps until ctx ends.
func (w *Worker) readLoop(ctx context.Context, i int) {
	backoff := 50 * time.Millisecond
	for ctx.Err() == nil {
		nodes, count, busy := w.readable(i)
		if len(nodes) == 0 {
			// Nothing to read, or every node is busy: wait for a step to finish.
			select {
			case <-ctx.Done():
			case <-w.wake:
			case <-time.After(w.opts.Block):
			}
			continue
		}
		block := w.opts.Block
		if busy {
			block = min(block, busyBlock)
		}
		acts, err := w.e.rdb.ReadNodes(ctx, w.consumer, nodes, count, block)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			w.e.log.Warn("worker: read failed; backing off", "error", err, "backoff", backoff)
			select {
			case <-ctx.Done():
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, 5*time.Second)
			continue
		}
		backoff = 50 * time.Millisecond
		if len(acts) == 0 {
			continue
		}
		pre := w.preload(acts)
		for k, a := range acts {
			w.start(a, pre[k])
		}
	}
}

// preload reads, in one round trip for a whole read, what the activations' steps need
// from Redis and this process does not have: their states, and for steps with side
// effects their runs' statuses (the gate drops a cancelled run's step before it runs).
func (w *Worker) preload(acts []store.Activation) []preloaded {
	out := make([]preloaded, len(acts))
	byFlow := map[string][]int{}
	for k, a := range acts {
		if a.Join == "" {
			if s, ok := w.e.cache.get(a.Run, a.Ckpt); ok {
				out[k].state = s
			}
		}
		needState := a.Join == "" && out[k].state == nil
		needStatus := !pure(w.planNode(a))
		if needState || needStatus {
			byFlow[a.Flow] = append(byFlow[a.Flow], k)
		}
	}
	for flow, ks := range byFlow {
		refs := make([]store.StateRef, len(ks))
		want := make([]bool, len(ks))
		for i, k := range ks {
			refs[i] = store.StateRef{Run: acts[k].Run, Ckpt: acts[k].Ckpt}
			want[i] = acts[k].Join == "" && out[k].state == nil
		}
		got, err := w.e.rdb.LoadStepInputs(w.hard, flow, refs, want)
		if err != nil {
			continue // the gate reads what it needs one by one
		}
		for i, k := range ks {
			if b := got[i].State; b != nil {
				if s, err := flows.DecodeState(b); err == nil {
					out[k].state = s
					w.e.cache.put(acts[k].Run, acts[k].Ckpt, s)
				}
			}
			out[k].status, out[k].pins, out[k].known = got[i].Status, got[i].Pins, true
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

// start runs an activation's step in a goroutine of its own, counted against its
// node's limit, and retries it as its node's policy says.
func (w *Worker) start(a store.Activation, pre preloaded) {
	n := w.planNode(a)
	timeout := flows.DefaultSettings.StepTimeout.D()
	if n != nil {
		timeout = n.Timeout
	}
	isPure := pure(n)
	if !w.inflight.add(a, timeout, !isPure) {
		// The sweeper claimed a step this worker is still running (its heartbeats did
		// not get through); the running one will commit.
		return
	}
	if isPure {
		w.pureSem <- struct{}{} // the executor's bound: the reader waits for room
	}
	w.steps.Add(1)
	go func() {
		defer w.steps.Done()
		defer w.poke()
		defer w.inflight.remove(a)
		if isPure {
			defer func() { <-w.pureSem }()
		}
		if w.withRetries(a, pre, time.Now()) == outcomeLeft && w.ctx.Err() == nil {
			// Redis could not take its commit or failure: the sweeper takes it back
			// once it has been idle for claim_after.
			w.mu.Lock()
			w.leftAt = time.Now()
			w.mu.Unlock()
		}
	}()
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
