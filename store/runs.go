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
	ID      string                     `json:"id"`
	Flow    string                     `json:"flow"`
	Version string                     `json:"version"`
	Status  string                     `json:"status"`
	Input   json.RawMessage            `json:"input,omitempty"`
	Outputs map[string]json.RawMessage `json:"-"`
	// OutputError says which stored outputs could not be read back as JSON (each is
	// shown as null); empty when all could.
	OutputError string      `json:"output_error,omitempty"`
	Error       string      `json:"error,omitempty"`
	ErrorNode   string      `json:"error_node,omitempty"`
	LastError   string      `json:"last_error,omitempty"`
	Steps       int         `json:"steps"`
	Live        int         `json:"live"`
	Parked      int         `json:"-"`
	Dead        int         `json:"dead_letters"`
	Usage       flows.Usage `json:"usage"`
	Created     time.Time   `json:"created_at"`
	Started     *time.Time  `json:"started_at,omitempty"`
	Updated     time.Time   `json:"updated_at"`
	Finished    *time.Time  `json:"finished_at,omitempty"`
	ParentRun   string      `json:"parent_run,omitempty"`
	// Caller is the step that started this run as a subflow.
	Caller *RunCaller `json:"caller,omitempty"`
	// Part is the partition the run lives on.
	Part       int                        `json:"partition"`
	ParentCkpt string                     `json:"parent_checkpoint,omitempty"`
	LastCkpt   string                     `json:"last_checkpoint,omitempty"`
	Waits      map[string]json.RawMessage `json:"-"`
	Webhook    string                     `json:"-"`
	// Pins are the node outputs held fixed for the run (engine.StartOptions.Pins).
	Pins json.RawMessage `json:"pins,omitempty"`
	// KeptFrom is, after keep_last trimmed the history, its oldest checkpoint kept.
	KeptFrom string `json:"-"`

	// Trigger says what started the run ("schedule:N" for the flow's Nth schedule,
	// "hook" for the webhook ingress, "replay"); empty for an API call, a person or a fork.
	Trigger string `json:"trigger,omitempty"`
	// By is who started it, as the server knew them: a person's email, a key's service
	// and prefix, "SLUICE_TOKEN" (docs/teams.md); empty for a schedule or the engine.
	By string `json:"by,omitempty"`
	// Tick is the schedule tick a scheduled run is for.
	Tick *time.Time `json:"tick,omitempty"`
	// Environment is the environment whose version the run started on, when it was
	// started through one (docs/environments.md); "" otherwise.
	Environment string `json:"environment,omitempty"`

	// Moves are the run's moves to other versions (a retry on another version, a
	// waiting run moved), oldest first.
	Moves []Move `json:"moves,omitempty"`
	// ReplayOf is the run this one replays (ReplayOfCkpt the checkpoint it started
	// from, "" for the original's input); ReplayedAs the replays of this run.
	ReplayOf     string   `json:"replay_of,omitempty"`
	ReplayOfCkpt string   `json:"replay_of_checkpoint,omitempty"`
	ReplayedAs   []string `json:"replayed_as,omitempty"`
	// KeysOf is the run whose idempotency keys this run's calls send (a replay asked to
	// keep its origin's); "" its own.
	KeysOf string `json:"keys_of,omitempty"`

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
	if h["input"] != "" { // a run an older build started keeps its input in its hash
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
	if h["pins"] != "" {
		r.Pins = json.RawMessage(h["pins"])
	}
	r.Webhook = h["webhook"]
	r.Trigger, r.By = h["trigger"], h["by"]
	r.Environment = h["env"]
	r.Trace, r.TraceParent = h["tp"], h["tpp"]
	parseReplayFields(r, h)
	if t := msTime(h["tick"]); !t.IsZero() {
		r.Tick = &t
	}
	if h["caller_run"] != "" {
		r.Caller = &RunCaller{Flow: h["caller_flow"], Run: h["caller_run"], Node: h["caller_node"]}
	}
	var unreadable []string
	for k, v := range h {
		switch {
		case strings.HasPrefix(k, "out:"):
			r.Outputs[k[4:]] = json.RawMessage(v)
			if !json.Valid(r.Outputs[k[4:]]) {
				unreadable = append(unreadable, k[4:])
			}
		case strings.HasPrefix(k, "wait:"):
			r.Waits[k[5:]] = json.RawMessage(v)
		}
	}
	if len(unreadable) > 0 {
		r.OutputError = unreadableOutputs(r.Outputs, unreadable)
	}
	return r
}

