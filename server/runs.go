package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/sluicehq/sluice/flows"
	"github.com/sluicehq/sluice/flows/engine"
	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/teams"
)

// runEngine is what the run handlers need of the engine.
type runEngine interface {
	compiler
	Plan(ctx context.Context, flow, version string) (*flows.Plan, error)
	CurrentPlan(ctx context.Context, flow string) (*flows.Plan, error)
	EnvPlan(ctx context.Context, flow, env string) (*flows.Plan, error)
	Start(ctx context.Context, plan *flows.Plan, input json.RawMessage, opts engine.StartOptions) (string, error)
	Info(ctx context.Context, flow, run string) (*engine.RunInfo, error)
	Wait(ctx context.Context, flow, run string) (*store.Run, error)
	List(ctx context.Context, flow string, q engine.ListQuery) ([]*store.Run, int64, error)
	Cancel(ctx context.Context, flow, run string) error
	Resume(ctx context.Context, flow, run, node string, decision json.RawMessage) error
	Fork(ctx context.Context, flow, run, ckpt string, patch json.RawMessage, opts engine.ForkOptions) (string, error)
	HasWebhook(ctx context.Context, run *store.Run) bool
}

var _ runEngine = (*engine.Engine)(nil)

// StartRequest is the body of POST /api/flows/FLOW/runs. Fields the server controls
// (id, status, times) are ignored if sent.
type StartRequest struct {
	// Input is the run's input (any JSON; an object is merged into the state).
	Input json.RawMessage `json:"input"`
	// Webhook, when set, receives the run's result (POST, JSON) when it finishes.
	Webhook string `json:"webhook"`
	// Version pins a published version of the flow; empty runs the saved file (or,
	// without one, the flow's current version in Redis).
	Version string `json:"version"`
	// Pins hold some nodes' results fixed for this run, by node id: they do not run
	// (see engine.StartOptions.Pins).
	Pins map[string]engine.Pin `json:"pins,omitempty"`
}

// Started is the answer to a run start (and a fork) that has not finished yet.
type Started struct {
	Run    string `json:"run"`
	Flow   string `json:"flow"`
	Status string `json:"status"`
	URL    string `json:"url"` // where to GET the run
}

// RunView is a run as the API shows it.
type RunView struct {
	*store.Run
	Output  json.RawMessage     `json:"output"`
	Waiting map[string]WaitView `json:"waiting,omitempty"`
	// HasWebhook says whether the run's result goes to a webhook (given at start, or an
	// output node's); the URL itself is never shown.
	HasWebhook   bool  `json:"has_webhook"`
	StorageBytes int64 `json:"storage_bytes,omitempty"`
	// Spend is what the run's model calls spent (failed attempts too), and Budget its
	// flow's caps; only on GET of one run.
	Spend  *flows.Spend  `json:"spend,omitempty"`
	Budget *flows.Budget `json:"budget,omitempty"`
	// DaySpend is what every run of the flow spent on the run's UTC day (today while
	// the run goes on, else the day it finished), against the budget's day_tokens and
	// day_usd; when the flow has a day cap or spent that day.
	DaySpend *DaySpend `json:"day_spend,omitempty"`
	// NoWorker is true when the run has activations that no live worker reads: it stays
	// queued until one starts (sluice worker, or serve with workers). WaitingForWorker
	// names the nodes. Only a run's own GET reports them.
	NoWorker         bool     `json:"no_worker,omitempty"`
	WaitingForWorker []string `json:"waiting_for_worker,omitempty"`
}

// workerWatch tells whether a run's activations sit where no worker reads.
type workerWatch interface {
	WaitingForWorker(ctx context.Context, ref store.RunRef, created time.Time) ([]string, error)
}

var _ workerWatch = (*store.Redis)(nil)

// waitingForWorker is where a queued or running run waits for a worker, if anywhere
// (best effort: an error reports nothing).
func (s *Server) waitingForWorker(ctx context.Context, r *store.Run) []string {
	if s.rdb == nil || (r.Status != store.StatusQueued && r.Status != store.StatusRunning) {
		return nil
	}
	var w workerWatch = s.rdb
	nodes, err := w.WaitingForWorker(ctx, r.Ref(), r.Created)
	if err != nil {
		return nil
	}
	return nodes
}

