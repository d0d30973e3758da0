package server

import (
	"context"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"
	"github.com/sluicehq/sluice/flows"
	"github.com/sluicehq/sluice/flows/engine"
	"github.com/sluicehq/sluice/store"
)

// versionEngine is what the version handlers need of the engine.
type versionEngine interface {
	Versions(ctx context.Context, flow string) (*engine.VersionHistory, error)
	Version(ctx context.Context, flow, version string) (*engine.VersionDetail, error)
	DiffVersions(ctx context.Context, flow, from, to string) (*engine.VersionDiff, error)
	RollbackPlan(ctx context.Context, flow, version string) (*flows.Plan, error)
	PublishWithMessage(ctx context.Context, p *flows.Plan, message string) error
	CurrentPlan(ctx context.Context, flow string) (*flows.Plan, error)
}

var _ versionEngine = (*engine.Engine)(nil)

func (s *Server) versions() versionEngine { return s.engine }

// RollbackRequest is the body of POST /api/flows/FLOW/rollback.
type RollbackRequest struct {
	// Version is the version to make current again: its 64 hex digits or a unique
	// prefix of at least 7.
	Version string `json:"version"`
	// Message is noted on the version in the history (optional).
	Message string `json:"message"`
}

// RolledBack is the answer to a rollback.
type RolledBack struct {
	Flow     string `json:"flow"`
	Version  string `json:"version"`
	Previous string `json:"previous,omitempty"`
	// FileWritten is true when the flow's file in this server's library now holds the
	// version (the editor and headless workers started from the file then agree).
	FileWritten bool `json:"file_written"`
	// Published is true when the in-process workers serve it.
	Published bool `json:"published"`
}

func (s *Server) listVersions(c echo.Context) error {
	flow, err := flowParam(c)
	if err != nil {
		return err
	}
	h, err := s.versions().Versions(c.Request().Context(), flow)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, h)
}

func (s *Server) getVersion(c echo.Context) error {
	flow, err := flowParam(c)
	if err != nil {
		return err
	}
	v, err := s.versions().Version(c.Request().Context(), flow, c.Param("version"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, v)
}

// diffVersion compares a version with another (?to=VERSION; default the current one).
func (s *Server) diffVersion(c echo.Context) error {
	flow, err := flowParam(c)
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	to := c.QueryParam("to")
	if to == "" {
		cur, err := s.versions().CurrentPlan(ctx, flow)
		if err != nil {
			return err
		}
		to = cur.Version
	}
	d, err := s.versions().DiffVersions(ctx, flow, c.Param("version"), to)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, d)
}

// rollback makes an earlier version current again and writes it to the flow's file.
// Runs in flight keep the version they started with.
func (s *Server) rollback(c echo.Context) error {
	flow, err := flowParam(c)
	if err != nil {
		return err
	}
	var req RollbackRequest
	if err := decodeRequest(c, &req); err != nil {
		return err
	}
	if strings.TrimSpace(req.Version) == "" {
		return &flows.Error{Code: flows.Invalid, Path: "version", Message: "name the version to roll back to"}
	}
	ctx := c.Request().Context()
	plan, err := s.versions().RollbackPlan(ctx, flow, req.Version)
	if err != nil {
		return err
	}
	out, err := s.rollbackTo(ctx, flow, plan, req.Message)
	if err != nil {
		return err
	}
	// A rollback is a promotion into the first environment (docs/environments.md).
	if envs, err := s.engine.Environments(ctx, workspaceOf(c)); err == nil {
		if _, err := s.engine.Promote(ctx, flow, envs[0].Name, engine.PromoteOptions{Version: plan.Version, Previous: out.Previous, By: principalOf(c).who(),
			Message: req.Message, Test: &store.PromotionTest{Gate: "skipped"}}); err != nil {
			return err
		}
	}
	return c.JSON(http.StatusOK, out)
}

// rollbackTo writes a version's document to the flow's file (keeping the canvas's
// notes) and publishes it: the first environment, and the saved file, then hold it.
func (s *Server) rollbackTo(ctx context.Context, flow string, plan *flows.Plan, message string) (RolledBack, error) {
	out := RolledBack{Flow: flow, Version: plan.Version}
	if cur, err := s.versions().CurrentPlan(ctx, flow); err == nil {
		out.Previous = cur.Version
	}
	src := plan.Source
	file, lerr := s.library.Load(flow)
	switch {
	case lerr == nil:
		// The notes on the canvas stay (docs/versions.md): the draft's when there is one.
		draft, _ := s.library.LoadDraft(flow)
		src = flows.KeepNotes(plan.Source, draft, file)
		if err := s.library.Save(flow, src); err != nil {
			return out, err
		}
		out.FileWritten = true
		// Like a save, a rollback replaces the working copy: a draft of the flow goes.
		if err := s.library.DeleteDraft(flow); err != nil && flows.ErrorCode(err) != flows.NotFound {
			return out, err
		}
	case flows.ErrorCode(lerr) != flows.NotFound:
		return out, lerr
	}
	if s.sync != nil && out.FileWritten {
		if _, _, err := s.sync.PublishNote(ctx, flow, src, message); err != nil {
			return out, err
		}
		out.Published = true
	} else if err := s.versions().PublishWithMessage(ctx, plan, message); err != nil {
		return out, err
	}
	return out, nil
}
