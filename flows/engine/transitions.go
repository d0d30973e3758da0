package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/sluicehq/sluice/flows"
	"github.com/sluicehq/sluice/store"
)

// Fork and join semantics live in this file, and only here: what a finished step does to
// its run is a list of typed transitions (store.Activate, OpenFork, Split, Arrive,
// GiveBack, CloseFork, Seed, Park), computed by one pure function of the plan, the node,
// the activation's fork tokens and the step's result. The store encodes them for the
// commit script; nothing else interprets them.

// stepPlace is where a step ran, as routing sees it.
type stepPlace struct {
	Entry  string // the consumed activation's stream entry id: forks it opens are named after it
	Tokens tokens // its fork tokens, innermost last
	Join   string // for a join's activation: the fork frame it closes
	Depth  int    // steps along its line since the run started
}

// transitions computes what a finished step does to its run. succ are the nodes its
// chosen ports and edge conditions name (see successors); state is the state after the
// step. now dates an approval's deadline.
func transitions(plan *flows.Plan, node *flows.PlanNode, at stepPlace, res *flows.Result, state map[string]any, succ []string, now time.Time) ([]store.Transition, error) {
	var out []store.Transition
	if at.Join != "" {
		out = append(out, store.CloseFork{Frame: at.Join})
	}
	if res.Wait != nil {
		w := map[string]any{"prompt": res.Wait.Prompt, "data": flows.JSONValue(res.Wait.Data), "tok": at.Tokens.String(),
			"on_timeout": res.Wait.OnTimeout, "depth": at.Depth}
		var deadline int64
		if res.Wait.Timeout > 0 {
			d := now.Add(res.Wait.Timeout.D())
			deadline = d.UnixMilli()
			w["deadline"] = d.UTC().Format(time.RFC3339Nano)
		}
		rec, err := json.Marshal(w)
		if err != nil {
			return nil, flows.Permanent(&flows.Error{Code: flows.Invalid, Node: node.ID, Path: "wait", Err: err})
		}
		return append(out, store.Park{Record: rec, Deadline: deadline}), nil
	}

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
	// A fanout starts one branch per item per successor; each item gets a seed
	// checkpoint of its own, which its branches read.
	type child struct {
		to  string
		ref store.Ref
	}
	var children []child
	fans := node.Spec != nil && node.Spec.Fans
	if fans {
		for i, item := range res.Items {
			seed, ok := item.(map[string]any)
			if !ok {
				return nil, flows.Permanent(&flows.Error{Code: flows.Invalid, Node: node.ID, Path: fmt.Sprintf("items[%d]", i),
					Message: fmt.Sprintf("a fanout item is merged into its branch's state, so it must be an object, got %s", flows.TypeName(item))})
			}
			seedState, err := plan.Reducers.Apply(state, seed)
			if err != nil {
				return nil, flows.Permanent(&flows.Error{Code: flows.Invalid, Node: node.ID, Path: fmt.Sprintf("items[%d]", i), Err: err})
			}
			upd, err := json.Marshal(seed)
			if err != nil {
				return nil, flows.Permanent(&flows.Error{Code: flows.Invalid, Node: node.ID, Path: fmt.Sprintf("items[%d]", i), Err: err})
			}
			st, err := json.Marshal(seedState)
			if err != nil {
				return nil, flows.Permanent(&flows.Error{Code: flows.Invalid, Node: node.ID, Path: fmt.Sprintf("items[%d]", i), Err: err})
			}
			if err := flows.CheckJSON(fmt.Sprintf("the state of item %d", i), st, plan.Settings.MaxStateBytes); err != nil {
				return nil, flows.Permanent(&flows.Error{Code: flows.TooLarge, Node: node.ID, Path: fmt.Sprintf("items[%d]", i), Err: err})
			}
			out = append(out, store.Seed{Update: upd, State: st})
			for _, to := range succ {
				children = append(children, child{to: to, ref: store.Ref(i + 1)})
			}
		}
	} else {
		for _, to := range succ {
			children = append(children, child{to: to})
		}
	}

	emit := func(t tokens, ch child) {
		if top, ok := t.top(); ok && ch.to == joinOf(t) {
			out = append(out, store.Arrive{Frame: top.frame, Branch: top.branch, From: ch.ref, Join: ch.to})
			return
		}
		out = append(out, store.Activate{Node: ch.to, From: ch.ref, Tokens: t.String()})
	}
	toks := at.Tokens
	curJoin := joinOf(toks)
	if !fans && len(children) <= 1 {
		if len(children) == 1 {
			emit(toks, children[0])
		} else if top, ok := toks.top(); ok && curJoin != "" {
			// The branch ends here, away from its join.
			out = append(out, store.GiveBack{Frame: top.frame, Join: curJoin})
		}
		return out, nil
	}

	// A fork.
	switch join := node.Join; {
	case join != "" && join != curJoin:
		frame := node.ID + "~" + at.Entry
		out = append(out, store.OpenFork{Frame: frame, Branches: len(children), Outer: toks.String(), Join: join})
		for i, ch := range children {
			emit(toks.with(token{frame: frame, branch: strconv.Itoa(i)}), ch)
		}
	case curJoin != "":
		// More branches of the current frame: they meet at its join too.
		top, _ := toks.top()
		if len(children) == 0 {
			out = append(out, store.GiveBack{Frame: top.frame, Join: curJoin})
			break
		}
		out = append(out, store.Split{Frame: top.frame, More: len(children) - 1})
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
	return out, nil
}

// successors returns the nodes a step activates: the edges of its chosen ports whose
// conditions hold on the new state.
func successors(ctx context.Context, node *flows.PlanNode, ports []string, state map[string]any) ([]string, error) {
	chosen := func(port string) bool {
		if ports == nil {
			return true
		}
		for _, p := range ports {
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
