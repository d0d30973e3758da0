package server

import (
	_ "embed"
	"net/http"

	"github.com/labstack/echo/v4"
)

// openAPIDoc is the OpenAPI 3.1 description of the API, written by hand; a test checks
// that it names every route of routes.go.
//
//go:embed openapi.json
var openAPIDoc []byte

// OpenAPI returns the OpenAPI document the server serves at /api/openapi.json.
func OpenAPI() []byte { return openAPIDoc }

func (s *Server) openAPI(c echo.Context) error {
	return c.Blob(http.StatusOK, echo.MIMEApplicationJSON, openAPIDoc)
}
