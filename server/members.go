package server

// People, workspaces, members, API keys and settings through the API (docs/teams.md).
// What each route needs is in teams.Routes; these handlers check only what the table
// cannot say: that one does not change one's own role, that a key grants no more than
// its maker holds.

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/sluicehq/sluice/flows"
	"github.com/sluicehq/sluice/teams"
)

func (s *Server) needTeams() error {
	if s.teams == nil {
		return &flows.Error{Code: flows.Unavailable, Message: "people and keys need Redis"}
	}
	return nil
}

// meView is who the request acts as.
type meView struct {
	Who        string            `json:"who"`
	Kind       string            `json:"kind"`
	Person     *personView       `json:"person,omitempty"`
	Workspace  string            `json:"workspace"`
	Role       teams.Role        `json:"role"`
	Sensitive  bool              `json:"sensitive,omitempty"`
	Workspaces []memberWorkspace `json:"workspaces"`
	// Can says, per permission, whether the role holds it here (the UI disables the
	// rest, with Why).
	Can map[teams.Perm]bool   `json:"can"`
	Why map[teams.Perm]string `json:"why,omitempty"`
	// Teams: accounts are on (a token is set); off in the loopback single-person mode.
	Teams bool `json:"teams"`
	SSO   bool `json:"sso,omitempty"`
}

type personView struct {
	ID    string `json:"id"`
	Email string `json:"email"`
	Name  string `json:"name,omitempty"`
	SSO   bool   `json:"sso,omitempty"`
	// Groups are those of the person's last single sign-on.
	Groups []string `json:"groups,omitempty"`
}

type memberWorkspace struct {
	ID   string     `json:"id"`
	Name string     `json:"name,omitempty"`
	Role teams.Role `json:"role"`
}

func viewPerson(p teams.Person) *personView {
	return &personView{ID: p.ID, Email: p.Email, Name: p.Name, SSO: p.Subject != "", Groups: p.Groups}
}

// me builds the view of the request's principal (the API's /api/me and the pages).
func (s *Server) me(c echo.Context) meView {
	p := principalOf(c)
	ws := workspaceOf(c)
	w, _ := s.workspace(c.Request().Context(), ws)
	v := meView{Who: p.who(), Kind: p.kind, Workspace: ws, Role: p.role(ws), Sensitive: w.Sensitive,
		Can: map[teams.Perm]bool{}, Why: map[teams.Perm]string{}, Teams: s.cfg.Token != "", SSO: s.sso != nil}
	if p.person != nil {
		v.Person = viewPerson(*p.person)
	}
	wss, _ := s.workspaces(c.Request().Context())
	for _, x := range wss {
		if r := p.role(x.ID); r != "" && (p.key == nil || x.ID == p.key.Workspace) {
			v.Workspaces = append(v.Workspaces, memberWorkspace{ID: x.ID, Name: x.Name, Role: r})
		}
	}
	for _, perm := range []teams.Perm{teams.Read, teams.ReadState, teams.Run, teams.Edit, teams.Admin} {
		ok, why := teams.Allows(v.Role, perm, w.Sensitive)
		v.Can[perm] = ok
		if !ok {
			v.Why[perm] = why
		}
	}
	v.Can[teams.Instance] = p.everywhere
	return v
}

func (s *Server) getMe(c echo.Context) error { return c.JSON(http.StatusOK, s.me(c)) }

func (s *Server) listWorkspaces(c echo.Context) error {
	return c.JSON(http.StatusOK, map[string]any{"workspaces": s.me(c).Workspaces})
}

type workspaceRequest struct {
	ID        string `json:"id"`
	Name      string `json:"name"`
	Sensitive bool   `json:"sensitive"`
}

func (s *Server) createWorkspace(c echo.Context) error {
	if err := s.needTeams(); err != nil {
		return err
	}
	var req workspaceRequest
	if err := decodeRequest(c, &req); err != nil {
		return err
	}
	if _, ok := s.workspace(c.Request().Context(), req.ID); ok {
		return &flows.Error{Code: flows.Conflict, Path: "id", Message: fmt.Sprintf("workspace %q exists", req.ID)}
	}
	w := teams.Workspace{ID: req.ID, Name: req.Name, Sensitive: req.Sensitive}
	if err := s.teams.SaveWorkspace(c.Request().Context(), w); err != nil {
		return err
	}
	s.auth.flush()
	s.audit(c, req.ID, "workspace.create", req.ID, "")
	return c.JSON(http.StatusCreated, w)
}

