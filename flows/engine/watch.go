package engine

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/sluicehq/sluice/store"
)

// runWatcher wakes whoever waits for a run to settle (the API's ?wait, `sluice run`, a
// subflow's parent step) when the run's status changes, instead of each of them reading
// the run hash every few milliseconds. One goroutine per engine tails the events streams
// of the flows that have waiters, while there are any.
type runWatcher struct {
	rdb *store.Redis
	log *slog.Logger

	mu      sync.Mutex
	waiters map[string]map[chan struct{}]bool // flow \x00 run -> channels to wake
	after   map[string]string                 // flow -> the event id read up to
	running bool
}

// watchBlock is how long one read of the events streams waits; a flow that gets its
// first waiter joins the read within this time (its events from the moment it was
// added are not missed).
const watchBlock = 250 * time.Millisecond

// waitSafety is how often a waiter reads its run anyway, in case a wake-up was lost
// (the events stream is capped, Redis restarted).
const waitSafety = 2 * time.Second

func newRunWatcher(rdb *store.Redis, log *slog.Logger) *runWatcher {
	return &runWatcher{rdb: rdb, log: log, waiters: map[string]map[chan struct{}]bool{}, after: map[string]string{}}
}

// register returns a channel that receives when run's status may have changed, and a
// function to stop. Events from the moment register returns are seen.
func (rw *runWatcher) register(ctx context.Context, flow, run string) (chan struct{}, func(), error) {
	rw.mu.Lock()
	_, watched := rw.after[flow]
	rw.mu.Unlock()
	if !watched {
		id, err := rw.rdb.LastEventID(ctx, flow)
		if err != nil {
			return nil, nil, err
		}
		rw.mu.Lock()
		if _, ok := rw.after[flow]; !ok {
			rw.after[flow] = id
		}
		rw.mu.Unlock()
	}
	ch := make(chan struct{}, 1)
	key := flow + "\x00" + run
	rw.mu.Lock()
	if rw.waiters[key] == nil {
		rw.waiters[key] = map[chan struct{}]bool{}
	}
	rw.waiters[key][ch] = true
	if !rw.running {
		rw.running = true
		go rw.loop()
	}
	rw.mu.Unlock()
	return ch, func() {
		rw.mu.Lock()
		delete(rw.waiters[key], ch)
		if len(rw.waiters[key]) == 0 {
			delete(rw.waiters, key)
		}
		rw.mu.Unlock()
	}, nil
}

// loop reads the watched flows' events while anyone waits, and wakes the waiters of
// runs whose status changed.
func (rw *runWatcher) loop() {
	backoff := 50 * time.Millisecond
	for {
		rw.mu.Lock()
		if len(rw.waiters) == 0 {
			rw.running = false
			rw.after = map[string]string{}
			rw.mu.Unlock()
			return
		}
		wanted := map[string]bool{}
		for key := range rw.waiters {
			flow, _, _ := strings.Cut(key, "\x00")
			wanted[flow] = true
		}
		var flowIDs, after []string
		for f, id := range rw.after {
			if !wanted[f] {
				delete(rw.after, f)
				continue
			}
			flowIDs, after = append(flowIDs, f), append(after, id)
		}
		rw.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), watchBlock+5*time.Second)
		evs, err := rw.rdb.ReadFlowsEvents(ctx, flowIDs, after, 1000, watchBlock)
		cancel()
		if err != nil {
			rw.log.Debug("run watcher: read failed", "error", err)
			time.Sleep(backoff)
			backoff = min(2*backoff, 2*time.Second)
			continue
		}
		backoff = 50 * time.Millisecond
		rw.mu.Lock()
		for _, ev := range evs {
			entry, _, _ := strings.Cut(ev.ID, ".")
			if store.CompareStreamIDs(entry, rw.after[ev.Flow]) > 0 {
				rw.after[ev.Flow] = entry
			}
			if ev.Type != "run" {
				continue
			}
			for ch := range rw.waiters[ev.Flow+"\x00"+ev.Run] {
				select {
				case ch <- struct{}{}:
				default:
				}
			}
		}
		rw.mu.Unlock()
	}
}
