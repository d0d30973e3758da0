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

// EventsMaxLen caps each flow's events stream (approximately).
const EventsMaxLen = 10000

// Activation is one entry of a node's stream: a run reaching that node.
type Activation struct {
	Flow       string
	Node       string
	Part       int    // the partition of the run (and of the stream the entry is in)
	ID         string // stream entry id
	Run        string
	Version    string
	Ckpt       string // checkpoint whose state the step reads
	Tok        string // fork tokens, innermost last
	Join       string // for a join's activation: the fork frame that completed
	Resume     string // JSON decision of a resumed approval
	Depth      int    // steps along its line since the run started (the loop guard)
	Deliveries int    // how often Redis has delivered it (1 on first read)
	// Before is how many attempts of the step came before this activation: a retried
	// dead letter carries its earlier attempts ("ao"), so attempts are numbered across
	// retries.
	Before int
	// Trace is the W3C traceparent of the run's span ("tp"; "" when the run is not
	// traced): the parent of the step's span, whatever process runs it.
	Trace string
}

// keys are the keys of the activation's partition.
func (a Activation) keys() Keys { return PartKeys(a.Flow, a.Part) }

func activationFrom(n NodeRef, m redis.XMessage, deliveries int) Activation {
	a := Activation{Flow: n.Flow, Node: n.Node, Part: n.Part, ID: m.ID, Deliveries: deliveries}
	a.Run, _ = m.Values["run"].(string)
	a.Version, _ = m.Values["v"].(string)
	a.Ckpt, _ = m.Values["ckpt"].(string)
	a.Tok, _ = m.Values["tok"].(string)
	a.Join, _ = m.Values["join"].(string)
	a.Resume, _ = m.Values["resume"].(string)
	a.Trace, _ = m.Values["tp"].(string)
	d, _ := m.Values["d"].(string)
	a.Depth, _ = strconv.Atoi(d)
	ao, _ := m.Values["ao"].(string)
	a.Before, _ = strconv.Atoi(ao)
	if a.Depth == 0 {
		a.Depth = 1
	}
	return a
}

// Attempt is the activation's attempt number, counted across retries of its step.
func (a Activation) Attempt() int { return a.Before + a.Deliveries }

func nowMS() int64 { return time.Now().UnixMilli() }

// StoreVersion stores a version's flow JSON (once; versions are immutable), records its
// node ids and creates the consumer groups. It does not make the version current.
func (r *Redis) StoreVersion(ctx context.Context, flow, version string, doc []byte, nodes []string) error {
	k := FlowKeys(flow)
	pipe := r.Client.Pipeline()
	pipe.SetNX(ctx, k.Version(version), doc, 0)
	if len(nodes) > 0 {
		members := make([]any, len(nodes))
		for i, n := range nodes {
			members[i] = n
		}
		pipe.SAdd(ctx, k.Nodes(), members...)
	}
	pipe.SAdd(ctx, flowsKey, flow)
	pipe.Incr(ctx, generationKey)
	if _, err := pipe.Exec(ctx); err != nil {
		return fmt.Errorf("store version of flow %q: %w", flow, err)
	}
	return r.EnsureGroups(ctx, flow, nodes)
}

// generationKey counts changes to stored and current versions: workers read it to know
// when to look for new nodes and settings, instead of reading every flow.
const generationKey = "sluice:generation"

// Generation returns the version generation ("" when Redis has none: it restarted).
func (r *Redis) Generation(ctx context.Context) (string, error) {
	g, err := r.Client.Get(ctx, generationKey).Result()
	if errors.Is(err, redis.Nil) {
		return "", nil
	}
	return g, err
}

// flowsKey is the set of flow ids that have data in Redis.
const flowsKey = "sluice:flows"

