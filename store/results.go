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

// Result is an entry of a flow's results stream: a run that finished.
type Result struct {
	Flow       string
	ID         string // stream entry id
	Run        string
	Status     string
	Deliveries int // how often the dispatch group has delivered it (1 on first read)
}

func resultFrom(flow string, m redis.XMessage, deliveries int) Result {
	res := Result{Flow: flow, ID: m.ID, Deliveries: deliveries}
	res.Run, _ = m.Values["run"].(string)
	res.Status, _ = m.Values["status"].(string)
	return res
}

// ReadResults reads new entries of the results streams of flows for consumer of the
// dispatch group, blocking at most block. A missing group is created and the read
// returns nothing.
func (r *Redis) ReadResults(ctx context.Context, flowIDs []string, consumer string, count int, block time.Duration) ([]Result, error) {
	if len(flowIDs) == 0 {
		return nil, nil
	}
	streams := make([]string, 0, 2*len(flowIDs))
	byKey := make(map[string]string, len(flowIDs))
	for _, f := range flowIDs {
		key := FlowKeys(f).Results()
		streams = append(streams, key)
		byKey[key] = f
	}
	for range flowIDs {
		streams = append(streams, ">")
	}
	res, err := r.Client.XReadGroup(ctx, &redis.XReadGroupArgs{Group: DispatchGroup, Consumer: consumer, Streams: streams, Count: int64(count), Block: block}).Result()
	if errors.Is(err, redis.Nil) {
		return nil, nil
	}
	if err != nil {
		if isNoGroup(err) {
			for _, f := range flowIDs {
				if err := r.EnsureGroups(ctx, f, nil); err != nil {
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
func (r *Redis) ClaimResults(ctx context.Context, flow, consumer string, minIdle time.Duration, limit int) ([]Result, error) {
	key := FlowKeys(flow).Results()
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
		out = append(out, resultFrom(flow, m, max(1, counts[m.ID])))
	}
	return out, nil
}

// TouchResult resets the idle time of a result entry consumer is still delivering, so
// another dispatcher does not claim it. It reports false when the entry is no longer
// consumer's.
func (r *Redis) TouchResult(ctx context.Context, res Result, consumer string) (bool, error) {
	n, err := heartbeatScript.Run(ctx, r.Client, []string{FlowKeys(res.Flow).Results()}, DispatchGroup, consumer, res.ID).Int()
	return n > 0, err
}

// AckResult acknowledges a delivered (or dead-lettered) result entry and deletes it:
// the results stream only ever loses entries the dispatch group has acknowledged.
func (r *Redis) AckResult(ctx context.Context, res Result) error {
	key := FlowKeys(res.Flow).Results()
	pipe := r.Client.TxPipeline()
	pipe.XAck(ctx, key, DispatchGroup, res.ID)
	pipe.XDel(ctx, key, res.ID)
	_, err := pipe.Exec(ctx)
	return err
}

// AckResults acknowledges and deletes several result entries of a flow in one
// transaction.
func (r *Redis) AckResults(ctx context.Context, flow string, res []Result) error {
	if len(res) == 0 {
		return nil
	}
	ids := make([]string, len(res))
	for i, x := range res {
		ids[i] = x.ID
	}
	key := FlowKeys(flow).Results()
	pipe := r.Client.TxPipeline()
	pipe.XAck(ctx, key, DispatchGroup, ids...)
	pipe.XDel(ctx, key, ids...)
	_, err := pipe.Exec(ctx)
	return err
}

// ResultsLength is the number of entries in a flow's results stream.
func (r *Redis) ResultsLength(ctx context.Context, flow string) (int64, error) {
	return r.Client.XLen(ctx, FlowKeys(flow).Results()).Result()
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

// DeadDelivery moves a result entry to the delivery dead letters and acknowledges it,
// in one transaction.
func (r *Redis) DeadDelivery(ctx context.Context, res Result, target, errMsg string, attempts int) (string, error) {
	k := FlowKeys(res.Flow)
	pipe := r.Client.TxPipeline()
	add := pipe.XAdd(ctx, &redis.XAddArgs{Stream: k.DeliveryDead(), MaxLen: EventsMaxLen, Approx: true,
		Values: []any{"run", res.Run, "status", res.Status, "target", target, "error", errMsg, "attempts", strconv.Itoa(attempts), "ts", strconv.FormatInt(nowMS(), 10)}})
	pipe.XAck(ctx, k.Results(), DispatchGroup, res.ID)
	pipe.XDel(ctx, k.Results(), res.ID)
	if _, err := pipe.Exec(ctx); err != nil {
		return "", err
	}
	return add.Val(), nil
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
	pipe := r.Client.TxPipeline()
	add := pipe.XAdd(ctx, &redis.XAddArgs{Stream: k.Results(), Values: []any{"run", run, "status", status, "retried", id}})
	pipe.XDel(ctx, k.DeliveryDead(), id)
	if _, err := pipe.Exec(ctx); err != nil {
		return "", err
	}
	return add.Val(), nil
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