// WaitView is an approval a run waits at.
type WaitView struct {
	Prompt    string          `json:"prompt"`
	Data      json.RawMessage `json:"data,omitempty"`
	Deadline  string          `json:"deadline,omitempty"`
	OnTimeout string          `json:"on_timeout,omitempty"`
}

func (s *Server) viewRun(ctx context.Context, r *store.Run) *RunView {
	v := viewRun(r)
	v.HasWebhook = s.runs().HasWebhook(ctx, r)
	return v
}

// viewRun is a run as the API shows it, but for what needs the engine.
func viewRun(r *store.Run) *RunView {
	v := &RunView{Run: r, Output: r.Output()}
	if v.Output == nil {
		v.Output = json.RawMessage("null")
	}
	for node, raw := range r.Waits {
		var w WaitView
		_ = json.Unmarshal(raw, &w)
		if v.Waiting == nil {
			v.Waiting = map[string]WaitView{}
		}
		v.Waiting[node] = w
	}
	return v
}

// RunList is the body of GET /api/flows/FLOW/runs.
type RunList struct {
	Runs []*RunView `json:"runs"`
	// Total is how many runs match (with a status filter: among the newest 10,000).
	Total  int64 `json:"total"`
	Offset int   `json:"offset"`
	Limit  int   `json:"limit"`
	// NextOffset is the offset of the next page; absent on the last one.
	NextOffset *int `json:"next_offset,omitempty"`
}

func (s *Server) runs() runEngine { return s.engine }

// flowParam returns the :flow parameter; an invalid id is a flow that does not exist.
func flowParam(c echo.Context) (string, error) {
	f := c.Param("flow")
	if !flows.ValidFlowID(f) {
		return "", &flows.Error{Code: flows.NotFound, Flow: f, Message: "no such flow"}
	}
	return f, nil
}

// decodeRequest reads an optional JSON object body into v. Unknown fields are ignored,
// so that server-controlled fields a client echoes back do no harm.
func decodeRequest(c echo.Context, v any) error {
	b, err := readBody(c)
	if err != nil {
		return err
	}
	if len(b) == 0 {
		return nil
	}
	if err := json.Unmarshal(b, v); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field != "" {
			return &flows.Error{Code: flows.Invalid, Path: te.Field, Message: fmt.Sprintf("must be %s", jsonKind(te.Type.Kind().String()))}
		}
		return &flows.Error{Code: flows.Invalid, Message: "the body is not a JSON object: " + err.Error()}
	}
	return nil
}

func jsonKind(k string) string {
	switch k {
	case "string":
		return "a string"
	case "bool":
		return "true or false"
	case "map", "struct":
		return "an object"
	case "slice":
		return "an array"
	}
	return "a number"
}

// waitParam reads ?wait=30s (or a number of seconds), capped at cfg.MaxWait.
func (s *Server) waitParam(c echo.Context) (time.Duration, error) {
	w := c.QueryParam("wait")
	if w == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(w)
	if err != nil {
		n, nerr := strconv.Atoi(w)
		if nerr != nil {
			return 0, &flows.Error{Code: flows.Invalid, Path: "wait", Message: fmt.Sprintf("%q is not a duration such as 30s", w)}
		}
		d = time.Duration(n) * time.Second
	}
	if d < 0 {
		return 0, &flows.Error{Code: flows.Invalid, Path: "wait", Message: "must not be negative"}
	}
	return min(d, s.cfg.MaxWait), nil
}

func checkWebhook(u string) error {
	if u == "" {
		return nil
	}
	p, err := url.Parse(u)
	if err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" {
		return &flows.Error{Code: flows.Invalid, Path: "webhook", Message: "must be an http or https URL"}
	}
	return nil
}

// planFor is the plan a new run of flow starts on: a pinned version, else the saved
// file, else (no file here: workers elsewhere published it) the current version.
func (s *Server) planFor(ctx context.Context, flow, version string) (*flows.Plan, error) {
	return planFor(ctx, s.library, s.runs(), flow, version)
}

