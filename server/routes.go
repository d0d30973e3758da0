package server

import (
	"net/http"

	"github.com/labstack/echo/v4"
	"github.com/sluicehq/sluice/static"
)

// routes is the whole HTTP surface of Sluice.
func (s *Server) routes() {
	e := s.echo
	e.Use(s.recoverPanics, s.requestLog())

	e.GET("/healthz", s.healthz)
	e.GET("/static/*", echo.WrapHandler(http.StripPrefix("/static/", http.FileServerFS(static.FS))))

	e.GET("/", s.homePage)
}
