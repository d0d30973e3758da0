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

func eventFrom(flow string, m redis.XMessage) Event {
	s := func(k string) string { v, _ := m.Values[k].(string); return v }
	ev := Event{ID: m.ID, Flow: flow, Type: s("type"), Run: s("run"), Node: s("node"), Ckpt: s("ckpt")}
	if d := s("data"); d != "" && json.Valid([]byte(d)) {
		ev.Data = json.RawMessage(d)
	}
	ev.Step, _ = strconv.Atoi(s("step"))
	return ev
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

// EventsAfter returns up to count events of flow that came after id, oldest first.
func (r *Redis) EventsAfter(ctx context.Context, flow, id string, count int64) ([]Event, error) {
	if !ValidStreamID(id) {
		id = "0-0"
	}
	msgs, err := r.Client.XRangeN(ctx, FlowKeys(flow).Events(), "("+id, "+", count).Result()
	if err != nil {
		return nil, err
	}
	out := make([]Event, len(msgs))
	for i, m := range msgs {
		out[i] = eventFrom(flow, m)
	}
	return out, nil
}

// ReadEvents waits at most block for events of flow after id and returns them.
func (r *Redis) ReadEvents(ctx context.Context, flow, id string, count int64, block time.Duration) ([]Event, error) {
	res, err := r.Client.XRead(ctx, &redis.XReadArgs{Streams: []string{FlowKeys(flow).Events(), id}, Count: count, Block: block}).Result()
	if errors.Is(err, redis.Nil) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []Event
	for _, s := range res {
		for _, m := range s.Messages {
			out = append(out, eventFrom(flow, m))
		}
	}
	return out, nil
}

// ValidStreamID reports whether s is a complete stream entry id ("ms-seq").
func ValidStreamID(s string) bool {
	ms, seq, ok := strings.Cut(s, "-")
	if !ok {
		return false
	}
	_, err1 := strconv.ParseUint(ms, 10, 64)
	_, err2 := strconv.ParseUint(seq, 10, 64)
	return err1 == nil && err2 == nil
}

// CompareStreamIDs orders two valid stream ids: -1, 0 or 1.
func CompareStreamIDs(a, b string) int {
	am, as, _ := strings.Cut(a, "-")
	bm, bs, _ := strings.Cut(b, "-")
	x, _ := strconv.ParseUint(am, 10, 64)
	y, _ := strconv.ParseUint(bm, 10, 64)
	if x != y {
		if x < y {
			return -1
		}
		return 1
	}
	x, _ = strconv.ParseUint(as, 10, 64)
	y, _ = strconv.ParseUint(bs, 10, 64)
	switch {
	case x < y:
		return -1
	case x > y:
		return 1
	}
	return 0
}
