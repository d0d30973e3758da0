package store

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// QueueStats are the figures of one node's stream and its consumer group.
type QueueStats struct {
	Node string `json:"node"`
	// Length is the number of entries in the stream not yet acknowledged: not yet
	// delivered plus pending. (Commits trim consumed entries a listpack node at a time,
	// so the stream itself may keep a few acknowledged ones; they are not counted.)
	Length int64 `json:"length"`
	// Pending is the number of entries delivered to a worker and not yet committed.
	Pending int64 `json:"pending"`
	// Lag is the number of entries no worker has read yet.
	Lag int64 `json:"lag"`
	// OldestPendingIdleMS is how long the oldest pending entry has gone without its
	// worker touching it; 0 when nothing is pending.
	OldestPendingIdleMS int64 `json:"oldest_pending_idle_ms"`
	// DeadLetters is the number of this node's entries in the flow's dead letters.
	DeadLetters int64      `json:"dead_letters"`
	Consumers   []Consumer `json:"consumers"`
}

// Consumer is one worker's consumer in a node's group.
type Consumer struct {
	Name    string `json:"name"`
	Pending int64  `json:"pending"`
	// IdleMS is the time since the consumer last read or claimed an entry.
	IdleMS int64 `json:"idle_ms"`
	// InactiveMS is the time since its last successful read or claim (Redis ≥ 7.2;
	// -1 when the server does not say).
	InactiveMS int64 `json:"inactive_ms"`
}

// FlowQueues are the queue figures of every node stream of a flow.
type FlowQueues struct {
	Flow        string       `json:"flow"`
	DeadLetters int64        `json:"dead_letters"`
	Nodes       []QueueStats `json:"nodes"`
	Time        time.Time    `json:"time"`
}

// deadCountScan bounds how many dead letters are read to count them per node.
const deadCountScan = 10000

// Queues reads the queue figures of every node of flow that has a stream. XINFO answers
// differ between servers (the embedded one gives partial answers), so the counts that
// matter come from XLEN and XPENDING, and XINFO only adds the consumers' idle times.
func (r *Redis) Queues(ctx context.Context, flow string) (*FlowQueues, error) {
	nodes, err := r.FlowNodes(ctx, flow)
	if err != nil {
		return nil, err
	}
	sort.Strings(nodes)
	parts, err := r.Parts(ctx, flow)
	if err != nil {
		return nil, err
	}
	out := &FlowQueues{Flow: flow, Nodes: make([]QueueStats, 0, len(nodes)), Time: time.Now().UTC()}

	// Every node's figures are the sums over the flow's partitions.
	pipe := r.Client.Pipeline()
	type partCmds struct {
		oldest []*redis.XPendingExtCmd
		dead   *redis.IntCmd
	}
	pc := make([]partCmds, len(parts))
	for j, pr := range parts {
		k := pr.keys()
		c := partCmds{oldest: make([]*redis.XPendingExtCmd, len(nodes))}
		for i, n := range nodes {
			c.oldest[i] = pipe.XPendingExt(ctx, &redis.XPendingExtArgs{Stream: k.In(n), Group: Group, Start: "-", End: "+", Count: 1})
		}
		c.dead = pipe.XLen(ctx, k.Dead())
		pc[j] = c
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) && !isNoGroup(err) {
		// Per-command errors are looked at below; a failed round trip is reported.
		if ctx.Err() != nil || isConnError(err) {
			return nil, fmt.Errorf("queues of flow %q: %w", flow, err)
		}
	}
	perNodeDead := map[string]int64{}
	for j, pr := range parts {
		n := pc[j].dead.Val()
		out.DeadLetters += n
		if n == 0 {
			continue
		}
		msgs, err := r.Client.XRangeN(ctx, pr.keys().Dead(), "-", "+", deadCountScan).Result()
		if err != nil {
			return nil, fmt.Errorf("dead letters of flow %q: %w", flow, err)
		}
		for _, m := range msgs {
			n, _ := m.Values["node"].(string)
			perNodeDead[n]++
		}
	}
	var streams []string
	for _, pr := range parts {
		for _, n := range nodes {
			streams = append(streams, pr.keys().In(n))
		}
	}
	backlogs := r.groupBacklogs(ctx, streams)
	for i, n := range nodes {
		q := QueueStats{Node: n, DeadLetters: perNodeDead[n], Consumers: []Consumer{}}
		for j := range parts {
			b := backlogs[j*len(nodes)+i]
			q.Pending += b.pending
			q.Lag += b.lag
			q.Length += b.lag + b.pending
			if ps, err := pc[j].oldest[i].Result(); err == nil && len(ps) > 0 {
				q.OldestPendingIdleMS = max(q.OldestPendingIdleMS, ps[0].Idle.Milliseconds())
			}
		}
		out.Nodes = append(out.Nodes, q)
	}

	// Consumers: best effort, one round trip; a worker's consumer is the same name on
	// every partition.
	pipe = r.Client.Pipeline()
	cons := make([][]*redis.XInfoConsumersCmd, len(parts))
	for j, pr := range parts {
		cons[j] = make([]*redis.XInfoConsumersCmd, len(nodes))
		for i, n := range nodes {
			cons[j][i] = pipe.XInfoConsumers(ctx, pr.keys().In(n), Group)
		}
	}
	_, _ = pipe.Exec(ctx)
	for i := range nodes {
		byName := map[string]*Consumer{}
		for j := range parts {
			cs, err := cons[j][i].Result()
			if err != nil {
				continue
			}
			for _, c := range cs {
				inactive := int64(-1)
				if c.Inactive > 0 {
					inactive = c.Inactive.Milliseconds()
				}
				if have, ok := byName[c.Name]; ok {
					have.Pending += c.Pending
					have.IdleMS = min(have.IdleMS, c.Idle.Milliseconds())
					if inactive >= 0 && (have.InactiveMS < 0 || inactive < have.InactiveMS) {
						have.InactiveMS = inactive
					}
					continue
				}
				byName[c.Name] = &Consumer{Name: c.Name, Pending: c.Pending, IdleMS: c.Idle.Milliseconds(), InactiveMS: inactive}
			}
		}
		for _, name := range sortedKeys(byName) {
			out.Nodes[i].Consumers = append(out.Nodes[i].Consumers, *byName[name])
		}
	}
	return out, nil
}

// Flows returns the ids of every flow that has data in Redis.
func (r *Redis) Flows(ctx context.Context) ([]string, error) {
	ids, err := r.Client.SMembers(ctx, flowsKey).Result()
	sort.Strings(ids)
	return ids, err
}

func isNoGroup(err error) bool { return err != nil && strings.HasPrefix(err.Error(), "NOGROUP") }

// isConnError reports whether err means the server was not reached (as opposed to a
// command's own error reply).
func isConnError(err error) bool {
	var re redis.Error
	return !errors.As(err, &re)
}
