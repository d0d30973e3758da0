package store

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/sluicehq/sluice/flows"
)

// Commit is everything one step commits — or a few pure steps in a row, fused: their
// checkpoints, states and events, then what the last one's routing does.
type Commit struct {
	Act      Activation
	Consumer string
	MaxSteps int
	TTL      time.Duration
	KeepLast int
	// Steps are the steps committed: the first ran Act; each further one ran the single
	// successor of the one before, in this process, without an activation of its own.
	Steps []CommitStep
	// Transitions follow the last step. Among them, Branch holds steps run inline along
	// a branch of a fork the last step opened.
	Transitions []Transition
	// Start, when set, makes the commit the start of the fresh run its steps belong to
	// (store/startfold.go): Act.ID is then "" and Act.Ckpt is Start.Ckpt.
	Start *StartArgs
	// Turns are turns of the first step (JSON) saved with the commit instead of one by
	// one (SaveTurn): they are written as SaveTurn writes them, before the steps'
	// checkpoint, and only if the commit is made. A start has none.
	Turns [][]byte
}

// CommitStep is one step of a commit.
type CommitStep struct {
	Node string
	// Checkpoint is the step's checkpoint (Kind, Update, Output, Attempt, ...). The first
	// step's Parent, when empty, is Act.Ckpt; each further step's is the step before.
	Checkpoint Checkpoint
	State      []byte
	// Final is the value of an output node (part of the run's output), or nil.
	Final []byte
	// Event is what the live views are told about the step: a JSON object.
	Event json.RawMessage
}

// CommitResult says what a commit did.
type CommitResult struct {
	Status    CommitStatus
	Ckpt      string
	Step      int
	Live      int
	RunStatus string
}

// stepEvent is one step's entry in a commit's events array: {"n": node, "d": event}, or
// for the common event {"duration_ms":MS,"kind":KIND,"status":"done"} (a step with
// nothing else to say) {"n": node, "ms": MS}, with "k": KIND unless it is "step" — a
// third of the bytes a run keeps in the events stream. Readers get the event back byte
// for byte (full).
type stepEvent struct {
	Node string          `json:"n"`
	Data json.RawMessage `json:"d,omitempty"`
	MS   json.Number     `json:"ms,omitempty"`
	Kind string          `json:"k,omitempty"`
}

// full gives a short step event its data back, as the engine wrote it.
func (e *stepEvent) full() {
	if e.Data != nil || e.MS == "" {
		return
	}
	kind := e.Kind
	if kind == "" {
		kind = "step"
	}
	e.Data = json.RawMessage(`{"duration_ms":` + string(e.MS) + `,"kind":"` + kind + `","status":"done"}`)
}

// shortEvent returns the duration and kind of a step event of the common form (see
// stepEvent), or ok false.
func shortEvent(ev []byte) (ms, kind []byte, ok bool) {
	const pre, mid, post = `{"duration_ms":`, `,"kind":"`, `","status":"done"}`
	if !bytes.HasPrefix(ev, []byte(pre)) || !bytes.HasSuffix(ev, []byte(post)) {
		return nil, nil, false
	}
	rest := ev[len(pre) : len(ev)-len(post)]
	i := bytes.Index(rest, []byte(mid))
	if i <= 0 {
		return nil, nil, false
	}
	ms, kind = rest[:i], rest[i+len(mid):]
	for _, c := range ms {
		if (c < '0' || c > '9') && c != '.' && c != '-' && c != 'e' && c != 'E' && c != '+' {
			return nil, nil, false
		}
	}
	if !json.Valid(ms) || len(kind) == 0 {
		return nil, nil, false
	}
	for _, c := range kind {
		if c < 'a' || c > 'z' {
			return nil, nil, false
		}
	}
	return ms, kind, true
}

// commitCall builds one commit script call for commits of one partition of one flow.
type commitCall struct {
	keys  []string
	args  []any
	index map[string]string // transition stream -> its index in keys, as an argument
	extra []string          // the transition streams, after every commit's five keys
}

