package server

import (
	"context"
	"net/http"

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
