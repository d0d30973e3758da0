package server

import (
	"context"
	"encoding/json"
	"net/http"

	"github.com/labstack/echo/v4"
	"github.com/sluicehq/sluice/flows"
	"github.com/sluicehq/sluice/flows/engine"
)

// TryNodeRequest is the body of POST /api/flows/FLOW/nodes/NODE/try: the node of the
// given document (the editor's working copy; default the flow's saved file) run alone,
// on a state given, or on the state the node received at a checkpoint of a past run.
type TryNodeRequest struct {
	Document json.RawMessage `json:"document,omitempty"`
	State    json.RawMessage `json:"state,omitempty"`
	From     *struct {
		Run        string `json:"run"`
		Checkpoint string `json:"checkpoint"`
	} `json:"from,omitempty"`
}

// nodeTrier runs one node alone.
type nodeTrier interface {
	TryNode(ctx context.Context, plan *flows.Plan, node string, state map[string]any) (*engine.Trial, error)
}

var _ nodeTrier = (*engine.Engine)(nil)

// tryNode serves POST /api/flows/:flow/nodes/:node/try.
func (s *Server) tryNode(c echo.Context) error {
	flow, err := flowParam(c)
	if err != nil {
		return err
	}
	var req TryNodeRequest
	if err := decodeRequest(c, &req); err != nil {
		return err
	}
	ctx := c.Request().Context()
	var plan *flows.Plan
	if len(req.Document) > 0 {
		var probs flows.Problems
		plan, probs, err = s.runs().Compile(req.Document)
		if err != nil {
			return &flows.InvalidError{Flow: flow, Problems: probs}
		}
		if plan.Flow != flow {
			return &flows.Error{Code: flows.Invalid, Flow: flow, Path: "document.id", Message: "the document is another flow's"}
		}
	} else if plan, err = planFor(ctx, s.library, s.runs(), flow, ""); err != nil {
		return err
	}
	var state map[string]any
	switch {
	case req.From != nil && len(req.State) > 0:
		return &flows.Error{Code: flows.Invalid, Path: "from", Message: "give state or from, not both"}
	case req.From != nil:
		if state, err = s.receivedState(ctx, flow, req.From.Run, req.From.Checkpoint); err != nil {
			return err
		}
	case len(req.State) > 0:
		if state, err = flows.DecodeState(req.State); err != nil {
			return &flows.Error{Code: flows.Invalid, Path: "state", Message: "the state is a JSON object: " + err.Error()}
		}
	}
	// A node that calls a model or a server may take its full timeout; the request waits.
	t, err := s.engine.TryNode(ctx, plan, c.Param("node"), state)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, t)
}

// receivedState is the state the step of checkpoint ckpt received: the state after its
// parent (a run's first step received its input).
func (s *Server) receivedState(ctx context.Context, flow, run, ckpt string) (map[string]any, error) {
	cp, err := s.history().Checkpoint(ctx, flow, run, ckpt)
	if err != nil {
		return nil, err
	}
	if cp.Parent == "" {
		return nil, &flows.Error{Code: flows.Invalid, Flow: flow, Path: "from.checkpoint", Message: "this checkpoint has no parent: give the state instead"}
	}
	parent, err := s.history().Checkpoint(ctx, flow, run, cp.Parent)
	if err != nil {
		return nil, err
	}
	return flows.DecodeState(parent.State)
}
