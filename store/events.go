package store

import (
	"context"
	"encoding/json"
	"errors"
	"sort"
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
	Part int             `json:"partition,omitempty"` // the run's partition
}

// eventsFrom decodes one entry of a partition's events stream. A commit writes one
// entry for all its steps (type "steps", see commit.lua): it becomes one "step" event per
// step, each with the id "<entry>.<k>", and a "run" event when the run's status changed.
// Events of a partition p > 0 have "@p" at the end of their ids.
func eventsFrom(pr PartRef, m redis.XMessage) []Event {
	s := func(k string) string { v, _ := m.Values[k].(string); return v }
	suffix := ""
	if pr.Part > 0 {
		suffix = "@" + strconv.Itoa(pr.Part)
	}
	if s("type") == "batch" {
		var commits []batchEvent
		_ = json.Unmarshal([]byte(s("data")), &commits)
		var out []Event
		k := 0
		for _, c := range commits {
			out = append(out, stepEvents(pr, m.ID, suffix, &k, c.Run, c.Status, c.Ckpt, c.Step, c.Steps)...)
		}
		return out
	}
	if s("type") != "steps" {
		ev := Event{ID: m.ID + suffix, Flow: pr.Flow, Part: pr.Part, Type: s("type"), Run: s("run"), Node: s("node"), Ckpt: s("ckpt")}
		if d := s("data"); d != "" && json.Valid([]byte(d)) {
			ev.Data = json.RawMessage(d)
		}
		ev.Step, _ = strconv.Atoi(s("step"))
		return []Event{ev}
	}
	var steps []stepEvent
	_ = json.Unmarshal([]byte(s("data")), &steps)
	first, _ := strconv.Atoi(s("step"))
	k := 0
	return stepEvents(pr, m.ID, suffix, &k, s("run"), s("node"), s("ckpt"), first, steps)
}

// batchEvent is one commit of a "batch" events entry (see commit.lua).
type batchEvent struct {
	Run    string      `json:"r"`
	Status string      `json:"st"`
	Ckpt   string      `json:"c"`
	Step   int         `json:"s"`
	Steps  []stepEvent `json:"e"`
}

// stepEvents are the events of one commit's steps in events entry id, numbered on from
// *k: one "step" event per step and a "run" event when the run's status changed. entry
// is the commit's checkpoint entry: step j's checkpoint is subID(entry, j, n).
func stepEvents(pr PartRef, id, suffix string, k *int, run, status, entry string, first int, steps []stepEvent) []Event {
	out := make([]Event, 0, len(steps)+1)
	for j, st := range steps {
		st.full()
		ev := Event{ID: id + "." + strconv.Itoa(*k) + suffix, Flow: pr.Flow, Part: pr.Part, Type: "step", Run: run, Node: st.Node, Data: st.Data, Step: first + j}
		if entry != "" {
			ev.Ckpt = subID(entry, j, len(steps))
		}
		out = append(out, ev)
		*k++
	}
	if status != "" {
		out = append(out, Event{ID: id + "." + strconv.Itoa(*k) + suffix, Flow: pr.Flow, Part: pr.Part, Type: "run", Run: run,
			Data: json.RawMessage(`{"status":"` + status + `"}`)})
		*k++
	}
	return out
}

// A flow's events are in one stream per partition. Events are ordered by time, then
// partition, then their place in their stream (CompareStreamIDs); "after an event" means
// after it in that order, so one event id (the last a client saw) says where to resume in
// every partition: in its own, after it; in the others, after its time.

// LastEventID returns the id of the newest event of flow, "0-0" when there is none:
// reading after it gets only what comes next.
func (r *Redis) LastEventID(ctx context.Context, flow string) (string, error) {
	parts, err := r.Parts(ctx, flow)
	if err != nil {
		return "", err
	}
	pipe := r.Client.Pipeline()
	cmds := make([]*redis.XMessageSliceCmd, len(parts))
	for i, pr := range parts {
		cmds[i] = pipe.XRevRangeN(ctx, pr.keys().Events(), "+", "-", 1)
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return "", err
	}
	last := "0-0"
	for i, c := range cmds {
		if msgs := c.Val(); len(msgs) > 0 {
			if id := withPart(msgs[0].ID, parts[i].Part); CompareStreamIDs(id, last) > 0 {
				last = id
			}
		}
	}
	return last, nil
}

// PartLastEventID returns the id of the newest event of one partition of a flow, "0-0"
// when there is none.
func (r *Redis) PartLastEventID(ctx context.Context, pr PartRef) (string, error) {
	msgs, err := r.Client.XRevRangeN(ctx, pr.keys().Events(), "+", "-", 1).Result()
	if err != nil && !errors.Is(err, redis.Nil) {
		return "", err
	}
	if len(msgs) == 0 {
		return "0-0", nil
	}
	return withPart(msgs[0].ID, pr.Part), nil
}