// planFor is Server.planFor for anything that runs library flows (the MCP server too).
// A request that names an environment (environments.go) starts on its version.
func planFor(ctx context.Context, lib *store.Library, eng runEngine, flow, version string) (*flows.Plan, error) {
	if version != "" {
		return eng.Plan(ctx, flow, version)
	}
	if env := environmentFrom(ctx); env != "" {
		return eng.EnvPlan(ctx, flow, env)
	}
	doc, err := lib.Load(flow)
	if err == nil {
		plan, _, cerr := eng.Compile(doc) // the engine keeps compiled documents by their hash
		if cerr == nil {
			return plan, nil
		}
		// The file has errors: its last good version keeps running, if there is one.
		if p, perr := eng.CurrentPlan(ctx, flow); perr == nil {
			return p, nil
		}
		return nil, cerr
	}
	if flows.ErrorCode(err) != flows.NotFound {
		return nil, err
	}
	if draft, derr := lib.LoadDraft(flow); derr == nil {
		return nil, draftOnly(eng, flow, draft)
	}
	p, perr := eng.CurrentPlan(ctx, flow)
	if flows.ErrorCode(perr) == flows.NotFound {
		return nil, &flows.Error{Code: flows.NotFound, Flow: flow, Message: "no such flow"}
	}
	return p, perr
}

// draftOnly is the error of running a flow that has only a draft: nothing valid was ever
// saved, so there is no version to run.
func draftOnly(c compiler, flow string, draft []byte) error {
	_, probs, _ := c.Compile(draft)
	why := "it is a draft that has never been saved valid"
	if errs := probs.Errors(); len(errs) > 0 {
		why = fmt.Sprintf("it is a draft with %d %s (%s) and has never been saved valid", len(errs), pluralWord(len(errs), "problem"), errs[0])
	}
	return &flows.Error{Code: flows.Invalid, Flow: flow, Message: fmt.Sprintf("flow %q cannot run: %s; fix it in the editor and save it", flow, why)}
}

func pluralWord(n int, w string) string {
	if n == 1 {
		return w
	}
	return w + "s"
}

// startRun starts a run and answers 202 at once; with ?wait=30s it answers 200 with the
// run if it finishes (or waits for a person) in time.
func (s *Server) startRun(c echo.Context) error {
	flow, err := flowParam(c)
	if err != nil {
		return err
	}
	wait, err := s.waitParam(c)
	if err != nil {
		return err
	}
	var req StartRequest
	if err := decodeRequest(c, &req); err != nil {
		return err
	}
	if err := checkWebhook(req.Webhook); err != nil {
		return err
	}
	ctx := c.Request().Context()
	env := environmentFrom(ctx)
	if env != "" && req.Version != "" {
		return &flows.Error{Code: flows.Invalid, Flow: flow, Path: "version", Message: fmt.Sprintf("name a version or an environment (%q), not both", env)}
	}
	plan, err := s.planFor(ctx, flow, req.Version)
	if err != nil {
		return err
	}
	id, err := s.runs().Start(ctx, plan, req.Input, engine.StartOptions{Webhook: req.Webhook, Pins: req.Pins, Environment: env})
	if err != nil {
		return err
	}
	return s.answerStarted(c, flow, id, wait)
}

func (s *Server) answerStarted(c echo.Context, flow, id string, wait time.Duration) error {
	loc := "/api/flows/" + flow + "/runs/" + id
	c.Response().Header().Set(echo.HeaderLocation, loc)
	if wait > 0 {
		ctx, cancel := context.WithTimeout(c.Request().Context(), wait)
		r, err := s.runs().Wait(ctx, flow, id)
		cancel()
		if err == nil {
			return c.JSON(http.StatusOK, s.viewRun(c.Request().Context(), r))
		}
		if c.Request().Context().Err() != nil {
			return c.Request().Context().Err()
		}
		if !errors.Is(err, context.DeadlineExceeded) {
			return err
		}
	}
	return c.JSON(http.StatusAccepted, Started{Run: id, Flow: flow, Status: store.StatusQueued, URL: loc})
}

