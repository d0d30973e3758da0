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

// Checkpoint is one entry of a run's history: a committed step, the run's start, a
// fanout branch's seed, a turn of a long step, a failed attempt or an interrupted step.
type Checkpoint struct {
	ID   string `json:"id"`
	Node string `json:"node"`
	// Kind is input, step, send, join, wait, resume, turn, error (a failed attempt) or
	// interrupted (a step the run's cancel stopped).
	Kind       string          `json:"kind"`
	Step       int             `json:"step"`
	Parent     string          `json:"parent,omitempty"`
	Attempt    int             `json:"attempt,omitempty"`
	Update     json.RawMessage `json:"update,omitempty"`
	Output     json.RawMessage `json:"output,omitempty"`
	Error      string          `json:"error,omitempty"`
	Ports      []string        `json:"ports,omitempty"`
	Branches   []string        `json:"branches,omitempty"`
	Duration   time.Duration   `json:"-"`
	DurationMS float64         `json:"duration_ms"`
	Usage      flows.Usage     `json:"usage"`
	StateBytes int             `json:"state_bytes,omitempty"`
	Worker     string          `json:"worker,omitempty"` // the consumer that ran the step
	Time       time.Time       `json:"time"`
	State      json.RawMessage `json:"state,omitempty"`
	// Entry is, for a turn or a failed attempt, the activation (stream entry) it belongs to.
	Entry string `json:"-"`
	// Pinned says the step did not run: its output was pinned for the run.
	Pinned bool `json:"pinned,omitempty"`
	// OutputIsState says, to a commit, that Output is byte for byte the state the step
	// read (its parent checkpoint's, as stored or started): the commit then keeps it
	// once, as that state (see packedBody). Readers get Output filled in.
	OutputIsState bool `json:"-"`

	runInput    bool // the update is the run's input, not stored with the checkpoint
	parentState bool // the output is the parent checkpoint's state, not stored with the checkpoint
}

// IsState reports whether the checkpoint records a state a run can continue from (not
// a turn, a failed attempt or an interrupted step).
func (c *Checkpoint) IsState() bool {
	switch c.Kind {
	case KindTurn, KindError, KindInterrupted:
		return false
	}
	return true
}

// Checkpoint kinds that record no state.
const (
	KindTurn        = "turn"
	KindError       = "error"
	KindInterrupted = "interrupted"
)

// ckptBody is a checkpoint as its stream entry keeps it: everything but the parent, the
// step number and the time is packed in one field ("c"), so that every entry of the
// stream has the same fields (Redis then stores the field names once per stream node)
// and a commit passes one argument for its checkpoints instead of a dozen each.
//
// A commit of several fused steps writes one entry for all of them: its "c" is a JSON
// array of bodies, one per step, and its "k" the number of steps. The steps' checkpoint
// ids are the entry's id with ".0", ".1", … for all but the last, which has the entry's
// id itself (what later activations read).
type ckptBody struct {
	Node       string          `json:"n,omitempty"` // in a packed entry only
	Kind       string          `json:"k"`
	Update     json.RawMessage `json:"u,omitempty"`
	Output     json.RawMessage `json:"o,omitempty"`
	Error      string          `json:"e,omitempty"`
	Attempt    int             `json:"a,omitempty"`
	Ports      []string        `json:"ports,omitempty"`
	Branches   []string        `json:"br,omitempty"`
	DurUS      int64           `json:"us,omitempty"`
	InTok      int64           `json:"in,omitempty"`
	OutTok     int64           `json:"out,omitempty"`
	CacheRead  int64           `json:"cr,omitempty"`
	CacheWrite int64           `json:"cw,omitempty"`
	MicroUSD   int64           `json:"mu,omitempty"` // cost in millionths of a dollar
	StateBytes int             `json:"sb,omitempty"`
	Worker     string          `json:"w,omitempty"`
	Entry      string          `json:"x,omitempty"`
	Pinned     bool            `json:"pin,omitempty"`
	// RunInput says the update is the run's input, kept once, in the state hash (an
	// older build's run: the run hash): a run's first checkpoint does not store it again
	// (readers fill it in: fillKept).
	RunInput bool `json:"ri,omitempty"`
	// ParentState says the output is the state of the step's parent checkpoint (the
	// entry's "p"), kept once, in the state hash: an input node's step, whose output is
	// the state it read, does not store it again (readers fill it in: fillKept).
	ParentState bool `json:"op,omitempty"`
}

