package engine

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/sluicehq/sluice/store"
)

// runWatcher wakes whoever waits for a run to settle (the API's ?wait, `sluice run`,
// `sluice test`, a subflow's parent step) when the run's status changes, instead of each
// of them reading the run hash every few milliseconds. It tails the events streams of
// the partitions that hold runs with waiters, while there are any: one goroutine (a
// loop) per read group, whose blocking read covers the group's watched partitions. On
// one server every partition is in one group (one XREAD reads them all); on a Redis
// Cluster, whose XREAD takes the streams of one slot only, each hash tag is a group of
// its own, so that every read blocks (one read of several slots could only poll them:
// it woke waiters up to 100 ms late).
//
// A blocking read cannot be told that a partition was added to the watch: a waiter whose
// partition its group's read in flight does not cover gets a catch-up read of that
// partition alone, until its group's next read covers it. Without it a wait on a new
// partition woke one block late.
type runWatcher struct {
	rdb *store.Redis
	log *slog.Logger
	// block is how long one read of the events streams waits; safety how often a waiter
	// reads its run anyway, in case a wake-up was lost (the events stream is capped,
	// Redis restarted). watchBlock and waitSafety; tests set them.
	block, safety time.Duration
	// read reads events (store.ReadRunsEvents; tests wrap it).
	read func(ctx context.Context, parts []store.PartRef, afters []string, count int64, block time.Duration) ([]store.Event, error)

	mu       sync.Mutex
	waiters  map[store.RunRef]map[chan struct{}]bool // channels to wake
	after    map[store.PartRef]string                // the event id read up to
	reading  map[store.PartRef]bool                  // what the loops' reads in flight cover
	catching map[store.PartRef]bool                  // partitions with a catch-up read
	running  map[string]bool                         // the read groups with a loop
}

const (
	watchBlock = 250 * time.Millisecond
	waitSafety = 2 * time.Second
)

func newRunWatcher(rdb *store.Redis, log *slog.Logger) *runWatcher {
	return &runWatcher{rdb: rdb, log: log, block: watchBlock, safety: waitSafety, read: rdb.ReadRunsEvents,
		waiters: map[store.RunRef]map[chan struct{}]bool{}, after: map[store.PartRef]string{},
		reading: map[store.PartRef]bool{}, catching: map[store.PartRef]bool{}, running: map[string]bool{}}
}

// group is the read group of partition p: "" on one server, its hash tag on a cluster.
func (rw *runWatcher) group(p store.PartRef) string {
	if !rw.rdb.Cluster() {
		return ""
	}
	return p.Tag()
}

// register returns a channel that receives when run's status may have changed, and a
// function to stop. Events from the moment register returns are seen.
func (rw *runWatcher) register(ctx context.Context, flow, run string) (chan struct{}, func(), error) {
	ref, err := rw.rdb.FindRun(ctx, flow, run)
	if err != nil {
		return nil, nil, err
	}
	part := store.PartRef{Flow: flow, Part: ref.Part}
	rw.mu.Lock()
	_, watched := rw.after[part]
	rw.mu.Unlock()
	id := ""
	if !watched {
		if id, err = rw.rdb.PartLastEventID(ctx, part); err != nil {
			return nil, nil, err
		}
	}
	ch := make(chan struct{}, 1)
	// The partition's position and its waiter are added at once: a loop drops the
	// position of a partition nobody waits on.
	rw.mu.Lock()
	if _, ok := rw.after[part]; !ok {
		if id == "" {
			// Watched when looked at, dropped since: from the newest event on.
			rw.mu.Unlock()
			if id, err = rw.rdb.PartLastEventID(ctx, part); err != nil {
				return nil, nil, err
			}
			rw.mu.Lock()
		}
		if _, ok := rw.after[part]; !ok {
			rw.after[part] = id
		}
	}
	if rw.waiters[ref] == nil {
		rw.waiters[ref] = map[chan struct{}]bool{}
	}
	rw.waiters[ref][ch] = true
	switch g := rw.group(part); {
	case !rw.running[g]:
		rw.running[g] = true
		go rw.loop(g) // its first read covers the partition
	case !rw.reading[part] && !rw.catching[part]:
		rw.catching[part] = true
		go rw.catchUp(part)
	}
	rw.mu.Unlock()
	return ch, func() {
		rw.mu.Lock()
		delete(rw.waiters[ref], ch)
		if len(rw.waiters[ref]) == 0 {
			delete(rw.waiters, ref)
		}
		rw.mu.Unlock()
	}, nil
}