// unreadableOutputs replaces the outputs no JSON reader takes (nested deeper than
// encoding/json reads, say: commits refuse such outputs, older runs may hold one) with
// null and says which they were and why, so that the run and every listing holding it
// can still be read and written as JSON.
func unreadableOutputs(outputs map[string]json.RawMessage, nodes []string) string {
	sort.Strings(nodes)
	var msgs []string
	for _, node := range nodes {
		var v json.RawMessage
		err := json.Unmarshal(outputs[node], &v)
		msgs = append(msgs, fmt.Sprintf("the output of node %q (%d bytes) cannot be read back as JSON (%v); it is shown as null", node, len(outputs[node]), err))
		outputs[node] = json.RawMessage("null")
	}
	return strings.Join(msgs, "; ")
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
	Part               int        // the partition the run is placed on
	State              []byte     // initial state JSON
	Checkpoint         Checkpoint // the first checkpoint (kind "input")
	Entries            []string   // nodes that get the first activations
	Fields             []string   // more run hash field/value pairs (input, parent_run, ...)
	// Trace is the run span's traceparent, added to the first activations ("" for none).
	Trace string
	// Fresh says Run is a new random id (the engine's NewRunID), so that no run of that
	// id can exist: the start is then a MULTI of plain commands instead of a script that
	// first checks (see StartRun).
	Fresh bool
	// Ckpt, for a fresh start, is the id of the run's first checkpoint when the caller
	// chose it (FirstCkptID), so that it can keep the run's state under it before the
	// start is sent: a worker may read the run's first activation before the start's
	// reply arrives. Empty: chosen at the start.
	Ckpt string
}

// firstState is what the start keeps as the state of the run's first checkpoint: the
// state, or "" when it is the run's input byte for byte (most starts: the input is the
// state), which the state hash keeps already: "" is no JSON, so it says "the input"
// (sameAsInput) to every reader of states, and the input is kept once.
func (a *StartArgs) firstState() any {
	if in, i := a.input(); i >= 0 && in == string(a.State) {
		return sameAsInput
	}
	return a.State
}

// sameAsInput is the state kept for a checkpoint whose state is its run's input.
const sameAsInput = ""

// inputField is the field of a run's state hash that keeps the run's input (a run an
// older build started keeps it in its run hash, under the same name).
const inputField = "input"

// input returns the run's input among Fields and the index of its field name (-1: none).
func (a *StartArgs) input() (string, int) {
	for i := 0; i+1 < len(a.Fields); i += 2 {
		if a.Fields[i] == inputField {
			return a.Fields[i+1], i
		}
	}
	return "", -1
}

// setInput gives a run its input as read from its state hash, unless its run hash had
// it (a run an older build started).
func setInput(r *Run, in *redis.StringCmd) {
	if b, err := in.Bytes(); err == nil && len(b) > 0 && r.Input == nil {
		r.Input = json.RawMessage(b)
	}
}

// stateFields are the state hash's fields a start writes: the first checkpoint's state
// and the run's input, which the run hash does not keep (see Keys.State).
func (a *StartArgs) stateFields(ckpt string) []any {
	out := []any{ckpt, a.firstState()}
	if in, i := a.input(); i >= 0 {
		out = append(out, inputField, in)
	}
	return out
}

// runFields are the run hash's fields a start writes of Fields: all but the input.
func (a *StartArgs) runFields() []string {
	_, i := a.input()
	if i < 0 {
		return a.Fields
	}
	out := make([]string, 0, len(a.Fields)-2)
	out = append(out, a.Fields[:i]...)
	return append(out, a.Fields[i+2:]...)
}

