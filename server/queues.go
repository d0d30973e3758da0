package server

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"
	"github.com/sluicehq/sluice/flows"
	"github.com/sluicehq/sluice/flows/engine"
	"github.com/sluicehq/sluice/store"
)

// queueReader reads a flow's queue figures.
type queueReader interface {
	Queues(ctx context.Context, flow string) (*store.FlowQueues, error)
}

var _ queueReader = (*store.Redis)(nil)

// flowQueues answers the figures of every node stream of a flow: length, pending, lag,
// consumers with idle times, the oldest pending entry's idle time, dead letters.
func (s *Server) flowQueues(c echo.Context) error {
	flow, err := flowParam(c)
	if err != nil {
		return err
	}
	var qr queueReader = s.rdb
	q, err := qr.Queues(c.Request().Context(), flow)
	if err != nil {
		return err
	}
	if len(q.Nodes) == 0 {
		// No stream in Redis: a flow never published is one this server does not know.
		if _, lerr := s.library.Load(flow); flows.ErrorCode(lerr) == flows.NotFound {
			return &flows.Error{Code: flows.NotFound, Flow: flow, Message: "no such flow"}
		}
	}
	return c.JSON(http.StatusOK, q)
}

// workerNotes are the queue notes of the versions the workers serve
// (engine.CatalogPlans, the deciding one first): a node's note is the deciding
// version's — prod's once a version was promoted there, not the saved one in dev — and
// a node only an earlier environment's version has takes that version's, as its limit
// does.
func workerNotes(plans []*flows.Plan) map[string]string {
	notes := map[string]string{}
	seen := map[string]bool{}
	for _, p := range plans {
		pn := queueNotes(p)
		for id := range p.Nodes {
			if seen[id] {
				continue
			}
			seen[id] = true
			if n, ok := pn[id]; ok {
				notes[id] = n
			}
		}
	}
	return notes
}

