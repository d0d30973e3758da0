package server

// Saves committed to git (docs/environments.md, "Git"): with serve --git-commit, each
// route that changes a flow's file or its cases commits those two files, once the
// handler succeeded and before its answer is written, by the person signed in (or the
// key) with the save's message. Only the flow's own files go in the commit
// (store.GitRepo.Commit). A commit that fails does not undo the save: the answer
// carries the Sluice-Warning header, the failure is logged and counted
// (sluice_git_commit_failures_total), and the editor shows it until a commit of the
// flow succeeds.

import (
	"errors"
	"fmt"
	"strings"
	"unicode"

	"github.com/labstack/echo/v4"
	"github.com/sluicehq/sluice/flows"
	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/teams"
)

// WarningHeader carries, on a successful answer, what the change could not do beside
// it (a save that is not committed to git).
const WarningHeader = "Sluice-Warning"

// gitCommits are the routes whose success is committed, with what the commit says.
var gitCommits = map[string]string{
	"PUT /api/flows/:flow":                            "Save",
	"POST /api/flows":                                 "Import",
	"POST /flows/:flow/duplicate":                     "Duplicate",
	"DELETE /api/flows/:flow":                         "Delete",
	"POST /flows/:flow/delete":                        "Delete",
	"POST /api/flows/:flow/rollback":                  "Roll back",
	"POST /api/flows/:flow/environments/:env/promote": "Promote",
	"PUT /api/flows/:flow/cases":                      "Save the test cases of",
	"POST /api/flows/:flow/cases":                     "Add a test case to",
}

// gitFlowKey names, in a request's context, the flow a route wrote when it is not the
// route's :flow (an import, a duplicate's copy).
const gitFlowKey = "git.flow"

// wroteFlow says which flow a route wrote, for its commit, when the URL does not name it.
func wroteFlow(c echo.Context, id string) { c.Set(gitFlowKey, id) }

// commitBefore has a route's change of a flow's files committed, when the server
// commits, just before the route's successful answer is written: a commit that fails
// can still be said in it.
func (s *Server) commitBefore(c echo.Context, route string) {
	verb, ok := gitCommits[route]
	if !ok || s.git == nil {
		return
	}
	c.Response().Before(func() {
		if c.Response().Status >= 400 {
			return
		}
		if warning := s.commitRoute(c, route, verb); warning != "" {
			c.Response().Header().Set(WarningHeader, headerSafe(warning))
		}
	})
}

// commitRoute commits the flow's files and returns what to warn of when that fails.
func (s *Server) commitRoute(c echo.Context, route, verb string) string {
	flow := c.Param("flow")
	if id, _ := c.Get(gitFlowKey).(string); id != "" {
		flow = id
	} else if route == "POST /api/flows" || route == "POST /flows/:flow/duplicate" {
		return "" // nothing was written (a duplicate of a draft is a draft)
	}
	files, err := s.library.Files(flow)
	if err != nil {
		return ""
	}
	ws, bare := teams.Split(flow)
	msg := fmt.Sprintf("%s flow %s", verb, bare)
	if verb == "Duplicate" {
		_, from := teams.Split(c.Param("flow"))
		msg = fmt.Sprintf("Duplicate flow %s as %s", from, bare)
	}
	if ws != teams.DefaultWorkspace {
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
		s.metrics.gitFailures.Inc()
		s.log.Warn("git: the change is saved but not committed", "flow", flow, "route", route, "error", err)
		why := "the server's log says why"
		var fe *flows.Error
		if errors.As(err, &fe) && fe.Message != "" {
			why = fe.Message
		}
		warning := fmt.Sprintf("saved, but not committed to git (%s); the flow's next save commits its files", why)
		s.gitWarnings.Store(flow, warning)
		return warning
	}
	s.gitWarnings.Delete(flow)
	if h != "" {
		s.log.Info("git: committed", "flow", flow, "commit", h[:12])
	}
	return ""
}

// gitWarning is what the editor of flow is told of its last failed commit ("" none
// since its last commit).
func (s *Server) gitWarning(flow string) string {
	w, _ := s.gitWarnings.Load(flow)
	str, _ := w.(string)
	return str
}

// headerSafe keeps a header value to printable ASCII.
func headerSafe(s string) string {
	return strings.Map(func(r rune) rune {
		if r > unicode.MaxASCII || !unicode.IsPrint(r) {
			return '?'
		}
		return r
	}, s)
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
