package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/sluicehq/sluice/flows"
)

// Run statuses.
const (
	StatusQueued    = "queued"
	StatusRunning   = "running"
	StatusWaiting   = "waiting"
	StatusSucceeded = "succeeded"
	StatusFailed    = "failed"
	StatusCancelled = "cancelled"
)

// Finished reports whether a run status is final.
func Finished(status string) bool {
	return status == StatusSucceeded || status == StatusFailed || status == StatusCancelled
}

// Run is a run as its hash records it.
type Run struct {
	ID        string                     `json:"id"`
	Flow      string                     `json:"flow"`
	Version   string                     `json:"version"`
	Status    string                     `json:"status"`
	Input     json.RawMessage            `json:"input,omitempty"`
	Outputs   map[string]json.RawMessage `json:"-"`
	Error     string                     `json:"error,omitempty"`
	ErrorNode string                     `json:"error_node,omitempty"`
	LastError string                     `json:"last_error,omitempty"`
	Steps     int                        `json:"steps"`
	Live      int                        `json:"live"`
	Parked    int                        `json:"-"`
	Dead      int                        `json:"dead_letters"`
	Usage     flows.Usage                `json:"usage"`
	Created   time.Time                  `json:"created_at"`
	Started   *time.Time                 `json:"started_at,omitempty"`
	Updated   time.Time                  `json:"updated_at"`
	Finished  *time.Time                 `json:"finished_at,omitempty"`
	ParentRun string                     `json:"parent_run,omitempty"`
	// Caller is the step that started this run as a subflow.
	Caller     *RunCaller                 `json:"caller,omitempty"`
	ParentCkpt string                     `json:"parent_checkpoint,omitempty"`
	LastCkpt   string                     `json:"last_checkpoint,omitempty"`
	Waits      map[string]json.RawMessage `json:"-"`
	Webhook    string                     `json:"-"`
	// KeptFrom is, after keep_last trimmed the history, its oldest checkpoint kept.
	KeptFrom string `json:"-"`

	// Trigger says what started the run ("schedule:N" for the flow's Nth schedule);
	// empty for an API call, a person or a fork.
	Trigger string `json:"trigger,omitempty"`
	// Tick is the schedule tick a scheduled run is for.
	Tick *time.Time `json:"tick,omitempty"`

	// Trace is the traceparent of the run's span and TraceParent the span id of its
	// parent ("" for a trace's root); both "" when the run is not traced.
	Trace       string `json:"-"`
	TraceParent string `json:"-"`
}

func msTime(s string) time.Time {
	n, _ := strconv.ParseInt(s, 10, 64)
	if n == 0 {
		return time.Time{}
	}
	return time.UnixMilli(n).UTC()
}

func parseRun(flow, id string, h map[string]string) *Run {
	r := &Run{ID: id, Flow: flow, Outputs: map[string]json.RawMessage{}, Waits: map[string]json.RawMessage{}}
	atoi := func(k string) int { n, _ := strconv.Atoi(h[k]); return n }
	atoi64 := func(k string) int64 { n, _ := strconv.ParseInt(h[k], 10, 64); return n }
	r.Version, r.Status = h["version"], h["status"]
	if h["input"] != "" {
		r.Input = json.RawMessage(h["input"])
	}
	r.Error, r.ErrorNode, r.LastError = h["error"], h["error_node"], h["last_error"]
	r.Steps, r.Live, r.Parked, r.Dead = atoi("steps"), atoi("live"), atoi("parked"), atoi("dead")
	r.Usage = flows.Usage{InputTokens: atoi64("in_tokens"), OutputTokens: atoi64("out_tokens")}
	r.Created, r.Updated = msTime(h["created_at"]), msTime(h["updated_at"])
	if t := msTime(h["started_at"]); !t.IsZero() {
		r.Started = &t
	}
	if t := msTime(h["finished_at"]); !t.IsZero() {
		r.Finished = &t
	}
	r.ParentRun, r.ParentCkpt, r.LastCkpt = h["parent_run"], h["parent_ckpt"], h["last_ckpt"]
	r.KeptFrom = h["kept_from"]
	r.Webhook = h["webhook"]
	r.Trigger = h["trigger"]
	r.Trace, r.TraceParent = h["tp"], h["tpp"]
	if t := msTime(h["tick"]); !t.IsZero() {
		r.Tick = &t
	}
	if h["caller_run"] != "" {
		r.Caller = &RunCaller{Flow: h["caller_flow"], Run: h["caller_run"], Node: h["caller_node"]}
	}
	for k, v := range h {
		switch {
		case strings.HasPrefix(k, "out:"):
			r.Outputs[k[4:]] = json.RawMessage(v)
		case strings.HasPrefix(k, "wait:"):
			r.Waits[k[5:]] = json.RawMessage(v)
		}
	}
	return r
}