// StartRun creates a run and its first activations on its partition. In the same round
// trip it checks that the run's version is stored (the version is a flow-wide key, in
// another slot than the run's on a cluster, so not inside the script): when it is not
// (Redis lost it), the run is created anyway and a NotFound error says to store the
// version; workers retry the run's steps until it is there.
func (r *Redis) StartRun(ctx context.Context, a StartArgs) (string, error) {
	k := PartKeys(a.Flow, a.Part)
	keys := []string{k.Run(a.Run), k.Ckpt(a.Run), k.State(a.Run), k.Runs(), k.Events()}
	for _, n := range a.Entries {
		keys = append(keys, k.In(n))
	}
	args := []any{a.Run, a.Version, strconv.FormatInt(nowMS(), 10), EventsMaxLen, a.firstState(), a.Checkpoint.Node, a.Checkpoint.Parent, a.Checkpoint.inputBody(a.Fields), len(a.Fields) / 2}
	for _, f := range a.Fields { // the input among them: start.lua keeps it in the state hash
		args = append(args, f)
	}
	if a.Trace != "" {
		args = append(args, a.Trace)
	}
	if a.Fresh && r.wait <= 0 {
		return r.startFresh(ctx, a)
	}
	var res []any
	var err error
	var has *redis.IntCmd
	if r.wait > 0 {
		// The start waits for replicas on its own node's connection (see promise).
		has = r.Client.Exists(ctx, FlowKeys(a.Flow).Version(a.Version))
		res, err = r.promise(ctx, startScript, keys, args...).Slice()
	} else {
		pipe := r.Client.Pipeline()
		has = pipe.Exists(ctx, FlowKeys(a.Flow).Version(a.Version))
		start := startScript.EvalSha(ctx, pipe, keys, args...)
		_, _ = pipe.Exec(ctx)
		res, err = start.Slice()
		if isNoScript(err) {
			res, err = startScript.Run(ctx, r.Client, keys, args...).Slice()
		}
	}
	if err != nil {
		return "", fmt.Errorf("start run: %w", err)
	}
	if res[0] == "exists" {
		return "", &flows.Error{Code: flows.Conflict, Flow: a.Flow, Message: fmt.Sprintf("run %q already exists", a.Run)}
	}
	ckpt, _ := res[1].(string)
	if has.Val() == 0 && has.Err() == nil {
		return ckpt, &flows.Error{Code: flows.NotFound, Flow: a.Flow, Message: fmt.Sprintf("version %.12s is not stored", a.Version)}
	}
	return ckpt, nil
}

// startFresh creates a run whose id is new (StartArgs.Fresh) in one MULTI: what
// start.lua does, without its check that the run does not exist and without running Lua
// (about half the instructions of a start). The first checkpoint's id is chosen here
// ("<now ms>-1"): the run's checkpoint stream is new, and every later entry's id is
// Redis's, larger. go-redis sends a transaction again only when writing it failed, so
// Redis never runs it twice.
func (r *Redis) startFresh(ctx context.Context, a StartArgs) (string, error) {
	ckpts, errs := r.StartRuns(ctx, []StartArgs{a})
	return ckpts[0], errs[0]
}