func (c *Checkpoint) toBody() ckptBody {
	return ckptBody{Kind: c.Kind, Update: c.Update, Output: c.Output, Error: c.Error, Attempt: c.Attempt,
		Ports: c.Ports, Branches: c.Branches, DurUS: c.Duration.Microseconds(), InTok: c.Usage.InputTokens,
		OutTok: c.Usage.OutputTokens, CacheRead: c.Usage.CacheReadTokens, CacheWrite: c.Usage.CacheWriteTokens, MicroUSD: toMicro(c.Usage.CostUSD),
		StateBytes: c.StateBytes, Worker: c.Worker, Entry: c.Entry, Pinned: c.Pinned}
}

// body encodes the checkpoint's packed field.
func (c *Checkpoint) body() []byte {
	b := c.toBody()
	return encodeBody(&b)
}

// packedBody encodes a commit's checkpoints, one step's or several fused steps', for
// one entry. The first step's output, when it is the state the step read (OutputIsState),
// is not stored again: its parent is an entry's last checkpoint or a seed, whose state
// the state hash keeps as long as the run — unless keep_last trims the history (parents
// kept: false), which deletes the states of the checkpoints it drops. A fused step's
// parent is the step before it in the entry, whose state is not stored.
func packedBody(steps []CommitStep, parentsKept bool) []byte {
	if len(steps) == 1 {
		b := steps[0].Checkpoint.toBody()
		stateOnce(&b, &steps[0].Checkpoint, parentsKept)
		return encodeBody(&b)
	}
	bodies := make([]ckptBody, len(steps))
	for i, s := range steps {
		bodies[i] = s.Checkpoint.toBody()
		bodies[i].Node = s.Node
	}
	stateOnce(&bodies[0], &steps[0].Checkpoint, parentsKept)
	return encodeBodies(bodies)
}

// stateOnce marks a commit's first body as having its parent's state for its output.
func stateOnce(b *ckptBody, c *Checkpoint, parentsKept bool) {
	if parentsKept && c.OutputIsState && len(c.Output) > 0 {
		b.Output, b.ParentState = nil, true
	}
}

// inputBody is the body of a run's first checkpoint: without its update when that is
// the run's input, which the state hash keeps (fields: the start's field/value pairs).
func (c *Checkpoint) inputBody(fields []string) []byte {
	b := c.toBody()
	for i := 0; i+1 < len(fields); i += 2 {
		if fields[i] == "input" && c.Kind == "input" && len(c.Update) > 0 && fields[i+1] == string(c.Update) {
			b.Update, b.RunInput = nil, true
		}
	}
	return encodeBody(&b)
}

// fillKept gives the checkpoints what they keep elsewhere, once: the update of those
// whose update is their run's input (a first checkpoint, see inputBody), and the output
// of those whose output is their parent's state (see packedBody; a parent's state kept
// as sameAsInput is the input), all read from the state hash (an older build's run has
// its input in its run hash). One round trip, and only when a checkpoint needs it.
func (r *Redis) fillKept(ctx context.Context, ref RunRef, cps []Checkpoint) error {
	var parents []string
	wantInput := false
	for i := range cps {
		if cps[i].parentState && cps[i].Parent != "" {
			parents = append(parents, cps[i].Parent)
		}
		wantInput = wantInput || cps[i].runInput
	}
	if len(parents) == 0 && !wantInput {
		return nil
	}
	k := ref.keys()
	pipe := r.Client.Pipeline()
	// The input is read with the parents' states: one of them is the first checkpoint's,
	// kept as sameAsInput, in every run an input node starts.
	inCmd := pipe.HMGet(ctx, k.State(ref.Run), append([]string{inputField}, parents...)...)
	oldIn := pipe.HGet(ctx, k.Run(ref.Run), inputField) // a run an older build started
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return err
	}
	vals := inCmd.Val()
	var in []byte
	if s, ok := vals[0].(string); ok {
		in = []byte(s)
	} else {
		in, _ = oldIn.Bytes()
	}
	states := map[string][]byte{}
	for j, v := range vals[1:] {
		if s, ok := v.(string); ok {
			if s == sameAsInput {
				states[parents[j]] = in
			} else {
				states[parents[j]] = []byte(s)
			}
		}
	}
	for i := range cps {
		if cps[i].runInput && len(in) > 0 {
			cps[i].Update = json.RawMessage(in)
		}
		if cps[i].parentState {
			if b := states[cps[i].Parent]; len(b) > 0 {
				cps[i].Output = json.RawMessage(b)
			}
		}
	}
	return nil
}

