package store

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Event is an entry of a flow's events stream: what the live views show.
type Event struct {
	ID   string          `json:"id"` // stream entry id: resume after it
	Flow string          `json:"flow"`
	Type string          `json:"type"` // step, run, start, retry, dead, turn, resumed, retried, token, ...
	Run  string          `json:"run,omitempty"`
	Node string          `json:"node,omitempty"`
	Data json.RawMessage `json:"data,omitempty"`
	Ckpt string          `json:"checkpoint,omitempty"`
	Step int             `json:"step,omitempty"`
}

// eventsFrom decodes one entry of an events stream. A commit writes one entry for all
// its steps (type "steps", see commit.lua): it becomes one "step" event per step, each
// with the id "<entry>.<k>", and a "run" event when the run's status changed.
func eventsFrom(flow string, m redis.XMessage) []Event {
	s := func(k string) string { v, _ := m.Values[k].(string); return v }
	if s("type") != "steps" {
		ev := Event{ID: m.ID, Flow: flow, Type: s("type"), Run: s("run"), Node: s("node"), Ckpt: s("ckpt")}
		if d := s("data"); d != "" && json.Valid([]byte(d)) {
			ev.Data = json.RawMessage(d)
		}
		ev.Step, _ = strconv.Atoi(s("step"))
		return []Event{ev}
	}
	var steps []stepEvent
	_ = json.Unmarshal([]byte(s("data")), &steps)
	entry := s("ckpt") // the commit's checkpoint entry: step k's checkpoint is subID(entry, k, n)
	first, _ := strconv.Atoi(s("step"))
	out := make([]Event, 0, len(steps)+1)
	for k, st := range steps {
		ev := Event{ID: m.ID + "." + strconv.Itoa(k), Flow: flow, Type: "step", Run: s("run"), Node: st.Node, Data: st.Data, Step: first + k}
		if entry != "" {
			ev.Ckpt = subID(entry, k, len(steps))
		}
		out = append(out, ev)
	}
	if st := s("node"); st != "" {
		out = append(out, Event{ID: m.ID + "." + strconv.Itoa(len(steps)), Flow: flow, Type: "run", Run: s("run"),
			Data: json.RawMessage(`{"status":"` + st + `"}`)})
	}
	return out
}

// LastEventID returns the id of the newest entry of flow's events stream, "0-0" when it
// is empty: reading after it gets only what comes next.
func (r *Redis) LastEventID(ctx context.Context, flow string) (string, error) {
	msgs, err := r.Client.XRevRangeN(ctx, FlowKeys(flow).Events(), "+", "-", 1).Result()
	if err != nil {
		return "", err
	}
	if len(msgs) == 0 {
		return "0-0", nil
	}
	return msgs[0].ID, nil
}

// EventsAfter returns up to count entries' worth of events of flow that came after id,
// oldest first.
func (r *Redis) EventsAfter(ctx context.Context, flow, id string, count int64) ([]Event, error) {
	if !ValidStreamID(id) {
		id = "0-0"
	}
	entry, _, hasSub := strings.Cut(id, ".")
	start := "(" + entry
	if hasSub {
		start = entry // the rest of that entry's events, then what follows
	}
	msgs, err := r.Client.XRangeN(ctx, FlowKeys(flow).Events(), start, "+", count).Result()
	if err != nil {
		return nil, err
	}
	var out []Event
	for _, m := range msgs {
		for _, ev := range eventsFrom(flow, m) {
			if hasSub && m.ID == entry && CompareStreamIDs(ev.ID, id) <= 0 {
				continue
			}
			out = append(out, ev)
		}
	}
	return out, nil
}

// ReadEvents waits at most block for events of flow after id and returns them.
func (r *Redis) ReadEvents(ctx context.Context, flow, id string, count int64, block time.Duration) ([]Event, error) {
	entry, _, _ := strings.Cut(id, ".") // events of one entry are always read together
	res, err := r.Client.XRead(ctx, &redis.XReadArgs{Streams: []string{FlowKeys(flow).Events(), entry}, Count: count, Block: block}).Result()
	if errors.Is(err, redis.Nil) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []Event
	for _, s := range res {
		for _, m := range s.Messages {
			out = append(out, eventsFrom(flow, m)...)
		}
	}
	return out, nil
}

