package engine

// Retrying a step on another version, and moving a waiting run: a run moves only when
// the version it moves to can go on from where it is (see docs/replay.md).

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/sluicehq/sluice/flows"
	"github.com/sluicehq/sluice/store"
)

// RetryOptions say how a dead letter is retried.
type RetryOptions struct {
	// Target is the version to retry on; nil retries on the version the step ran ("as it
	// was").
	Target *flows.Plan
	// By says who retried ("" unknown), recorded with the run's move.
	By string
}

// Retry is what a retry did.
type Retry struct {
	Dead  string `json:"id"`    // the dead letter
	Entry string `json:"entry"` // its new entry in the node's stream
	Run   string `json:"run"`
	Node  string `json:"node"`
	From  string `json:"from"` // the version the step ran
	To    string `json:"to"`   // the version it is retried on
	Moved bool   `json:"moved"`
	// Attempt is the number the retried step's next attempt has (attempts are numbered
	// across retries).
	Attempt int `json:"attempt"`
}

// RetryDead puts a dead letter back on its node's stream, on the version it ran or on
// opts.Target. A retry on another version first checks that the run can move there (see
// checkMove): the node exists, what it reads of the state is there, and the forks the
// run has open meet at the same joins; otherwise it refuses with a Conflict that names
// the node and what is missing. The step then runs the target's node on the state it
// had received, and the run's later steps follow the target's graph.
func (e *Engine) RetryDead(ctx context.Context, flow, id string, opts RetryOptions) (*Retry, error) {
	d, err := e.rdb.DeadLetter(ctx, flow, id)
	if err != nil {
		return nil, err
	}
	out := &Retry{Dead: id, Run: d.Run, Node: d.Node, From: d.Version, To: d.Version, Attempt: d.Before + d.Attempts + 1}
	args := store.RetryArgs{From: d.Version, By: opts.By}
	if t := opts.Target; t != nil && t.Version != d.Version {
		ref, err := e.rdb.FindRun(ctx, flow, d.Run)
		if err != nil {
			return nil, err
		}
		var state map[string]any
		if d.Ckpt != "" {
			if state, err = e.stateAt(ctx, ref, d.Ckpt); err != nil {
				return nil, err
			}
		}
		frames, err := e.rdb.OpenFrames(ctx, ref)
		if err != nil {
			return nil, err
		}
		for _, tk := range parseTokens(d.Tok) {
			if !slices.Contains(frames, tk.frame) {
				frames = append(frames, tk.frame)
			}
		}
		from, _ := e.Plan(ctx, flow, d.Version) // nil when gone: only the target is checked
		if err := checkMove(from, t, d.Run, d.Node, state, frames); err != nil {
			return nil, err
		}
		if err := e.StoreVersion(ctx, t); err != nil {
			return nil, err
		}
		args.Version, out.To, out.Moved = t.Version, t.Version, true
	}
	if out.Entry, err = e.rdb.RetryDeadOn(ctx, flow, id, args); err != nil {
		return nil, err
	}
	return out, nil
}

// RetryRun retries every dead letter of a failed run (RetryDead on each), or those of
// one node when node is not "".
func (e *Engine) RetryRun(ctx context.Context, flow, run, node string, opts RetryOptions) ([]*Retry, error) {
	ds, err := e.rdb.RunDeadLetters(ctx, flow, run)
	if err != nil {
		return nil, err
	}
	var out []*Retry
	for _, d := range ds {
		if node != "" && d.Node != node {
			continue
		}
		r, err := e.RetryDead(ctx, flow, d.ID, opts)
		if err != nil {
			return out, err
		}
		out = append(out, r)
	}
	if len(out) == 0 {
		what := "run " + quote(run)
		if node != "" {
			what += " at node " + quote(node)
		}
		if _, err := e.Get(ctx, flow, run); err != nil {
			return nil, err
		}
		return nil, &flows.Error{Code: flows.Conflict, Flow: flow, Node: node, Message: fmt.Sprintf("%s has no dead letter to retry (a step that failed and was not retried or discarded)", what)}
	}
	return out, nil
}

// MoveOptions say how a waiting run moves.
type MoveOptions struct {
	Target *flows.Plan
	By     string
}

// Moved is a waiting run moved to another version.
type Moved struct {
	Run  string `json:"run"`
	Node string `json:"node"`
	From string `json:"from"`
	To   string `json:"to"`
}

