package server

import (
	"context"
	"net/http"

	"github.com/labstack/echo/v4"
	"github.com/sluicehq/sluice/flows"
	"github.com/sluicehq/sluice/flows/engine"
	"github.com/sluicehq/sluice/store"
)

// history is what the checkpoint handlers need of the engine.
type history interface {
	Checkpoints(ctx context.Context, flow, run string) ([]store.Checkpoint, error)
	Checkpoint(ctx context.Context, flow, run, id string) (*store.Checkpoint, error)
	Diff(ctx context.Context, flow, run, a, b string) ([]engine.Change, error)
}

var _ history = (*engine.Engine)(nil)

// CheckpointList is the body of GET .../checkpoints: the run's history in commit order,
// without states.
type CheckpointList struct {
	Checkpoints []store.Checkpoint `json:"checkpoints"`
}

// CheckpointDiff is the body of GET .../checkpoints/CKPT/diff.
type CheckpointDiff struct {
	From    string          `json:"from"`
	To      string          `json:"to"`
	Changes []engine.Change `json:"changes"`
}

func (s *Server) history() history { return s.engine }

func (s *Server) listCheckpoints(c echo.Context) error {
	flow, err := flowParam(c)
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	cps, err := s.history().Checkpoints(ctx, flow, c.Param("run"))
	if err != nil {
		return err
	}
	if len(cps) == 0 {
		// A run with no checkpoint yet, or no such run (another flow's or workspace's
		// run id is none here): the second is a 404, not an empty history.
		if _, err := s.runs().Info(ctx, flow, c.Param("run")); err != nil {
			return err
		}
		cps = []store.Checkpoint{}
	}
	return c.JSON(http.StatusOK, CheckpointList{Checkpoints: cps})
}

func (s *Server) getCheckpoint(c echo.Context) error {
	flow, err := flowParam(c)
	if err != nil {
		return err
	}
	cp, err := s.history().Checkpoint(c.Request().Context(), flow, c.Param("run"), c.Param("ckpt"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, cp)
}

// diffCheckpoint compares the state after ?from= (default: the checkpoint's parent)
// with the state after the checkpoint in the path.
func (s *Server) diffCheckpoint(c echo.Context) error {
	flow, err := flowParam(c)
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	run, to := c.Param("run"), c.Param("ckpt")
	from := c.QueryParam("from")
	if from == "" {
		cp, err := s.history().Checkpoint(ctx, flow, run, to)
		if err != nil {
			return err
		}
		if cp.Parent == "" {
			return &flows.Error{Code: flows.Invalid, Path: "from", Message: "this checkpoint has no parent: name the checkpoint to compare with in ?from="}
		}
		from = cp.Parent
	}
	changes, err := s.history().Diff(ctx, flow, run, from, to)
	if err != nil {
		return err
	}
	if changes == nil {
		changes = []engine.Change{}
	}
	return c.JSON(http.StatusOK, CheckpointDiff{From: from, To: to, Changes: changes})
}
