package store

import (
	"context"
	"encoding/json"
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
	ID         string // stream entry id
	Run        string
	Version    string
	Ckpt       string // checkpoint whose state the step reads
	Tok        string // fork tokens, innermost last
	Join       string // for a join's activation: the fork frame that completed
	Resume     string // JSON decision of a resumed approval
	Depth      int    // steps along its line since the run started (the loop guard)
	Deliveries int    // how often Redis has delivered it (1 on first read)
}

func activationFrom(flow, node string, m redis.XMessage, deliveries int) Activation {
	a := Activation{Flow: flow, Node: node, ID: m.ID, Deliveries: deliveries}
	a.Run, _ = m.Values["run"].(string)
	a.Version, _ = m.Values["v"].(string)
	a.Ckpt, _ = m.Values["ckpt"].(string)
	a.Tok, _ = m.Values["tok"].(string)
	a.Join, _ = m.Values["join"].(string)
	a.Resume, _ = m.Values["resume"].(string)
	d, _ := m.Values["d"].(string)
	a.Depth, _ = strconv.Atoi(d)
	if a.Depth == 0 {
		a.Depth = 1
	}
	return a
}

func nowMS() int64 { return time.Now().UnixMilli() }

// PublishVersion stores a version's flow JSON (once; versions are immutable), records
// its node ids, makes it the flow's current version, and creates the consumer groups.
func (r *Redis) PublishVersion(ctx context.Context, flow, version string, doc []byte, nodes []string) error {
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
	pipe.Set(ctx, k.Current(), version, 0)
	pipe.SAdd(ctx, flowsKey, flow)
	if _, err := pipe.Exec(ctx); err != nil {
		return fmt.Errorf("publish version of flow %q: %w", flow, err)
	}
	return r.EnsureGroups(ctx, flow, nodes)
}

// flowsKey is the set of flow ids that have data in Redis.
const flowsKey = "sluice:flows"