// EnsureGroups creates the node streams' consumer groups and the results streams'
// dispatch group, on every partition of the flow, if they do not exist. It is
// idempotent.
func (r *Redis) EnsureGroups(ctx context.Context, flow string, nodes []string) error {
	parts, err := r.Parts(ctx, flow)
	if err != nil {
		return err
	}
	pipe := r.Client.Pipeline()
	for _, pr := range parts {
		k := pr.keys()
		for _, n := range nodes {
			pipe.XGroupCreateMkStream(ctx, k.In(n), Group, "0")
		}
		pipe.XGroupCreateMkStream(ctx, k.Results(), DispatchGroup, "0")
	}
	cmds, _ := pipe.Exec(ctx)
	for _, c := range cmds {
		if err := c.Err(); err != nil && !strings.HasPrefix(err.Error(), "BUSYGROUP") {
			return fmt.Errorf("create consumer group: %w", err)
		}
	}
	return nil
}

// VersionDoc returns the flow JSON of a version.
func (r *Redis) VersionDoc(ctx context.Context, flow, version string) ([]byte, error) {
	b, err := r.Client.Get(ctx, FlowKeys(flow).Version(version)).Bytes()
	if errors.Is(err, redis.Nil) {
		return nil, &flows.Error{Code: flows.NotFound, Flow: flow, Message: fmt.Sprintf("version %.12s is not in Redis", version)}
	}
	return b, err
}

// HasVersion reports whether Redis holds a version's flow JSON.
func (r *Redis) HasVersion(ctx context.Context, flow, version string) (bool, error) {
	n, err := r.Client.Exists(ctx, FlowKeys(flow).Version(version)).Result()
	return n > 0, err
}

// CurrentVersion returns the version new runs of flow start on.
func (r *Redis) CurrentVersion(ctx context.Context, flow string) (string, error) {
	v, err := r.Client.Get(ctx, FlowKeys(flow).Current()).Result()
	if errors.Is(err, redis.Nil) {
		return "", &flows.Error{Code: flows.NotFound, Flow: flow, Message: "flow has no published version"}
	}
	return v, err
}

// FlowNodes returns every node id that has a stream in flow, over all versions.
func (r *Redis) FlowNodes(ctx context.Context, flow string) ([]string, error) {
	return r.Client.SMembers(ctx, FlowKeys(flow).Nodes()).Result()
}

// NodeRef names one node's stream: on one partition of its flow.
type NodeRef struct {
	Flow, Node string
	Part       int
}

// Key is the stream's key.
func (n NodeRef) Key() string { return PartKeys(n.Flow, n.Part).In(n.Node) }

// Tag is the hash tag of the stream's partition: streams of one tag can be read in one
// command on a cluster.
func (n NodeRef) Tag() string { return tagOf(n.Flow, n.Part) }

// ReadNodes reads new activations for consumer from the streams of nodes (of any flows),
// with a finite block (a negative one: without blocking); count limits how many entries each stream may give. A missing
// group (Redis restarted empty) is created again and the read returns nothing.
func (r *Redis) ReadNodes(ctx context.Context, consumer string, nodes []NodeRef, count int, block time.Duration) ([]Activation, error) {
	if len(nodes) == 0 || count <= 0 {
		return nil, nil
	}
	streams := make([]string, 0, 2*len(nodes))
	byKey := make(map[string]NodeRef, len(nodes))
	for _, n := range nodes {
		key := n.Key()
		streams = append(streams, key)
		byKey[key] = n
	}
	for range nodes {
		streams = append(streams, ">")
	}
	res, err := r.Client.XReadGroup(ctx, &redis.XReadGroupArgs{Group: Group, Consumer: consumer, Streams: streams, Count: int64(count), Block: block}).Result()
	if errors.Is(err, redis.Nil) {
		return nil, nil
	}
	if err != nil {
		if isNoGroup(err) {
			perFlow := map[string][]string{}
			for _, n := range nodes {
				perFlow[n.Flow] = append(perFlow[n.Flow], n.Node)
			}
			for f, ns := range perFlow {
				if err := r.EnsureGroups(ctx, f, ns); err != nil {
					return nil, err
				}
			}
			return nil, nil
		}
		return nil, err
	}
	var out []Activation
	for _, s := range res {
		n := byKey[s.Stream]
		for _, m := range s.Messages {
			out = append(out, activationFrom(n, m, 1))
		}
	}
	return out, nil
}

