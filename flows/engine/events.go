package engine

import (
	"context"
	"encoding/json"
	"log/slog"
	"sync"
	"time"

	"github.com/sluicehq/sluice/flows"
	"github.com/sluicehq/sluice/store"
)

// eventBatcher appends live events that are not part of a commit (a step started,
// streamed LLM tokens) to the flows' events streams, in pipelined batches. Under
// pressure it drops events rather than slow a step down.
//
// A step's commit writes its own event; every event the step emitted before must be in
// the stream ahead of it (a view or the OpenAI gateway that stops at a run's last event
// would lose the tokens after it), so a step that emitted calls barrier before its
// commit. Batches reach Redis in the order they were taken (flushMu), whichever
// goroutine flushes them.
type eventBatcher struct {
	rdb *store.Redis
	log *slog.Logger

	mu    sync.Mutex
	batch []store.LiveEvent
	kick  chan struct{} // a batch is full: flush it now

	flushMu sync.Mutex
}

// maxPendingEvents is how many events may wait for a flush; more are dropped.
const maxPendingEvents = 4096

func newEventBatcher(rdb *store.Redis, log *slog.Logger) *eventBatcher {
	return &eventBatcher{rdb: rdb, log: log, kick: make(chan struct{}, 1)}
}

// emit queues an event; it never blocks on Redis.
func (b *eventBatcher) emit(ref store.RunRef, node, kind string, data any) {
	raw, err := json.Marshal(data)
	if err != nil {
		return
	}
	raw = flows.RedactEvent(ref.Flow, raw) // streamed tokens may repeat a secret (flows/secrets.go)
	b.mu.Lock()
	n := len(b.batch)
	if n < maxPendingEvents {
		b.batch = append(b.batch, store.LiveEvent{Flow: ref.Flow, Run: ref.Run, Part: ref.Part, Node: node, Type: kind, Data: raw})
	}
	b.mu.Unlock()
	if n+1 == 256 {
		select {
		case b.kick <- struct{}{}:
		default:
		}
	}
}

// flush appends what is waiting.
func (b *eventBatcher) flush() {
	b.flushMu.Lock()
	defer b.flushMu.Unlock()
	b.mu.Lock()
	batch := b.batch
	b.batch = nil
	b.mu.Unlock()
	if len(batch) == 0 {
		return
	}
	fctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := b.rdb.AppendEvents(fctx, batch); err != nil {
		b.log.Debug("live events dropped", "count", len(batch), "error", err)
	}
}

// barrier returns once every event emitted before it is in Redis (or was dropped).
func (b *eventBatcher) barrier() { b.flush() }

func (b *eventBatcher) run(ctx context.Context) {
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			b.flush()
			return
		case <-b.kick:
			b.flush()
		case <-tick.C:
			b.flush()
		}
	}
}
