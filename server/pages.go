package server

import (
	"encoding/json"
	"net/http"

	"github.com/a-h/templ"
	"github.com/labstack/echo/v4"
	"github.com/sluicehq/sluice/templ/layout"
	"github.com/sluicehq/sluice/templ/pages"
)

func (s *Server) render(c echo.Context, status int, t templ.Component) error {
	c.Response().Header().Set(echo.HeaderContentType, echo.MIMETextHTMLCharsetUTF8)
	c.Response().WriteHeader(status)
	return t.Render(c.Request().Context(), c.Response())
}

func (s *Server) page(title, section string) layout.Page {
	return layout.Page{Title: title, Section: section, Embedded: s.cfg.Embedded}
}

func (s *Server) homePage(c echo.Context) error {
	files, err := s.library.List()
	if err != nil {
		return err
	}
	items := make([]pages.FlowItem, 0, len(files))
	for _, f := range files {
		var head struct {
			Name  string            `json:"name"`
			Nodes []json.RawMessage `json:"nodes"`
		}
		item := pages.FlowItem{ID: f.ID}
		if err := json.Unmarshal(f.Data, &head); err != nil {
			item.Problem = "not valid JSON: " + err.Error()
		}
		item.Name, item.Nodes = head.Name, len(head.Nodes)
		if item.Name == "" {
			item.Name = f.ID
		}
		items = append(items, item)
	}
	return s.render(c, http.StatusOK, pages.Home(s.page("Flows", "flows"), s.library.Dir, items))
}
