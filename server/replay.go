package server

// Retry on a chosen version, moving waiting runs, replay, compare and bulk replay: the
// handlers of docs/replay.md.

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

// replayEngine is what the retry, replay and compare handlers need of the engine.
type replayEngine interface {
	ResolveVersion(ctx context.Context, flow, v string) (string, error)
	Plan(ctx context.Context, flow, version string) (*flows.Plan, error)
	RetryDead(ctx context.Context, flow, id string, opts engine.RetryOptions) (*engine.Retry, error)
	RetryRun(ctx context.Context, flow, run, node string, opts engine.RetryOptions) ([]*engine.Retry, error)
	MoveWaiting(ctx context.Context, flow, run string, opts engine.MoveOptions) ([]engine.Moved, error)
	Replay(ctx context.Context, flow, run string, o engine.ReplayOptions) (string, error)
	Compare(ctx context.Context, flow, a, b string) (*engine.Comparison, error)
	Get(ctx context.Context, flow, run string) (*store.Run, error)
}

var _ replayEngine = (*engine.Engine)(nil)

func (s *Server) replays() replayEngine { return s.engine }

// RetryRequest is the body of a retry: which version the step runs on.
type RetryRequest struct {
	// Version is "current" (the flow's saved version, what a new run starts on), a
	// version (its hash or a prefix of at least 7 digits), or "" / "original": the
	// version the step ran ("as it was").
	Version string `json:"version"`
	// Node, for a run's retry, retries only that node's dead letter.
	Node string `json:"node,omitempty"`
	// By says who retries, for the run's record of the move ("" : "api").
	By string `json:"by,omitempty"`
}

// RetryList is the answer to a run's retry.
type RetryList struct {
	Retried []*engine.Retry `json:"retried"`
}

// MoveRequest is the body of moving a waiting run.
type MoveRequest struct {
	Version string `json:"version"`
	By      string `json:"by,omitempty"`
}

// MoveList is the answer to moving a waiting run.
type MoveList struct {
	Moved []engine.Moved `json:"moved"`
}

// targetPlan is the plan a retry, move or replay names: nil for "" or "original" (the
// run's own), the plan a new run starts on for "current", else that version's.
func (s *Server) targetPlan(ctx context.Context, flow, v string) (*flows.Plan, error) {
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "", "original":
		return nil, nil
	case "current":
		return s.planFor(ctx, flow, "")
	}
	full, err := s.replays().ResolveVersion(ctx, flow, v)
	if err != nil {
		return nil, err
	}
	return s.replays().Plan(ctx, flow, full)
}

// targetEnvironment is the environment a new run on version v (of targetPlan) starts
// through: the request's, for "current".
func targetEnvironment(ctx context.Context, v string) string {
	if strings.EqualFold(strings.TrimSpace(v), "current") {
		return environmentFrom(ctx)
	}
	return ""
}

func byOf(by string) string {
	by = strings.TrimSpace(by)
	if by == "" {
		return "api"
	}
	if len(by) > 64 {
		by = by[:64]
	}
	return by
}

// retryDeadLetter puts a dead letter back on its node's stream and reopens its run, on
// the version it ran or the one the body names ({"version": "current"}); a move that the
// target cannot take is refused with 409.
func (s *Server) retryDeadLetter(c echo.Context) error {
	flow, err := flowParam(c)
	if err != nil {
		return err
	}
	id, err := deadID(c)
	if err != nil {
		return err
	}
	var req RetryRequest
	if err := decodeRequest(c, &req); err != nil {
		return err
	}
	ctx := c.Request().Context()
	target, err := s.targetPlan(ctx, flow, req.Version)
	if err != nil {
		return err
	}
	r, err := s.replays().RetryDead(ctx, flow, id, engine.RetryOptions{Target: target, By: byOf(req.By)})
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, r)
}

// retryRun retries a failed run's dead letters (or one node's) on the version the body
// names.
func (s *Server) retryRun(c echo.Context) error {
	flow, err := flowParam(c)
	if err != nil {
		return err
	}
	var req RetryRequest
	if err := decodeRequest(c, &req); err != nil {
		return err
	}
	ctx := c.Request().Context()
	target, err := s.targetPlan(ctx, flow, req.Version)
	if err != nil {
		return err
	}
	rs, err := s.replays().RetryRun(ctx, flow, c.Param("run"), req.Node, engine.RetryOptions{Target: target, By: byOf(req.By)})
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, RetryList{Retried: rs})
}

