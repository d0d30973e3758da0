package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime/debug"
	"strconv"
	"time"

	"github.com/sluicehq/sluice/flows"
	"github.com/sluicehq/sluice/store"
)

// stepOutcome is what happened to one activation, for the worker's bookkeeping.
type stepOutcome int

const (
	outcomeCommitted stepOutcome = iota
	outcomeStale                 // someone else committed it, or the run was gone
	outcomeRetry                 // failed; still pending for another attempt
	outcomeDead                  // moved to the dead letters
	outcomeLeft                  // left pending (shutdown, Redis unreachable)
)

// loadState returns the state an activation reads: its checkpoint's, or for a join the
// state at the fork with every arriving branch's updates merged in branch order.
func (e *Engine) loadState(ctx context.Context, plan *flows.Plan, act store.Activation) (*joined, map[string]any, error) {
	if act.Join != "" {
		j, err := e.joinState(ctx, plan, act)
		if err != nil {
			return nil, nil, err
		}
		return j, j.state, nil
	}
	s, err := e.stateAt(ctx, act.Flow, act.Run, act.Ckpt)
	return nil, s, err
}

// joined is the merge of a fork's branches.
type joined struct {
	state    map[string]any // the state at the fork with every branch's updates
	arrivals []string       // checkpoints of the arriving branches, in branch order
	// delta is all branch updates composed with the reducers: the join's checkpoint
	// records it as its update, so an outer join walking through this one sees them.
	delta map[string]any
}

func (e *Engine) stateAt(ctx context.Context, flow, run, ckpt string) (map[string]any, error) {
	if s, ok := e.cache.get(run, ckpt); ok {
		return s, nil
	}
	b, err := e.rdb.LoadState(ctx, flow, run, ckpt)
	if err != nil {
		return nil, err
	}
	s, err := flows.DecodeState(b)
	if err != nil {
		return nil, flows.Permanent(fmt.Errorf("checkpoint %s: %w", ckpt, err))
	}
	e.cache.put(run, ckpt, s, len(b))
	return s, nil
}

// joinState merges the branches of a completed fork. Each branch's updates are those of
// the checkpoints between the fork and its arrival; a checkpoint two branches share (a
// branch that forked again towards the same join) counts once, for the first of them.
// The seed checkpoints of a fanout are left out: a branch's item is its own.
func (e *Engine) joinState(ctx context.Context, plan *flows.Plan, act store.Activation) (*joined, error) {
	fr, err := e.rdb.GetFrame(ctx, act.Flow, act.Run, act.Join)
	if err != nil {
		return nil, err
	}
	base, err := e.stateAt(ctx, act.Flow, act.Run, fr.Base)
	if err != nil {
		return nil, err
	}
	branches := make([]string, 0, len(fr.Branches))
	for b := range fr.Branches {
		branches = append(branches, b)
	}
	sortBranches(branches)
	arrivals := make([]string, len(branches))
	for i, b := range branches {
		arrivals[i] = fr.Branches[b]
	}
	if len(branches) == 0 {
		return &joined{state: base, arrivals: arrivals}, nil
	}
	cps, err := e.rdb.Checkpoints(ctx, act.Flow, act.Run, fr.Base, 0)
	if err != nil {
		return nil, err
	}
	byID := make(map[string]*store.Checkpoint, len(cps))
	for i := range cps {
		byID[cps[i].ID] = &cps[i]
	}
	state, delta := base, map[string]any{}
	seen := map[string]bool{}
	for _, arrival := range arrivals {
		var path []*store.Checkpoint
		for id := arrival; id != "" && id != fr.Base && !seen[id]; {
			c, ok := byID[id]
			if !ok {
				return nil, flows.Permanent(fmt.Errorf("join: checkpoint %s of a branch is missing", id))
			}
			seen[id] = true
			path = append(path, c)
			id = c.Parent
		}
		for i := len(path) - 1; i >= 0; i-- {
			c := path[i]
			if c.Kind == "send" || len(c.Update) == 0 {
				continue
			}
			upd, err := flows.DecodeState(c.Update)
			if err != nil {
				return nil, flows.Permanent(fmt.Errorf("join: update of checkpoint %s: %w", c.ID, err))
			}
			state, err = plan.Reducers.Apply(state, upd)
			if err != nil {
				return nil, flows.Permanent(fmt.Errorf("join: merging branch of checkpoint %s: %w", c.ID, err))
			}
			if delta, err = plan.Reducers.Apply(delta, upd); err != nil {
				return nil, flows.Permanent(fmt.Errorf("join: merging branch of checkpoint %s: %w", c.ID, err))
			}
		}
	}
	return &joined{state: state, arrivals: arrivals, delta: delta}, nil
}

