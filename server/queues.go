package server

import (
	"context"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"
	"github.com/sluicehq/sluice/flows"
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

// queueNotes says, for the nodes whose streams a worker may never read, where their
// steps run instead: a tool runs within the steps of the agents it is attached to; an
// inline step that follows another inline step is fused into that step's commit, on
// the worker that ran it (flows/engine/worker.go fuse), so its group has no consumer.
func queueNotes(plan *flows.Plan) map[string]string {
	if plan == nil || plan.Doc == nil {
		return nil
	}
	inline := func(id string) bool {
		n := plan.Nodes[id]
		if n == nil {
			return false
		}
		in, ok := n.Component.(flows.Inliner)
		return ok && in.Inline()
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
	after := map[string][]string{}
	for _, e := range plan.Doc.Edges {
		if isTool(e.From, e.FromPort()) {
			toolOf[e.From] = appendNew(toolOf[e.From], e.To)
			continue
		}
		n := plan.Nodes[e.To]
		if inline(e.To) && inline(e.From) && n != nil && n.Spec != nil && n.Spec.Name != flows.JoinType {
			after[e.To] = appendNew(after[e.To], e.From)
		}
	}
	notes := map[string]string{}
	for id, agents := range toolOf {
		notes[id] = "a tool: runs within the steps of " + strings.Join(agents, ", ")
	}
	for id, prev := range after {
		if _, ok := notes[id]; !ok {
			notes[id] = "runs inline after " + strings.Join(prev, ", ") + ": fused into that step, on the worker that runs it"
		}
	}
	return notes
}

func appendNew(list []string, s string) []string {
	for _, x := range list {
		if x == s {
			return list
		}
	}
	return append(list, s)
}