// newCommitCall starts a call of n commits of one partition of one flow, with the
// settings of c (which the call's commits share: see commitGroups).
func newCommitCall(c *Commit, n int) *commitCall {
	k := c.Act.keys()
	call := &commitCall{keys: make([]string, 0, 4+5*n+2), args: make([]any, 0, 8+20*n), index: map[string]string{}}
	call.keys = append(call.keys, k.Events(), k.Results(), k.Waits(), k.Expiry())
	now := nowMS()
	ttl := int64(c.TTL / time.Second)
	call.args = append(call.args, Group, strconv.FormatInt(now, 10), strconv.Itoa(EventsMaxLen),
		strconv.Itoa(c.MaxSteps), strconv.FormatInt(ttl, 10), strconv.Itoa(c.KeepLast), strconv.FormatInt(now+ttl*1000, 10),
		strconv.Itoa(n), c.Consumer)
	return call
}

// streamIndex is the KEYS index a transition's stream will have; extra keys are
// numbered after the n commits' five keys each.
func (call *commitCall) streamIndex(key string, n int) string {
	if i, ok := call.index[key]; ok {
		return i
	}
	call.extra = append(call.extra, key)
	i := strconv.Itoa(4 + 5*n + len(call.extra))
	call.index[key] = i
	return i
}

func (call *commitCall) finish() ([]string, []any) {
	return append(call.keys, call.extra...), call.args
}

// add appends one commit of the call's n.
func (call *commitCall) add(c *Commit, n int) {
	k := c.Act.keys()
	run := c.Act.Run
	call.keys = append(call.keys, k.In(c.Act.Node), k.Run(run), k.Ckpt(run), k.State(run), k.Frames(run))
	var usage flows.Usage
	for _, s := range c.Steps {
		usage = usage.Add(s.Checkpoint.Usage)
	}
	// Steps run inline along a fork's branches, and at its join, count as the commit's
	// own: their tokens and outputs.
	var finals []CommitStep
	for _, t := range c.Transitions {
		var steps []CommitStep
		switch b := t.(type) {
		case Branch:
			steps = b.Steps
		case Joined:
			steps = b.Steps
		}
		for _, s := range steps {
			usage = usage.Add(s.Checkpoint.Usage)
			if s.Final != nil {
				finals = append(finals, s)
			}
		}
	}
	evs := stepEventsJSON(c.Steps)
	first, last := c.Steps[0], c.Steps[len(c.Steps)-1]
	parent := first.Checkpoint.Parent
	if parent == "" {
		parent = c.Act.Ckpt
	}
	args := call.args
	args = append(args, c.Act.ID, run,
		strconv.Itoa(c.Act.Depth+len(c.Steps)), strconv.Itoa(len(c.Steps)), evs,
		first.Node, last.Node, parent, packedBody(c.Steps, c.KeepLast == 0))
	// Only the last step's state is stored: a fused step's state is the one before the
	// commit with the steps' updates applied, and the engine computes it when someone
	// asks. With keep_last, whose trimming may drop the state it would start from, every
	// state is stored.
	if c.KeepLast > 0 {
		args = append(args, strconv.Itoa(len(c.Steps)))
		for _, s := range c.Steps {
			args = append(args, s.State)
		}
	} else {
		args = append(args, last.State)
	}
	// The ops: the steps' outputs and tokens (only those there are), then the
	// transitions.
	nops := len(c.Transitions) + len(finals)
	for _, s := range c.Steps {
		if s.Final != nil {
			nops++
		}
	}
	spent := usage.InputTokens != 0 || usage.OutputTokens != 0
	if spent {
		nops++
	}
	if c.Start != nil {
		nops += c.Start.startOps()
	}
	nops += len(c.Turns)
	args = append(args, strconv.Itoa(nops))
	if c.Start != nil {
		args = c.Start.appendStartOps(args, call, n, k)
	}
	for _, t := range c.Turns {
		tc := Checkpoint{Kind: KindTurn, Update: t, Attempt: c.Act.Attempt(), Worker: c.Consumer, Entry: c.Act.ID}
		args = append(args, opTurn, tc.body(), t)
	}
	for _, s := range c.Steps {
		if s.Final != nil {
			args = append(args, opFinal, s.Node, s.Final)
		}
	}
	for _, s := range finals {
		args = append(args, opFinal, s.Node, s.Final)
	}
	if spent {
		args = append(args, opTokens, strconv.FormatInt(usage.InputTokens, 10), strconv.FormatInt(usage.OutputTokens, 10))
	}
	for _, t := range c.Transitions {
		code, key, targs := t.op(k)
		args = append(args, code)
		for _, a := range targs {
			if a == "KEY" {
				a = call.streamIndex(key, n)
			}
			args = append(args, a)
		}
	}
	call.args = args
}