// settingsView is a workspace's settings.
type settingsView struct {
	ID        string   `json:"id"`
	Name      string   `json:"name,omitempty"`
	Sensitive bool     `json:"sensitive"`
	Secrets   []string `json:"secrets"`
	Providers []string `json:"providers"`
}

func (s *Server) getSettings(c echo.Context) error {
	w, _ := s.workspace(c.Request().Context(), workspaceOf(c))
	return c.JSON(http.StatusOK, settingsView{ID: w.ID, Name: w.Name, Sensitive: w.Sensitive,
		Secrets: nonNil(w.Secrets), Providers: nonNil(w.Providers)})
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

type settingsRequest struct {
	Name      *string   `json:"name"`
	Sensitive *bool     `json:"sensitive"`
	Secrets   *[]string `json:"secrets"`
	Providers *[]string `json:"providers"`
}

func (s *Server) saveSettings(c echo.Context) error {
	if err := s.needTeams(); err != nil {
		return err
	}
	var req settingsRequest
	if err := decodeRequest(c, &req); err != nil {
		return err
	}
	w, _ := s.workspace(c.Request().Context(), workspaceOf(c))
	if req.Name != nil {
		w.Name = *req.Name
	}
	if req.Sensitive != nil {
		w.Sensitive = *req.Sensitive
	}
	// An owner narrows what the operator gives the workspace, never more: each name
	// must be one the operator lets this workspace's flows read or call.
	if req.Secrets != nil {
		for i, n := range *req.Secrets {
			if !validEnvName(n) {
				return &flows.Error{Code: flows.Invalid, Path: fmt.Sprintf("secrets[%d]", i), Message: fmt.Sprintf("%q is not an environment variable name", n)}
			}
			if s.engine != nil {
				if err := s.engine.Registry().Secrets().CheckIn(w.ID, n, nil); err != nil {
					return &flows.Error{Code: flows.Invalid, Path: fmt.Sprintf("secrets[%d]", i), Message: err.Error()}
				}
			}
		}
		if !slices.Equal(w.Secrets, *req.Secrets) {
			s.audit(c, w.ID, "secrets.change", strings.Join(*req.Secrets, ","), "")
		}
		w.Secrets = *req.Secrets
	}
	if req.Providers != nil {
		for i, n := range *req.Providers {
			if s.engine != nil {
				if err := s.engine.Registry().CheckProvider(w.ID, n); err != nil {
					msg := err.Error()
					var fe *flows.Error
					if errors.As(err, &fe) && fe.Message != "" {
						msg = fe.Message
					}
					return &flows.Error{Code: flows.Invalid, Path: fmt.Sprintf("providers[%d]", i), Message: msg}
				}
			}
		}
		if !slices.Equal(w.Providers, *req.Providers) {
			s.audit(c, w.ID, "providers.change", strings.Join(*req.Providers, ","), "")
		}
		w.Providers = *req.Providers
	}
	ctx := c.Request().Context()
	if err := s.teams.SaveWorkspace(ctx, w); err != nil {
		return err
	}
	s.auth.flush()
	if s.rules != nil {
		if err := s.rules.Reload(ctx); err != nil {
			return err
		}
	}
	return s.getSettings(c)
}

func validEnvName(n string) bool {
	if n == "" {
		return false
	}
	for i, r := range n {
		if !(r == '_' || r >= 'A' && r <= 'Z' || r >= 'a' && r <= 'z' || i > 0 && r >= '0' && r <= '9') {
			return false
		}
	}
	return true
}

// memberView is one member of a workspace.
type memberView struct {
	personView
	Role teams.Role `json:"role"`
}

func (s *Server) listMembers(c echo.Context) error {
	if err := s.needTeams(); err != nil {
		return err
	}
	ctx := c.Request().Context()
	roles, err := s.teams.Members(ctx, workspaceOf(c))
	if err != nil {
		return err
	}
	out := []memberView{}
	for id, r := range roles {
		p, err := s.teams.Person(ctx, id)
		if err != nil {
			continue
		}
		out = append(out, memberView{personView: *viewPerson(p), Role: r})
	}
	slices.SortFunc(out, func(a, b memberView) int { return strings.Compare(a.Email, b.Email) })
	return c.JSON(http.StatusOK, map[string]any{"members": out})
}

type memberRequest struct {
	Email string `json:"email"`
	Name  string `json:"name"`
	Role  string `json:"role"`
}

// resetLinkTTL is how long an owner's password link is good for.
const resetLinkTTL = 24 * time.Hour

// invite makes someone a member: a new person gets a one-time link to set a password.
func (s *Server) invite(c echo.Context) error {
	if err := s.needTeams(); err != nil {
		return err
	}
	var req memberRequest
	if err := decodeRequest(c, &req); err != nil {
		return err
	}
	role, err := teams.ParseRole(req.Role)
	if err != nil {
		return &flows.Error{Code: flows.Invalid, Path: "role", Message: err.Error()}
	}
	ctx := c.Request().Context()
	ws := workspaceOf(c)
	p, err := s.teams.PersonByEmail(ctx, req.Email)
	created := false
	if flows.ErrorCode(err) == flows.NotFound {
		p = teams.Person{Email: req.Email, Name: req.Name}
		if err := s.teams.CreatePerson(ctx, &p); err != nil {
			return err
		}
		created = true
	} else if err != nil {
		return err
	}
	if err := s.checkOwnRole(c, p.ID); err != nil {
		return err
	}
	if err := s.teams.SetRole(ctx, ws, p.ID, role); err != nil {
		return err
	}
	s.auth.flush()
	s.audit(c, ws, "member.role", p.Email, string(role))
	out := map[string]any{"member": memberView{personView: *viewPerson(p), Role: role}}
	if created {
		link, err := s.resetLink(c, p.ID)
		if err != nil {
			return err
		}
		out["link"] = link
	}
	return c.JSON(http.StatusCreated, out)
}

// checkOwnRole refuses a change of one's own membership: an owner who demotes or
// removes themselves could leave a workspace with none, and nobody raises their own.
func (s *Server) checkOwnRole(c echo.Context, person string) error {
	if p := principalOf(c); p.person != nil && p.person.ID == person {
		return &flows.Error{Code: flows.Forbidden, Message: "you cannot change your own role; another owner can"}
	}
	return nil
}

func (s *Server) setMemberRole(c echo.Context) error {
	if err := s.needTeams(); err != nil {
		return err
	}
	var req memberRequest
	if err := decodeRequest(c, &req); err != nil {
		return err
	}
	role, err := teams.ParseRole(req.Role)
	if err != nil {
		return &flows.Error{Code: flows.Invalid, Path: "role", Message: err.Error()}
	}
	return s.changeMember(c, role)
}

func (s *Server) removeMember(c echo.Context) error { return s.changeMember(c, "") }

func (s *Server) changeMember(c echo.Context, role teams.Role) error {
	if err := s.needTeams(); err != nil {
		return err
	}
	ctx := c.Request().Context()
	ws := workspaceOf(c)
	id := c.Param("person")
	if err := s.checkOwnRole(c, id); err != nil {
		return err
	}
	members, err := s.teams.Members(ctx, ws)
	if err != nil {
		return err
	}
	if _, ok := members[id]; !ok {
		return &flows.Error{Code: flows.NotFound, Message: "no such member of this workspace"}
	}
	p, err := s.teams.Person(ctx, id)
	if err != nil {
		return err
	}
	if err := s.teams.SetRole(ctx, ws, id, role); err != nil {
		return err
	}
	s.auth.flush()
	if role == "" {
		s.audit(c, ws, "member.remove", p.Email, "")
		return c.NoContent(http.StatusNoContent)
	}
	s.audit(c, ws, "member.role", p.Email, string(role))
	return c.JSON(http.StatusOK, memberView{personView: *viewPerson(p), Role: role})
}

// resetLink issues a one-time link for person to set a password.
func (s *Server) resetLink(c echo.Context, person string) (string, error) {
	tok := teams.RandomToken(32)
	if err := s.teams.CreateReset(c.Request().Context(), teams.Digest(tok), person, resetLinkTTL); err != nil {
		return "", err
	}
	return "/reset?t=" + tok, nil
}

func (s *Server) issueReset(c echo.Context) error {
	if err := s.needTeams(); err != nil {
		return err
	}
	ctx := c.Request().Context()
	id := c.Param("person")
	members, err := s.teams.Members(ctx, workspaceOf(c))
	if err != nil {
		return err
	}
	if _, ok := members[id]; !ok {
		return &flows.Error{Code: flows.NotFound, Message: "no such member of this workspace"}
	}
	p, err := s.teams.Person(ctx, id)
	if err != nil {
		return err
	}
	link, err := s.resetLink(c, id)
	if err != nil {
		return err
	}
	s.audit(c, workspaceOf(c), "member.reset", p.Email, "")
	return c.JSON(http.StatusCreated, map[string]any{"link": link, "expires_in": resetLinkTTL.String()})
}

// keyRequest makes an API key.
type keyRequest struct {
	Name string `json:"name"`
	Role string `json:"role"`
	// Service names a service account: the key is the workspace's, not its maker's
	// (owners only).
	Service string `json:"service"`
	// ExpiresIn is a Go duration ("720h"); "" never expires.
	ExpiresIn string `json:"expires_in"`
}

func (s *Server) createKey(c echo.Context) error {
	if err := s.needTeams(); err != nil {
		return err
	}
	var req keyRequest
	if err := decodeRequest(c, &req); err != nil {
		return err
	}
	p := principalOf(c)
	ws := workspaceOf(c)
	have := p.role(ws)
	role, err := teams.ParseRole(req.Role)
	if err != nil {
		return &flows.Error{Code: flows.Invalid, Path: "role", Message: err.Error()}
	}
	if have == "" {
		return &flows.Error{Code: flows.Forbidden, Message: fmt.Sprintf("you are not a member of workspace %q", ws)}
	}
	if !have.AtLeast(role) {
		return &flows.Error{Code: flows.Forbidden, Path: "role", Message: fmt.Sprintf("a %s cannot make a key with the %s role", have, role)}
	}
	if p.key != nil {
		return &flows.Error{Code: flows.Forbidden, Message: "an API key cannot make keys; sign in"}
	}
	key, id := teams.NewKey()
	k := teams.APIKey{ID: id, Prefix: teams.KeyPrefix + id, Name: req.Name, Workspace: ws, Role: role,
		Digest: teams.Digest(key), Created: time.Now().UnixMilli()}
	if req.ExpiresIn != "" {
		d, err := time.ParseDuration(req.ExpiresIn)
		if err != nil || d <= 0 {
			return &flows.Error{Code: flows.Invalid, Path: "expires_in", Message: fmt.Sprintf("expires_in %q: give a duration like \"720h\"", req.ExpiresIn)}
		}
		k.Expires = time.Now().Add(d).UnixMilli()
	}
	switch {
	case req.Service != "":
		if !have.AtLeast(teams.Owner) {
			return &flows.Error{Code: flows.Forbidden, Path: "service", Message: "only an owner makes service account keys"}
		}
		k.Service = req.Service
	case p.person != nil:
		k.Person = p.person.ID
	default:
		return &flows.Error{Code: flows.Invalid, Path: "service", Message: "SLUICE_TOKEN is no person: name the service account the key is for"}
	}
	if err := s.teams.SaveKey(c.Request().Context(), k); err != nil {
		return err
	}
	s.audit(c, ws, "key.create", k.Prefix, string(role))
	k.Digest = ""
	return c.JSON(http.StatusCreated, map[string]any{"key": key, "info": k,
		"note": "this is the only time the key is shown: keep it now"})
}

// visibleKeys are the keys of the workspace the principal may see: their own, or all
// of them for an owner.
func (s *Server) visibleKeys(c echo.Context) ([]teams.APIKey, error) {
	all, err := s.teams.Keys(c.Request().Context())
	if err != nil {
		return nil, err
	}
	p := principalOf(c)
	ws := workspaceOf(c)
	owner := p.role(ws).AtLeast(teams.Owner)
	out := []teams.APIKey{}
	for _, k := range all {
		if k.Workspace != ws {
			continue
		}
		if owner || (p.person != nil && k.Person == p.person.ID) {
			out = append(out, k)
		}
	}
	return out, nil
}

func (s *Server) listKeys(c echo.Context) error {
	if err := s.needTeams(); err != nil {
		return err
	}
	ks, err := s.visibleKeys(c)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]any{"keys": ks})
}

func (s *Server) revokeKey(c echo.Context) error {
	if err := s.needTeams(); err != nil {
		return err
	}
	ks, err := s.visibleKeys(c)
	if err != nil {
		return err
	}
	id := strings.TrimPrefix(c.Param("key"), teams.KeyPrefix)
	for _, k := range ks {
		if k.ID != id {
			continue
		}
		if k.Revoked == 0 {
			k.Revoked = time.Now().UnixMilli()
			full, err := s.teams.Key(c.Request().Context(), id)
			if err != nil {
				return err
			}
			full.Revoked = k.Revoked
			if err := s.teams.SaveKey(c.Request().Context(), full); err != nil {
				return err
			}
			s.auth.flush()
			s.audit(c, k.Workspace, "key.revoke", k.Prefix, "")
		}
		return c.JSON(http.StatusOK, k)
	}
	return &flows.Error{Code: flows.NotFound, Message: "no such key of yours in this workspace"}
}
