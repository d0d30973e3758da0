package server

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/sluicehq/sluice/flows"
	"github.com/sluicehq/sluice/flows/engine"
)

// scheduleEngine is what the schedule handlers need of the engine.
type scheduleEngine interface {
	Schedules(ctx context.Context, flow string, nextN, runsN int) (string, []engine.ScheduleView, error)
	PauseSchedule(ctx context.Context, flow string, n int) error
	ResumeSchedule(ctx context.Context, flow string, n int) error
}

var _ scheduleEngine = (*engine.Engine)(nil)

func (s *Server) schedules() scheduleEngine { return s.engine }

// ScheduleList is the body of GET /api/flows/FLOW/schedules: the schedules of the flow's
// current version (what the schedulers run), with their next fire times, pause and
// recent runs.
type ScheduleList struct {
	Flow      string                `json:"flow"`
	Version   string                `json:"version"`
	Now       time.Time             `json:"now"`
	Schedules []engine.ScheduleView `json:"schedules"`
}

func (s *Server) listSchedules(c echo.Context) error {
	flow, err := flowParam(c)
	if err != nil {
		return err
	}
	next, err := intParam(c, "next", 5)
	if err != nil {
		return err
	}
	runs, err := intParam(c, "runs", 5)
	if err != nil {
		return err
	}
	v, list, err := s.schedules().Schedules(c.Request().Context(), flow, min(next, 50), min(runs, 20))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, ScheduleList{Flow: flow, Version: v, Now: time.Now().UTC(), Schedules: list})
}

func scheduleParam(c echo.Context) (int, error) {
	n, err := strconv.Atoi(c.Param("schedule"))
	if err != nil || n < 0 {
		return 0, &flows.Error{Code: flows.NotFound, Path: "schedule", Message: fmt.Sprintf("%q is not a schedule number (0 for the first)", c.Param("schedule"))}
	}
	return n, nil
}

func (s *Server) pauseSchedule(c echo.Context) error  { return s.setPaused(c, true) }
func (s *Server) resumeSchedule(c echo.Context) error { return s.setPaused(c, false) }

// setPaused pauses or resumes a schedule for every process and answers it.
func (s *Server) setPaused(c echo.Context, pause bool) error {
	flow, err := flowParam(c)
	if err != nil {
		return err
	}
	n, err := scheduleParam(c)
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	if pause {
		err = s.schedules().PauseSchedule(ctx, flow, n)
	} else {
		err = s.schedules().ResumeSchedule(ctx, flow, n)
	}
	if err != nil {
		return err
	}
	_, list, err := s.schedules().Schedules(ctx, flow, 5, 5)
	if err != nil {
		return err
	}
	if n >= len(list) { // the current version changed meanwhile
		return &flows.Error{Code: flows.Conflict, Flow: flow, Message: "the flow's current version changed; look again"}
	}
	return c.JSON(http.StatusOK, list[n])
}