// after is where to read partition p for the events after id: the first entry id to
// read from, and whether it is exclusive.
func after(id string, p int) (start string, exclusive bool) {
	ms, seq, _, part, ok := parseEventID(id)
	switch {
	case !ok:
		return "0-0", false
	case p == part:
		return strconv.FormatUint(ms, 10) + "-" + strconv.FormatUint(seq, 10), true
	case p > part:
		return strconv.FormatUint(ms, 10) + "-0", false
	default:
		return strconv.FormatUint(ms, 10) + "-18446744073709551615", true
	}
}

// sortEvents orders events of several partitions (see CompareStreamIDs).
func sortEvents(evs []Event) {
	sort.SliceStable(evs, func(i, j int) bool { return CompareStreamIDs(evs[i].ID, evs[j].ID) < 0 })
}

// EventsAfter returns events of flow that came after id, oldest first: up to count
// entries' worth of each partition.
func (r *Redis) EventsAfter(ctx context.Context, flow, id string, count int64) ([]Event, error) {
	if !ValidStreamID(id) {
		id = "0-0"
	}
	parts, err := r.Parts(ctx, flow)
	if err != nil {
		return nil, err
	}
	pipe := r.Client.Pipeline()
	cmds := make([]*redis.XMessageSliceCmd, len(parts))
	for i, pr := range parts {
		start, excl := after(id, pr.Part)
		_, _, k, part, _ := parseEventID(id)
		if part == pr.Part && k >= 0 {
			excl = false // the rest of that entry's events, then what follows
		}
		if excl {
			start = "(" + start
		}
		cmds[i] = pipe.XRangeN(ctx, pr.keys().Events(), start, "+", count)
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, err
	}
	var out []Event
	for i, c := range cmds {
		for _, m := range c.Val() {
			for _, ev := range eventsFrom(parts[i], m) {
				if CompareStreamIDs(ev.ID, id) > 0 {
					out = append(out, ev)
				}
			}
		}
	}
	sortEvents(out)
	return out, nil
}

// ReadEvents waits at most block for events of flow after id and returns them.
func (r *Redis) ReadEvents(ctx context.Context, flow, id string, count int64, block time.Duration) ([]Event, error) {
	parts, err := r.Parts(ctx, flow)
	if err != nil {
		return nil, err
	}
	afters := make([]string, len(parts))
	for i := range parts {
		afters[i] = id
	}
	return r.readEvents(ctx, parts, afters, count, block)
}