// LiveEvent is an event appended outside a commit (a step started, streamed tokens).
type LiveEvent struct {
	Flow, Run, Node, Type string
	Data                  []byte
}

// AppendEvents adds live events to their flows' events streams in one pipeline.
func (r *Redis) AppendEvents(ctx context.Context, evs []LiveEvent) error {
	pipe := r.Client.Pipeline()
	for _, ev := range evs {
		pipe.XAdd(ctx, &redis.XAddArgs{Stream: FlowKeys(ev.Flow).Events(), MaxLen: EventsMaxLen, Approx: true,
			Values: []any{"type", ev.Type, "run", ev.Run, "node", ev.Node, "data", ev.Data, "ckpt", "", "step", ""}})
	}
	_, err := pipe.Exec(ctx)
	return err
}

// ValidStreamID reports whether s is a complete stream entry id ("ms-seq"), or the id
// of one event of an entry that holds several ("ms-seq.k").
func ValidStreamID(s string) bool {
	_, _, _, ok := parseEventID(s)
	return ok
}

// parseEventID splits "ms-seq" or "ms-seq.k"; k is -1 for a plain entry id.
func parseEventID(s string) (ms, seq uint64, k int64, ok bool) {
	id, sub, hasSub := strings.Cut(s, ".")
	a, b, found := strings.Cut(id, "-")
	if !found {
		return 0, 0, 0, false
	}
	var err1, err2 error
	ms, err1 = strconv.ParseUint(a, 10, 64)
	seq, err2 = strconv.ParseUint(b, 10, 64)
	if err1 != nil || err2 != nil {
		return 0, 0, 0, false
	}
	k = -1
	if hasSub {
		n, err := strconv.ParseUint(sub, 10, 32)
		if err != nil {
			return 0, 0, 0, false
		}
		k = int64(n)
	}
	return ms, seq, k, true
}

// CompareStreamIDs orders two valid event ids: -1, 0 or 1. A plain entry id comes after
// every event of that entry ("ms-seq.k"): it stands for the whole entry.
func CompareStreamIDs(a, b string) int {
	am, as, ak, _ := parseEventID(a)
	bm, bs, bk, _ := parseEventID(b)
	if ak < 0 {
		ak = 1 << 40
	}
	if bk < 0 {
		bk = 1 << 40
	}
	switch {
	case am != bm:
		return cmp(am < bm)
	case as != bs:
		return cmp(as < bs)
	case ak != bk:
		return cmp(ak < bk)
	}
	return 0
}

func cmp(less bool) int {
	if less {
		return -1
	}
	return 1
}

// ReadFlowsEvents waits at most block for events of several flows, each after its own id
// in after (an event id: one of a commit's events stands for its whole entry), and
// returns them with their flows.
func (r *Redis) ReadFlowsEvents(ctx context.Context, flows, after []string, count int64, block time.Duration) ([]Event, error) {
	if len(flows) == 0 {
		return nil, nil
	}
	streams := make([]string, 0, 2*len(flows))
	byKey := make(map[string]string, len(flows))
	for _, f := range flows {
		key := FlowKeys(f).Events()
		streams = append(streams, key)
		byKey[key] = f
	}
	for _, id := range after {
		entry, _, _ := strings.Cut(id, ".")
		streams = append(streams, entry)
	}
	res, err := r.Client.XRead(ctx, &redis.XReadArgs{Streams: streams, Count: count, Block: block}).Result()
	if errors.Is(err, redis.Nil) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []Event
	for _, s := range res {
		for _, m := range s.Messages {
			out = append(out, eventsFrom(byKey[s.Stream], m)...)
		}
	}
	return out, nil
}
