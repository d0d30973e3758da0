package server

// Saves committed to git (docs/environments.md, "Git"): with serve --git-commit, each
// route that changes a flow's file or its cases commits those two files, once the
// handler succeeded, by the person signed in (or the key) with the save's message.
// Only the flow's own files go in the commit (store.GitRepo.Commit).

import (
	"fmt"
	"strings"

	"github.com/labstack/echo/v4"
	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/teams"
)

// gitCommits are the routes whose success is committed, with what the commit says.
var gitCommits = map[string]string{
	"PUT /api/flows/:flow":                            "Save",
	"DELETE /api/flows/:flow":                         "Delete",
	"POST /flows/:flow/delete":                        "Delete",
	"POST /api/flows/:flow/rollback":                  "Roll back",
	"POST /api/flows/:flow/environments/:env/promote": "Promote",
	"PUT /api/flows/:flow/cases":                      "Save the test cases of",
	"POST /api/flows/:flow/cases":                     "Add a test case to",
}

// commitRoute commits a route's change of a flow's files, when the server commits. The
// change is saved already: a commit that fails is logged, and the next save of the
// flow commits its files as they then are.
func (s *Server) commitRoute(c echo.Context, route string) {
	verb, ok := gitCommits[route]
	if !ok || s.git == nil || c.Response().Status >= 400 {
		return
	}
	flow := c.Param("flow")
	files, err := s.library.Files(flow)
	if err != nil {
		return
	}
	_, bare := teams.Split(flow)
	msg := fmt.Sprintf("%s flow %s", verb, bare)
	if ws, _ := teams.Split(flow); ws != teams.DefaultWorkspace {
		msg += " of workspace " + ws
	}
	if env := c.Param("env"); env != "" {
		msg = fmt.Sprintf("Promote flow %s to %s (the file is the version promoted)", bare, env)
	}
	if note := strings.TrimSpace(c.QueryParam("message")); note != "" {
		msg = note + "\n\n" + msg
	}
	h, err := s.git.Commit(files, s.authorOf(principalOf(c)), msg)
	if err != nil {
		s.log.Warn("git: the save is not committed", "flow", flow, "error", err)
		return
	}
	if h != "" {
		s.log.Info("git: committed", "flow", flow, "commit", h[:12])
	}
}

// authorOf is who a commit is by: the person signed in (their key's person too), a
// service key by its name, the token holder and the loopback person as the
// repository's configured user.
func (s *Server) authorOf(p *principal) store.Author {
	switch {
	case p.person != nil:
		name := p.person.Name
		if name == "" {
			name, _, _ = strings.Cut(p.person.Email, "@")
		}
		return store.Author{Name: name, Email: p.person.Email}
	case p.key != nil:
		return store.Author{Name: "service " + p.key.Service + " (key " + p.key.Prefix + ")", Email: p.key.Service + "@sluice.invalid"}
	}
	return s.git.DefaultAuthor()
}