// safetyTick is how often a waiter reads its run anyway.
func (rw *runWatcher) safetyTick() time.Duration {
	rw.mu.Lock()
	defer rw.mu.Unlock()
	return rw.safety
}

// loop reads the events of read group g's watched partitions while anyone waits on one
// of them, and wakes the waiters of runs whose status changed.
func (rw *runWatcher) loop(g string) {
	backoff := 50 * time.Millisecond
	var parts []store.PartRef // what the last read covered
	for {
		rw.mu.Lock()
		for _, p := range parts {
			delete(rw.reading, p)
		}
		wanted := map[store.PartRef]bool{}
		for ref := range rw.waiters {
			if p := (store.PartRef{Flow: ref.Flow, Part: ref.Part}); rw.group(p) == g {
				wanted[p] = true
			}
		}
		parts = parts[:0]
		var after []string
		for p, id := range rw.after {
			if rw.group(p) != g {
				continue
			}
			if !wanted[p] {
				delete(rw.after, p)
				continue
			}
			parts, after = append(parts, p), append(after, id)
			rw.reading[p] = true
		}
		if len(parts) == 0 {
			delete(rw.running, g)
			rw.mu.Unlock()
			return
		}
		block := rw.block
		rw.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), block+5*time.Second)
		evs, err := rw.read(ctx, parts, after, 1000, block)
		cancel()
		if store.IsClosed(err) {
			// The engine's Redis was closed: waiters learn it from their next read.
			rw.mu.Lock()
			delete(rw.running, g)
			for _, p := range parts {
				delete(rw.reading, p)
			}
			rw.mu.Unlock()
			return
		}
		if err != nil {
			rw.log.Debug("run watcher: read failed", "error", err)
			time.Sleep(backoff)
			backoff = min(2*backoff, 2*time.Second)
			continue
		}
		backoff = 50 * time.Millisecond
		rw.deliver(evs)
	}
}

// catchUp reads partition p alone, from where the watch is, until its group's read
// covers it or nobody waits on it any more.
func (rw *runWatcher) catchUp(p store.PartRef) {
	defer func() {
		rw.mu.Lock()
		delete(rw.catching, p)
		rw.mu.Unlock()
	}()
	for {
		rw.mu.Lock()
		after, watched := rw.after[p]
		done := !watched || !rw.running[rw.group(p)] || rw.reading[p] || !rw.waitedOn(p)
		block := rw.block
		rw.mu.Unlock()
		if done {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), block+5*time.Second)
		evs, err := rw.read(ctx, []store.PartRef{p}, []string{after}, 1000, block)
		cancel()
		if err != nil {
			return // its group's next read covers p
		}
		rw.deliver(evs)
	}
}

// waitedOn reports whether anyone waits on a run of partition p (rw.mu held).
func (rw *runWatcher) waitedOn(p store.PartRef) bool {
	for ref := range rw.waiters {
		if ref.Flow == p.Flow && ref.Part == p.Part {
			return true
		}
	}
	return false
}

// deliver moves the watch past evs and wakes the waiters of the runs whose status they
// change. The loop and a catch-up read may both deliver an event: a second wake-up only
// makes a waiter read its run once more.
func (rw *runWatcher) deliver(evs []store.Event) {
	rw.mu.Lock()
	defer rw.mu.Unlock()
	for _, ev := range evs {
		p := store.PartRef{Flow: ev.Flow, Part: ev.Part}
		if last, ok := rw.after[p]; ok && store.CompareStreamIDs(ev.ID, last) > 0 {
			rw.after[p] = ev.ID
		}
		if ev.Type != "run" {
			continue
		}
		for ch := range rw.waiters[store.RunRef{Flow: ev.Flow, Run: ev.Run, Part: ev.Part}] {
			select {
			case ch <- struct{}{}:
			default:
			}
		}
	}
}