// AutoClaim hands entries of node that have been pending longer than minIdle to
// consumer: the sweeper that rescues steps of crashed workers. It follows XAUTOCLAIM's
// cursor to the end (at most limit entries) and returns the claimed activations with their
// delivery counts, and the ids Redis reported deleted (dropped from the pending list).
func (r *Redis) AutoClaim(ctx context.Context, n NodeRef, consumer string, minIdle time.Duration, limit int) ([]Activation, []string, error) {
	flow, node := n.Flow, n.Node
	key := n.Key()
	var claimed []redis.XMessage
	var deleted []string
	start := "0-0"
	for len(claimed) < limit {
		res, err := r.Client.Do(ctx, "XAUTOCLAIM", key, Group, consumer, minIdle.Milliseconds(), start, "COUNT", min(100, limit-len(claimed))).Slice()
		if err != nil {
			if strings.HasPrefix(err.Error(), "NOGROUP") {
				return nil, nil, r.EnsureGroups(ctx, flow, []string{node})
			}
			return nil, nil, err
		}
		if len(res) < 2 {
			break
		}
		next, _ := res[0].(string)
		claimed = append(claimed, parseXMessages(res[1])...)
		if len(res) > 2 {
			if ids, ok := res[2].([]any); ok {
				for _, id := range ids {
					if s, ok := id.(string); ok {
						deleted = append(deleted, s)
					}
				}
			}
		}
		if next == "" || next == "0-0" {
			break
		}
		start = next
	}
	if len(claimed) == 0 {
		return nil, deleted, nil
	}
	counts := map[string]int{}
	pend, err := r.Client.XPendingExt(ctx, &redis.XPendingExtArgs{Stream: key, Group: Group, Start: claimed[0].ID, End: claimed[len(claimed)-1].ID, Count: int64(len(claimed)) + 1000, Consumer: consumer}).Result()
	if err != nil {
		return nil, nil, err
	}
	for _, p := range pend {
		counts[p.ID] = int(p.RetryCount)
	}
	out := make([]Activation, 0, len(claimed))
	for _, m := range claimed {
		if m.Values == nil {
			deleted = append(deleted, m.ID) // older servers return deleted entries as nil
			continue
		}
		out = append(out, activationFrom(n, m, max(1, counts[m.ID])))
	}
	return out, deleted, nil
}

func parseXMessages(v any) []redis.XMessage {
	items, _ := v.([]any)
	out := make([]redis.XMessage, 0, len(items))
	for _, it := range items {
		pair, _ := it.([]any)
		if len(pair) < 2 {
			continue
		}
		id, _ := pair[0].(string)
		m := redis.XMessage{ID: id}
		if fields, ok := pair[1].([]any); ok {
			m.Values = make(map[string]any, len(fields)/2)
			for i := 0; i+1 < len(fields); i += 2 {
				f, _ := fields[i].(string)
				m.Values[f] = fields[i+1]
			}
		}
		out = append(out, m)
	}
	return out
}

// Reclaim takes an entry of consumer's back for another attempt (the delivery count
// goes up). ok is false when another consumer has claimed it meanwhile.
func (r *Redis) Reclaim(ctx context.Context, a Activation, consumer string) (Activation, bool, error) {
	res, err := reclaimScript.Run(ctx, r.Client, []string{a.keys().In(a.Node)}, Group, consumer, a.ID).Slice()
	if err != nil || len(res) == 0 {
		return a, false, err
	}
	n, _ := res[0].(int64)
	m := redis.XMessage{ID: a.ID, Values: map[string]any{}}
	for i := 1; i+1 < len(res); i += 2 {
		f, _ := res[i].(string)
		m.Values[f] = res[i+1]
	}
	return activationFrom(NodeRef{Flow: a.Flow, Node: a.Node, Part: a.Part}, m, int(n)), true, nil
}

// Heartbeat resets the idle time of entries consumer is still working on.
func (r *Redis) Heartbeat(ctx context.Context, n NodeRef, consumer string, ids []string) error {
	if len(ids) == 0 {
		return nil
	}
	args := make([]any, 0, 2+len(ids))
	args = append(args, Group, consumer)
	for _, id := range ids {
		args = append(args, id)
	}
	return heartbeatScript.Run(ctx, r.Client, []string{n.Key()}, args...).Err()
}