func (c *Checkpoint) fromBody(b ckptBody) {
	c.runInput, c.parentState = b.RunInput, b.ParentState
	c.Kind, c.Update, c.Output, c.Error, c.Attempt = b.Kind, b.Update, b.Output, b.Error, b.Attempt
	c.Ports, c.Branches, c.Worker, c.Entry, c.StateBytes, c.Pinned = b.Ports, b.Branches, b.Worker, b.Entry, b.StateBytes, b.Pinned
	c.Duration = time.Duration(b.DurUS) * time.Microsecond
	c.DurationMS = float64(b.DurUS) / 1000
	c.Usage = flows.Usage{InputTokens: b.InTok, OutputTokens: b.OutTok, CacheReadTokens: b.CacheRead, CacheWriteTokens: b.CacheWrite, CostUSD: float64(b.MicroUSD) / 1e6}
}

// The fields of a checkpoint stream entry.
const (
	ckptNode   = "n"
	ckptParent = "p"
	ckptBodyF  = "c"
	ckptSteps  = "k"
	ckptStep   = "s"
	ckptTime   = "t"
)

// subID is the checkpoint id of step k of an entry of n steps.
func subID(entry string, k, n int) string {
	if k == n-1 {
		return entry
	}
	return entry + "." + strconv.Itoa(k)
}

// parseCheckpoints decodes one stream entry into its checkpoints (one, or several for a
// packed commit), in order.
func parseCheckpoints(m redis.XMessage) []Checkpoint {
	s := func(k string) string { v, _ := m.Values[k].(string); return v }
	raw := s(ckptBodyF)
	if raw == "" {
		return []Checkpoint{parseOldCheckpoint(m)}
	}
	step, _ := strconv.Atoi(s(ckptStep))
	t := msTime(s(ckptTime))
	if raw[0] != '[' {
		c := Checkpoint{ID: m.ID, Node: s(ckptNode), Parent: s(ckptParent), Step: step, Time: t}
		var b ckptBody
		_ = json.Unmarshal([]byte(raw), &b)
		c.fromBody(b)
		return []Checkpoint{c}
	}
	var bodies []ckptBody
	_ = json.Unmarshal([]byte(raw), &bodies)
	out := make([]Checkpoint, len(bodies))
	parent := s(ckptParent)
	for k, b := range bodies {
		c := Checkpoint{ID: subID(m.ID, k, len(bodies)), Node: b.Node, Parent: parent, Time: t}
		if step > 0 {
			c.Step = step + k
		}
		c.fromBody(b)
		out[k] = c
		parent = c.ID
	}
	return out
}

// parseOldCheckpoint reads a checkpoint written before the body was packed into one
// field (node, kind, parent, update, output, m, step, ts).
func parseOldCheckpoint(m redis.XMessage) Checkpoint {
	s := func(k string) string { v, _ := m.Values[k].(string); return v }
	c := Checkpoint{ID: m.ID, Node: s("node"), Kind: s("kind"), Parent: s("parent")}
	c.Step, _ = strconv.Atoi(s("step"))
	if v := s("update"); v != "" {
		c.Update = json.RawMessage(v)
	}
	if v := s("output"); v != "" {
		c.Output = json.RawMessage(v)
	}
	var meta struct {
		Attempt    int      `json:"attempt"`
		Ports      []string `json:"ports"`
		Branches   []string `json:"branches"`
		DurUS      int64    `json:"dur_us"`
		InTok      int64    `json:"in_tok"`
		OutTok     int64    `json:"out_tok"`
		StateBytes int      `json:"sbytes"`
		Worker     string   `json:"worker"`
		Entry      string   `json:"entry"`
	}
	_ = json.Unmarshal([]byte(s("m")), &meta)
	c.Attempt, c.Ports, c.Branches, c.Worker, c.Entry = meta.Attempt, meta.Ports, meta.Branches, meta.Worker, meta.Entry
	c.Duration = time.Duration(meta.DurUS) * time.Microsecond
	c.DurationMS = float64(meta.DurUS) / 1000
	c.Usage = flows.Usage{InputTokens: meta.InTok, OutputTokens: meta.OutTok}
	c.StateBytes = meta.StateBytes
	c.Time = msTime(s("ts"))
	return c
}

// EntryOf is the stream entry a checkpoint id belongs to ("X.k" and "X" are in X).
func EntryOf(id string) string { return entryOfID(id) }

func entryOfID(id string) string {
	e, _, _ := strings.Cut(id, ".")
	return e
}

