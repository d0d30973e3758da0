package server

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/sluicehq/sluice/flows"
	"github.com/sluicehq/sluice/flows/engine"
	"github.com/sluicehq/sluice/store"
)

// bulkEngine is what the bulk replay handlers need of the engine.
type bulkEngine interface {
	EstimateBulk(ctx context.Context, flow string, q engine.BulkQuery) (*engine.BulkEstimate, []*store.Run, error)
	CreateBulk(ctx context.Context, flow string, spec engine.BulkSpec, target *flows.Plan) (string, *engine.BulkEstimate, error)
	BulkReport(ctx context.Context, flow, job string) (*engine.BulkReport, error)
	CancelBulk(ctx context.Context, flow, job string) error
	SelectRuns(ctx context.Context, flow string, q engine.BulkQuery) ([]*store.Run, error)
	MoveWaiting(ctx context.Context, flow, run string, opts engine.MoveOptions) ([]engine.Moved, error)
}

var _ bulkEngine = (*engine.Engine)(nil)

func (s *Server) bulk() bulkEngine { return s.engine }

// RunQuery chooses runs of a flow for a bulk replay or move; empty fields choose all.
type RunQuery struct {
	Status  string `json:"status,omitempty"`
	Version string `json:"version,omitempty"` // the runs' version (a hash or a prefix)
	Node    string `json:"node,omitempty"`    // a failed run's failed node, a waiting run's approval
	Error   string `json:"error,omitempty"`   // text in the run's error
	Trigger string `json:"trigger,omitempty"`
	// Since and Until bound when the runs started: an RFC 3339 time, or a duration
	// back from now ("24h").
	Since string `json:"since,omitempty"`
	Until string `json:"until,omitempty"`
}

// BulkReplayRequest is the body of POST /api/flows/FLOW/replays.
type BulkReplayRequest struct {
	Query RunQuery `json:"query"`
	// Version is the version the replays run on: "current", a version, or "" /
	// "original" (each run's own).
	Version     string  `json:"version"`
	Reuse       bool    `json:"reuse,omitempty"`
	SameKeys    bool    `json:"same_keys,omitempty"`
	Rate        float64 `json:"rate,omitempty"`        // replays started per second at most (default 10)
	Concurrency int     `json:"concurrency,omitempty"` // replays running at once (default 8)
	// DryRun answers the estimate and makes no job.
	DryRun bool   `json:"dry_run,omitempty"`
	By     string `json:"by,omitempty"`
}

// BulkCreated is the answer to a bulk replay made.
type BulkCreated struct {
	Job      string               `json:"job"`
	Estimate *engine.BulkEstimate `json:"estimate"`
	URL      string               `json:"url"`
}

// BulkJobList is the body of GET .../replays.
type BulkJobList struct {
	Jobs []*store.BulkJob `json:"jobs"`
}

// BulkMoveRequest is the body of POST /api/flows/FLOW/runs/move: waiting runs to move.
type BulkMoveRequest struct {
	Query   RunQuery `json:"query"`
	Version string   `json:"version"`
	By      string   `json:"by,omitempty"`
}

// BulkMoved is the answer to a bulk move: the runs moved and those refused, with why.
type BulkMoved struct {
	Moved   []engine.Moved `json:"moved"`
	Refused []Refusal      `json:"refused"`
}

// Refusal is a run that could not move.
type Refusal struct {
	Run   string `json:"run"`
	Node  string `json:"node,omitempty"`
	Error string `json:"error"`
}

func parseWhen(field, v string, now time.Time) (time.Time, error) {
	if v == "" {
		return time.Time{}, nil
	}
	if d, err := time.ParseDuration(v); err == nil {
		return now.Add(-d), nil
	}
	t, err := time.Parse(time.RFC3339, v)
	if err != nil {
		return time.Time{}, &flows.Error{Code: flows.Invalid, Path: "query." + field, Message: fmt.Sprintf("%q is neither a duration such as 24h nor an RFC 3339 time", v)}
	}
	return t, nil
}