// RunCaller names the step of another run that started a run as a subflow.
type RunCaller struct {
	Flow string `json:"flow"`
	Run  string `json:"run"`
	Node string `json:"node"`
}

// StartArgs creates a run.
type StartArgs struct {
	Flow, Run, Version string
	State              []byte     // initial state JSON
	Checkpoint         Checkpoint // the first checkpoint (kind "input")
	Entries            []string   // nodes that get the first activations
	Fields             []string   // more run hash field/value pairs (input, parent_run, ...)
	// Trace is the run span's traceparent, added to the first activations ("" for none).
	Trace string
}

// StartRun creates a run and its first activations.
func (r *Redis) StartRun(ctx context.Context, a StartArgs) (string, error) {
	k := FlowKeys(a.Flow)
	keys := []string{k.Run(a.Run), k.Ckpt(a.Run), k.State(a.Run), k.Runs(), k.Events(), k.Version(a.Version)}
	for _, n := range a.Entries {
		keys = append(keys, k.In(n))
	}
	args := []any{a.Run, a.Version, strconv.FormatInt(nowMS(), 10), EventsMaxLen, a.State, a.Checkpoint.Node, a.Checkpoint.Parent, a.Checkpoint.body(), len(a.Fields) / 2}
	for _, f := range a.Fields {
		args = append(args, f)
	}
	if a.Trace != "" {
		args = append(args, a.Trace)
	}
	res, err := startScript.Run(ctx, r.Client, keys, args...).Slice()
	if err != nil {
		return "", fmt.Errorf("start run: %w", err)
	}
	switch res[0] {
	case "exists":
		return "", &flows.Error{Code: flows.Conflict, Flow: a.Flow, Message: fmt.Sprintf("run %q already exists", a.Run)}
	case "no_version":
		return "", &flows.Error{Code: flows.NotFound, Flow: a.Flow, Message: fmt.Sprintf("version %.12s is not published", a.Version)}
	}
	ckpt, _ := res[1].(string)
	return ckpt, nil
}

// GetRun reads a run's hash.
func (r *Redis) GetRun(ctx context.Context, flow, run string) (*Run, error) {
	h, err := r.Client.HGetAll(ctx, FlowKeys(flow).Run(run)).Result()
	if err != nil {
		return nil, err
	}
	if len(h) == 0 {
		return nil, &flows.Error{Code: flows.NotFound, Flow: flow, Message: fmt.Sprintf("no run %q", run)}
	}
	return parseRun(flow, run, h), nil
}

// RunStatus reads only a run's status ("" when the run does not exist).
func (r *Redis) RunStatus(ctx context.Context, flow, run string) (string, error) {
	s, err := r.Client.HGet(ctx, FlowKeys(flow).Run(run), "status").Result()
	if errors.Is(err, redis.Nil) {
		return "", nil
	}
	return s, err
}

// CancelRun cancels a run that has not finished.
func (r *Redis) CancelRun(ctx context.Context, flow, run string, ttl time.Duration) error {
	k := FlowKeys(flow)
	res, err := cancelScript.Run(ctx, r.Client, []string{k.Run(run), k.Ckpt(run), k.State(run), k.Frames(run), k.Events(), k.Results(), k.Waits(), k.Expiry()},
		run, nowMS(), int64(ttl/time.Second), EventsMaxLen).Slice()
	if err != nil {
		return err
	}
	switch res[0] {
	case "not_found":
		return &flows.Error{Code: flows.NotFound, Flow: flow, Message: fmt.Sprintf("no run %q", run)}
	case "conflict":
		return &flows.Error{Code: flows.Conflict, Flow: flow, Message: fmt.Sprintf("run %q has already %s", run, res[1])}
	}
	return nil
}

// ResumeRun answers the approval node of a waiting run with decision (JSON).
func (r *Redis) ResumeRun(ctx context.Context, flow, run, node string, decision []byte) error {
	k := FlowKeys(flow)
	res, err := resumeScript.Run(ctx, r.Client, []string{k.Run(run), k.In(node), k.Events(), k.Waits()},
		run, node, decision, nowMS(), EventsMaxLen).Slice()
	if err != nil {
		return err
	}
	switch res[0] {
	case "not_found":
		return &flows.Error{Code: flows.NotFound, Flow: flow, Message: fmt.Sprintf("no run %q", run)}
	case "conflict":
		return &flows.Error{Code: flows.Conflict, Flow: flow, Node: node, Message: fmt.Sprintf("run %q is %s, not waiting at node %q", run, res[1], node)}
	}
	return nil
}