// readEvents reads the events of several partitions, each after its own event id,
// waiting at most block. On one server it is one XREAD; on a cluster, whose XREAD takes
// the streams of one slot only, the partitions are read without blocking, in one
// pipeline, a few times within block.
func (r *Redis) readEvents(ctx context.Context, parts []PartRef, afters []string, count int64, block time.Duration) ([]Event, error) {
	if len(parts) == 0 {
		return nil, nil
	}
	streams := make([]string, 0, 2*len(parts))
	byKey := make(map[string]PartRef, len(parts))
	for _, pr := range parts {
		key := pr.keys().Events()
		streams = append(streams, key)
		byKey[key] = pr
	}
	for i, pr := range parts {
		start, excl := after(afters[i], pr.Part)
		if !excl {
			start = previousID(start)
		}
		streams = append(streams, start)
	}
	collect := func(res []redis.XStream) []Event {
		var out []Event
		for _, s := range res {
			for _, m := range s.Messages {
				out = append(out, eventsFrom(byKey[s.Stream], m)...)
			}
		}
		sortEvents(out)
		return out
	}
	if !r.cluster || oneTag(parts) {
		res, err := r.Client.XRead(ctx, &redis.XReadArgs{Streams: streams, Count: count, Block: block}).Result()
		if errors.Is(err, redis.Nil) {
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		return collect(res), nil
	}
	deadline := time.Now().Add(block)
	for {
		pipe := r.Client.Pipeline()
		cmds := make([]*redis.XStreamSliceCmd, len(parts))
		for i := range parts {
			cmds[i] = pipe.XRead(ctx, &redis.XReadArgs{Streams: []string{streams[i], streams[len(parts)+i]}, Count: count, Block: -1})
		}
		_, err := pipe.Exec(ctx)
		if err != nil && !errors.Is(err, redis.Nil) {
			return nil, err
		}
		var res []redis.XStream
		for _, c := range cmds {
			res = append(res, c.Val()...)
		}
		if len(res) > 0 || time.Now().After(deadline) {
			return collect(res), nil
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(clusterPoll):
		}
	}
}

// oneTag reports whether parts share one hash tag (one slot on a cluster).
func oneTag(parts []PartRef) bool {
	for _, p := range parts[1:] {
		if p.Tag() != parts[0].Tag() {
			return false
		}
	}
	return true
}

// clusterPoll is how often a read of several partitions' events looks again on a
// cluster.
const clusterPoll = 100 * time.Millisecond

// previousID is the id just before id, for XREAD, which reads after an id.
func previousID(id string) string {
	ms, seq, ok := strings.Cut(id, "-")
	if !ok {
		return id
	}
	s, _ := strconv.ParseUint(seq, 10, 64)
	if s > 0 {
		return ms + "-" + strconv.FormatUint(s-1, 10)
	}
	m, _ := strconv.ParseUint(ms, 10, 64)
	if m == 0 {
		return "0-0"
	}
	return strconv.FormatUint(m-1, 10) + "-18446744073709551615"
}

// LiveEvent is an event appended outside a commit (a step started, streamed tokens).
type LiveEvent struct {
	Flow, Run, Node, Type string
	Part                  int
	Data                  []byte
}

// AppendEvents adds live events to their partitions' events streams in one pipeline.
func (r *Redis) AppendEvents(ctx context.Context, evs []LiveEvent) error {
	pipe := r.Client.Pipeline()
	for _, ev := range evs {
		pipe.XAdd(ctx, &redis.XAddArgs{Stream: PartKeys(ev.Flow, ev.Part).Events(), MaxLen: EventsMaxLen, Approx: true,
			Values: []any{"type", ev.Type, "run", ev.Run, "node", ev.Node, "data", ev.Data, "ckpt", "", "step", ""}})
	}
	_, err := pipe.Exec(ctx)
	return err
}

// ValidStreamID reports whether s is a complete stream entry id ("ms-seq"), or the id
// of one event of an entry that holds several ("ms-seq.k"), either with "@p" for a
// partition p > 0.
func ValidStreamID(s string) bool {
	_, _, _, _, ok := parseEventID(s)
	return ok
}

// parseEventID splits "ms-seq[.k][@p]"; k is -1 for a plain entry id, p 0 without "@".
func parseEventID(s string) (ms, seq uint64, k int64, part int, ok bool) {
	s, ps, hasPart := strings.Cut(s, "@")
	if hasPart {
		n, err := strconv.ParseUint(ps, 10, 16)
		if err != nil {
			return 0, 0, 0, 0, false
		}
		part = int(n)
	}
	id, sub, hasSub := strings.Cut(s, ".")
	a, b, found := strings.Cut(id, "-")
	if !found {
		return 0, 0, 0, 0, false
	}
	var err1, err2 error
	ms, err1 = strconv.ParseUint(a, 10, 64)
	seq, err2 = strconv.ParseUint(b, 10, 64)
	if err1 != nil || err2 != nil {
		return 0, 0, 0, 0, false
	}
	k = -1
	if hasSub {
		n, err := strconv.ParseUint(sub, 10, 32)
		if err != nil {
			return 0, 0, 0, 0, false
		}
		k = int64(n)
	}
	return ms, seq, k, part, true
}

// CompareStreamIDs orders two valid event ids: -1, 0 or 1 — by time, then partition,
// then place in the partition's stream. A plain entry id comes after every event of that
// entry ("ms-seq.k"): it stands for the whole entry.
func CompareStreamIDs(a, b string) int {
	am, as, ak, ap, _ := parseEventID(a)
	bm, bs, bk, bp, _ := parseEventID(b)
	if ak < 0 {
		ak = 1 << 40
	}
	if bk < 0 {
		bk = 1 << 40
	}
	switch {
	case am != bm:
		return cmp(am < bm)
	case ap != bp:
		return cmp(ap < bp)
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

// ReadRunsEvents waits at most block for events of several flows' partitions, each after
// its own event id, and returns them with their flows (see readEvents).
func (r *Redis) ReadRunsEvents(ctx context.Context, parts []PartRef, afters []string, count int64, block time.Duration) ([]Event, error) {
	return r.readEvents(ctx, parts, afters, count, block)
}

// RecentRunEvents returns the events of one run among the newest scan entries of its
// partition's events stream written since since (the run's creation), oldest first: what
// a page needs to tell what the run's steps are doing now (a step started, waiting for a
// rate limit). Older events of the run are not read; neither are events the stream no
// longer holds (it keeps about EventsMaxLen entries).
func (r *Redis) RecentRunEvents(ctx context.Context, ref RunRef, since time.Time, scan int64) ([]Event, error) {
	from := "-"
	if !since.IsZero() {
		from = strconv.FormatInt(since.UnixMilli(), 10) + "-0"
	}
	msgs, err := r.Client.XRevRangeN(ctx, ref.keys().Events(), "+", from, scan).Result()
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, err
	}
	pr := PartRef{Flow: ref.Flow, Part: ref.Part}
	var out []Event
	for i := len(msgs) - 1; i >= 0; i-- {
		run, _ := msgs[i].Values["run"].(string)
		if t, _ := msgs[i].Values["type"].(string); t == "batch" {
			for _, ev := range eventsFrom(pr, msgs[i]) {
				if ev.Run == ref.Run {
					out = append(out, ev)
				}
			}
			continue
		}
		if run != ref.Run {
			continue
		}
		out = append(out, eventsFrom(pr, msgs[i])...)
	}
	return out, nil
}

// EventTime is when the event with id was written (the time in its stream entry id);
// zero for an id that is not one.
func EventTime(id string) time.Time {
	ms, _, _, _, ok := parseEventID(id)
	if !ok {
		return time.Time{}
	}
	return time.UnixMilli(int64(ms)).UTC()
}