// commitGroups splits commits into the groups one script call commits: those of one
// partition of one flow (whose keys share a slot and the partition's streams) with the
// same settings (max_steps, retention, keep_last: the flow's) and consumer (the script
// takes them once per call), at most maxCallCommits each, in order.
func commitGroups(commits []*Commit) [][]int {
	type groupKey struct {
		k                  Keys
		maxSteps, keepLast int
		ttl                time.Duration
		consumer           string
	}
	var groups [][]int
	at := map[groupKey]int{}
	for i, c := range commits {
		k := groupKey{c.Act.keys(), c.MaxSteps, c.KeepLast, c.TTL, c.Consumer}
		g, ok := at[k]
		if !ok || len(groups[g]) >= maxCallCommits {
			g = len(groups)
			groups = append(groups, nil)
			at[k] = g
		}
		groups[g] = append(groups[g], i)
	}
	// Within a call, the commits of one stream are in a row, in the order of their
	// entries: commit.lua then checks the fence of a stream's commits with one XPENDING
	// over their range, and trims below the last one acknowledged without comparing ids.
	for _, g := range groups {
		if len(g) > 1 {
			slices.SortStableFunc(g, func(a, b int) int {
				x, y := commits[a].Act, commits[b].Act
				if c := strings.Compare(x.Node, y.Node); c != 0 {
					return c
				}
				return compareEntryIDs(x.ID, y.ID)
			})
		}
	}
	return groups
}

// compareEntryIDs orders stream entry ids ("ms-seq", decimal without leading zeros) as
// Redis does: a shorter number is the smaller.
func compareEntryIDs(a, b string) int {
	am, as, _ := strings.Cut(a, "-")
	bm, bs, _ := strings.Cut(b, "-")
	if len(am) != len(bm) {
		return len(am) - len(bm)
	}
	if c := strings.Compare(am, bm); c != 0 {
		return c
	}
	if len(as) != len(bs) {
		return len(as) - len(bs)
	}
	return strings.Compare(as, bs)
}

// maxCallCommits bounds the commits of one script call: Redis runs a script alone, so a
// long one holds every other client up.
const maxCallCommits = 64

// CommitBatch commits the commits and returns their results in order. The commits of
// one partition of one flow go in one script call (see commit.lua), the calls in one
// pipeline. A commit whose result is unknown (the connection failed) carries an error;
// it is safe to send again, since the fence refuses a second commit of the same entry.
// A call Redis refuses (a bad op: a bug) is sent again a commit at a time, so that the
// others of its batch are not held up by it.
func (r *Redis) CommitBatch(ctx context.Context, commits []*Commit) ([]CommitResult, []error) {
	results := make([]CommitResult, len(commits))
	errs := make([]error, len(commits))
	groups := commitGroups(commits)
	for attempt := 0; attempt < 3; attempt++ {
		pipe := r.Client.Pipeline()
		cmds := make([]*redis.Cmd, len(groups))
		for gi, g := range groups {
			if attempt > 0 && !isNoScript(errs[g[0]]) {
				continue
			}
			call := newCommitCall(commits[g[0]], len(g))
			for _, i := range g {
				call.add(commits[i], len(g))
			}
			keys, args := call.finish()
			cmds[gi] = commitScript.EvalSha(ctx, pipe, keys, args...)
		}
		_, _ = pipe.Exec(ctx)
		retry := false
		var split [][]int
		for gi, cmd := range cmds {
			if cmd == nil {
				continue
			}
			g := groups[gi]
			res, err := cmd.Slice()
			var crs []CommitResult
			if err == nil {
				crs, err = parseCommitResults(res, len(g))
			}
			for j, i := range g {
				errs[i] = err
				if err == nil {
					results[i] = crs[j]
				}
			}
			switch {
			case isNoScript(err):
				retry = true
				split = append(split, g)
			case err != nil && len(g) > 1 && isScriptError(err):
				retry = true
				for _, i := range g {
					errs[i] = errNoScriptSplit
					split = append(split, []int{i})
				}
			}
		}
		if !retry {
			break
		}
		groups = split
		if err := r.LoadScripts(ctx); err != nil {
			break
		}
	}
	return results, errs
}