// Frame is an open fork of a run as its frames hash records it.
type Frame struct {
	Base     string
	Tok      string
	Expected int
	Done     int
	Branches map[string]string // branch path -> checkpoint id of its arrival
}

// GetFrame reads one fork frame of a run.
func (r *Redis) GetFrame(ctx context.Context, flow, run, frame string) (*Frame, error) {
	h, err := r.Client.HGetAll(ctx, FlowKeys(flow).Frames(run)).Result()
	if err != nil {
		return nil, err
	}
	p := frame + ":"
	f := &Frame{Branches: map[string]string{}}
	found := false
	for k, v := range h {
		if !strings.HasPrefix(k, p) {
			continue
		}
		found = true
		switch rest := k[len(p):]; {
		case rest == "base":
			f.Base = v
		case rest == "tok":
			f.Tok = v
		case rest == "n":
			f.Expected, _ = strconv.Atoi(v)
		case rest == "d":
			f.Done, _ = strconv.Atoi(v)
		case strings.HasPrefix(rest, "b:"):
			f.Branches[rest[2:]] = v
		}
	}
	if !found {
		return nil, &flows.Error{Code: flows.NotFound, Flow: flow, Message: fmt.Sprintf("run %q has no open fork %q", run, frame)}
	}
	return f, nil
}

// ListRuns returns run ids of a flow, newest first, after skipping offset.
func (r *Redis) ListRuns(ctx context.Context, flow string, offset, count int64) ([]string, int64, error) {
	k := FlowKeys(flow)
	pipe := r.Client.Pipeline()
	ids := pipe.ZRevRange(ctx, k.Runs(), offset, offset+count-1)
	total := pipe.ZCard(ctx, k.Runs())
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, 0, err
	}
	return ids.Val(), total.Val(), nil
}

// GetRuns reads several runs' hashes in one round trip; runs that no longer exist are
// removed from the flow's run index and left out.
func (r *Redis) GetRuns(ctx context.Context, flow string, ids []string) ([]*Run, error) {
	k := FlowKeys(flow)
	pipe := r.Client.Pipeline()
	cmds := make([]*redis.MapStringStringCmd, len(ids))
	for i, id := range ids {
		cmds[i] = pipe.HGetAll(ctx, k.Run(id))
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, err
	}
	var out []*Run
	var gone []any
	for i, c := range cmds {
		h := c.Val()
		if len(h) == 0 {
			gone = append(gone, ids[i])
			continue
		}
		out = append(out, parseRun(flow, ids[i], h))
	}
	if len(gone) > 0 {
		r.Client.ZRem(ctx, k.Runs(), gone...)
	}
	return out, nil
}

// DeadLetter is an activation that failed too often (or permanently).
type DeadLetter struct {
	ID       string    `json:"id"`
	Flow     string    `json:"flow"`
	Node     string    `json:"node"`
	Run      string    `json:"run"`
	Error    string    `json:"error"`
	Attempts int       `json:"attempts"`
	Time     time.Time `json:"time"`
	Ckpt     string    `json:"checkpoint"`
}

// DeadLetters lists a flow's dead letters, oldest first.
func (r *Redis) DeadLetters(ctx context.Context, flow string, count int64) ([]DeadLetter, error) {
	msgs, err := r.Client.XRangeN(ctx, FlowKeys(flow).Dead(), "-", "+", count).Result()
	if err != nil {
		return nil, err
	}
	out := make([]DeadLetter, len(msgs))
	for i, m := range msgs {
		s := func(k string) string { v, _ := m.Values[k].(string); return v }
		n, _ := strconv.Atoi(s("attempts"))
		out[i] = DeadLetter{ID: m.ID, Flow: flow, Node: s("node"), Run: s("run"), Error: s("error"), Attempts: n, Time: msTime(s("ts")), Ckpt: s("a:ckpt")}
	}
	return out, nil
}

