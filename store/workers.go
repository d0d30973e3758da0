package store

import (
	"context"
	"errors"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// workersKey is the sorted set of worker consumers by the time (ms) each last said it was
// alive. Sweepers claim the steps of workers that stopped saying so, instead of looking
// through every stream all the time.
const workersKey = "sluice:workers"

// WorkerAlive records that consumer is alive now.
func (r *Redis) WorkerAlive(ctx context.Context, consumer string) error {
	return r.Client.ZAdd(ctx, workersKey, redis.Z{Score: float64(nowMS()), Member: consumer}).Err()
}

// DeadWorkers returns the workers (but self) that last said they were alive before
// since.
func (r *Redis) DeadWorkers(ctx context.Context, since time.Time, self string) ([]string, error) {
	ids, err := r.Client.ZRangeByScore(ctx, workersKey, &redis.ZRangeBy{Min: "-inf", Max: "(" + strconv.FormatInt(since.UnixMilli(), 10), Count: 1000}).Result()
	if err != nil {
		return nil, err
	}
	out := ids[:0]
	for _, id := range ids {
		if id != self {
			out = append(out, id)
		}
	}
	return out, nil
}

// ForgetWorkers removes dead workers whose steps have been claimed.
func (r *Redis) ForgetWorkers(ctx context.Context, consumers []string) error {
	if len(consumers) == 0 {
		return nil
	}
	members := make([]any, len(consumers))
	for i, c := range consumers {
		members[i] = c
	}
	return r.Client.ZRem(ctx, workersKey, members...).Err()
}

// LiveConsumerWindow is how recently a consumer must have said it is alive for it to
// count as a live worker: every worker records itself in workersKey (WorkerAlive) at
// least every 10 s. A consumer with no record (a worker of an older Sluice, or one whose
// record the sweepers forgot once it stopped) counts as live where Redis saw it within
// the window: ≥ 7.2 reports a consumer's last attempt to read, blocking reads included;
// 7.0 only when it last got an entry.
const LiveConsumerWindow = 60 * time.Second

// unreadGrace is how long an activation may sit in a stream with no consumer before the
// run counts as waiting for a worker: a live worker blocked on that stream creates its
// consumer only when it reads the entry, a moment later.
const unreadGrace = time.Second

// runScan bounds the entries read per node stream to find a run's activations.
const runScan = 500

// WaitingForWorker returns the nodes where run has activations that no live worker
// reads (sorted), for a run created at created. It reads each node's consumers, and
// only the streams of nodes without a live one; a node whose consumers cannot be read
// (a server without XINFO) counts as served, so nothing is reported on a guess.
func (r *Redis) WaitingForWorker(ctx context.Context, ref RunRef, created time.Time) ([]string, error) {
	flow, run := ref.Flow, ref.Run
	nodes, err := r.FlowNodes(ctx, flow)
	if err != nil || len(nodes) == 0 {
		return nil, err
	}
	k := ref.keys()
	pipe := r.Client.Pipeline()
	infos := make([]*redis.Cmd, len(nodes))
	for i, n := range nodes {
		infos[i] = pipe.Do(ctx, "XINFO", "CONSUMERS", k.In(n), Group)
	}
	if _, err := pipe.Exec(ctx); err != nil && (ctx.Err() != nil || isConnError(err)) {
		return nil, err
	}
	alive, known, err := r.workerLiveness(ctx)
	if err != nil {
		return nil, err
	}
	var unserved []string
	for i, n := range nodes {
		res, err := infos[i].Result()
		switch {
		case err != nil && (isNoGroup(err) || strings.HasPrefix(err.Error(), "ERR no such key")):
			unserved = append(unserved, n) // no group yet: nobody ever read it
		case err != nil:
			continue // cannot tell: count it as served
		case !anyLive(res, alive, known):
			unserved = append(unserved, n)
		}
	}
	if len(unserved) == 0 {
		return nil, nil
	}
	start := "-"
	if !created.IsZero() {
		start = strconv.FormatInt(created.UnixMilli(), 10)
	}
	pipe = r.Client.Pipeline()
	ranges := make([]*redis.XMessageSliceCmd, len(unserved))
	for i, n := range unserved {
		ranges[i] = pipe.XRangeN(ctx, k.In(n), start, "+", runScan)
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) && (ctx.Err() != nil || isConnError(err)) {
		return nil, err
	}
	now := time.Now()
	var out []string
	for i, n := range unserved {
		for _, m := range ranges[i].Val() {
			if v, _ := m.Values["run"].(string); v == run && now.Sub(idTime(m.ID)) >= unreadGrace {
				out = append(out, n)
				break
			}
		}
	}
	sort.Strings(out)
	return out, nil
}

// workerLiveness reads which workers said lately that they are alive (alive) and which
// ever did (known).
func (r *Redis) workerLiveness(ctx context.Context) (alive, known map[string]bool, err error) {
	zs, err := r.Client.ZRangeWithScores(ctx, workersKey, 0, -1).Result()
	if err != nil {
		return nil, nil, err
	}
	alive, known = map[string]bool{}, map[string]bool{}
	since := float64(time.Now().Add(-LiveConsumerWindow).UnixMilli())
	for _, z := range zs {
		name, _ := z.Member.(string)
		known[name] = true
		if z.Score >= since {
			alive[name] = true
		}
	}
	return alive, known, nil
}

// anyLive reports whether an XINFO CONSUMERS answer (RESP2 or RESP3) names a live
// consumer: one whose worker said lately that it is alive, or, for a worker that never
// says so, one Redis saw lately (see LiveConsumerWindow).
func anyLive(res any, alive, known map[string]bool) bool {
	list, _ := res.([]any)
	for _, c := range list {
		fields := map[string]int64{}
		has := map[string]bool{}
		name := ""
		add := func(key, val any) {
			s, _ := key.(string)
			if s == "name" {
				name, _ = val.(string)
			}
			n, _ := val.(int64)
			fields[s], has[s] = n, true
		}
		switch v := c.(type) {
		case map[any]any:
			for key, val := range v {
				add(key, val)
			}
		case []any:
			for j := 0; j+1 < len(v); j += 2 {
				add(v[j], v[j+1])
			}
		default:
			continue
		}
		if known[name] {
			if alive[name] {
				return true
			}
			continue
		}
		// No record: Redis's idle time says. On 7.0 (no "inactive") that is since the
		// consumer last got an entry, so a worker that stopped cleanly, whose consumer
		// stays in the group, stops counting after the window instead of for as long as
		// the consumer stays; a live one of an older Sluice idle that long on 7.0 counts
		// as gone, which only shows the hint. A server that reports no idle time: served.
		if !has["idle"] || time.Duration(fields["idle"])*time.Millisecond < LiveConsumerWindow {
			return true
		}
	}
	return false
}

// idTime is the time a stream entry id ("ms-seq") was added.
func idTime(id string) time.Time {
	ms, _, _ := strings.Cut(id, "-")
	n, _ := strconv.ParseInt(ms, 10, 64)
	return time.UnixMilli(n)
}