// errNoScriptSplit marks, between attempts, the commits of a refused call that are sent
// again one at a time.
var errNoScriptSplit = errors.New("NOSCRIPT: sent again alone")

// isScriptError reports whether err is Redis refusing a script's arguments (an error
// reply of the script), not the connection failing.
func isScriptError(err error) bool {
	var re redis.Error
	return errors.As(err, &re) && !isNoScript(err)
}

// replyValues is how many values of commit.lua's flat reply each status has, itself
// included.
var replyValues = map[CommitStatus]int{CommitOK: 5, CommitStale: 1, CommitDropped: 2, CommitMaxSteps: 2}

// parseCommitResults reads the replies of n commits from commit.lua's flat array.
func parseCommitResults(res []any, n int) ([]CommitResult, error) {
	crs := make([]CommitResult, n)
	j := 0
	for c := range crs {
		if j >= len(res) {
			return nil, fmt.Errorf("commit: %d values hold the replies of %d commits, not %d", len(res), c, n)
		}
		s, _ := res[j].(string)
		cr := CommitResult{Status: CommitStatus(s)}
		w := replyValues[cr.Status]
		if w == 0 || j+w > len(res) {
			return nil, fmt.Errorf("commit: reply %d: %v is no commit reply", c+1, res[j])
		}
		switch cr.Status {
		case CommitOK:
			cr.Ckpt, _ = res[j+1].(string)
			s, _ := res[j+2].(int64)
			l, _ := res[j+3].(int64)
			cr.Step, cr.Live = int(s), int(l)
			cr.RunStatus, _ = res[j+4].(string)
		case CommitDropped:
			cr.RunStatus, _ = res[j+1].(string)
		case CommitMaxSteps:
			d, _ := res[j+1].(int64)
			cr.Step = int(d)
		}
		crs[c] = cr
		j += w
	}
	if j != len(res) {
		return nil, fmt.Errorf("commit: %d values left after the replies of %d commits", len(res)-j, n)
	}
	return crs, nil
}

// Drop acknowledges an activation without committing a step: its run was cancelled or
// is gone. When the step was running and the cancel stopped it, interrupted records that
// in the run's history (a checkpoint of kind "interrupted"). It says what it did
// (DropStatus): dropped, stale (the entry is no longer consumer's), or nothing when the
// run is running (neither cancelled nor gone).
func (r *Redis) Drop(ctx context.Context, a Activation, consumer string, interrupted *Checkpoint, ttl time.Duration) (DropStatus, error) {
	k := a.keys()
	body := ""
	if interrupted != nil {
		interrupted.Kind = KindInterrupted
		body = string(interrupted.body())
	}
	res, err := dropScript.Run(ctx, r.Client, []string{k.In(a.Node), k.Run(a.Run), k.Ckpt(a.Run), k.State(a.Run), k.Events(), k.Expiry()},
		Group, consumer, a.ID, a.Run, a.Node, a.Ckpt, body, strconv.FormatInt(nowMS(), 10), strconv.FormatInt(int64(ttl/time.Second), 10), EventsMaxLen).Text()
	return DropStatus(res), err
}