// RetryDead puts a dead letter back on its node's stream and reopens its run.
func (r *Redis) RetryDead(ctx context.Context, flow, id string) (string, error) {
	k := FlowKeys(flow)
	msgs, err := r.Client.XRange(ctx, k.Dead(), id, id).Result()
	if err != nil {
		return "", err
	}
	if len(msgs) == 0 {
		return "", &flows.Error{Code: flows.NotFound, Flow: flow, Message: fmt.Sprintf("no dead letter %q", id)}
	}
	node, _ := msgs[0].Values["node"].(string)
	run, _ := msgs[0].Values["run"].(string)
	res, err := retryDeadScript.Run(ctx, r.Client, []string{k.Dead(), k.In(node), k.Run(run), k.Events(), k.Ckpt(run), k.State(run), k.Frames(run), k.Expiry()},
		id, node, nowMS(), EventsMaxLen).Slice()
	if err != nil {
		return "", err
	}
	switch res[0] {
	case "not_found":
		return "", &flows.Error{Code: flows.NotFound, Flow: flow, Message: fmt.Sprintf("no dead letter %q", id)}
	case "gone":
		return "", &flows.Error{Code: flows.Conflict, Flow: flow, Message: fmt.Sprintf("run %q of dead letter %q has expired", run, id)}
	}
	newID, _ := res[1].(string)
	return newID, nil
}

// DiscardDead deletes a dead letter; its run stays failed.
func (r *Redis) DiscardDead(ctx context.Context, flow, id string) error {
	k := FlowKeys(flow)
	msgs, err := r.Client.XRange(ctx, k.Dead(), id, id).Result()
	if err != nil {
		return err
	}
	if len(msgs) == 0 {
		return &flows.Error{Code: flows.NotFound, Flow: flow, Message: fmt.Sprintf("no dead letter %q", id)}
	}
	run, _ := msgs[0].Values["run"].(string)
	return discardDeadScript.Run(ctx, r.Client, []string{k.Dead(), k.Run(run)}, id).Err()
}

// sortedKeys returns a map's keys sorted.
func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// Output is the run's output: the value of its output node, or an object keyed by node
// id when several output nodes produced one; null when none did.
func (r *Run) Output() json.RawMessage {
	switch len(r.Outputs) {
	case 0:
		return nil
	case 1:
		for _, v := range r.Outputs {
			return v
		}
	}
	m := make(map[string]json.RawMessage, len(r.Outputs))
	for _, k := range sortedKeys(r.Outputs) {
		m[k] = r.Outputs[k]
	}
	b, _ := json.Marshal(m)
	return b
}

// Waiting is an approval whose timeout has passed.
type Waiting struct {
	Run  string
	Node string
}

// ExpiredWaits returns up to limit approvals of flow whose deadline has passed.
func (r *Redis) ExpiredWaits(ctx context.Context, flow string, now time.Time, limit int64) ([]Waiting, error) {
	ms, err := r.Client.ZRangeByScore(ctx, FlowKeys(flow).Waits(), &redis.ZRangeBy{Min: "-inf", Max: strconv.FormatInt(now.UnixMilli(), 10), Count: limit}).Result()
	if err != nil {
		return nil, err
	}
	out := make([]Waiting, 0, len(ms))
	for _, m := range ms {
		run, node, _ := strings.Cut(m, " ")
		out = append(out, Waiting{Run: run, Node: node})
	}
	return out, nil
}

// DropWait forgets an expired wait whose run no longer waits (it was cancelled or lost).
func (r *Redis) DropWait(ctx context.Context, flow string, w Waiting) error {
	return r.Client.ZRem(ctx, FlowKeys(flow).Waits(), w.Run+" "+w.Node).Err()
}

// Touch refreshes the expiry of a finished run's keys: a run that is looked at is kept.
func (r *Redis) Touch(ctx context.Context, flow, run string, ttl time.Duration) error {
	if ttl <= 0 {
		return nil
	}
	k := FlowKeys(flow)
	pipe := r.Client.Pipeline()
	for _, key := range k.RunKeys(run) {
		pipe.Expire(ctx, key, ttl)
	}
	pipe.ZAddXX(ctx, k.Expiry(), redis.Z{Score: float64(time.Now().Add(ttl).UnixMilli()), Member: run})
	_, err := pipe.Exec(ctx)
	return err
}

// PruneRuns removes up to limit runs whose keys have expired from the flow's run index
// and returns how many it removed. Runs due that still exist (their retention was
// refreshed by other means) are given their new deadline.
func (r *Redis) PruneRuns(ctx context.Context, flow string, limit int) (int, error) {
	k := FlowKeys(flow)
	n, err := pruneScript.Run(ctx, r.Client, []string{k.Expiry(), k.Runs(), k.Prefix() + "run:"}, nowMS(), limit).Int()
	if err != nil {
		return 0, fmt.Errorf("prune runs of flow %q: %w", flow, err)
	}
	return n, nil
}