// BulkQueryOf turns a request's query into the engine's.
func BulkQueryOf(q RunQuery, now time.Time) (engine.BulkQuery, error) {
	out := engine.BulkQuery{Status: q.Status, Version: strings.ToLower(q.Version), Node: q.Node, Error: q.Error, Trigger: q.Trigger}
	var err error
	if out.Since, err = parseWhen("since", q.Since, now); err != nil {
		return out, err
	}
	if out.Until, err = parseWhen("until", q.Until, now); err != nil {
		return out, err
	}
	return out, nil
}

// replayRuns makes a bulk replay job (202), or with dry_run answers how many runs it
// would replay and what they spent (200). Any serve process works on the job.
func (s *Server) replayRuns(c echo.Context) error {
	flow, err := flowParam(c)
	if err != nil {
		return err
	}
	var req BulkReplayRequest
	if err := decodeRequest(c, &req); err != nil {
		return err
	}
	q, err := BulkQueryOf(req.Query, time.Now())
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	if req.DryRun {
		est, _, err := s.bulk().EstimateBulk(ctx, flow, q)
		if err != nil {
			return err
		}
		return c.JSON(http.StatusOK, est)
	}
	target, err := s.targetPlan(ctx, flow, req.Version)
	if err != nil {
		return err
	}
	job, est, err := s.bulk().CreateBulk(ctx, flow, engine.BulkSpec{Query: q, Reuse: req.Reuse, SameKeys: req.SameKeys, Rate: req.Rate, Concurrency: req.Concurrency, By: byOf(req.By),
		Environment: targetEnvironment(ctx, req.Version)}, target)
	if err != nil {
		return err
	}
	loc := "/api/flows/" + flow + "/replays/" + job
	c.Response().Header().Set(echo.HeaderLocation, loc)
	return c.JSON(http.StatusAccepted, BulkCreated{Job: job, Estimate: est, URL: loc})
}

func (s *Server) listReplayJobs(c echo.Context) error {
	flow, err := flowParam(c)
	if err != nil {
		return err
	}
	jobs, err := s.rdb.BulkJobs(c.Request().Context(), flow, 50)
	if err != nil {
		return err
	}
	if jobs == nil {
		jobs = []*store.BulkJob{}
	}
	return c.JSON(http.StatusOK, BulkJobList{Jobs: jobs})
}

// getReplayJob answers a bulk replay job with its progress and each run's result.
func (s *Server) getReplayJob(c echo.Context) error {
	flow, err := flowParam(c)
	if err != nil {
		return err
	}
	rep, err := s.bulk().BulkReport(c.Request().Context(), flow, c.Param("job"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, rep)
}

func (s *Server) cancelReplayJob(c echo.Context) error {
	flow, err := flowParam(c)
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	if err := s.bulk().CancelBulk(ctx, flow, c.Param("job")); err != nil {
		return err
	}
	rep, err := s.bulk().BulkReport(ctx, flow, c.Param("job"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, rep)
}

// moveRuns moves the waiting runs a query chooses to another version, each under the
// same check as one run's move; the runs that cannot move are listed with why.
func (s *Server) moveRuns(c echo.Context) error {
	flow, err := flowParam(c)
	if err != nil {
		return err
	}
	var req BulkMoveRequest
	if err := decodeRequest(c, &req); err != nil {
		return err
	}
	req.Query.Status = store.StatusWaiting
	q, err := BulkQueryOf(req.Query, time.Now())
	if err != nil {
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
	runs, err := s.bulk().SelectRuns(ctx, flow, q)
	if err != nil {
		return err
	}
	out := BulkMoved{Moved: []engine.Moved{}, Refused: []Refusal{}}
	for _, r := range runs {
		ms, err := s.bulk().MoveWaiting(ctx, flow, r.ID, engine.MoveOptions{Target: target, By: byOf(req.By)})
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			rf := Refusal{Run: r.ID, Error: err.Error()}
			if fe, ok := err.(*flows.Error); ok {
				rf.Node, rf.Error = fe.Node, fe.Message
			}
			out.Refused = append(out.Refused, rf)
			continue
		}
		out.Moved = append(out.Moved, ms...)
	}
	return c.JSON(http.StatusOK, out)
}