// getRun answers a run; with ?wait=30s it first waits (at most that long) for the run
// to finish or wait for a person.
func (s *Server) getRun(c echo.Context) error {
	flow, err := flowParam(c)
	if err != nil {
		return err
	}
	wait, err := s.waitParam(c)
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	run := c.Param("run")
	if wait > 0 {
		wctx, cancel := context.WithTimeout(ctx, wait)
		_, err := s.runs().Wait(wctx, flow, run)
		cancel()
		if err != nil && !errors.Is(err, context.DeadlineExceeded) {
			return err
		}
	}
	info, err := s.runs().Info(ctx, flow, run)
	if err != nil {
		return err
	}
	v := s.viewRun(ctx, info.Run)
	v.StorageBytes = info.StorageBytes
	if sp, err := s.spendOf(ctx, flow, info.Run); err == nil {
		if sp.run.Tokens > 0 {
			v.Spend = &sp.run
		}
		v.Budget = sp.budget
		if sp.hasDay() {
			v.DaySpend = &sp.day
		}
	}
	v.WaitingForWorker = s.waitingForWorker(ctx, info.Run)
	v.NoWorker = len(v.WaitingForWorker) > 0
	return c.JSON(http.StatusOK, v)
}

func (s *Server) listRuns(c echo.Context) error {
	flow, err := flowParam(c)
	if err != nil {
		return err
	}
	q := engine.ListQuery{Status: c.QueryParam("status"), Version: c.QueryParam("version"), Trigger: c.QueryParam("trigger")}
	if q.Offset, err = intParam(c, "offset", 0); err != nil {
		return err
	}
	if q.Limit, err = intParam(c, "limit", 50); err != nil {
		return err
	}
	q.Limit = min(max(q.Limit, 1), 500)
	for _, p := range []struct {
		name string
		t    *time.Time
	}{{"since", &q.Since}, {"until", &q.Until}} {
		if v := c.QueryParam(p.name); v != "" {
			t, err := time.Parse(time.RFC3339, v)
			if err != nil {
				return &flows.Error{Code: flows.Invalid, Path: p.name, Message: fmt.Sprintf("%q is not an RFC 3339 time such as 2026-01-02T15:04:05Z", v)}
			}
			*p.t = t
		}
	}
	runs, total, err := s.runs().List(c.Request().Context(), flow, q)
	if err != nil {
		return err
	}
	out := RunList{Runs: make([]*RunView, 0, len(runs)), Total: total, Offset: q.Offset, Limit: q.Limit}
	for _, r := range runs {
		out.Runs = append(out.Runs, s.viewRun(c.Request().Context(), r))
	}
	if next := q.Offset + len(runs); int64(next) < total && len(runs) == q.Limit {
		out.NextOffset = &next
	}
	return c.JSON(http.StatusOK, out)
}

func intParam(c echo.Context, name string, def int) (int, error) {
	v := c.QueryParam(name)
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return 0, &flows.Error{Code: flows.Invalid, Path: name, Message: fmt.Sprintf("%q is not a whole number ≥ 0", v)}
	}
	return n, nil
}

