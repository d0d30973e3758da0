package store

import (
	"context"
	"encoding/json"
	"strconv"
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
	// Transitions follow the last step.
	Transitions []Transition
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
	Status    string // "ok", "stale", "dropped", "max_steps"
	Ckpt      string
	Step      int
	Live      int
	RunStatus string
}

// stepEvent is one step's entry in a commit's events array.
type stepEvent struct {
	Node string          `json:"n"`
	Data json.RawMessage `json:"d"`
}

func (c *Commit) keysArgs() ([]string, []any) {
	k := c.Act.keys()
	run := c.Act.Run
	keys := []string{k.In(c.Act.Node), k.Run(run), k.Ckpt(run), k.State(run), k.Frames(run), k.Events(), k.Results(), k.Waits(), k.Expiry()}
	index := map[string]string{}
	keyIndex := func(key string) string {
		if i, ok := index[key]; ok {
			return i
		}
		keys = append(keys, key)
		i := strconv.Itoa(len(keys))
		index[key] = i
		return i
	}
	var usage flows.Usage
	events := make([]stepEvent, len(c.Steps))
	for i, s := range c.Steps {
		usage = usage.Add(s.Checkpoint.Usage)
		events[i] = stepEvent{Node: s.Node, Data: s.Event}
		if len(s.Event) == 0 {
			events[i].Data = json.RawMessage("{}")
		}
	}
	evs, _ := json.Marshal(events)
	first, last := c.Steps[0], c.Steps[len(c.Steps)-1]
	parent := first.Checkpoint.Parent
	if parent == "" {
		parent = c.Act.Ckpt
	}
	args := make([]any, 0, 24+2*len(c.Steps)+4*len(c.Transitions))
	args = append(args, Group, c.Consumer, c.Act.ID, run, strconv.FormatInt(nowMS(), 10), strconv.Itoa(c.MaxSteps),
		strconv.FormatInt(int64(c.TTL/time.Second), 10), strconv.Itoa(c.KeepLast), strconv.Itoa(EventsMaxLen),
		strconv.Itoa(c.Act.Depth), strconv.Itoa(c.Act.Depth+len(c.Steps)), strconv.Itoa(len(c.Steps)),
		strconv.FormatInt(usage.InputTokens, 10), strconv.FormatInt(usage.OutputTokens, 10), evs,
		first.Node, last.Node, parent, packedBody(c.Steps))
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
		args = append(args, "1", last.State)
	}
	var finals []any
	for _, s := range c.Steps {
		if s.Final != nil {
			finals = append(finals, s.Node, s.Final)
		}
	}
	args = append(args, strconv.Itoa(len(finals)/2))
	args = append(args, finals...)
	args = append(args, strconv.Itoa(len(c.Transitions)))
	for _, t := range c.Transitions {
		code, key, targs := t.op(k)
		args = append(args, code)
		for _, a := range targs {
			if a == "KEY" {
				a = keyIndex(key)
			}
			args = append(args, a)
		}
	}
	return keys, args
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

// Drop acknowledges an activation without committing a step: its run was cancelled or
// is gone. When the step was running and the cancel stopped it, interrupted records that
// in the run's history (a checkpoint of kind "interrupted"). It reports "dropped", or
// "stale" when the entry is no longer consumer's, or "running" when the run is neither
// cancelled nor gone (nothing is dropped then).
func (r *Redis) Drop(ctx context.Context, a Activation, consumer string, interrupted *Checkpoint, ttl time.Duration) (string, error) {
	k := a.keys()
	body := ""
	if interrupted != nil {
		interrupted.Kind = KindInterrupted
		body = string(interrupted.body())
	}
	res, err := dropScript.Run(ctx, r.Client, []string{k.In(a.Node), k.Run(a.Run), k.Ckpt(a.Run), k.State(a.Run), k.Events(), k.Expiry()},
		Group, consumer, a.ID, a.Run, a.Node, a.Ckpt, body, strconv.FormatInt(nowMS(), 10), strconv.FormatInt(int64(ttl/time.Second), 10), EventsMaxLen).Text()
	return res, err
}
