package server

import (
	"context"
	"net/http"

	"github.com/labstack/echo/v4"
	"github.com/sluicehq/sluice/flows"
	"github.com/sluicehq/sluice/store"
)

// deadLetters lists, retries and discards a flow's dead letters.
type deadLetters interface {
	DeadLetters(ctx context.Context, flow string, count int64) ([]store.DeadLetter, error)
	RetryDead(ctx context.Context, flow, id string) (string, error)
	DiscardDead(ctx context.Context, flow, id string) error
}

var _ deadLetters = (*store.Redis)(nil)

// DeadLetterList is the body of GET .../deadletters, oldest first.
type DeadLetterList struct {
	DeadLetters []store.DeadLetter `json:"dead_letters"`
}

// Retried is the answer to a dead-letter retry.
type Retried struct {
	ID    string `json:"id"`    // the dead letter
	Entry string `json:"entry"` // its new entry in the node's (or results) stream
}

func (s *Server) deadLetters() deadLetters { return s.rdb }

// deadID checks a dead letter's id: a stream entry id.
func deadID(c echo.Context) (string, error) {
	id := c.Param("id")
	if !store.ValidStreamID(id) {
		return "", &flows.Error{Code: flows.NotFound, Message: "no dead letter " + id}
	}
	return id, nil
}

func (s *Server) listDeadLetters(c echo.Context) error {
	flow, err := flowParam(c)
	if err != nil {
		return err
	}
	limit, err := intParam(c, "limit", 100)
	if err != nil {
		return err
	}
	dl, err := s.deadLetters().DeadLetters(c.Request().Context(), flow, int64(min(max(limit, 1), 1000)))
	if err != nil {
		return err
	}
	if dl == nil {
		dl = []store.DeadLetter{}
	}
	if stateHidden(c) {
		// An error says what the step saw: statuses only (docs/teams.md).
		for i := range dl {
			dl[i].Error = ""
		}
	}
	return c.JSON(http.StatusOK, DeadLetterList{DeadLetters: dl})
}

func (s *Server) discardDeadLetter(c echo.Context) error {
	flow, err := flowParam(c)
	if err != nil {
		return err
	}
	id, err := deadID(c)
	if err != nil {
		return err
	}
	if err := s.deadLetters().DiscardDead(c.Request().Context(), flow, id); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}