// queueNotes says, for the nodes whose streams a worker may never read, where their
// steps run instead: a tool runs within the steps of the agents it is attached to; a
// pure step right after a step (of any node but a fanout) that started it and no other
// node is fused into that step's commit, on the worker that ran it (flows/engine/fuse.go), so its
// group has no consumer; so is a pure target of a fork that step opens (a fanout's
// items' included, when their branches meet at a join), and the fork's join when every
// branch is a chain of pure steps. The items of a fanout whose branches never meet,
// branches added to a fork from within it, and other joins are read from their streams. Which edges a step takes can depend on its state: a node
// is said to run inline "when that step starts no other node" where conditions decide.
func queueNotes(plan *flows.Plan) map[string]string {
	if plan == nil || plan.Doc == nil {
		return nil
	}
	isTool := func(from, port string) bool {
		n := plan.Nodes[from]
		if n == nil || n.Spec == nil {
			return false
		}
		for _, p := range n.Spec.Ports {
			if p.Name == port && p.Direction == "out" && p.Type == flows.PortTool {
				return true
			}
		}
		return false
	}
	toolOf := map[string][]string{}
	for _, e := range plan.Doc.Edges {
		if isTool(e.From, e.FromPort()) {
			toolOf[e.From] = appendNew(toolOf[e.From], e.To)
		}
	}
	// A step takes the edges of the ports it chooses (an inline node with several out
	// ports, a rules router or an approval, chooses one), those with a condition only
	// when it holds. The edge to X is the only one taken for sure when it is alone on
	// its port; maybe, when the others on its port all have conditions.
	after, maybe, fanAfter := map[string][]string{}, map[string][]string{}, map[string][]string{}
	// A fork's branches run inline when it opens a fork of its own: its join is no other
	// fork's (a node in a branch that forks again towards the same join adds branches to
	// that fork, and those are read from their streams).
	forksTo := map[string]int{}
	for _, p := range plan.Nodes {
		if p.Join != "" {
			forksTo[p.Join]++
		}
	}
	for _, dn := range plan.Doc.Nodes {
		p := plan.Nodes[dn.ID]
		// Any step starts a chain: a pure step after it runs in its commit.
		if p.Spec.Fans && (p.Join == "" || forksTo[p.Join] != 1) {
			continue // a fanout's items whose branches never meet are read from the stream
		}
		for _, e := range p.Edges {
			if !plan.Nodes[e.To].Pure() {
				continue
			}
			if !p.Pure() && !p.IsJoin() && !plan.Nodes[e.To].StepBounded() {
				continue // after a step with side effects, only a step of bounded time fuses
			}
			if p.Spec.Fans {
				fanAfter[e.To] = appendNew(fanAfter[e.To], p.ID) // its items' branches meet
				continue
			}
			if p.Join != "" && forksTo[p.Join] == 1 {
				after[e.To] = appendNew(after[e.To], p.ID) // alone, or a branch of p's fork
				continue
			}
			others, unconditional := 0, 0
			for _, o := range p.Edges {
				if o.Port != e.Port || o.Key == e.Key {
					continue
				}
				others++
				if o.Condition == nil {
					unconditional++
				}
			}
			switch {
			case others == 0:
				after[e.To] = appendNew(after[e.To], p.ID)
			case unconditional == 0:
				maybe[e.To] = appendNew(maybe[e.To], p.ID)
			}
		}
	}
	// A join runs inline in the commit of the step that opened its fork when every
	// branch is a chain of pure steps that runs inline there (the engine's joinInline).
	joinAfter, fanJoinAfter := map[string][]string{}, map[string][]string{}
	for _, dn := range plan.Doc.Nodes {
		p := plan.Nodes[dn.ID]
		if p.Join != "" && forksTo[p.Join] == 1 && plan.Nodes[p.Join].JoinsInline() && branchesInline(plan, p) {
			if p.Spec.Fans {
				fanJoinAfter[p.Join] = appendNew(fanJoinAfter[p.Join], p.ID)
			} else {
				joinAfter[p.Join] = appendNew(joinAfter[p.Join], p.ID)
			}
		}
	}
	notes := map[string]string{}
	for id, agents := range toolOf {
		notes[id] = "a tool: runs within the steps of " + strings.Join(agents, ", ")
	}
	const where = ": fused into that step, on the worker that runs it"
	for id, prev := range after {
		if _, ok := notes[id]; !ok {
			notes[id] = "runs inline after " + strings.Join(prev, ", ") + where
		}
	}
	for id, forks := range joinAfter {
		if _, ok := notes[id]; !ok {
			notes[id] = "runs inline after the branches of " + strings.Join(forks, ", ") + " in the commit of that step, on the worker that runs it"
		}
	}
	// A fanout's items are as many as its list: a commit runs at most
	// engine.MaxBranchSteps steps of their branches, and an empty list activates the join.
	for id, fans := range fanAfter {
		if _, ok := notes[id]; !ok {
			notes[id] = fmt.Sprintf("runs inline after %s for up to %d item steps a commit (a worker reads the rest)", strings.Join(fans, ", "), engine.MaxBranchSteps) + where
		}
	}
	for id, fans := range fanJoinAfter {
		if _, ok := notes[id]; !ok {
			notes[id] = fmt.Sprintf("runs inline after the branches of %s in the commit of that step when every item's branch ran there (up to %d item steps; else a worker reads it)", strings.Join(fans, ", "), engine.MaxBranchSteps)
		}
	}
	for id, prev := range maybe {
		if _, ok := notes[id]; !ok {
			notes[id] = "runs inline after " + strings.Join(prev, ", ") + " when that step starts no other node (else a worker reads it)" + where
		}
	}
	return notes
}

// branchesInline reports whether every branch of the fork p opens is a chain of pure
// steps, each with one successor, that runs inline in p's commit up to p's join.
func branchesInline(plan *flows.Plan, p *flows.PlanNode) bool {
	for _, e := range p.Edges {
		n := plan.Nodes[e.To]
		for k := 0; n.ID != p.Join; k++ {
			if k >= engine.MaxFusedSteps || !n.Pure() || n.Spec.Fans || len(n.Edges) != 1 || (!p.Pure() && !p.IsJoin() && !n.StepBounded()) {
				return false
			}
			n = plan.Nodes[n.Edges[0].To]
		}
	}
	return true
}

func appendNew(list []string, s string) []string {
	for _, x := range list {
		if x == s {
			return list
		}
	}
	return append(list, s)
}
