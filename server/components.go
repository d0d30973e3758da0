package server

import (
	"net/http"

	"github.com/labstack/echo/v4"
	"github.com/sluicehq/sluice/flows"
)

// registryOwner has the component registry flows are compiled with.
type registryOwner interface {
	Registry() *flows.Registry
}

// ComponentList is the body of GET /api/components: every component a node can be,
// with its ports, parameter schema and example, in palette order.
type ComponentList struct {
	Components []*flows.Spec `json:"components"`
}

func (s *Server) listComponents(c echo.Context) error {
	var reg registryOwner = s.engine
	return c.JSON(http.StatusOK, ComponentList{Components: reg.Registry().Specs()})
}
