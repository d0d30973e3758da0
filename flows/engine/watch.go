package engine

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/sluicehq/sluice/store"
)

// runWatcher wakes whoever waits for a run to settle (the API's ?wait, `sluice run`, a
// subflow's parent step) when the run's status changes, instead of each of them reading
// the run hash every few milliseconds. One goroutine per engine tails the events streams
// of the partitions that hold runs with waiters, while there are any.
type runWatcher struct {
	rdb *store.Redis
	log *slog.Logger

	mu      sync.Mutex
	waiters map[store.RunRef]map[chan struct{}]bool // channels to wake
	after   map[store.PartRef]string                // the event id read up to
	running bool
}

// watchBlock is how long one read of the events streams waits; a partition that gets
// its first waiter joins the read within this time (its events from the moment it was
// added are not missed).
const watchBlock = 250 * time.Millisecond

// waitSafety is how often a waiter reads its run anyway, in case a wake-up was lost
// (the events stream is capped, Redis restarted).
const waitSafety = 2 * time.Second

func newRunWatcher(rdb *store.Redis, log *slog.Logger) *runWatcher {
	return &runWatcher{rdb: rdb, log: log, waiters: map[store.RunRef]map[chan struct{}]bool{}, after: map[store.PartRef]string{}}
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
	if !watched {
		id, err := rw.rdb.PartLastEventID(ctx, part)
		if err != nil {
			return nil, nil, err
		}
		rw.mu.Lock()
		if _, ok := rw.after[part]; !ok {
			rw.after[part] = id
		}
		rw.mu.Unlock()
	}
	ch := make(chan struct{}, 1)
	rw.mu.Lock()
	if rw.waiters[ref] == nil {
		rw.waiters[ref] = map[chan struct{}]bool{}
	}
	rw.waiters[ref][ch] = true
	if !rw.running {
		rw.running = true
		go rw.loop()
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

// loop reads the watched partitions' events while anyone waits, and wakes the waiters
// of runs whose status changed.
func (rw *runWatcher) loop() {
	backoff := 50 * time.Millisecond
	for {
		rw.mu.Lock()
		if len(rw.waiters) == 0 {
			rw.running = false
			rw.after = map[store.PartRef]string{}
			rw.mu.Unlock()
			return
		}
		wanted := map[store.PartRef]bool{}
		for ref := range rw.waiters {
			wanted[store.PartRef{Flow: ref.Flow, Part: ref.Part}] = true
		}
		var parts []store.PartRef
		var after []string
		for p, id := range rw.after {
			if !wanted[p] {
				delete(rw.after, p)
				continue
			}
			parts, after = append(parts, p), append(after, id)
		}
		rw.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), watchBlock+5*time.Second)
		evs, err := rw.rdb.ReadRunsEvents(ctx, parts, after, 1000, watchBlock)
		cancel()
		if store.IsClosed(err) {
			// The engine's Redis was closed: waiters learn it from their next read.
			rw.mu.Lock()
			rw.running = false
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
		rw.mu.Lock()
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
		rw.mu.Unlock()
	}
}
