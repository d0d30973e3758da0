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