// GetRun reads a run's hash, on whichever partition it lives.
func (r *Redis) GetRun(ctx context.Context, flow, run string) (*Run, error) {
	var out *Run
	err := r.findRun(ctx, flow, run, func(k Keys) (bool, error) {
		pipe := r.Client.Pipeline()
		hc := pipe.HGetAll(ctx, k.Run(run))
		in := pipe.HGet(ctx, k.State(run), inputField)
		if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
			return false, err
		}
		h := hc.Val()
		if len(h) == 0 {
			return false, nil
		}
		out = parseRun(flow, run, h)
		setInput(out, in)
		out.Part = k.Part()
		return true, nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// RunStatus reads only a run's status ("" when the run does not exist).
func (r *Redis) RunStatus(ctx context.Context, ref RunRef) (string, error) {
	s, err := r.Client.HGet(ctx, ref.keys().Run(ref.Run), "status").Result()
	if errors.Is(err, redis.Nil) {
		return "", nil
	}
	return s, err
}

// CancelRun cancels a run that has not finished.
func (r *Redis) CancelRun(ctx context.Context, ref RunRef, ttl time.Duration) error {
	flow, run := ref.Flow, ref.Run
	k := ref.keys()
	res, err := r.promise(ctx, cancelScript, []string{k.Run(run), k.Ckpt(run), k.State(run), k.Frames(run), k.Events(), k.Results(), k.Waits(), k.Expiry()},
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
func (r *Redis) ResumeRun(ctx context.Context, ref RunRef, node string, decision []byte) error {
	flow, run := ref.Flow, ref.Run
	k := ref.keys()
	res, err := r.promise(ctx, resumeScript, []string{k.Run(run), k.In(node), k.Events(), k.Waits()},
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
func (r *Redis) GetFrame(ctx context.Context, ref RunRef, frame string) (*Frame, error) {
	flow, run := ref.Flow, ref.Run
	h, err := r.Client.HGetAll(ctx, ref.keys().Frames(run)).Result()
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

// GetRuns reads several runs' hashes in one round trip; runs that no longer exist are
// removed from their partition's run index and left out.
func (r *Redis) GetRuns(ctx context.Context, refs []RunRef) ([]*Run, error) {
	pipe := r.Client.Pipeline()
	cmds := make([]*redis.MapStringStringCmd, len(refs))
	ins := make([]*redis.StringCmd, len(refs))
	for i, ref := range refs {
		cmds[i] = pipe.HGetAll(ctx, ref.keys().Run(ref.Run))
		ins[i] = pipe.HGet(ctx, ref.keys().State(ref.Run), inputField)
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, err
	}
	var out []*Run
	gone := map[int][]any{}
	for i, c := range cmds {
		h := c.Val()
		if len(h) == 0 {
			gone[refs[i].Part] = append(gone[refs[i].Part], refs[i].Run)
			continue
		}
		run := parseRun(refs[i].Flow, refs[i].Run, h)
		setInput(run, ins[i])
		run.Part = refs[i].Part
		out = append(out, run)
	}
	for p, ids := range gone {
		r.Client.ZRem(ctx, PartKeys(refs[0].Flow, p).Runs(), ids...)
	}
	return out, nil
}

// DeadLetter is an activation that failed too often (or permanently). Its id is its
// entry's in its partition's dead-letter stream, with "@p" for a partition p > 0.
type DeadLetter struct {
	ID       string    `json:"id"`
	Flow     string    `json:"flow"`
	Node     string    `json:"node"`
	Run      string    `json:"run"`
	Error    string    `json:"error"`
	Attempts int       `json:"attempts"`
	Time     time.Time `json:"time"`
	Ckpt     string    `json:"checkpoint"`
	// Version is the version the step ran on; Before the attempts of earlier retries
	// (attempt numbers go on across retries).
	Version string `json:"version"`
	Before  int    `json:"attempts_before,omitempty"`
	Tok     string `json:"-"` // the activation's fork tokens
}

// DeadLetters lists a flow's dead letters, oldest first, over every partition.
func (r *Redis) DeadLetters(ctx context.Context, flow string, count int64) ([]DeadLetter, error) {
	parts, err := r.Parts(ctx, flow)
	if err != nil {
		return nil, err
	}
	pipe := r.Client.Pipeline()
	cmds := make([]*redis.XMessageSliceCmd, len(parts))
	for i, pr := range parts {
		cmds[i] = pipe.XRangeN(ctx, pr.keys().Dead(), "-", "+", count)
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, err
	}
	var out []DeadLetter
	for i, c := range cmds {
		p := parts[i].Part
		for _, m := range c.Val() {
			out = append(out, deadLetterOf(flow, withPart(m.ID, p), m))
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Time.Before(out[j].Time) })
	if int64(len(out)) > count {
		out = out[:count]
	}
	return out, nil
}

// withPart adds a partition to an entry id ("@p" for p > 0); splitPart takes it off.
func withPart(id string, p int) string {
	if p == 0 {
		return id
	}
	return id + "@" + strconv.Itoa(p)
}

func splitPart(id string) (string, int) {
	e, ps, ok := strings.Cut(id, "@")
	if !ok {
		return id, 0
	}
	p, err := strconv.Atoi(ps)
	if err != nil || p < 0 {
		return id, -1
	}
	return e, p
}

// RetryDead puts a dead letter back on its node's stream, on the version it ran, and
// reopens its run (RetryDeadOn moves it to another version).
func (r *Redis) RetryDead(ctx context.Context, flow, id string) (string, error) {
	return r.RetryDeadOn(ctx, flow, id, RetryArgs{})
}

// DiscardDead deletes a dead letter; its run stays failed.
func (r *Redis) DiscardDead(ctx context.Context, flow, id string) error {
	entry, p := splitPart(id)
	if p < 0 || !ValidStreamID(entry) {
		return &flows.Error{Code: flows.NotFound, Flow: flow, Message: fmt.Sprintf("no dead letter %q", id)}
	}
	k := PartKeys(flow, p)
	msgs, err := r.Client.XRange(ctx, k.Dead(), entry, entry).Result()
	if err != nil {
		return err
	}
	if len(msgs) == 0 {
		return &flows.Error{Code: flows.NotFound, Flow: flow, Message: fmt.Sprintf("no dead letter %q", id)}
	}
	run, _ := msgs[0].Values["run"].(string)
	return discardDeadScript.Run(ctx, r.Client, []string{k.Dead(), k.Run(run)}, entry).Err()
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
	RunRef
	Node string
}

// ExpiredWaits returns up to limit approvals of a flow's partition whose deadline has
// passed.
func (r *Redis) ExpiredWaits(ctx context.Context, flow string, part int, now time.Time, limit int64) ([]Waiting, error) {
	ms, err := r.Client.ZRangeByScore(ctx, PartKeys(flow, part).Waits(), &redis.ZRangeBy{Min: "-inf", Max: strconv.FormatInt(now.UnixMilli(), 10), Count: limit}).Result()
	if err != nil {
		return nil, err
	}
	out := make([]Waiting, 0, len(ms))
	for _, m := range ms {
		run, node, _ := strings.Cut(m, " ")
		out = append(out, Waiting{RunRef: RunRef{Flow: flow, Run: run, Part: part}, Node: node})
	}
	return out, nil
}

// DropWait forgets an expired wait whose run no longer waits (it was cancelled or lost).
func (r *Redis) DropWait(ctx context.Context, w Waiting) error {
	return r.Client.ZRem(ctx, w.keys().Waits(), w.Run+" "+w.Node).Err()
}

// Touch refreshes the expiry of a finished run's keys: a run that is looked at is kept.
func (r *Redis) Touch(ctx context.Context, ref RunRef, ttl time.Duration) error {
	if ttl <= 0 {
		return nil
	}
	k, run := ref.keys(), ref.Run
	pipe := r.Client.Pipeline()
	for _, key := range k.RunKeys(run) {
		pipe.Expire(ctx, key, ttl)
	}
	pipe.ZAddXX(ctx, k.Expiry(), redis.Z{Score: float64(time.Now().Add(ttl).UnixMilli()), Member: run})
	_, err := pipe.Exec(ctx)
	return err
}

// PruneRuns ends the retention of up to limit finished runs of a flow's partition that
// are due — it deletes their keys and removes them from the run index — and returns how
// many it removed. Runs due whose keys have a TTL of their own (retention refreshed by
// reading them) are given its deadline (see prune.lua).
func (r *Redis) PruneRuns(ctx context.Context, flow string, part, limit int) (int, error) {
	k := PartKeys(flow, part)
	n, err := pruneScript.Run(ctx, r.Client, []string{k.Expiry(), k.Runs(), k.Prefix()}, nowMS(), limit).Int()
	if err != nil {
		return 0, fmt.Errorf("prune runs of flow %q: %w", flow, err)
	}
	return n, nil
}

// RunBytes is the memory a run's keys take in Redis: MEMORY USAGE where the server has
// it, else the sum of the keys' field and value sizes (the embedded Redis).
func (r *Redis) RunBytes(ctx context.Context, ref RunRef) (int64, error) {
	run := ref.Run
	keys := ref.keys().RunKeys(run)
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
	k := ref.keys()
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

// RunIDs returns runs of a flow, newest first, created between since and until (zero
// times are open ends), after skipping offset: the run indexes of every partition,
// merged.
func (r *Redis) RunIDs(ctx context.Context, flow string, since, until time.Time, offset, count int64) ([]RunRef, error) {
	max, min := "+inf", "-inf"
	if !until.IsZero() {
		max = strconv.FormatInt(until.UnixMilli(), 10)
	}
	if !since.IsZero() {
		min = strconv.FormatInt(since.UnixMilli(), 10)
	}
	parts, err := r.Parts(ctx, flow)
	if err != nil {
		return nil, err
	}
	if len(parts) == 1 {
		ids, err := r.Client.ZRevRangeByScore(ctx, parts[0].keys().Runs(), &redis.ZRangeBy{Min: min, Max: max, Offset: offset, Count: count}).Result()
		out := make([]RunRef, len(ids))
		for i, id := range ids {
			out[i] = RunRef{Flow: flow, Run: id, Part: parts[0].Part}
		}
		return out, err
	}
	// The first offset+count of each partition hold the first offset+count of all.
	pipe := r.Client.Pipeline()
	cmds := make([]*redis.ZSliceCmd, len(parts))
	for i, pr := range parts {
		cmds[i] = pipe.ZRevRangeByScoreWithScores(ctx, pr.keys().Runs(), &redis.ZRangeBy{Min: min, Max: max, Count: offset + count})
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, err
	}
	type scored struct {
		ref   RunRef
		score float64
	}
	var all []scored
	for i, c := range cmds {
		for _, z := range c.Val() {
			id, _ := z.Member.(string)
			all = append(all, scored{RunRef{Flow: flow, Run: id, Part: parts[i].Part}, z.Score})
		}
	}
	sort.SliceStable(all, func(i, j int) bool {
		if all[i].score != all[j].score {
			return all[i].score > all[j].score
		}
		return all[i].ref.Run > all[j].ref.Run
	})
	var out []RunRef
	for i := offset; i < int64(len(all)) && i < offset+count; i++ {
		out = append(out, all[i].ref)
	}
	return out, nil
}

// FlowProbe is what a sweeper needs to know of a flow to decide whether anything is due.
type FlowProbe struct {
	WaitDue   int64 // unix ms of the earliest approval deadline; 0 for none
	ExpiryDue int64 // unix ms of the earliest run expiry; 0 for none
}

// ProbeFlow reads the earliest approval deadline and run expiry over a flow's
// partitions in one round trip.
func (r *Redis) ProbeFlow(ctx context.Context, flow string) (FlowProbe, error) {
	parts, err := r.Parts(ctx, flow)
	if err != nil {
		return FlowProbe{}, err
	}
	pipe := r.Client.Pipeline()
	cmds := make([][2]*redis.ZSliceCmd, len(parts))
	for i, pr := range parts {
		k := pr.keys()
		cmds[i] = [2]*redis.ZSliceCmd{pipe.ZRangeWithScores(ctx, k.Waits(), 0, 0), pipe.ZRangeWithScores(ctx, k.Expiry(), 0, 0)}
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return FlowProbe{}, err
	}
	earliest := func(due *int64, c *redis.ZSliceCmd) {
		if z := c.Val(); len(z) > 0 {
			if t := max(int64(z[0].Score), 1); *due == 0 || t < *due {
				*due = t
			}
		}
	}
	var p FlowProbe
	for _, c := range cmds {
		earliest(&p.WaitDue, c[0])
		earliest(&p.ExpiryDue, c[1])
	}
	return p, nil
}

// RunStatuses reads the statuses of some runs in one round trip ("" for a run that is
// gone).
func (r *Redis) RunStatuses(ctx context.Context, runs []RunRef) ([]string, error) {
	pipe := r.Client.Pipeline()
	cmds := make([]*redis.StringCmd, len(runs))
	for i, ref := range runs {
		cmds[i] = pipe.HGet(ctx, ref.keys().Run(ref.Run), "status")
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
	parts, err := r.Parts(ctx, flow)
	if err != nil {
		return 0, err
	}
	pipe := r.Client.Pipeline()
	cmds := make([]*redis.IntCmd, len(parts))
	for i, pr := range parts {
		cmds[i] = pipe.ZCount(ctx, pr.keys().Runs(), min, max)
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return 0, err
	}
	var n int64
	for _, c := range cmds {
		n += c.Val()
	}
	return n, nil
}
