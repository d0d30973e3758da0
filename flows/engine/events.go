package engine

import (
	"context"
	"encoding/json"
	"log/slog"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/sluicehq/sluice/flows"
	"github.com/sluicehq/sluice/store"
)

// eventBatcher appends live events that are not part of a commit (a step started,
// streamed LLM tokens) to the flows' events streams, in pipelined batches. Under
// pressure it drops events rather than slow a step down.
type eventBatcher struct {
	rdb *store.Redis
	log *slog.Logger
	ch  chan liveEvent
}

type liveEvent struct {
	flow, run, node, kind string
	data                  []byte
}

func newEventBatcher(rdb *store.Redis, log *slog.Logger) *eventBatcher {
	return &eventBatcher{rdb: rdb, log: log, ch: make(chan liveEvent, 4096)}
}

// emit queues an event; it never blocks.
func (b *eventBatcher) emit(flow, run, node, kind string, data any) {
	raw, err := json.Marshal(data)
	if err != nil {
		return
	}
	raw = flows.RedactEvent(raw) // streamed tokens may repeat a secret (flows/secrets.go)
	select {
	case b.ch <- liveEvent{flow: flow, run: run, node: node, kind: kind, data: raw}:
	default:
	}
}

func (b *eventBatcher) run(ctx context.Context) {
	var batch []liveEvent
	flush := func() {
		if len(batch) == 0 {
			return
		}
		fctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		pipe := b.rdb.Client.Pipeline()
		for _, ev := range batch {
			pipe.XAdd(fctx, &redis.XAddArgs{Stream: store.FlowKeys(ev.flow).Events(), MaxLen: store.EventsMaxLen, Approx: true,
				Values: []any{"type", ev.kind, "run", ev.run, "node", ev.node, "data", ev.data, "ckpt", "", "step", ""}})
		}
		if _, err := pipe.Exec(fctx); err != nil {
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
