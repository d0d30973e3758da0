package store

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/sluicehq/sluice/flows"
)

// Result is an entry of a flow partition's results stream: a run that finished.
type Result struct {
	Flow       string
	Part       int
	ID         string // stream entry id
	Run        string
	Status     string
	Deliveries int // how often the dispatch group has delivered it (1 on first read)
}

// PartRef names one partition of a flow.
type PartRef struct {
	Flow string
	Part int
}

// Tag is the partition's hash tag: keys of one tag can go in one command on a cluster.
func (p PartRef) Tag() string { return tagOf(p.Flow, p.Part) }

func (p PartRef) keys() Keys { return PartKeys(p.Flow, p.Part) }

func resultFrom(pr PartRef, m redis.XMessage, deliveries int) Result {
	res := Result{Flow: pr.Flow, Part: pr.Part, ID: m.ID, Deliveries: deliveries}
	res.Run, _ = m.Values["run"].(string)
	res.Status, _ = m.Values["status"].(string)
	return res
}

// ReadResults reads new entries of the results streams of some flow partitions for
// consumer of the dispatch group, waiting at most block. On one server it is one
// XREADGROUP; on a cluster, whose XREADGROUP takes the streams of one slot only, the
// partitions are read without blocking, in one pipeline, every dispatchPoll within block.
// A missing group is created and the read returns nothing.
func (r *Redis) ReadResults(ctx context.Context, parts []PartRef, consumer string, count int, block time.Duration) ([]Result, error) {
	if !r.cluster || len(parts) <= 1 {
		return r.readResults(ctx, parts, consumer, count, block)
	}
	deadline := time.Now().Add(block)
	for {
		pipe := r.Client.Pipeline()
		cmds := make([]*redis.XStreamSliceCmd, len(parts))
		for i, pr := range parts {
			cmds[i] = pipe.XReadGroup(ctx, &redis.XReadGroupArgs{Group: DispatchGroup, Consumer: consumer, Streams: []string{pr.keys().Results(), ">"}, Count: int64(count), Block: -1})
		}
		_, _ = pipe.Exec(ctx)
		var out []Result
		for i, c := range cmds {
			res, err := c.Result()
			if err != nil && !errors.Is(err, redis.Nil) {
				if isNoGroup(err) {
					_ = r.EnsureGroups(ctx, parts[i].Flow, nil)
					continue
				}
				return out, err
			}
			for _, s := range res {
				for _, m := range s.Messages {
					out = append(out, resultFrom(parts[i], m, 1))
				}
			}
		}
		if len(out) > 0 || time.Now().After(deadline) {
			return out, nil
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(dispatchPoll):
		}
	}
}

// dispatchPoll is how often the results of a cluster's partitions are looked at.
const dispatchPoll = 250 * time.Millisecond

func (r *Redis) readResults(ctx context.Context, parts []PartRef, consumer string, count int, block time.Duration) ([]Result, error) {
	if len(parts) == 0 {
		return nil, nil
	}
	streams := make([]string, 0, 2*len(parts))
	byKey := make(map[string]PartRef, len(parts))
	for _, pr := range parts {
		key := pr.keys().Results()
		streams = append(streams, key)
		byKey[key] = pr
	}
	for range parts {
		streams = append(streams, ">")
	}
	if block <= 0 {
		block = -1 // go-redis: no BLOCK argument
	}
	res, err := r.Client.XReadGroup(ctx, &redis.XReadGroupArgs{Group: DispatchGroup, Consumer: consumer, Streams: streams, Count: int64(count), Block: block}).Result()
	if errors.Is(err, redis.Nil) {
		return nil, nil
	}
	if err != nil {
		if isNoGroup(err) {
			for _, pr := range parts {
				if err := r.EnsureGroups(ctx, pr.Flow, nil); err != nil {
					return nil, err
				}
			}
			return nil, nil
		}
		return nil, err
	}
	var out []Result
	for _, s := range res {
		for _, m := range s.Messages {
			out = append(out, resultFrom(byKey[s.Stream], m, 1))
		}
	}
	return out, nil
}

