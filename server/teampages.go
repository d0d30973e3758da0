package server

// The members, keys, audit and settings pages (templ/pages/teams.templ,
// settings.templ): server-rendered lists whose buttons call the JSON API.

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/sluicehq/sluice/teams"
	"github.com/sluicehq/sluice/templ/layout"
	"github.com/sluicehq/sluice/templ/pages"
)

func roleNames(upTo teams.Role) []string {
	var out []string
	for _, r := range teams.Roles {
		if upTo.AtLeast(r) {
			out = append(out, string(r))
		}
	}
	return out
}

func (s *Server) membersPage(c echo.Context) error {
	if err := s.needTeams(); err != nil {
		return err
	}
	ctx := c.Request().Context()
	ws := workspaceOf(c)
	roles, err := s.teams.Members(ctx, ws)
	if err != nil {
		return err
	}
	self := ""
	if p := principalOf(c).person; p != nil {
		self = p.ID
	}
	m := pages.MembersPage{Workspace: ws, Roles: roleNames(teams.Owner)}
	for id, r := range roles {
		p, err := s.teams.Person(ctx, id)
		if err != nil {
			continue
		}
		m.Members = append(m.Members, pages.MemberRow{ID: id, Email: p.Email, Role: string(r), Self: id == self})
	}
	slices.SortFunc(m.Members, func(a, b pages.MemberRow) int { return strings.Compare(a.Email, b.Email) })
	return s.render(c, http.StatusOK, pages.Members(s.page("Members", ""), m))
}

func when(ms int64) string {
	if ms == 0 {
		return "—"
	}
	return time.UnixMilli(ms).UTC().Format("2006-01-02 15:04 UTC")
}

func (s *Server) keysPage(c echo.Context) error {
	if err := s.needTeams(); err != nil {
		return err
	}
	ks, err := s.visibleKeys(c)
	if err != nil {
		return err
	}
	p := principalOf(c)
	ws := workspaceOf(c)
	k := pages.KeysPage{Workspace: ws, Owner: p.role(ws).AtLeast(teams.Owner)}
	if p.key == nil && (p.person != nil || k.Owner) {
		k.Roles = roleNames(p.role(ws))
	}
	ctx := c.Request().Context()
	for _, x := range ks {
		owner := "service " + x.Service
		if x.Person != "" {
			owner = x.Person
			if pp, err := s.teams.Person(ctx, x.Person); err == nil {
				owner = pp.Email
			}
		}
		exp := "never"
		if x.Expires != 0 {
			exp = when(x.Expires)
		}
		k.Keys = append(k.Keys, pages.KeyRow{ID: x.ID, Prefix: x.Prefix, Name: x.Name, Role: string(x.Role), Owner: owner,
			Expires: exp, LastUsed: when(x.LastUsed), Created: when(x.Created), Revoked: x.Revoked != 0})
	}
	return s.render(c, http.StatusOK, pages.Keys(s.page("API keys", ""), k))
}

func (s *Server) auditPage(c echo.Context) error {
	if err := s.needTeams(); err != nil {
		return err
	}
	a := pages.AuditPage{Workspace: workspaceOf(c), Action: c.QueryParam("action"), Who: c.QueryParam("who")}
	entries, err := s.teams.AuditLog(c.Request().Context(), a.Workspace, "", 1000)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if (a.Action == "" || strings.HasPrefix(e.Action, a.Action)) && (a.Who == "" || strings.Contains(e.Who, a.Who)) && len(a.Entries) < 200 {
			a.Entries = append(a.Entries, pages.AuditRow{At: when(e.At), Who: e.Who, Action: e.Action, Target: e.Target, From: e.From, Detail: e.Detail})
		}
	}
	return s.render(c, http.StatusOK, pages.Audit(s.page("Audit log", ""), a))
}

// settingsPage shows the workspace's environments (docs/environments.md) to every
// member; an owner edits them there (PUT /api/environments), anyone else sees why not.
func (s *Server) settingsPage(c echo.Context) error {
	ctx := c.Request().Context()
	ws := workspaceOf(c)
	envs, err := s.engine.Environments(ctx, ws)
	if err != nil {
		return err
	}
	sp := pages.SettingsPage{Workspace: ws, CanEdit: layout.Allowed(ctx, string(teams.Admin))}
	for _, r := range teams.Roles {
		if r != teams.Viewer {
			sp.Roles = append(sp.Roles, string(r))
		}
	}
	if !sp.CanEdit {
		sp.Why = fmt.Sprintf("Only an owner of %s can change its environments; your role here is %s.", ws, principalOf(c).role(ws))
	}
	for _, e := range envs {
		role := e.Role
		if role == "" {
			role = string(teams.Editor)
		}
		sp.Environments = append(sp.Environments, pages.EnvironmentRow{Name: e.Name, Gate: e.Gate, RequireCases: e.RequireCases, Role: role})
	}
	return s.render(c, http.StatusOK, pages.Settings(s.page("Settings", "settings"), sp))
}
