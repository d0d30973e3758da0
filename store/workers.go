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

// LiveConsumerWindow is how recently a consumer must have tried to read for it to count
// as a live worker, where Redis says (≥ 7.2 reports a consumer's last attempt, blocking
// reads included). Redis 7.0 reports only its last successful read, which an idle live
// worker does not renew; there a consumer counts as live as long as it exists: workers
// delete their consumers when they stop, and the others prune those of crashed
// processes after an hour.
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
func (r *Redis) WaitingForWorker(ctx context.Context, flow, run string, created time.Time) ([]string, error) {
	nodes, err := r.FlowNodes(ctx, flow)
	if err != nil || len(nodes) == 0 {
		return nil, err
	}
	k := FlowKeys(flow)
	pipe := r.Client.Pipeline()
	infos := make([]*redis.Cmd, len(nodes))
	for i, n := range nodes {
		infos[i] = pipe.Do(ctx, "XINFO", "CONSUMERS", k.In(n), Group)
	}
	if _, err := pipe.Exec(ctx); err != nil && (ctx.Err() != nil || isConnError(err)) {
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
		case !anyLive(res):
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

// anyLive reports whether an XINFO CONSUMERS answer (RESP2 or RESP3) names a live consumer.
func anyLive(res any) bool {
	list, _ := res.([]any)
	for _, c := range list {
		fields := map[string]int64{}
		has := map[string]bool{}
		switch v := c.(type) {
		case map[any]any:
			for key, val := range v {
				s, _ := key.(string)
				n, _ := val.(int64)
				fields[s], has[s] = n, true
			}
		case []any:
			for j := 0; j+1 < len(v); j += 2 {
				s, _ := v[j].(string)
				n, _ := v[j+1].(int64)
				fields[s], has[s] = n, true
			}
		default:
			continue
		}
		if !has["inactive"] || time.Duration(fields["idle"])*time.Millisecond < LiveConsumerWindow {
			return true // Redis 7.0 (no "inactive": see LiveConsumerWindow), or seen lately
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