func (s *Server) cancelRun(c echo.Context) error {
	flow, err := flowParam(c)
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	if err := s.runs().Cancel(ctx, flow, c.Param("run")); err != nil {
		return err
	}
	info, err := s.runs().Info(ctx, flow, c.Param("run"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, s.viewRun(ctx, info.Run))
}

// ResumeRequest is the body of POST .../resume: the decision for the approval the run
// waits at, e.g. {"decision": "approve"} or {"decision": "reject", "comment": "no"}, or
// {"decision": "approve", "value": {...edited state keys...}}. "node" names the approval
// when the run waits at several.
type ResumeRequest struct {
	Node string `json:"node"`
}

func (s *Server) resumeRun(c echo.Context) error {
	flow, err := flowParam(c)
	if err != nil {
		return err
	}
	b, err := readBody(c)
	if err != nil {
		return err
	}
	var fields map[string]json.RawMessage
	if len(b) > 0 {
		if err := json.Unmarshal(b, &fields); err != nil {
			return &flows.Error{Code: flows.Invalid, Message: `the body is a decision object such as {"decision": "approve"}`}
		}
	}
	node := c.QueryParam("node")
	if raw, ok := fields["node"]; ok {
		if err := json.Unmarshal(raw, &node); err != nil {
			return &flows.Error{Code: flows.Invalid, Path: "node", Message: "must be a string"}
		}
		delete(fields, "node")
	}
	ctx := c.Request().Context()
	if err := s.checkApprover(c, flow, c.Param("run"), node); err != nil {
		return err
	}
	if fields == nil {
		fields = map[string]json.RawMessage{}
	}
	if p := principalOf(c); p.person != nil || p.key != nil || fields["by"] == nil {
		// Who answered is who the request acts as, never what a person's request says
		// (approvals name people); SLUICE_TOKEN and the single-person mode may say it.
		fields["by"], _ = json.Marshal(p.who())
	}
	decision, _ := json.Marshal(fields)
	if err := s.runs().Resume(ctx, flow, c.Param("run"), node, decision); err != nil {
		return err
	}
	info, err := s.runs().Info(ctx, flow, c.Param("run"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, s.viewRun(ctx, info.Run))
}

// ForkRequest is the body of POST .../fork.
type ForkRequest struct {
	// Checkpoint is the checkpoint to start from (required).
	Checkpoint string `json:"checkpoint"`
	// Patch is a JSON merge patch (RFC 7386) applied to that checkpoint's state.
	Patch json.RawMessage `json:"patch"`
	// Current runs the fork on the flow's current version instead of the original's.
	Current bool `json:"current"`
	// Webhook is not inherited; set it to have the fork's result sent.
}

func (s *Server) forkRun(c echo.Context) error {
	flow, err := flowParam(c)
	if err != nil {
		return err
	}
	wait, err := s.waitParam(c)
	if err != nil {
		return err
	}
	var req ForkRequest
	if err := decodeRequest(c, &req); err != nil {
		return err
	}
	if req.Checkpoint == "" {
		return &flows.Error{Code: flows.Invalid, Path: "checkpoint", Message: "name the checkpoint to fork from"}
	}
	if string(req.Patch) == "null" {
		req.Patch = nil
	}
	id, err := s.runs().Fork(c.Request().Context(), flow, c.Param("run"), req.Checkpoint, req.Patch, engine.ForkOptions{Current: req.Current})
	if err != nil {
		return err
	}
	return s.answerStarted(c, flow, id, wait)
}

// checkApprover refuses an answer to an approval whose role (the node's "role"
// parameter, docs/teams.md) the request's principal does not hold in the workspace.
func (s *Server) checkApprover(c echo.Context, flow, run, node string) error {
	ctx := c.Request().Context()
	info, err := s.runs().Info(ctx, flow, run)
	if err != nil {
		return err
	}
	plan, err := s.planFor(ctx, flow, info.Run.Version)
	if err != nil || plan.Doc == nil {
		return nil // the engine says what is wrong with the run
	}
	role := principalOf(c).role(workspaceOf(c))
	for _, n := range plan.Doc.Nodes {
		if n.Type != "approval" || (node != "" && n.ID != node) {
			continue
		}
		if node == "" && info.Run.Waits != nil {
			if _, waiting := info.Run.Waits[n.ID]; !waiting {
				continue
			}
		}
		var p struct {
			Role string `json:"role"`
		}
		_ = json.Unmarshal(n.Params, &p)
		need, err := teams.ParseRole(p.Role)
		if err != nil {
			continue // the default: the route's own (operator)
		}
		if !role.AtLeast(need) {
			c.Response().Header().Set("Sluice-Required-Role", string(need))
			return &flows.Error{Code: flows.Forbidden, Node: n.ID, Message: fmt.Sprintf("approval %s needs the %s role to answer; you are a %s", n.ID, need, role)}
		}
	}
	return nil
}