// MoveWaiting moves a run that waits at an approval to version opts.Target, under the
// same check as a retry: once decided, the approval's step and all after it run the
// target's graph.
func (e *Engine) MoveWaiting(ctx context.Context, flow, run string, opts MoveOptions) ([]Moved, error) {
	if opts.Target == nil {
		return nil, &flows.Error{Code: flows.Invalid, Flow: flow, Path: "version", Message: "name the version to move to"}
	}
	r, err := e.Get(ctx, flow, run)
	if err != nil {
		return nil, err
	}
	if r.Status != store.StatusWaiting || len(r.Waits) == 0 {
		return nil, &flows.Error{Code: flows.Conflict, Flow: flow, Message: fmt.Sprintf("run %q is %s, not waiting at an approval: only a waiting run moves (retry a failed one's step instead)", run, r.Status)}
	}
	if r.Version == opts.Target.Version {
		return nil, nil
	}
	from, _ := e.Plan(ctx, flow, r.Version)
	frames, err := e.rdb.OpenFrames(ctx, r.Ref())
	if err != nil {
		return nil, err
	}
	var out []Moved
	nodes := sortedKeys(r.Waits)
	for _, node := range nodes {
		ckpt, tok, err := e.rdb.WaitOf(ctx, r.Ref(), node)
		if err != nil {
			return nil, err
		}
		var state map[string]any
		if ckpt != "" {
			if state, err = e.stateAt(ctx, r.Ref(), ckpt); err != nil {
				return nil, err
			}
		}
		fs := slices.Clone(frames)
		for _, tk := range parseTokens(tok) {
			if !slices.Contains(fs, tk.frame) {
				fs = append(fs, tk.frame)
			}
		}
		if err := checkMove(from, opts.Target, run, node, state, fs); err != nil {
			return nil, err
		}
		if tn, fn := opts.Target.Nodes[node], nodeOf(from, node); fn != nil && tn.Type != fn.Type {
			return nil, refuse(opts.Target, run, node, fmt.Sprintf("it waits at %q, a %s, which version %.7s makes a %s: a decision cannot resume it", node, fn.Type, opts.Target.Version, tn.Type))
		}
	}
	if err := e.StoreVersion(ctx, opts.Target); err != nil {
		return nil, err
	}
	for i, node := range nodes {
		if i > 0 {
			break // one move moves the run: the version is the run's
		}
		if err := e.rdb.MoveWaiting(ctx, r.Ref(), node, r.Version, opts.Target.Version, opts.By); err != nil {
			return nil, err
		}
	}
	for _, node := range nodes {
		out = append(out, Moved{Run: run, Node: node, From: r.Version, To: opts.Target.Version})
	}
	return out, nil
}

func nodeOf(p *flows.Plan, node string) *flows.PlanNode {
	if p == nil {
		return nil
	}
	return p.Nodes[node]
}

// checkMove says whether run can go on at node on version to, given the state the node
// received and the fork frames the run has open; from is the version it ran (nil when no
// longer stored: its forks are then checked against to alone).
func checkMove(from, to *flows.Plan, run, node string, state map[string]any, frames []string) error {
	n := to.Nodes[node]
	if n == nil {
		return refuse(to, run, node, fmt.Sprintf("version %.7s has no node %q", to.Version, node))
	}
	if state != nil {
		keys, whole := to.NodeReads(node)
		var missing []string
		if !whole {
			for _, k := range keys {
				if _, ok := state[k]; !ok {
					missing = append(missing, "."+k)
				}
			}
		}
		if len(missing) > 0 {
			slices.Sort(missing)
			return refuse(to, run, node, fmt.Sprintf("node %q of version %.7s reads %s, which the state it received does not have", node, to.Version, strings.Join(missing, ", ")))
		}
	}
	slices.Sort(frames)
	for _, f := range frames {
		fn := frameNode(f)
		tn := to.Nodes[fn]
		want := ""
		if src := nodeOf(from, fn); src != nil {
			want = src.Join
		}
		switch {
		case tn == nil:
			return refuse(to, run, node, fmt.Sprintf("the run has a fork open at %q, which version %.7s does not have", fn, to.Version))
		case tn.Join == "" || to.Nodes[tn.Join] == nil:
			return refuse(to, run, node, fmt.Sprintf("the run has a fork open at %q, whose branches meet at no join in version %.7s", fn, to.Version))
		case want != "" && tn.Join != want:
			return refuse(to, run, node, fmt.Sprintf("the run has a fork open at %q whose branches meet at %q; in version %.7s they meet at %q", fn, want, to.Version, tn.Join))
		}
	}
	return nil
}

// refuse is the Conflict of a move that cannot be made, with what to do instead.
func refuse(to *flows.Plan, run, node, why string) error {
	return &flows.Error{Code: flows.Conflict, Flow: to.Flow, Node: node, Path: "version",
		Message: fmt.Sprintf("run %s cannot move to version %.7s at node %q: %s. Replay it from an earlier checkpoint on that version instead (POST /api/flows/%s/runs/%s/replay with {\"version\": \"%.12s\", \"checkpoint\": ID}), which starts a new run and leaves this one as it is",
			run, to.Version, node, why, to.Flow, run, to.Version)}
}

func quote(s string) string { return fmt.Sprintf("%q", s) }