// Checkpoints returns checkpoints of a run from id start ("-" for the first) on, in
// commit order, without their states: up to count stream entries' worth (0: all).
func (r *Redis) Checkpoints(ctx context.Context, ref RunRef, start string, count int64) ([]Checkpoint, error) {
	run := ref.Run
	from := "-"
	if start != "" && start != "-" {
		from = entryOfID(start)
	}
	var msgs []redis.XMessage
	var err error
	if count > 0 {
		msgs, err = r.Client.XRangeN(ctx, ref.keys().Ckpt(run), from, "+", count).Result()
	} else {
		msgs, err = r.Client.XRange(ctx, ref.keys().Ckpt(run), from, "+").Result()
	}
	if err != nil {
		return nil, err
	}
	out := make([]Checkpoint, 0, len(msgs))
	for _, m := range msgs {
		for _, c := range parseCheckpoints(m) {
			if from != "-" && m.ID == from && start != from && CompareStreamIDs(c.ID, start) < 0 {
				continue // before start, in start's own entry
			}
			out = append(out, c)
		}
	}
	if err := r.fillKept(ctx, ref, out); err != nil {
		return nil, err
	}
	return out, nil
}

// GetCheckpoint returns one checkpoint with its state.
func (r *Redis) GetCheckpoint(ctx context.Context, ref RunRef, id string) (*Checkpoint, error) {
	flow, run, k := ref.Flow, ref.Run, ref.keys()
	entry := entryOfID(id)
	pipe := r.Client.Pipeline()
	rng := pipe.XRange(ctx, k.Ckpt(run), entry, entry)
	st := pipe.HGet(ctx, k.State(run), id)
	_, _ = pipe.Exec(ctx)
	msgs, err := rng.Result()
	if err != nil {
		return nil, err
	}
	for _, m := range msgs {
		for _, c := range parseCheckpoints(m) {
			if c.ID != id {
				continue
			}
			if b, err := st.Bytes(); err == nil {
				if string(b) == sameAsInput {
					if b, err = r.inputOf(ctx, ref); err != nil {
						return nil, err
					}
				}
				c.State = b
			}
			cps := []Checkpoint{c}
			if err := r.fillKept(ctx, ref, cps); err != nil {
				return nil, err
			}
			return &cps[0], nil
		}
	}
	return nil, &flows.Error{Code: flows.NotFound, Flow: flow, Message: fmt.Sprintf("run %q has no checkpoint %q", run, id)}
}

// LoadState returns the state JSON of a checkpoint.
func (r *Redis) LoadState(ctx context.Context, ref RunRef, ckpt string) ([]byte, error) {
	flow, run := ref.Flow, ref.Run
	b, err := r.Client.HGet(ctx, ref.keys().State(run), ckpt).Bytes()
	if errors.Is(err, redis.Nil) {
		return nil, &flows.Error{Code: flows.NotFound, Flow: flow, Message: fmt.Sprintf("run %q has no checkpoint %q (expired or trimmed)", run, ckpt)}
	}
	if err == nil && string(b) == sameAsInput {
		return r.inputOf(ctx, ref)
	}
	return b, err
}

// inputOf returns a run's input: the state of its first checkpoint when the start kept
// that as sameAsInput.
func (r *Redis) inputOf(ctx context.Context, ref RunRef) ([]byte, error) {
	in, err := r.inputsOf(ctx, []RunRef{ref})
	if err != nil {
		return nil, err
	}
	if in[0] == nil {
		return nil, &flows.Error{Code: flows.NotFound, Flow: ref.Flow, Message: fmt.Sprintf("run %q is gone (expired)", ref.Run)}
	}
	return in[0], nil
}

// inputsOf returns runs' inputs in one round trip (nil for a run that has none). An
// input is in the run's state hash, or for a run an older build started in its run hash.
func (r *Redis) inputsOf(ctx context.Context, refs []RunRef) ([][]byte, error) {
	pipe := r.Client.Pipeline()
	in := make([]*redis.StringCmd, len(refs))
	old := make([]*redis.StringCmd, len(refs))
	for i, ref := range refs {
		k := ref.keys()
		in[i] = pipe.HGet(ctx, k.State(ref.Run), inputField)
		old[i] = pipe.HGet(ctx, k.Run(ref.Run), inputField)
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, err
	}
	out := make([][]byte, len(refs))
	for i := range refs {
		if b, err := in[i].Bytes(); err == nil {
			out[i] = b
		} else if b, err := old[i].Bytes(); err == nil {
			out[i] = b
		}
	}
	return out, nil
}

// StateRef names one checkpoint's state.
type StateRef struct {
	RunRef
	Ckpt string
	// First says the checkpoint may be its run's first (the activation's depth is 1):
	// its state is then usually kept as the run's input (sameAsInput), which
	// LoadStepInputs reads with it, in the same command.
	First bool
}