// ClaimResults hands results entries of flow that have been pending longer than minIdle
// (their dispatcher crashed) to consumer, at most limit of them, with their delivery
// counts.
func (r *Redis) ClaimResults(ctx context.Context, pr PartRef, consumer string, minIdle time.Duration, limit int) ([]Result, error) {
	key := pr.keys().Results()
	res, err := r.Client.Do(ctx, "XAUTOCLAIM", key, DispatchGroup, consumer, minIdle.Milliseconds(), "0-0", "COUNT", limit).Slice()
	if err != nil {
		if isNoGroup(err) || errors.Is(err, redis.Nil) {
			return nil, nil
		}
		return nil, err
	}
	if len(res) < 2 {
		return nil, nil
	}
	msgs := parseXMessages(res[1])
	if len(msgs) == 0 {
		return nil, nil
	}
	counts := map[string]int{}
	if pend, err := r.Client.XPendingExt(ctx, &redis.XPendingExtArgs{Stream: key, Group: DispatchGroup, Start: msgs[0].ID, End: msgs[len(msgs)-1].ID, Count: int64(len(msgs)) + 100, Consumer: consumer}).Result(); err == nil {
		for _, p := range pend {
			counts[p.ID] = int(p.RetryCount)
		}
	}
	out := make([]Result, 0, len(msgs))
	for _, m := range msgs {
		if m.Values == nil {
			continue
		}
		out = append(out, resultFrom(pr, m, max(1, counts[m.ID])))
	}
	return out, nil
}

// TouchResult resets the idle time of a result entry consumer is still delivering, so
// another dispatcher does not claim it. It reports false when the entry is no longer
// consumer's.
func (r *Redis) TouchResult(ctx context.Context, res Result, consumer string) (bool, error) {
	n, err := heartbeatScript.Run(ctx, r.Client, []string{PartKeys(res.Flow, res.Part).Results()}, DispatchGroup, consumer, res.ID).Int()
	return n > 0, err
}

// AckResult acknowledges a delivered (or dead-lettered) result entry and trims the
// results stream below what the dispatch group has acknowledged (see AckResults).
func (r *Redis) AckResult(ctx context.Context, res Result) error {
	return r.AckResults(ctx, []Result{res})
}

// AckResults acknowledges result entries and trims each results stream below its
// group's oldest pending entry, or, when none is pending, below the entry after the
// group's last delivered one: every entry before that was delivered and acknowledged.
// (The newest entry acknowledged in this call is no bound: dispatchers acknowledge
// concurrently, so the last to acknowledge may hold an older entry than another's.) The
// group is read before its pending list: an entry delivered in between is after the
// bound. The results stream so only ever loses entries the dispatch group has
// acknowledged. One XTRIM per stream and call costs Redis less than an XDEL per entry,
// each of which walks its listpack node from the start; the trim is exact, so a stream
// whose results are all delivered is empty. Two round trips.
func (r *Redis) AckResults(ctx context.Context, res []Result) error {
	type acks struct {
		key    string
		ids    []string
		newest string
	}
	by := map[PartRef]*acks{}
	var order []*acks
	for _, x := range res {
		pr := PartRef{Flow: x.Flow, Part: x.Part}
		a := by[pr]
		if a == nil {
			a = &acks{key: pr.keys().Results()}
			by[pr] = a
			order = append(order, a)
		}
		a.ids = append(a.ids, x.ID)
		if a.newest == "" || CompareStreamIDs(x.ID, a.newest) > 0 {
			a.newest = x.ID
		}
	}
	if len(order) == 0 {
		return nil
	}
	pipe := r.Client.Pipeline()
	oldest := make([]*redis.XPendingExtCmd, len(order))
	groups := make([]*redis.XInfoGroupsCmd, len(order))
	for i, a := range order {
		pipe.XAck(ctx, a.key, DispatchGroup, a.ids...)
		groups[i] = pipe.XInfoGroups(ctx, a.key)
		oldest[i] = pipe.XPendingExt(ctx, &redis.XPendingExtArgs{Stream: a.key, Group: DispatchGroup, Start: "-", End: "+", Count: 1})
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return err
	}
	pipe = r.Client.Pipeline()
	for i, a := range order {
		min := nextStreamID(a.newest)
		for _, g := range groups[i].Val() {
			if g.Name == DispatchGroup && CompareStreamIDs(nextStreamID(g.LastDeliveredID), min) > 0 {
				min = nextStreamID(g.LastDeliveredID)
			}
		}
		if p := oldest[i].Val(); len(p) > 0 {
			min = p[0].ID
		}
		pipe.XTrimMinID(ctx, a.key, min)
	}
	_, err := pipe.Exec(ctx)
	return err
}

// ResultsLength is the number of entries in a flow's results stream.
func (r *Redis) ResultsLength(ctx context.Context, flow string) (int64, error) {
	parts, err := r.Parts(ctx, flow)
	if err != nil {
		return 0, err
	}
	var n int64
	for _, pr := range parts {
		l, err := r.Client.XLen(ctx, pr.keys().Results()).Result()
		if err != nil {
			return 0, err
		}
		n += l
	}
	return n, nil
}

