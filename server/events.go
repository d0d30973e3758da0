package server

import (
	"fmt"
	"net/http"
	"time"

	gws "github.com/gorilla/websocket"
	"github.com/labstack/echo/v4"
	"github.com/sluicehq/sluice/flows"
	"github.com/sluicehq/sluice/server/live"
)

// websocket serves /ws: live events, checkpoints, tokens, dead letters and queue figures
// of the flows and runs the client subscribes to (see server/live). A browser's Origin
// must be this server (or an allowed CORS origin): another site's page cannot open it
// with the user's cookie.
func (s *Server) websocket(c echo.Context) error {
	if o := c.Request().Header.Get("Origin"); o != "" && !sameOrigin(o, c.Request().Host) && !s.corsAllowed(o) {
		return &flows.Error{Code: flows.Forbidden, Message: "websocket from a foreign origin refused"}
	}
	if s.hub == nil {
		return &flows.Error{Code: flows.Unavailable, Message: "live views are not available"}
	}
	if !gws.IsWebSocketUpgrade(c.Request()) {
		return &flows.Error{Code: flows.Invalid, Message: "this is a websocket endpoint: connect with a websocket client (or use the SSE streams)"}
	}
	q := c.QueryParams()
	first := live.Request{Flow: q.Get("flow"), Run: q.Get("run"), LastEventID: q.Get("last_event_id")}
	if first.Flow == "" && first.Run != "" {
		return &flows.Error{Code: flows.Invalid, Path: "flow", Message: "a run is watched within its flow: add ?flow="}
	}
	ws := workspaceOf(c)
	if err := s.hub.ServeWSIn(c.Response(), c.Request(), first, func(f string) (string, bool) { return qualifyName(ws, f) }, stateHidden(c)); err != nil {
		s.log.Debug("websocket upgrade failed", "error", err)
	}
	return nil
}

func (s *Server) corsAllowed(origin string) bool {
	for _, o := range s.cfg.CORSOrigins {
		if o == "*" || o == origin {
			return true
		}
	}
	return false
}

// flowEvents streams a flow's live events as Server-Sent Events.
func (s *Server) flowEvents(c echo.Context) error { return s.sse(c, "") }

// runEvents streams one run's live events as Server-Sent Events.
func (s *Server) runEvents(c echo.Context) error { return s.sse(c, c.Param("run")) }

// sse is the EventSource alternative to /ws: each event is sent with its id, so a
// reconnecting client (Last-Event-ID) gets what it missed.
func (s *Server) sse(c echo.Context, run string) error {
	flow, err := flowParam(c)
	if err != nil {
		return err
	}
	if run != "" && !flows.ValidID(run) {
		return &flows.Error{Code: flows.NotFound, Flow: flow, Message: fmt.Sprintf("no run %q", run)}
	}
	if s.hub == nil {
		return &flows.Error{Code: flows.Unavailable, Message: "live views are not available"}
	}
	if run != "" {
		// Another flow's (or workspace's) run id is no run here: a 404, not a silent stream.
		if _, err := s.runs().Info(c.Request().Context(), flow, run); err != nil {
			return err
		}
	}
	last := c.Request().Header.Get("Last-Event-ID")
	if last == "" {
		last = c.QueryParam("last_event_id")
	}
	cl := s.hub.NewClient(256)
	defer s.hub.Remove(cl)
	if stateHidden(c) {
		cl.StatusOnly()
	}
	if err := s.hub.Subscribe(cl, flow, run, last); err != nil {
		return err
	}
	w := c.Response()
	w.Header().Set(echo.HeaderContentType, "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	w.Flush()
	ctx := c.Request().Context()
	beat := time.NewTicker(15 * time.Second)
	defer beat.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-cl.Dropped():
			return nil
		case <-beat.C:
			if _, err := fmt.Fprint(w, ": keep-alive\n\n"); err != nil {
				return nil
			}
		case m := <-cl.Messages():
			if m.ID != "" {
				fmt.Fprintf(w, "id: %s\n", m.ID)
			}
			if _, err := fmt.Fprintf(w, "event: %s\ndata: %s\n\n", m.Kind, m.Data); err != nil {
				return nil
			}
		}
		w.Flush()
	}
}
