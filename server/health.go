package server

import (
	"net/http"
	"time"

	"github.com/labstack/echo/v4"
)

// Health is the body of /healthz.
type Health struct {
	Status   string `json:"status"` // "ok" or "unavailable"
	Redis    string `json:"redis"`  // "ok" or the reason it is not
	Embedded bool   `json:"embedded_redis"`
}

func (s *Server) healthz(c echo.Context) error {
	h := Health{Status: "ok", Redis: "ok", Embedded: s.cfg.Embedded}
	if err := s.redis.Ping(c.Request().Context(), 2*time.Second); err != nil {
		h.Status, h.Redis = "unavailable", err.Error()
		return c.JSON(http.StatusServiceUnavailable, h)
	}
	return c.JSON(http.StatusOK, h)
}

// Ready is the body of /readyz.
type Ready struct {
	Status string            `json:"status"` // "ready" or "not_ready"
	Checks map[string]string `json:"checks"` // each check: "ok" or why not
}

// readyz says whether this server can take work: Redis answers and the flow library
// can be read. Unlike /healthz it is meant for load balancers deciding on traffic.
func (s *Server) readyz(c echo.Context) error {
	r := Ready{Status: "ready", Checks: map[string]string{"redis": "ok", "library": "ok"}}
	if err := s.redis.Ping(c.Request().Context(), 2*time.Second); err != nil {
		r.Status, r.Checks["redis"] = "not_ready", err.Error()
	}
	if s.library != nil {
		if _, err := s.library.List(); err != nil {
			r.Status, r.Checks["library"] = "not_ready", "the flows directory cannot be read"
		}
	}
	if r.Status != "ready" {
		return c.JSON(http.StatusServiceUnavailable, r)
	}
	return c.JSON(http.StatusOK, r)
}