// EnsureGroups creates the node streams' consumer groups and the results stream's
// dispatch group if they do not exist. It is idempotent.
func (r *Redis) EnsureGroups(ctx context.Context, flow string, nodes []string) error {
	k := FlowKeys(flow)
	pipe := r.Client.Pipeline()
	for _, n := range nodes {
		pipe.XGroupCreateMkStream(ctx, k.In(n), Group, "0")
	}
	pipe.XGroupCreateMkStream(ctx, k.Results(), DispatchGroup, "0")
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

// ReadGroup reads new activations for consumer from the streams of nodes, with a
// finite block. counts limits how many entries each node may get (its free capacity);
// nodes with no capacity are not read. A missing group (Redis restarted empty) is
// recreated and the read returns nothing.
func (r *Redis) ReadGroup(ctx context.Context, flow, consumer string, nodes []string, count int, block time.Duration) ([]Activation, error) {
	if len(nodes) == 0 || count <= 0 {
		return nil, nil
	}
	k := FlowKeys(flow)
	streams := make([]string, 0, 2*len(nodes))
	for _, n := range nodes {
		streams = append(streams, k.In(n))
	}
	for range nodes {
		streams = append(streams, ">")
	}
	res, err := r.Client.XReadGroup(ctx, &redis.XReadGroupArgs{Group: Group, Consumer: consumer, Streams: streams, Count: int64(count), Block: block}).Result()
	if errors.Is(err, redis.Nil) {
		return nil, nil
	}
	if err != nil {
		if strings.HasPrefix(err.Error(), "NOGROUP") {
			return nil, r.EnsureGroups(ctx, flow, nodes)
		}
		return nil, err
	}
	var out []Activation
	prefix := k.In("")
	for _, s := range res {
		node := strings.TrimPrefix(s.Stream, prefix)
		for _, m := range s.Messages {
			out = append(out, activationFrom(flow, node, m, 1))
		}
	}
	return out, nil
}

// AutoClaim hands entries of node that have been pending longer than minIdle to
// consumer: the sweeper that rescues steps of crashed workers. It follows XAUTOCLAIM's
// cursor to the end (at most limit entries) and returns the claimed activations with their
// delivery counts, and the ids Redis reported deleted (dropped from the pending list).
func (r *Redis) AutoClaim(ctx context.Context, flow, node, consumer string, minIdle time.Duration, limit int) ([]Activation, []string, error) {
	k := FlowKeys(flow)
	key := k.In(node)
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
		out = append(out, activationFrom(flow, node, m, max(1, counts[m.ID])))
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
	res, err := reclaimScript.Run(ctx, r.Client, []string{FlowKeys(a.Flow).In(a.Node)}, Group, consumer, a.ID).Slice()
	if err != nil || len(res) == 0 {
		return a, false, err
	}
	n, _ := res[0].(int64)
	m := redis.XMessage{ID: a.ID, Values: map[string]any{}}
	for i := 1; i+1 < len(res); i += 2 {
		f, _ := res[i].(string)
		m.Values[f] = res[i+1]
	}
	return activationFrom(a.Flow, a.Node, m, int(n)), true, nil
}

// Heartbeat resets the idle time of entries consumer is still working on.
func (r *Redis) Heartbeat(ctx context.Context, flow, node, consumer string, ids []string) error {
	if len(ids) == 0 {
		return nil
	}
	args := make([]any, 0, 2+len(ids))
	args = append(args, Group, consumer)
	for _, id := range ids {
		args = append(args, id)
	}
	return heartbeatScript.Run(ctx, r.Client, []string{FlowKeys(flow).In(node)}, args...).Err()
}

// Op is one change a commit makes besides the checkpoint: see commit.lua. Key, when
// set, is a stream the op needs in KEYS; the commit puts its index in place of "KEY" in
// Args.
type Op struct {
	Name string
	Key  string
	Args []string
}

// Commit is everything one step commits.
type Commit struct {
	Act          Activation
	Consumer     string
	MaxSteps     int
	TTL          time.Duration
	KeepLast     int
	Checkpoint   []string // field/value pairs
	State        []byte
	Usage        flows.Usage
	Final        []byte // output node's value, or nil
	Wait         []byte // approval's wait record, or nil
	WaitDeadline int64  // unix ms, 0 for none
	Event        []byte
	// Fused are further steps committed with this one: each ran the single successor of
	// the step before it, in this process, without an activation of its own. Wait and Ops
	// follow the last step.
	Fused []CommitStep
	Ops   []Op
}

// CommitStep is one fused step of a commit. A "parent" of "$prev" in its checkpoint is
// the checkpoint of the step before.
type CommitStep struct {
	Node       string
	Checkpoint []string
	State      []byte
	Usage      flows.Usage
	Final      []byte
	Event      []byte
}

// CommitResult says what a commit did.
type CommitResult struct {
	Status    string // "ok", "stale", "dropped", "max_steps"
	Ckpt      string
	Step      int
	Live      int
	RunStatus string
}

func (c *Commit) keysArgs() ([]string, []any) {
	k := FlowKeys(c.Act.Flow)
	run := c.Act.Run
	keys := []string{k.In(c.Act.Node), k.Run(run), k.Ckpt(run), k.State(run), k.Frames(run), k.Events(), k.Results(), k.Waits()}
	index := map[string]int{}
	keyIndex := func(key string) string {
		if i, ok := index[key]; ok {
			return strconv.Itoa(i)
		}
		keys = append(keys, key)
		index[key] = len(keys)
		return strconv.Itoa(len(keys))
	}
	args := []any{Group, c.Consumer, c.Act.ID, run, nowMS(), c.MaxSteps, int64(c.TTL / time.Second), c.KeepLast, EventsMaxLen,
		c.Act.Depth, 1 + len(c.Fused)}
	step := func(s CommitStep) {
		args = append(args, s.Node, len(s.Checkpoint)/2)
		for _, f := range s.Checkpoint {
			args = append(args, f)
		}
		args = append(args, s.State, s.Usage.InputTokens, s.Usage.OutputTokens, bytesOrEmpty(s.Final), bytesOrEmpty(s.Event))
	}
	step(CommitStep{Node: c.Act.Node, Checkpoint: c.Checkpoint, State: c.State, Usage: c.Usage, Final: c.Final, Event: c.Event})
	for _, s := range c.Fused {
		step(s)
	}
	args = append(args, bytesOrEmpty(c.Wait), c.WaitDeadline, len(c.Ops))
	for _, op := range c.Ops {
		args = append(args, op.Name)
		for _, a := range op.Args {
			if a == "KEY" {
				a = keyIndex(op.Key)
			}
			args = append(args, a)
		}
	}
	return keys, args
}

func bytesOrEmpty(b []byte) any {
	if b == nil {
		return ""
	}
	return b
}

// CommitBatch sends the commits in one pipeline and returns their results in order.
// A commit whose result is unknown (the connection failed) carries an error; it is safe
// to send again, since the fence refuses a second commit of the same entry.
func (r *Redis) CommitBatch(ctx context.Context, commits []*Commit) ([]CommitResult, []error) {
	results := make([]CommitResult, len(commits))
	errs := make([]error, len(commits))
	for attempt := 0; attempt < 2; attempt++ {
		pipe := r.Client.Pipeline()
		cmds := make([]*redis.Cmd, len(commits))
		for i, c := range commits {
			if attempt > 0 && !isNoScript(errs[i]) {
				continue
			}
			keys, args := c.keysArgs()
			cmds[i] = commitScript.EvalSha(ctx, pipe, keys, args...)
		}
		_, _ = pipe.Exec(ctx)
		retry := false
		for i, cmd := range cmds {
			if cmd == nil {
				continue
			}
			res, err := cmd.Slice()
			errs[i] = err
			if isNoScript(err) {
				retry = true
				continue
			}
			if err == nil {
				results[i] = parseCommitResult(res)
			}
		}
		if !retry {
			break
		}
		if err := r.LoadScripts(ctx); err != nil {
			break
		}
	}
	return results, errs
}

func parseCommitResult(res []any) CommitResult {
	var cr CommitResult
	if len(res) > 0 {
		cr.Status, _ = res[0].(string)
	}
	switch cr.Status {
	case "ok":
		cr.Ckpt, _ = res[1].(string)
		s, _ := res[2].(int64)
		l, _ := res[3].(int64)
		cr.Step, cr.Live = int(s), int(l)
		cr.RunStatus, _ = res[4].(string)
	case "dropped":
		if len(res) > 1 {
			cr.RunStatus, _ = res[1].(string)
		}
	case "max_steps":
		if len(res) > 1 {
			d, _ := res[1].(int64)
			cr.Step = int(d)
		}
	}
	return cr
}

// Failure is a failed step to record.
type Failure struct {
	Act         Activation
	Consumer    string
	Error       string
	Permanent   bool
	MaxAttempts int
	TTL         time.Duration
}

// Fail records a failed step: "retry" (the entry stays pending), "dead" (moved to the
// dead letters, the run failed) or "stale" (the entry is no longer ours). Each failed
// attempt is also a checkpoint of kind "error" in the run's history.
func (r *Redis) Fail(ctx context.Context, f Failure) (status string, deliveries int, err error) {
	k := FlowKeys(f.Act.Flow)
	perm := "0"
	if f.Permanent {
		perm = "1"
	}
	res, err := failScript.Run(ctx, r.Client, []string{k.In(f.Act.Node), k.Run(f.Act.Run), k.Dead(), k.Events(), k.Results(), k.Ckpt(f.Act.Run)},
		Group, f.Consumer, f.Act.ID, f.Act.Run, f.Act.Node, f.Error, nowMS(), int64(f.TTL/time.Second), perm, f.MaxAttempts, EventsMaxLen, f.Act.Ckpt).Slice()
	if err != nil {
		return "", 0, err
	}
	status, _ = res[0].(string)
	if len(res) > 1 {
		n, _ := res[1].(int64)
		deliveries = int(n)
	}
	return status, deliveries, nil
}

// SaveTurn records a turn of a running step in its run's checkpoint history. It fails
// with a Conflict error when the step is no longer this consumer's.
func (r *Redis) SaveTurn(ctx context.Context, a Activation, consumer string, turn []byte) (string, error) {
	k := FlowKeys(a.Flow)
	res, err := turnScript.Run(ctx, r.Client, []string{k.In(a.Node), k.Ckpt(a.Run), k.Events()},
		Group, consumer, a.ID, a.Run, a.Node, a.Ckpt, turn, nowMS(), EventsMaxLen).Slice()
	if err != nil {
		return "", err
	}
	if res[0] != "ok" {
		return "", &flows.Error{Code: flows.Conflict, Flow: a.Flow, Node: a.Node, Message: "another worker has taken this step over"}
	}
	id, _ := res[1].(string)
	return id, nil
}

// Turns returns the turns saved by earlier attempts of an activation, oldest first.
func (r *Redis) Turns(ctx context.Context, a Activation) ([]json.RawMessage, error) {
	msgs, err := r.Client.XRange(ctx, FlowKeys(a.Flow).Ckpt(a.Run), a.Ckpt, "+").Result()
	if err != nil {
		return nil, err
	}
	var out []json.RawMessage
	for _, m := range msgs {
		if m.Values["kind"] == "turn" && m.Values["node"] == a.Node && entryOf(m) == a.ID {
			s, _ := m.Values["update"].(string)
			out = append(out, json.RawMessage(s))
		}
	}
	return out, nil
}

// StateRef names one checkpoint's state.
type StateRef struct{ Run, Ckpt string }

// LoadStates reads several checkpoints' states of a flow in one round trip. A missing
// state is nil in the result.
func (r *Redis) LoadStates(ctx context.Context, flow string, refs []StateRef) ([][]byte, error) {
	k := FlowKeys(flow)
	pipe := r.Client.Pipeline()
	cmds := make([]*redis.StringCmd, len(refs))
	for i, ref := range refs {
		cmds[i] = pipe.HGet(ctx, k.State(ref.Run), ref.Ckpt)
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, err
	}
	out := make([][]byte, len(refs))
	for i, c := range cmds {
		b, err := c.Bytes()
		if err == nil {
			out[i] = b
		}
	}
	return out, nil
}

// PruneConsumers deletes the consumers of a flow's node streams that have nothing
// pending and have not read for longer than idle: names of worker processes that are
// gone (consumer names carry the process id, so every restart adds one). It returns how
// many it deleted. Consumers whose idle time the server does not report are kept.
func (r *Redis) PruneConsumers(ctx context.Context, flow string, nodes []string, idle time.Duration) (int, error) {
	k := FlowKeys(flow)
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