// moveRun moves a run waiting at an approval to another version.
func (s *Server) moveRun(c echo.Context) error {
	flow, err := flowParam(c)
	if err != nil {
		return err
	}
	var req MoveRequest
	if err := decodeRequest(c, &req); err != nil {
		return err
	}
	ctx := c.Request().Context()
	target, err := s.targetPlan(ctx, flow, req.Version)
	if err != nil {
		return err
	}
	if target == nil {
		return &flows.Error{Code: flows.Invalid, Flow: flow, Path: "version", Message: `name the version to move to: "current" or a version`}
	}
	ms, err := s.replays().MoveWaiting(ctx, flow, c.Param("run"), engine.MoveOptions{Target: target, By: byOf(req.By)})
	if err != nil {
		return err
	}
	if ms == nil {
		ms = []engine.Moved{}
	}
	return c.JSON(http.StatusOK, MoveList{Moved: ms})
}

// ReplayRequest is the body of POST .../runs/RUN/replay.
type ReplayRequest struct {
	// Version is the version the replay runs on: "" or "original" the run's own,
	// "current", or a version.
	Version string `json:"version"`
	// Checkpoint, when set, starts the replay from the state after that checkpoint;
	// otherwise from the run's input.
	Checkpoint string `json:"checkpoint,omitempty"`
	// Reuse gives back the recorded output of every node whose definition and input
	// are unchanged instead of running it again.
	Reuse bool `json:"reuse,omitempty"`
	// SameKeys sends the original's idempotency keys with the replay's outbound calls
	// (by default a replay sends keys of its own).
	SameKeys bool `json:"same_keys,omitempty"`
}

// replayRun starts a new run that replays a run (202 with the new run; with ?wait=30s
// 200 with it once it finishes in time).
func (s *Server) replayRun(c echo.Context) error {
	flow, err := flowParam(c)
	if err != nil {
		return err
	}
	wait, err := s.waitParam(c)
	if err != nil {
		return err
	}
	var req ReplayRequest
	if err := decodeRequest(c, &req); err != nil {
		return err
	}
	ctx := c.Request().Context()
	target, err := s.targetPlan(ctx, flow, req.Version)
	if err != nil {
		return err
	}
	id, err := s.replays().Replay(ctx, flow, c.Param("run"), engine.ReplayOptions{Target: target, Checkpoint: req.Checkpoint, Reuse: req.Reuse, SameKeys: req.SameKeys, By: byFrom(ctx),
		Environment: targetEnvironment(ctx, req.Version)})
	if err != nil {
		return err
	}
	return s.answerStarted(c, flow, id, wait)
}

// compareRuns compares two runs node by node: GET .../runs/RUN/compare?with=OTHER
// compares RUN with OTHER; without with, a replay with the run it replays, or a run
// with its latest replay.
func (s *Server) compareRuns(c echo.Context) error {
	flow, err := flowParam(c)
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	a, b, err := s.comparePair(ctx, flow, c.Param("run"), c.QueryParam("with"))
	if err != nil {
		return err
	}
	cmp, err := s.replays().Compare(ctx, flow, a, b)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, cmp)
}

// comparePair is which run is compared with which: run with with, or (with "") the run
// it replays with it, or it with its latest replay.
func (s *Server) comparePair(ctx context.Context, flow, run, with string) (string, string, error) {
	if with != "" {
		return run, with, nil
	}
	r, err := s.replays().Get(ctx, flow, run)
	if err != nil {
		return "", "", err
	}
	switch {
	case r.ReplayOf != "":
		return r.ReplayOf, run, nil
	case len(r.ReplayedAs) > 0:
		return run, r.ReplayedAs[len(r.ReplayedAs)-1], nil
	}
	return "", "", &flows.Error{Code: flows.Invalid, Flow: flow, Path: "with", Message: fmt.Sprintf("run %s is no replay and has none: name the run to compare it with (?with=RUN)", run)}
}
