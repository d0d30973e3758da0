package server

import (
	"github.com/labstack/echo/v4"
	"github.com/sluicehq/sluice/flows"
)

// OIDCConfig turns on single sign-on with an OpenID Connect provider (docs/teams.md).
type OIDCConfig struct {
	Issuer       string
	ClientID     string
	ClientSecret string
	// RedirectURL is this server's /sso/callback as the provider knows it.
	RedirectURL string
	// GroupsClaim names the ID token's claim of group names (default "groups").
	GroupsClaim string
	// Groups maps a group to a role in a workspace: "group" -> "workspace:role".
	Groups map[string]string
	// Domains maps an email domain to a role in a workspace: "example.com" -> "workspace:role".
	Domains map[string]string
}

type ssoProvider struct{}

func (s *Server) ssoStart(c echo.Context) error {
	return &flows.Error{Code: flows.NotFound, Message: "single sign-on is not configured"}
}

func (s *Server) ssoCallback(c echo.Context) error {
	return &flows.Error{Code: flows.NotFound, Message: "single sign-on is not configured"}
}