// StepInput is what a step needs from Redis before it runs: the state of the checkpoint
// it reads (nil when it is gone), its run's status ("" when the run is gone) and the
// run's pinned node outputs (JSON, empty for none).
type StepInput struct {
	State  []byte
	Status string
	Pins   string
	// KeysOf is the run whose idempotency keys the run's calls send (a replay that keeps
	// its origin's keys), "" for its own.
	KeysOf string
}

// LoadStepInputs reads, for several activations, their checkpoints' states (only where
// want[i]) and their runs' statuses and pins, in one round trip. A first checkpoint's
// state kept as its run's input (sameAsInput) is read with the input in one HMGET where
// the ref says First; elsewhere, or for a run an older build started (its input in the
// run hash), one more round trip reads the input.
func (r *Redis) LoadStepInputs(ctx context.Context, refs []StateRef, want []bool) ([]StepInput, error) {
	pipe := r.Client.Pipeline()
	states := make([]*redis.SliceCmd, len(refs))
	runs := make([]*redis.SliceCmd, len(refs))
	for i, ref := range refs {
		k := ref.keys()
		if want[i] {
			if ref.First {
				states[i] = pipe.HMGet(ctx, k.State(ref.Run), ref.Ckpt, inputField)
			} else {
				states[i] = pipe.HMGet(ctx, k.State(ref.Run), ref.Ckpt)
			}
		}
		runs[i] = pipe.HMGet(ctx, k.Run(ref.Run), "status", "pins", "keys_of")
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, err
	}
	out := make([]StepInput, len(refs))
	var inputs []int // states kept as the run's input, not read with it
	for i := range refs {
		if states[i] != nil {
			v := states[i].Val()
			if s, ok := v[0].(string); ok {
				out[i].State = []byte(s)
				if s == sameAsInput {
					out[i].State = nil
					if in, ok := hmgetAt(v, 1); ok {
						out[i].State = []byte(in)
					} else {
						inputs = append(inputs, i)
					}
				}
			}
		}
		if v := runs[i].Val(); len(v) == 3 {
			out[i].Status, _ = v[0].(string)
			out[i].Pins, _ = v[1].(string)
			out[i].KeysOf, _ = v[2].(string)
		}
	}
	if inputs != nil {
		runs := make([]RunRef, len(inputs))
		for j, i := range inputs {
			runs[j] = refs[i].RunRef
		}
		in, err := r.inputsOf(ctx, runs)
		if err != nil {
			return nil, err
		}
		for j, i := range inputs {
			out[i].State = in[j]
		}
	}
	return out, nil
}

// hmgetAt returns the i-th value of an HMGET's reply, if the field was there.
func hmgetAt(v []any, i int) (string, bool) {
	if i >= len(v) {
		return "", false
	}
	s, ok := v[i].(string)
	return s, ok
}

// StepGate reads what the gate needs of one run: its status ("" when it is gone) and
// its pins.
func (r *Redis) StepGate(ctx context.Context, ref RunRef) (StepInput, error) {
	v, err := r.Client.HMGet(ctx, ref.keys().Run(ref.Run), "status", "pins", "keys_of").Result()
	if err != nil {
		return StepInput{}, err
	}
	var in StepInput
	in.Status, _ = v[0].(string)
	in.Pins, _ = v[1].(string)
	in.KeysOf, _ = v[2].(string)
	return in, nil
}

// SaveTurn records a turn of a running step in its run's checkpoint history. It fails
// with a Conflict error when the step is no longer this consumer's.
func (r *Redis) SaveTurn(ctx context.Context, a Activation, consumer string, turn []byte) (string, error) {
	k := a.keys()
	c := Checkpoint{Kind: KindTurn, Update: turn, Attempt: a.Attempt(), Worker: consumer, Entry: a.ID}
	res, err := turnScript.Run(ctx, r.Client, []string{k.In(a.Node), k.Ckpt(a.Run), k.Events()},
		Group, consumer, a.ID, a.Run, a.Node, a.Ckpt, c.body(), turn, nowMS(), EventsMaxLen).Slice()
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
	msgs, err := r.Client.XRange(ctx, a.keys().Ckpt(a.Run), entryOfID(a.Ckpt), "+").Result()
	if err != nil {
		return nil, err
	}
	var out []json.RawMessage
	for _, m := range msgs {
		for _, c := range parseCheckpoints(m) {
			if c.Kind == KindTurn && c.Node == a.Node && c.Entry == a.ID {
				out = append(out, c.Update)
			}
		}
	}
	return out, nil
}