// PendingOf returns, for each of the node streams, the ids of at most count entries
// pending for consumer, in one round trip. A stream without its group has none.
func (r *Redis) PendingOf(ctx context.Context, refs []NodeRef, consumer string, count int) ([][]string, error) {
	out := make([][]string, len(refs))
	if len(refs) == 0 {
		return out, nil
	}
	pipe := r.Client.Pipeline()
	cmds := make([]*redis.XPendingExtCmd, len(refs))
	for i, n := range refs {
		cmds[i] = pipe.XPendingExt(ctx, &redis.XPendingExtArgs{Stream: n.Key(), Group: Group, Start: "-", End: "+", Count: int64(count), Consumer: consumer})
	}
	_, _ = pipe.Exec(ctx)
	for i, c := range cmds {
		ps, err := c.Result()
		if err != nil {
			if isNoGroup(err) {
				continue
			}
			return nil, err
		}
		for _, p := range ps {
			out[i] = append(out[i], p.ID)
		}
	}
	return out, nil
}

// Failure is a failed step to record.
type Failure struct {
	Act         Activation
	Consumer    string
	Error       string
	Permanent   bool
	MaxAttempts int
	TTL         time.Duration
	// Attempt is what the run's history records of the attempt (kind "error" is set
	// here): its duration and worker.
	Attempt Checkpoint
}

// Fail records a failed step and says what became of it (FailStatus): retried, dead,
// dropped or stale. Every attempt but a stale or dropped one leaves a checkpoint of kind
// "error" in the run's history.
func (r *Redis) Fail(ctx context.Context, f Failure) (status FailStatus, deliveries int, err error) {
	k := f.Act.keys()
	perm := "0"
	if f.Permanent {
		perm = "1"
	}
	rec := f.Attempt
	rec.Kind, rec.Error, rec.Attempt, rec.Entry = KindError, f.Error, f.Act.Attempt(), f.Act.ID
	res, err := failScript.Run(ctx, r.Client, []string{k.In(f.Act.Node), k.Run(f.Act.Run), k.Dead(), k.Events(), k.Results(),
		k.Ckpt(f.Act.Run), k.State(f.Act.Run), k.Frames(f.Act.Run), k.Expiry()},
		Group, f.Consumer, f.Act.ID, f.Act.Run, f.Act.Node, f.Error, nowMS(), int64(f.TTL/time.Second), perm, f.MaxAttempts, EventsMaxLen,
		f.Act.Ckpt, rec.body()).Slice()
	if err != nil {
		return "", 0, err
	}
	s, _ := res[0].(string)
	status = FailStatus(s)
	if len(res) > 1 {
		n, _ := res[1].(int64)
		deliveries = int(n)
	}
	return status, deliveries, nil
}

// PruneConsumers deletes the consumers of a flow's node streams that have nothing
// pending and have not read for longer than idle: names of worker processes that are
// gone (consumer names carry the process id, so every restart adds one). It returns how
// many it deleted. Consumers whose idle time the server does not report are kept.
func (r *Redis) PruneConsumers(ctx context.Context, flow string, nodes []string, idle time.Duration) (int, error) {
	parts, err := r.Parts(ctx, flow)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, pr := range parts {
		if m, err := r.pruneConsumers(ctx, pr.keys(), nodes, idle); err != nil {
			return n + m, err
		} else {
			n += m
		}
	}
	return n, nil
}

func (r *Redis) pruneConsumers(ctx context.Context, k Keys, nodes []string, idle time.Duration) (int, error) {
	n := 0
	for _, node := range nodes {
		cs, err := r.Client.XInfoConsumers(ctx, k.In(node), Group).Result()
		if err != nil {
			continue // no stream or group yet
		}
		for _, c := range cs {
			if c.Pending == 0 && c.Idle > idle {
				if err := r.Client.XGroupDelConsumer(ctx, k.In(node), Group, c.Name).Err(); err != nil {
					return n, err
				}
				n++
			}
		}
	}
	return n, nil
}
