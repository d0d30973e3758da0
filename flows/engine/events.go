package engine

import (
	"context"
	"encoding/json"
	"log/slog"
	"time"

	"github.com/sluicehq/sluice/flows"
	"github.com/sluicehq/sluice/store"
)

// eventBatcher appends live events that are not part of a commit (a step started,
// streamed LLM tokens) to the flows' events streams, in pipelined batches. Under
// pressure it drops events rather than slow a step down.
type eventBatcher struct {
	rdb *store.Redis
	log *slog.Logger
	ch  chan store.LiveEvent
}

func newEventBatcher(rdb *store.Redis, log *slog.Logger) *eventBatcher {
	return &eventBatcher{rdb: rdb, log: log, ch: make(chan store.LiveEvent, 4096)}
}

// emit queues an event; it never blocks.
func (b *eventBatcher) emit(ref store.RunRef, node, kind string, data any) {
	raw, err := json.Marshal(data)
	if err != nil {
		return
	}
	raw = flows.RedactEvent(raw) // streamed tokens may repeat a secret (flows/secrets.go)
	select {
	case b.ch <- store.LiveEvent{Flow: ref.Flow, Run: ref.Run, Part: ref.Part, Node: node, Type: kind, Data: raw}:
	default:
	}
}

func (b *eventBatcher) run(ctx context.Context) {
	var batch []store.LiveEvent
	flush := func() {
		if len(batch) == 0 {
			return
		}
		fctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		if err := b.rdb.AppendEvents(fctx, batch); err != nil {
			b.log.Debug("live events dropped", "count", len(batch), "error", err)
		}
		cancel()
		batch = batch[:0]
	}
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			flush()
			return
		case ev := <-b.ch:
			batch = append(batch, ev)
			if len(batch) >= 256 {
				flush()
			}
		case <-tick.C:
			flush()
		}
	}
}