// RunBytes is the memory a run's keys take in Redis: MEMORY USAGE where the server has
// it, else the sum of the keys' field and value sizes (the embedded Redis).
func (r *Redis) RunBytes(ctx context.Context, flow, run string) (int64, error) {
	keys := FlowKeys(flow).RunKeys(run)
	pipe := r.Client.Pipeline()
	cmds := make([]*redis.IntCmd, len(keys))
	for i, k := range keys {
		cmds[i] = pipe.MemoryUsage(ctx, k, 0)
	}
	_, _ = pipe.Exec(ctx)
	var total int64
	fallback := false
	for _, c := range cmds {
		n, err := c.Result()
		if err != nil && !errors.Is(err, redis.Nil) {
			fallback = true
			break
		}
		total += n
	}
	if !fallback {
		return total, nil
	}
	total = 0
	k := FlowKeys(flow)
	for _, key := range []string{k.Run(run), k.State(run), k.Frames(run)} {
		h, err := r.Client.HGetAll(ctx, key).Result()
		if err != nil {
			return 0, err
		}
		for f, v := range h {
			total += int64(len(f) + len(v))
		}
	}
	msgs, err := r.Client.XRange(ctx, k.Ckpt(run), "-", "+").Result()
	if err != nil {
		return 0, err
	}
	for _, m := range msgs {
		total += int64(len(m.ID))
		for f, v := range m.Values {
			s, _ := v.(string)
			total += int64(len(f) + len(s))
		}
	}
	return total, nil
}

// RunIDs returns run ids of a flow, newest first, created between since and until
// (zero times are open ends), after skipping offset.
func (r *Redis) RunIDs(ctx context.Context, flow string, since, until time.Time, offset, count int64) ([]string, error) {
	max, min := "+inf", "-inf"
	if !until.IsZero() {
		max = strconv.FormatInt(until.UnixMilli(), 10)
	}
	if !since.IsZero() {
		min = strconv.FormatInt(since.UnixMilli(), 10)
	}
	return r.Client.ZRevRangeByScore(ctx, FlowKeys(flow).Runs(), &redis.ZRangeBy{Min: min, Max: max, Offset: offset, Count: count}).Result()
}

// FlowProbe is what a sweeper needs to know of a flow to decide whether anything is due.
type FlowProbe struct {
	WaitDue   int64 // unix ms of the earliest approval deadline; 0 for none
	ExpiryDue int64 // unix ms of the earliest run expiry; 0 for none
}

// ProbeFlow reads the earliest approval deadline and run expiry of a flow in one round
// trip.
func (r *Redis) ProbeFlow(ctx context.Context, flow string) (FlowProbe, error) {
	k := FlowKeys(flow)
	pipe := r.Client.Pipeline()
	w := pipe.ZRangeWithScores(ctx, k.Waits(), 0, 0)
	e := pipe.ZRangeWithScores(ctx, k.Expiry(), 0, 0)
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return FlowProbe{}, err
	}
	var p FlowProbe
	if z := w.Val(); len(z) > 0 {
		p.WaitDue = max(int64(z[0].Score), 1)
	}
	if z := e.Val(); len(z) > 0 {
		p.ExpiryDue = max(int64(z[0].Score), 1)
	}
	return p, nil
}

// RunStatuses reads the statuses of some runs of a flow in one round trip ("" for a run
// that is gone).
func (r *Redis) RunStatuses(ctx context.Context, flow string, runs []string) ([]string, error) {
	k := FlowKeys(flow)
	pipe := r.Client.Pipeline()
	cmds := make([]*redis.StringCmd, len(runs))
	for i, id := range runs {
		cmds[i] = pipe.HGet(ctx, k.Run(id), "status")
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, err
	}
	out := make([]string, len(runs))
	for i, c := range cmds {
		out[i], _ = c.Result()
	}
	return out, nil
}

// CountRuns counts a flow's runs created between since and until (zero times are open
// ends).
func (r *Redis) CountRuns(ctx context.Context, flow string, since, until time.Time) (int64, error) {
	min, max := "-inf", "+inf"
	if !since.IsZero() {
		min = strconv.FormatInt(since.UnixMilli(), 10)
	}
	if !until.IsZero() {
		max = strconv.FormatInt(until.UnixMilli(), 10)
	}
	return r.Client.ZCount(ctx, FlowKeys(flow).Runs(), min, max).Result()
}
