package server

// Environments and promotion (docs/environments.md). A request names an environment by
// path (/env/NAME/... before any route), the Sluice-Environment header or ?env=; runs,
// webhook ingress, /v1 and /mcp then start on that environment's version (planFor). A
// request that names none behaves as before environments: the saved file, else the
// first environment's version (where saving lands).

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"
	"github.com/sluicehq/sluice/flows"
	"github.com/sluicehq/sluice/flows/cases"
	"github.com/sluicehq/sluice/flows/engine"
	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/teams"
)

// EnvironmentHeader names the environment a request runs flows in.
const EnvironmentHeader = "Sluice-Environment"

// envPathPrefix starts a path that names an environment: /env/prod/v1/chat/completions
// is /v1/chat/completions in prod. Clients that take only a base URL (OpenAI and MCP
// clients, webhook senders) name an environment this way.
const envPathPrefix = "/env/"

type environmentKey struct{}

// environmentFrom is the environment the request named ("" none).
func environmentFrom(ctx context.Context) string {
	env, _ := ctx.Value(environmentKey{}).(string)
	return env
}

// environmentPath runs before routing: it takes /env/NAME off the path and names the
// environment in the request's header instead, where chooseEnvironment finds it.
func environmentPath(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		r := c.Request()
		rest, ok := strings.CutPrefix(r.URL.Path, envPathPrefix)
		if !ok {
			return next(c)
		}
		env, tail, _ := strings.Cut(rest, "/")
		r.Header.Set(EnvironmentHeader, env)
		r.URL.Path = "/" + tail
		if r.URL.RawPath != "" {
			if raw, ok := strings.CutPrefix(r.URL.RawPath, envPathPrefix+env); ok {
				r.URL.RawPath = raw
			} else {
				r.URL.RawPath = ""
			}
		}
		return next(c)
	}
}

// chooseEnvironment puts the environment a request names (header or ?env=) in its
// context. Whether the workspace has it is found out where it is used.
func chooseEnvironment(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		env := c.Request().Header.Get(EnvironmentHeader)
		if q := c.QueryParam("env"); q != "" {
			if env != "" && env != q {
				return &flows.Error{Code: flows.Invalid, Path: "env", Message: fmt.Sprintf("the request names two environments, %q and %q", env, q)}
			}
			env = q
		}
		if env == "" {
			return next(c)
		}
		if !flows.ValidID(env) {
			return &flows.Error{Code: flows.Invalid, Path: "env", Message: fmt.Sprintf("%q is not an environment name", env)}
		}
		c.SetRequest(c.Request().WithContext(withEnvironment(c.Request().Context(), env)))
		return next(c)
	}
}

func withEnvironment(ctx context.Context, env string) context.Context {
	if env == "" {
		return ctx
	}
	return context.WithValue(ctx, environmentKey{}, env)
}

// checkEnvironment refuses an environment workspace ws does not have ("" is none named).
func (s *Server) checkEnvironment(ctx context.Context, ws, env string) error {
	if env == "" || s.rdb == nil {
		return nil
	}
	envs, err := s.rdb.Environments(ctx, ws)
	if err != nil {
		return err
	}
	names := make([]string, len(envs))
	for i, e := range envs {
		if e.Name == env {
			return nil
		}
		names[i] = e.Name
	}
	return &flows.Error{Code: flows.NotFound, Path: "environment", Message: fmt.Sprintf("no environment %q in workspace %q: it has %s", env, ws, strings.Join(names, ", "))}
}

// EnvironmentList is a workspace's environments, in promotion order.
type EnvironmentList struct {
	Workspace    string              `json:"workspace"`
	Environments []store.Environment `json:"environments"`
}

func (s *Server) getEnvironments(c echo.Context) error {
	ws := workspaceOf(c)
	envs, err := s.engine.Environments(c.Request().Context(), ws)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, EnvironmentList{Workspace: ws, Environments: envs})
}

// setEnvironments replaces the workspace's environments. The first is where saving
// lands; it cannot be gated.
func (s *Server) setEnvironments(c echo.Context) error {
	var req EnvironmentList
	if err := decodeRequest(c, &req); err != nil {
		return err
	}
	if len(req.Environments) > 0 && req.Environments[0].Gate {
		return &flows.Error{Code: flows.Invalid, Path: "environments[0].gate", Message: "the first environment is where saving lands: it cannot be gated"}
	}
	ws := workspaceOf(c)
	if err := s.rdb.SetEnvironments(c.Request().Context(), ws, req.Environments); err != nil {
		return err
	}
	names := make([]string, len(req.Environments))
	for i, e := range req.Environments {
		names[i] = e.Name
	}
	s.audit(c, ws, "environments.set", "", strings.Join(names, ", "))
	return s.getEnvironments(c)
}

// FlowEnvironments is where each environment of a flow's workspace points.
type FlowEnvironments struct {
	Flow         string            `json:"flow"`
	Environments []engine.EnvState `json:"environments"`
}

func (s *Server) flowEnvironments(c echo.Context) error {
	flow, err := flowParam(c)
	if err != nil {
		return err
	}
	envs, err := s.engine.FlowEnvironments(c.Request().Context(), flow)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, FlowEnvironments{Flow: flow, Environments: envs})
}

// PromotionList is a flow's promotions, newest first.
type PromotionList struct {
	Flow       string            `json:"flow"`
	Promotions []store.Promotion `json:"promotions"`
}

