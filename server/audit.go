package server

// The audit log (docs/teams.md): who did what, when, from where, per workspace,
// append-only in Redis with a retention. Changes through the API are recorded by
// authorize, after their handler succeeded, from one table (auditActions); sign-in and
// sign-out, members and keys record their own.

import (
	"bufio"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"
	"github.com/sluicehq/sluice/teams"
)

// auditActions names the routes whose success is written to the audit log.
var auditActions = map[string]string{
	"PUT /api/flows/:flow":                        "flow.save",
	"POST /api/flows":                             "flow.import",
	"DELETE /api/flows/:flow":                     "flow.delete",
	"POST /flows/:flow/delete":                    "flow.delete",
	"POST /flows/:flow/duplicate":                 "flow.duplicate",
	"POST /api/flows/:flow/rollback":              "flow.rollback",
	"POST /api/flows/:flow/runs":                  "run.start",
	"POST /api/flows/:flow/runs/:run/cancel":      "run.cancel",
	"POST /api/flows/:flow/runs/:run/resume":      "run.resume",
	"POST /api/flows/:flow/runs/:run/fork":        "run.fork",
	"POST /api/flows/:flow/deadletters/:id/retry": "deadletter.retry",
	"DELETE /api/flows/:flow/deadletters/:id":     "deadletter.discard",
	"POST /api/flows/:flow/deliveries/:id/retry":  "delivery.retry",
}

// auditTarget names what a route that has no :flow changed (an import: the flow the
// document made), for auditRoute.
func auditTarget(c echo.Context, target string) { c.Set("audit_target", target) }

// auditRoute records a route's success, if it is one the log keeps.
func (s *Server) auditRoute(c echo.Context, route string) {
	action, ok := auditActions[route]
	if !ok || c.Response().Status >= 400 {
		return
	}
	target := c.Param("flow")
	if target == "" {
		target, _ = c.Get("audit_target").(string)
	}
	if r := c.Param("run"); r != "" {
		target += "/" + r
	}
	s.audit(c, workspaceOf(c), action, target, "")
}

func (s *Server) audit(c echo.Context, ws, action, target, detail string) {
	s.auditAs(c, ws, principalOf(c).who(), action, target, detail)
}

func (s *Server) auditAs(c echo.Context, ws, who, action, target, detail string) {
	if s.teams == nil {
		return
	}
	e := teams.AuditEntry{Who: who, Action: action, Target: target, From: clientIP(c.Request()), Detail: detail}
	if err := s.teams.Audit(c.Request().Context(), ws, e, s.cfg.AuditRetention); err != nil {
		s.log.Warn("audit log: cannot append", "workspace", ws, "action", action, "error", err)
	}
}

// listAudit returns the workspace's audit entries, newest first, filtered by action
// (prefix), who (substring) and before (an entry id, for the next page); with
// ?format=jsonl, all that match as JSON lines (export).
func (s *Server) listAudit(c echo.Context) error {
	if err := s.needTeams(); err != nil {
		return err
	}
	action, who, before := c.QueryParam("action"), c.QueryParam("who"), c.QueryParam("before")
	limit := 100
	if n, err := strconv.Atoi(c.QueryParam("limit")); err == nil && n > 0 && n <= 1000 {
		limit = n
	}
	jsonl := c.QueryParam("format") == "jsonl"
	ws := workspaceOf(c)
	var out []teams.AuditEntry
	for {
		batch, err := s.teams.AuditLog(c.Request().Context(), ws, before, 500)
		if err != nil {
			return err
		}
		for _, e := range batch {
			if (action == "" || strings.HasPrefix(e.Action, action)) && (who == "" || strings.Contains(e.Who, who)) {
				out = append(out, e)
			}
		}
		if len(batch) < 500 || (!jsonl && len(out) >= limit) {
			break
		}
		before = batch[len(batch)-1].ID
	}
	if jsonl {
		c.Response().Header().Set(echo.HeaderContentType, "application/jsonl")
		c.Response().Header().Set("Content-Disposition", `attachment; filename="audit-`+ws+`.jsonl"`)
		c.Response().WriteHeader(http.StatusOK)
		w := bufio.NewWriter(c.Response())
		enc := json.NewEncoder(w)
		for _, e := range out {
			_ = enc.Encode(e)
		}
		return w.Flush()
	}
	if len(out) > limit {
		out = out[:limit]
	}
	if out == nil {
		out = []teams.AuditEntry{}
	}
	return c.JSON(http.StatusOK, map[string]any{"entries": out})
}