// FailedDelivery is a result webhook that was given up on.
type FailedDelivery struct {
	ID       string    `json:"id"`
	Flow     string    `json:"flow"`
	Run      string    `json:"run"`
	Status   string    `json:"status"`
	Target   string    `json:"target"` // scheme and host of the webhook, never its path or query
	Error    string    `json:"error"`
	Attempts int       `json:"attempts"`
	Time     time.Time `json:"time"`
}

// DeadDelivery records a result webhook given up on in the flow's delivery dead letters.
// The result entry is acknowledged by the dispatcher once every webhook of the run was
// delivered or recorded so (the two are in different slots on a cluster: a crash between
// them leaves the entry pending, and its failures are recorded again — at least once).
func (r *Redis) DeadDelivery(ctx context.Context, res Result, target, errMsg string, attempts int) (string, error) {
	id, err := r.Client.XAdd(ctx, &redis.XAddArgs{Stream: FlowKeys(res.Flow).DeliveryDead(), MaxLen: EventsMaxLen, Approx: true,
		Values: []any{"run", res.Run, "status", res.Status, "target", target, "error", errMsg, "attempts", strconv.Itoa(attempts),
			"ts", strconv.FormatInt(nowMS(), 10), "part", strconv.Itoa(res.Part)}}).Result()
	return id, err
}

// FailedDeliveries lists a flow's undeliverable result webhooks, oldest first.
func (r *Redis) FailedDeliveries(ctx context.Context, flow string, count int64) ([]FailedDelivery, error) {
	msgs, err := r.Client.XRangeN(ctx, FlowKeys(flow).DeliveryDead(), "-", "+", count).Result()
	if err != nil {
		return nil, err
	}
	out := make([]FailedDelivery, len(msgs))
	for i, m := range msgs {
		s := func(k string) string { v, _ := m.Values[k].(string); return v }
		n, _ := strconv.Atoi(s("attempts"))
		out[i] = FailedDelivery{ID: m.ID, Flow: flow, Run: s("run"), Status: s("status"), Target: s("target"), Error: s("error"), Attempts: n, Time: msTime(s("ts"))}
	}
	return out, nil
}

// RetryDelivery puts a failed delivery back on the results stream, so the dispatcher
// tries it again from its first attempt.
func (r *Redis) RetryDelivery(ctx context.Context, flow, id string) (string, error) {
	k := FlowKeys(flow)
	msgs, err := r.Client.XRange(ctx, k.DeliveryDead(), id, id).Result()
	if err != nil {
		if strings.Contains(err.Error(), "Invalid stream ID") {
			return "", &flows.Error{Code: flows.NotFound, Flow: flow, Message: fmt.Sprintf("no failed delivery %q", id)}
		}
		return "", err
	}
	if len(msgs) == 0 {
		return "", &flows.Error{Code: flows.NotFound, Flow: flow, Message: fmt.Sprintf("no failed delivery %q", id)}
	}
	run, _ := msgs[0].Values["run"].(string)
	status, _ := msgs[0].Values["status"].(string)
	ps, _ := msgs[0].Values["part"].(string)
	part, _ := strconv.Atoi(ps)
	// The results stream of the run's partition, then the failed delivery goes (two
	// slots on a cluster: a crash between them leaves both, and a retry again is harmless).
	add, err := r.Client.XAdd(ctx, &redis.XAddArgs{Stream: PartKeys(flow, part).Results(), Values: []any{"run", run, "status", status, "retried", id}}).Result()
	if err != nil {
		return "", err
	}
	if err := r.Client.XDel(ctx, k.DeliveryDead(), id).Err(); err != nil {
		return "", err
	}
	return add, nil
}

// DiscardDelivery deletes a failed delivery.
func (r *Redis) DiscardDelivery(ctx context.Context, flow, id string) error {
	n, err := r.Client.XDel(ctx, FlowKeys(flow).DeliveryDead(), id).Result()
	if err != nil {
		if strings.Contains(err.Error(), "Invalid stream ID") {
			return &flows.Error{Code: flows.NotFound, Flow: flow, Message: fmt.Sprintf("no failed delivery %q", id)}
		}
		return err
	}
	if n == 0 {
		return &flows.Error{Code: flows.NotFound, Flow: flow, Message: fmt.Sprintf("no failed delivery %q", id)}
	}
	return nil
}