func (s *Server) listPromotions(c echo.Context) error {
	flow, err := flowParam(c)
	if err != nil {
		return err
	}
	n := int64(100)
	if q := c.QueryParam("limit"); q != "" {
		v, err := strconv.ParseInt(q, 10, 64)
		if err != nil || v < 1 || v > store.PromotionsMaxLen {
			return &flows.Error{Code: flows.Invalid, Path: "limit", Message: fmt.Sprintf("a number from 1 to %d", store.PromotionsMaxLen)}
		}
		n = v
	}
	ps, err := s.engine.Promotions(c.Request().Context(), flow, c.QueryParam("environment"), n)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, PromotionList{Flow: flow, Promotions: ps})
}

// PromoteRequest is the body of POST /api/flows/FLOW/environments/ENV/promote.
type PromoteRequest struct {
	// Version is the version to promote (its 64 hex digits or a unique prefix of at
	// least 7); empty: the version of From.
	Version string `json:"version"`
	// From is the environment whose version is promoted ("": the one before ENV).
	From string `json:"from"`
	// Message is a note kept with the promotion.
	Message string `json:"message"`
}

// Promoted is the answer to a promotion.
type Promoted struct {
	Flow      string          `json:"flow"`
	Promotion store.Promotion `json:"promotion"`
	// Report is the gate's test (each case's result), when the cases ran.
	Report *cases.Report `json:"report,omitempty"`
	// FileWritten is true when promoting into the first environment rewrote the flow's
	// file, as a rollback does.
	FileWritten bool `json:"file_written,omitempty"`
}

// promote moves an environment of a flow to a version, after its gate. Who may is
// authorize's business: the route's permission is the environment's role.
func (s *Server) promote(c echo.Context) error {
	flow, err := flowParam(c)
	if err != nil {
		return err
	}
	var req PromoteRequest
	if err := decodeRequest(c, &req); err != nil {
		return err
	}
	env := c.Param("env")
	ctx, cancel := context.WithTimeout(c.Request().Context(), maxCasesRun)
	defer cancel()
	opts := engine.PromoteOptions{Version: req.Version, From: req.From, Message: req.Message, By: principalOf(c).who()}
	t, err := s.engine.PromotionTarget(ctx, flow, env, opts)
	if err != nil {
		return err
	}
	opts.Version, opts.From = t.Version, t.From
	out := Promoted{Flow: flow}
	if t.First {
		// Into the first environment: a rollback (or forward) of the saved flow.
		plan, err := s.versions().RollbackPlan(ctx, flow, t.Version)
		if err != nil {
			return err
		}
		rb, p, err := s.rollbackTo(ctx, flow, plan, opts)
		if err != nil {
			return err
		}
		out.FileWritten = rb.FileWritten
		return s.promoted(c, out, p)
	}
	if t.Environment.Gate {
		test, rep, err := s.gate(ctx, flow, t.Version)
		if err != nil {
			return err
		}
		opts.Test, out.Report = test, rep
		if test.Gate == "failed" {
			msg := fmt.Sprintf("promotion of %.12s to %q refused: %d of %d test cases fail: %s", t.Version, env, len(test.Failing), test.Cases, strings.Join(test.Failing, ", "))
			s.audit(c, workspaceOf(c), "flow.promote.refused", flow+"@"+env, fmt.Sprintf("%.12s: failing %s", t.Version, strings.Join(test.Failing, ", ")))
			// The gate's report is the version's last test result (GET .../tests/VERSION).
			return &flows.Error{Code: flows.Conflict, Flow: flow, Path: "cases", Message: msg}
		}
	} else {
		opts.Test = &store.PromotionTest{Gate: "off"}
	}
	p, err := s.engine.Promote(ctx, flow, env, opts)
	if err != nil {
		return err
	}
	return s.promoted(c, out, p)
}

// promoted answers a promotion and writes it to the audit log.
func (s *Server) promoted(c echo.Context, out Promoted, p *store.Promotion) error {
	out.Promotion = *p
	detail := fmt.Sprintf("%.12s (was %.12s), test: %s", p.Version, p.Previous, p.Test.Gate)
	if p.Test.Cases > 0 {
		detail += fmt.Sprintf(" %d/%d", p.Test.Passed, p.Test.Cases)
	}
	s.audit(c, workspaceOf(c), "flow.promote", out.Flow+"@"+p.Environment, detail)
	return c.JSON(http.StatusOK, out)
}

// gate runs the flow's cases (its cases file in the library) on a version and records
// the report as the version's last test result.
func (s *Server) gate(ctx context.Context, flow, version string) (*store.PromotionTest, *cases.Report, error) {
	plan, err := s.runs().Plan(ctx, flow, version)
	if err != nil {
		return nil, nil, err
	}
	f, err := cases.Load(s.library, plan)
	if err != nil {
		return nil, nil, err
	}
	if s.sync != nil && f != nil {
		s.sync.Serve(plan.Flow)
	}
	test, rep, err := cases.Gate(ctx, s.engine, plan, f, cases.Options{Parallel: 4, Grader: s.grader})
	if err != nil {
		return nil, nil, err
	}
	if rep != nil && s.rdb != nil {
		if err := cases.Record(ctx, s.rdb, rep); err != nil {
			s.log.Warn("cannot record a test result", "flow", flow, "error", err)
		}
	}
	return test, rep, nil
}

// promoteRole is the least role that may promote into environment env of workspace
// ws: the environment's role, else editor. An environment the workspace does not have
// needs editor (the handler then says it does not exist).
func (s *Server) promoteRole(ctx context.Context, ws, env string) teams.Role {
	if s.rdb == nil {
		return teams.Editor
	}
	envs, err := s.rdb.Environments(ctx, ws)
	if err != nil {
		return teams.Editor
	}
	for _, e := range envs {
		if e.Name == env && e.Role != "" {
			if r, err := teams.ParseRole(e.Role); err == nil {
				return r
			}
		}
	}
	return teams.Editor
}