// runComponent runs a component, turning a panic into an error.
func runComponent(ctx context.Context, c flows.Component, s *flows.Step) (res *flows.Result, err error) {
	defer func() {
		if r := recover(); r != nil {
			_, err = flows.RedactStep(nil, fmt.Errorf("component panicked: %v\n%s", r, truncate(string(debug.Stack()), 2000)))
		}
	}()
	res, err = c.Run(ctx, s)
	if err == nil && res == nil {
		res = &flows.Result{}
	}
	// Secret values that came back (an upstream echoing a header) go no further than
	// here: not into a checkpoint, event, dead letter or log line (flows/secrets.go).
	return flows.RedactStep(res, err)
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// built is a step's result turned into a commit.
type built struct {
	commit   *store.Commit
	newState map[string]any
	stateLen int
	dur      time.Duration // the component's run time
	fused    []fusedStep   // steps fused into this commit after the first
}

// fusedStep is what the observer hears of a fused step.
type fusedStep struct {
	node  string
	dur   time.Duration
	usage flows.Usage
}

// buildCommit computes the state update, the successors and the fork bookkeeping of a
// finished step.
func (e *Engine) buildCommit(ctx context.Context, plan *flows.Plan, node *flows.PlanNode, act store.Activation, consumer string,
	state map[string]any, join *joined, res *flows.Result, dur time.Duration) (*built, error) {
	update := res.Update
	if node.Output != nil {
		v, err := node.Output.First(ctx, flows.JSONValue(res.Output), state)
		if err != nil {
			return nil, flows.Permanent(&flows.Error{Code: flows.Invalid, Node: node.ID, Path: "output", Err: err})
		}
		m, ok := v.(map[string]any)
		if v != nil && !ok {
			return nil, flows.Permanent(&flows.Error{Code: flows.Invalid, Node: node.ID, Path: "output",
				Message: fmt.Sprintf("the output mapping must produce an object (the state update), got %s", flows.TypeName(v))})
		}
		update = m
	}
	if update != nil {
		update = flows.JSONValue(update).(map[string]any)
	}
	newState := state
	if len(update) > 0 {
		var err error
		newState, err = plan.Reducers.Apply(state, update)
		if err != nil {
			return nil, flows.Permanent(&flows.Error{Code: flows.Invalid, Node: node.ID, Err: err})
		}
	}
	stateJSON, err := json.Marshal(newState)
	if err != nil {
		return nil, flows.Permanent(fmt.Errorf("state is not JSON: %w", err))
	}
	cp := store.Checkpoint{Node: node.ID, Kind: "step", Parent: act.Ckpt, Attempt: act.Deliveries, Duration: dur,
		Usage: res.Usage, StateBytes: res.StateBytes, Ports: res.Ports, Worker: consumer}
	recorded := update
	if join != nil {
		cp.Kind, cp.Branches = "join", join.arrivals
		if len(join.delta) > 0 {
			if recorded, err = plan.Reducers.Apply(join.delta, update); err != nil {
				return nil, flows.Permanent(&flows.Error{Code: flows.Invalid, Node: node.ID, Err: err})
			}
		}
	} else if act.Resume != "" {
		cp.Kind = "resume"
	}
	if len(recorded) > 0 {
		cp.Update, _ = json.Marshal(recorded)
	}
	if res.Output != nil {
		cp.Output, err = json.Marshal(flows.JSONValue(res.Output))
		if err != nil {
			return nil, flows.Permanent(fmt.Errorf("output is not JSON: %w", err))
		}
	}
	c := &store.Commit{
		Act: act, Consumer: consumer, MaxSteps: plan.Settings.MaxSteps, TTL: plan.Settings.CheckpointTTL.D(),
		KeepLast: plan.Settings.KeepLast, State: stateJSON, Usage: res.Usage,
	}
	if res.Final {
		c.Final = cp.Output
		if c.Final == nil {
			c.Final = []byte("null")
		}
	}
	toks := parseTokens(act.Tok)
	if act.Join != "" {
		c.Ops = append(c.Ops, store.Op{Name: "delframe", Args: []string{act.Join}})
	}
	if res.Wait != nil {
		cp.Kind = "wait"
		w := map[string]any{"prompt": res.Wait.Prompt, "data": flows.JSONValue(res.Wait.Data), "tok": toks.String(), "on_timeout": res.Wait.OnTimeout, "depth": act.Depth}
		if res.Wait.Timeout > 0 {
			deadline := time.Now().Add(res.Wait.Timeout.D())
			c.WaitDeadline = deadline.UnixMilli()
			w["deadline"] = deadline.UTC().Format(time.RFC3339Nano)
		}
		c.Wait, _ = json.Marshal(w)
	} else {
		succ, err := successors(ctx, node, res, newState)
		if err != nil {
			return nil, err
		}
		e.route(plan, node, act, toks, succ, res, newState, c)
	}
	c.Checkpoint = cp.Fields()
	ev := map[string]any{"status": "done", "duration_ms": float64(dur.Microseconds()) / 1000, "kind": cp.Kind}
	if res.Usage.InputTokens > 0 || res.Usage.OutputTokens > 0 {
		ev["usage"] = res.Usage
	}
	if res.Wait != nil {
		ev["status"] = "waiting"
		ev["prompt"] = res.Wait.Prompt
	}
	if len(res.Ports) > 0 {
		ev["ports"] = res.Ports
	}
	c.Event, _ = json.Marshal(ev)
	return &built{commit: c, newState: newState, stateLen: len(stateJSON)}, nil
}

// successors returns the nodes a step activates: the edges of its chosen ports whose
// conditions hold on the new state.
func successors(ctx context.Context, node *flows.PlanNode, res *flows.Result, state map[string]any) ([]string, error) {
	chosen := func(port string) bool {
		if res.Ports == nil {
			return true
		}
		for _, p := range res.Ports {
			if p == port {
				return true
			}
		}
		return false
	}
	var out []string
	for _, e := range node.Edges {
		if !chosen(e.Port) {
			continue
		}
		if e.Condition != nil {
			ok, err := e.Condition.Truthy(ctx, state, state)
			if err != nil {
				return nil, flows.Permanent(&flows.Error{Code: flows.Invalid, Node: node.ID, Path: "edges " + e.Key + " condition", Err: err})
			}
			if !ok {
				continue
			}
		}
		out = append(out, e.To)
	}
	return out, nil
}

// route adds the ops that activate succ: plain activations, forks (a new frame, or more
// branches of the current one when the fork meets at the same join), arrivals at the
// current frame's join, and a token given back when the branch ends here.
func (e *Engine) route(plan *flows.Plan, node *flows.PlanNode, act store.Activation, toks tokens, succ []string, res *flows.Result, state map[string]any, c *store.Commit) {
	k := store.FlowKeys(act.Flow)
	joinOf := func(t tokens) string {
		top, ok := t.top()
		if !ok {
			return ""
		}
		if fn := plan.Nodes[frameNode(top.frame)]; fn != nil {
			return fn.Join
		}
		return ""
	}
	// Fanout: one branch per item per successor; each item gets a seed checkpoint.
	fans := node.Spec != nil && node.Spec.Fans
	type child struct{ to, ref string }
	var children []child
	if fans {
		for i, item := range res.Items {
			seed, _ := item.(map[string]any)
			seedState, err := plan.Reducers.Apply(state, seed)
			if err != nil {
				seedState = state
			}
			upd, _ := json.Marshal(seed)
			st, _ := json.Marshal(seedState)
			c.Ops = append(c.Ops, store.Op{Name: "send", Args: []string{string(upd), string(st)}})
			for _, to := range succ {
				children = append(children, child{to: to, ref: "$" + strconv.Itoa(i+1)})
			}
		}
	} else {
		for _, to := range succ {
			children = append(children, child{to: to, ref: "$"})
		}
	}

	curJoin := joinOf(toks)
	emit := func(t tokens, ch child) {
		if top, ok := t.top(); ok && ch.to == joinOf(t) {
			c.Ops = append(c.Ops, store.Op{Name: "arrive", Key: k.In(ch.to), Args: []string{top.frame, top.branch, ch.ref, "KEY"}})
			return
		}
		c.Ops = append(c.Ops, store.Op{Name: "xadd", Key: k.In(ch.to), Args: []string{"KEY", ch.ref, t.String()}})
	}

	if !fans && len(children) <= 1 {
		if len(children) == 0 {
			if top, ok := toks.top(); ok && curJoin != "" {
				c.Ops = append(c.Ops, store.Op{Name: "giveback", Key: k.In(curJoin), Args: []string{top.frame, "KEY"}})
			}
			return
		}
		emit(toks, children[0])
		return
	}

	// A fork.
	join := node.Join
	switch {
	case join != "" && join != curJoin:
		frame := node.ID + "~" + act.ID
		c.Ops = append(c.Ops, store.Op{Name: "open", Key: k.In(join), Args: []string{frame, strconv.Itoa(len(children)), toks.String(), "$", "KEY"}})
		for i, ch := range children {
			emit(toks.with(token{frame: frame, branch: strconv.Itoa(i)}), ch)
		}
	case curJoin != "":
		// More branches of the current frame: they meet at its join too.
		top, _ := toks.top()
		if len(children) == 0 {
			c.Ops = append(c.Ops, store.Op{Name: "giveback", Key: k.In(curJoin), Args: []string{top.frame, "KEY"}})
			return
		}
		c.Ops = append(c.Ops, store.Op{Name: "split", Args: []string{top.frame, strconv.Itoa(len(children) - 1)}})
		outer := toks.pop()
		for i, ch := range children {
			emit(outer.with(token{frame: top.frame, branch: top.branch + "." + strconv.Itoa(i)}), ch)
		}
	default:
		// Branches that never meet: each runs on its own.
		for _, ch := range children {
			emit(toks, ch)
		}
	}
}

// permanentOrRetry decides how a failed step is recorded.
func isPermanent(err error) bool {
	if flows.IsPermanent(err) {
		return true
	}
	var fe *flows.Error
	return errors.As(err, &fe) && fe.Code == flows.Invalid
}
