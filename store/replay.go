package store

// Retry on another version, runs that move, replays and the runs they replay: what the
// store keeps of them (see docs/replay.md).

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
	"github.com/sluicehq/sluice/flows"
)

var (
	moveWaitScript   = mustScript("move_wait")
	linkReplayScript = mustScript("link_replay")
)

// Move is a run moved to another version: by a retry of a step (Dead names the dead
// letter) or while it waited at an approval.
type Move struct {
	From    string `json:"from"`
	To      string `json:"to"`
	Node    string `json:"node"`
	Dead    string `json:"dead,omitempty"`
	By      string `json:"by,omitempty"`
	At      int64  `json:"at"` // unix ms
	Attempt int    `json:"attempt,omitempty"`
	Waiting bool   `json:"waiting,omitempty"`
}

func parseReplayFields(r *Run, h map[string]string) {
	if m := h["moves"]; m != "" {
		_ = json.Unmarshal([]byte(m), &r.Moves)
	}
	r.ReplayOf, r.ReplayOfCkpt = h["replay_of"], h["replay_of_ckpt"]
	if s := h["replayed_as"]; s != "" {
		r.ReplayedAs = strings.Fields(s)
	}
}

func deadLetterOf(flow, id string, m redis.XMessage) DeadLetter {
	s := func(k string) string { v, _ := m.Values[k].(string); return v }
	n, _ := strconv.Atoi(s("attempts"))
	before, _ := strconv.Atoi(s("a:ao"))
	return DeadLetter{ID: id, Flow: flow, Node: s("node"), Run: s("run"), Error: s("error"), Attempts: n, Time: msTime(s("ts")),
		Ckpt: s("a:ckpt"), Version: s("a:v"), Before: before, Tok: s("a:tok")}
}

// DeadLetter reads one dead letter by its id.
func (r *Redis) DeadLetter(ctx context.Context, flow, id string) (*DeadLetter, error) {
	entry, p := splitPart(id)
	if p < 0 || !ValidStreamID(entry) {
		return nil, &flows.Error{Code: flows.NotFound, Flow: flow, Message: fmt.Sprintf("no dead letter %q", id)}
	}
	msgs, err := r.Client.XRange(ctx, PartKeys(flow, p).Dead(), entry, entry).Result()
	if err != nil {
		return nil, err
	}
	if len(msgs) == 0 {
		return nil, &flows.Error{Code: flows.NotFound, Flow: flow, Message: fmt.Sprintf("no dead letter %q", id)}
	}
	d := deadLetterOf(flow, id, msgs[0])
	return &d, nil
}

// RunDeadLetters lists the dead letters of one run, oldest first.
func (r *Redis) RunDeadLetters(ctx context.Context, flow, run string) ([]DeadLetter, error) {
	all, err := r.DeadLetters(ctx, flow, 1<<20)
	if err != nil {
		return nil, err
	}
	var out []DeadLetter
	for _, d := range all {
		if d.Run == run {
			out = append(out, d)
		}
	}
	return out, nil
}

// RetryArgs say how a dead letter is retried.
type RetryArgs struct {
	// Version is the version to retry on; "" the one the step ran.
	Version string
	// From is the version the caller checked the move from (the dead letter's): the
	// retry is refused when the dead letter changed since. "" checks nothing.
	From string
	// By says who retried, for the run's record of the move.
	By string
}

// RetryDeadOn puts a dead letter back on its node's stream as a new activation of the
// version a names (attempts go on being numbered) and reopens its run. A retry on
// another version moves the run: its version becomes a.Version and the move is recorded.
func (r *Redis) RetryDeadOn(ctx context.Context, flow, id string, a RetryArgs) (string, error) {
	d, err := r.DeadLetter(ctx, flow, id)
	if err != nil {
		return "", err
	}
	entry, p := splitPart(id)
	k := PartKeys(flow, p)
	res, err := retryDeadScript.Run(ctx, r.Client, []string{k.Dead(), k.In(d.Node), k.Run(d.Run), k.Events(), k.Ckpt(d.Run), k.State(d.Run), k.Frames(d.Run), k.Expiry()},
		entry, d.Node, nowMS(), EventsMaxLen, a.Version, a.From, a.By).Slice()
	if err != nil {
		return "", err
	}
	switch res[0] {
	case "not_found":
		return "", &flows.Error{Code: flows.NotFound, Flow: flow, Message: fmt.Sprintf("no dead letter %q", id)}
	case "gone":
		return "", &flows.Error{Code: flows.Conflict, Flow: flow, Message: fmt.Sprintf("run %q of dead letter %q has expired", d.Run, id)}
	case "changed":
		return "", &flows.Error{Code: flows.Conflict, Flow: flow, Message: fmt.Sprintf("dead letter %q changed while it was checked; try again", id)}
	}
	newID, _ := res[1].(string)
	return newID, nil
}

// OpenFrames lists the fork frames a run has open (their ids, "node~entry").
func (r *Redis) OpenFrames(ctx context.Context, ref RunRef) ([]string, error) {
	ks, err := r.Client.HKeys(ctx, ref.keys().Frames(ref.Run)).Result()
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	var out []string
	for _, k := range ks {
		if f, ok := strings.CutSuffix(k, ":n"); ok && !seen[f] {
			seen[f] = true
			out = append(out, f)
		}
	}
	return out, nil
}

// MoveWaiting moves a run that waits at an approval node to version to: the run's later
// steps, from the approval's on, follow to's graph. from is the version the caller
// checked the move from (the run's).
func (r *Redis) MoveWaiting(ctx context.Context, ref RunRef, node, from, to, by string) error {
	k := ref.keys()
	res, err := moveWaitScript.Run(ctx, r.Client, []string{k.Run(ref.Run), k.Events()}, ref.Run, node, from, to, by, nowMS(), EventsMaxLen).Slice()
	if err != nil {
		return err
	}
	switch res[0] {
	case "not_found":
		return &flows.Error{Code: flows.NotFound, Flow: ref.Flow, Message: fmt.Sprintf("no run %q", ref.Run)}
	case "conflict":
		return &flows.Error{Code: flows.Conflict, Flow: ref.Flow, Node: node, Message: fmt.Sprintf("run %q does not wait at %q (it is %v)", ref.Run, node, res[1])}
	case "changed":
		return &flows.Error{Code: flows.Conflict, Flow: ref.Flow, Message: fmt.Sprintf("run %q moved to version %.12v while it was checked; try again", ref.Run, res[1])}
	}
	return nil
}

// LinkReplay records on run orig that replay replays it ("replayed_as").
func (r *Redis) LinkReplay(ctx context.Context, orig RunRef, replay string) error {
	return linkReplayScript.Run(ctx, r.Client, []string{orig.keys().Run(orig.Run)}, replay).Err()
}

// WaitOf returns the checkpoint whose state a waiting approval read and its fork tokens.
func (r *Redis) WaitOf(ctx context.Context, ref RunRef, node string) (ckpt, tok string, err error) {
	v, err := r.Client.HMGet(ctx, ref.keys().Run(ref.Run), "waitckpt:"+node, "wait:"+node).Result()
	if err != nil {
		return "", "", err
	}
	ckpt, _ = v[0].(string)
	if w, ok := v[1].(string); ok {
		var rec struct {
			Tok string `json:"tok"`
		}
		_ = json.Unmarshal([]byte(w), &rec)
		tok = rec.Tok
	}
	return ckpt, tok, nil
}
