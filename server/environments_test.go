package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"html"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/sluicehq/sluice/flows/engine"
	"github.com/sluicehq/sluice/flows/nodes/llmtest"
	"github.com/sluicehq/sluice/server"
	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/storetest"
	"github.com/sluicehq/sluice/teams"
)

// envRun is a run as the API answers it, with its version and environment.
type envRun struct {
	run
	Version     string `json:"version"`
	Environment string `json:"environment"`
	By          string `json:"by"`
}

func (a *api) getRun(flow, id string) envRun {
	a.t.Helper()
	var r envRun
	a.must(http.StatusOK, "GET", "/api/flows/"+flow+"/runs/"+id, nil).into(a.t, &r)
	return r
}

// startIn starts a run of flow through environment env (by header) and returns its id.
func (a *api) startIn(env, flow string, req any) string {
	a.t.Helper()
	var s server.Started
	a.must(http.StatusAccepted, "POST", "/api/flows/"+flow+"/runs", req, server.EnvironmentHeader, env).into(a.t, &s)
	return s.Run
}

// A run started on prod keeps prod's version while saving moves dev on: it waits for a
// person across the save, and finishes on what it started with; new runs through prod
// (by header, ?env= or the /env/prod path) still start on prod's version, and runs that
// name no environment start on the saved one, as before environments.
func TestARunStartedOnProdKeepsItsVersionWhileDevMovesOn(t *testing.T) {
	storetest.Each(t, func(t *testing.T, r *store.Redis) {
		a := newAPI(t, r)
		id, v1doc := a.flowDoc("approval", nil)
		var v1, v2 server.SavedFlow
		a.must(http.StatusCreated, "PUT", "/api/flows/"+id, v1doc).into(t, &v1)

		// Nothing in prod yet: a run through prod is refused, saying so.
		if e := a.do("POST", "/api/flows/"+id+"/runs", map[string]any{"input": map[string]any{"customer": "Ada"}}, server.EnvironmentHeader, "prod").errorBody(t); e.Status != 404 || !strings.Contains(e.Message, `no version in environment "prod"`) {
			t.Fatalf("run through an empty prod: %+v", e)
		}
		// Promote dev's version to prod (the one before it, by default).
		var p server.Promoted
		a.must(http.StatusOK, "POST", "/api/flows/"+id+"/environments/prod/promote", map[string]any{"message": "first release"}).into(t, &p)
		if p.Promotion.Version != v1.Version || p.Promotion.From != "dev" || p.Promotion.Environment != "prod" || p.Promotion.Test == nil || p.Promotion.Test.Gate != "no cases" {
			t.Fatalf("promotion = %+v", p.Promotion)
		}

		inFlight := a.startIn("prod", id, map[string]any{"input": map[string]any{"customer": "Ada"}})
		if got := a.settle(id, inFlight); got.Status != store.StatusWaiting {
			t.Fatalf("the prod run is %s, want waiting", got.Status)
		}

		// dev moves on: a save changes the reply.
		var d map[string]any
		json.Unmarshal(v1doc, &d)
		d["nodes"].([]any)[1].(map[string]any)["params"] = map[string]any{"expr": `{reply: ("Hi " + .customer + ", all fixed.")}`}
		v2doc, _ := json.Marshal(d)
		a.must(http.StatusOK, "PUT", "/api/flows/"+id, v2doc).into(t, &v2)

		a.must(http.StatusOK, "POST", "/api/flows/"+id+"/runs/"+inFlight+"/resume", `{"decision": "approve"}`)
		done := a.settle(id, inFlight)
		if done.Status != store.StatusSucceeded || !strings.Contains(string(done.Output), "Dear Ada, your ticket is solved.") {
			t.Fatalf("the prod run finished %s with %s, want v1's reply", done.Status, done.Output)
		}
		if got := a.getRun(id, inFlight); got.Version != v1.Version || got.Environment != "prod" {
			t.Errorf("the prod run has version %.12s in %q, want %.12s in prod", got.Version, got.Environment, v1.Version)
		}

		input := map[string]any{"input": map[string]any{"customer": "Bo"}}
		versionOf := func(how string, header ...string) (string, string) {
			t.Helper()
			path := "/api/flows/" + id + "/runs"
			if q, ok := strings.CutPrefix(how, "?"); ok {
				path += "?" + q
			} else if how != "" {
				path = how + path
			}
			var s server.Started
			a.must(http.StatusAccepted, "POST", path, input, header...).into(t, &s)
			got := a.getRun(id, s.Run)
			return got.Version, got.Environment
		}
		for _, c := range []struct {
			how     string
			header  []string
			version string
			env     string
		}{
			{"", []string{server.EnvironmentHeader, "prod"}, v1.Version, "prod"},
			{"?env=prod", nil, v1.Version, "prod"},
			{"/env/prod", nil, v1.Version, "prod"},
			{"?env=dev", nil, v2.Version, "dev"},
			{"", nil, v2.Version, ""},
		} {
			if v, env := versionOf(c.how, c.header...); v != c.version || env != c.env {
				t.Errorf("a run started with %q %v: version %.12s in %q, want %.12s in %q", c.how, c.header, v, env, c.version, c.env)
			}
		}
		a.must(http.StatusNotFound, "POST", "/api/flows/"+id+"/runs?env=staging", input)
		a.must(http.StatusBadRequest, "POST", "/api/flows/"+id+"/runs?env=prod", map[string]any{"version": v2.Version})

		var envs server.FlowEnvironments
		a.must(http.StatusOK, "GET", "/api/flows/"+id+"/environments", nil).into(t, &envs)
		if len(envs.Environments) != 2 || envs.Environments[0].Version != v2.Version || envs.Environments[1].Version != v1.Version ||
			!envs.Environments[1].Schedules || envs.Environments[1].Last == nil || envs.Environments[1].Last.Message != "first release" {
			t.Errorf("environments = %+v", envs.Environments)
		}
		var h engine.VersionHistory
		a.must(http.StatusOK, "GET", "/api/flows/"+id+"/versions", nil).into(t, &h)
		for _, v := range h.Versions {
			want := map[string]string{v1.Version: "prod", v2.Version: "dev"}[v.VersionInfo.Version]
			if strings.Join(v.Environments, ",") != want {
				t.Errorf("history: version %.12s is in %v, want %s", v.VersionInfo.Version, v.Environments, want)
			}
		}
	})
}

// The gate: a flow's cases run on the version being promoted to a gated environment;
// when one fails the promotion is refused (409) naming the failing cases, the
// environment stays where it was, the failed test is the version's last result and the
// refusal is in the audit log. A version whose cases pass is promoted, and the
// promotion records the result.
func TestAPromotionWhoseGateFailsIsRefusedNamingTheFailingCases(t *testing.T) {
	a := newAPI(t, storetest.Real(t))
	id, v1doc := a.flowDoc("linear", nil)
	var v1, v2 server.SavedFlow
	a.must(http.StatusCreated, "PUT", "/api/flows/"+id, v1doc).into(t, &v1)
	cases := `{"sluice_cases": 1, "flow": "` + id + `", "cases": [
		{"id": "greets-ada", "input": {"name": "Ada"}, "expect": [{"equals": {"greeting": "HELLO, ADA!"}}]},
		{"id": "greets-bo", "input": {"name": "Bo"}, "expect": [{"path": ".greeting", "contains": "BO"}]},
		{"id": "needs-a-name", "input": {}, "expect": [{"succeeds": false}]}]}`
	a.must(http.StatusOK, "PUT", "/api/flows/"+id+"/cases", cases)

	var ok server.Promoted
	a.must(http.StatusOK, "POST", "/api/flows/"+id+"/environments/prod/promote", nil).into(t, &ok)
	if tr := ok.Promotion.Test; tr == nil || tr.Gate != "passed" || tr.Cases != 3 || tr.Passed != 3 || ok.Report == nil || ok.Report.Passed != 3 {
		t.Fatalf("the passing promotion recorded %+v (report %+v)", ok.Promotion.Test, ok.Report)
	}

	// v2 stops shouting: two cases fail on it.
	var d map[string]any
	json.Unmarshal(v1doc, &d)
	d["nodes"].([]any)[2].(map[string]any)["params"] = map[string]any{"expr": "{greeting}"}
	v2doc, _ := json.Marshal(d)
	a.must(http.StatusOK, "PUT", "/api/flows/"+id, v2doc).into(t, &v2)

	r := a.do("POST", "/api/flows/"+id+"/environments/prod/promote", map[string]any{"version": v2.Version[:12]})
	e := r.errorBody(t)
	if r.status != http.StatusConflict || e.Path != "cases" || !strings.Contains(e.Message, "2 of 3 test cases fail: greets-ada, greets-bo") {
		t.Fatalf("the failing promotion answered %d %+v", r.status, e)
	}
	var envs server.FlowEnvironments
	a.must(http.StatusOK, "GET", "/api/flows/"+id+"/environments", nil).into(t, &envs)
	if envs.Environments[1].Version != v1.Version {
		t.Errorf("prod moved to %.12s after a refused promotion; want it to stay at %.12s", envs.Environments[1].Version, v1.Version)
	}
	var last struct {
		Failed  int      `json:"failed"`
		Failing []string `json:"failing"`
	}
	a.must(http.StatusOK, "GET", "/api/flows/"+id+"/tests/"+v2.Version, nil).into(t, &last)
	if last.Failed != 2 || strings.Join(last.Failing, ",") != "greets-ada,greets-bo" {
		t.Errorf("v2's last test result: %+v", last)
	}
	var proms server.PromotionList
	a.must(http.StatusOK, "GET", "/api/flows/"+id+"/promotions", nil).into(t, &proms)
	if len(proms.Promotions) != 1 || proms.Promotions[0].Version != v1.Version || proms.Promotions[0].By != "SLUICE_TOKEN" || proms.Promotions[0].At.IsZero() {
		t.Errorf("promotions = %+v, want the one of v1", proms.Promotions)
	}
	audit := a.must(http.StatusOK, "GET", "/api/audit", nil).String()
	if !strings.Contains(audit, `"flow.promote.refused"`) || !strings.Contains(audit, "failing greets-ada, greets-bo") || !strings.Contains(audit, `"flow.promote"`) {
		t.Errorf("the audit log lacks the promotions: %s", audit)
	}

	// Rollback is promoting an older version: back to v1 in dev rewrites the file.
	var back server.Promoted
	a.must(http.StatusOK, "POST", "/api/flows/"+id+"/environments/dev/promote", map[string]any{"version": v1.Version}).into(t, &back)
	if !back.FileWritten || back.Promotion.Previous != v2.Version {
		t.Errorf("promoting v1 into dev: %+v", back)
	}
	var h engine.VersionHistory
	a.must(http.StatusOK, "GET", "/api/flows/"+id+"/versions", nil).into(t, &h)
	if h.Current != v1.Version {
		t.Errorf("the current version is %.12s after promoting v1 into dev, want v1", h.Current)
	}
	if doc := a.must(http.StatusOK, "GET", "/api/flows/"+id, nil).String(); !strings.Contains(doc, "ascii_upcase") {
		t.Errorf("the saved file is not v1's after promoting it into dev: %s", doc)
	}
}

// Promoting into an environment needs its role: an owner may make prod need the owner
// role, and an editor is then refused (403, naming the role) while dev stays theirs.
func TestPromotingToAnEnvironmentNeedsItsRole(t *testing.T) {
	a := newAPI(t, storetest.Embedded(t))
	fid := storetest.FlowID(t)
	ws := "w" + fid[len(fid)-8:] // a workspace of the test's own: environments are per workspace
	t.Cleanup(func() { a.r.Client.Del(context.Background(), "sluice:environments:"+ws) })
	a.workspace(ws)
	a.must(http.StatusOK, "PUT", "/api/environments", map[string]any{"environments": []map[string]any{
		{"name": "dev"}, {"name": "staging", "role": "operator"}, {"name": "prod", "gate": true, "require_cases": true, "role": "owner"}}},
		server.WorkspaceHeader, ws)
	a.person("ed@example.com", "password-ed", map[string]teams.Role{ws: teams.Editor})
	b := a.browser()
	b.signin("ed@example.com", "password-ed")

	id, doc := a.flowDoc("linear", nil)
	a.must(http.StatusCreated, "PUT", "/api/flows/"+id, doc, server.WorkspaceHeader, ws)
	as := func(path string, body any) res {
		return a.do("POST", path, body, "Authorization", "", "Cookie", b.cookie(), server.WorkspaceHeader, ws)
	}
	if r := as("/api/flows/"+id+"/environments/staging/promote", nil); r.status != http.StatusOK {
		t.Fatalf("an editor promoting to staging (operator): %d %s", r.status, r.body)
	}
	r := as("/api/flows/"+id+"/environments/prod/promote", nil)
	if r.status != http.StatusForbidden || r.header.Get("Sluice-Required-Role") != "owner" || !strings.Contains(r.String(), "needs the owner role") {
		t.Fatalf("an editor promoting to prod (owner): %d %s", r.status, r.body)
	}
	// The owner is refused too, by the gate this time: prod needs cases, the flow has none.
	r = a.do("POST", "/api/flows/"+id+"/environments/prod/promote", nil, server.WorkspaceHeader, ws)
	if r.status != http.StatusConflict || !strings.Contains(r.errorBody(t).Message, "needs test cases") {
		t.Fatalf("promoting a flow without cases to prod (require_cases): %d %s", r.status, r.body)
	}
	var list server.EnvironmentList
	a.must(http.StatusOK, "GET", "/api/environments", nil, server.WorkspaceHeader, ws).into(t, &list)
	if len(list.Environments) != 3 || list.Environments[2].Role != "owner" {
		t.Errorf("environments = %+v", list.Environments)
	}
	for _, bad := range []string{`{"environments": []}`, `{"environments": [{"name": "dev", "gate": true}]}`,
		`{"environments": [{"name": "dev"}, {"name": "dev"}]}`, `{"environments": [{"name": "Prod!"}]}`, `{"environments": [{"name": "dev"}, {"name": "p", "role": "viewer"}]}`} {
		if r := a.do("PUT", "/api/environments", bad, server.WorkspaceHeader, ws); r.status != http.StatusBadRequest {
			t.Errorf("PUT %s: %d, want 400", bad, r.status)
		}
	}
}

// Webhook ingress follows its environment: a delivery to /env/prod/hooks/F (or with
// ?env=prod) starts prod's version, one with no environment the saved one; the same
// Idempotency-Key delivered to two environments starts a run in each.
func TestWebhooksFollowTheirEnvironment(t *testing.T) {
	storetest.Each(t, func(t *testing.T, r *store.Redis) {
		const secret = "hook-secret-env-5e1"
		a := newAPI(t, r, func(c *server.Config, _ *server.Deps) { c.HookSecret = func(string) string { return secret } })
		id, v1doc := a.flowDoc("linear", nil)
		var v1, v2 server.SavedFlow
		a.must(http.StatusCreated, "PUT", "/api/flows/"+id, v1doc).into(t, &v1)
		a.must(http.StatusOK, "POST", "/api/flows/"+id+"/environments/prod/promote", nil)
		var d map[string]any
		json.Unmarshal(v1doc, &d)
		d["nodes"].([]any)[2].(map[string]any)["params"] = map[string]any{"expr": "{greeting: (.greeting + \" (v2)\")}"}
		v2doc, _ := json.Marshal(d)
		a.must(http.StatusOK, "PUT", "/api/flows/"+id, v2doc).into(t, &v2)

		body := `{"name": "Hook"}`
		for _, c := range []struct {
			path, key, version, env, output string
		}{
			{"/env/prod/hooks/" + id, "evt-1", v1.Version, "prod", `{"greeting":"HELLO, HOOK!"}`},
			{"/hooks/" + id + "?env=prod", "evt-2", v1.Version, "prod", `{"greeting":"HELLO, HOOK!"}`},
			{"/hooks/" + id, "evt-1", v2.Version, "", `{"greeting":"Hello, Hook! (v2)"}`},
			{"/env/dev/hooks/" + id, "evt-1", v2.Version, "dev", `{"greeting":"Hello, Hook! (v2)"}`},
		} {
			var s server.Started
			a.must(http.StatusAccepted, "POST", c.path, body, "Authorization", "Bearer "+secret, "Idempotency-Key", c.key).into(t, &s)
			got := a.settle(id, s.Run)
			info := a.getRun(id, s.Run)
			if string(got.Output) != c.output || info.Version != c.version || info.Environment != c.env {
				t.Errorf("POST %s: output %s, version %.12s in %q; want %s from %.12s in %q", c.path, got.Output, info.Version, info.Environment, c.output, c.version, c.env)
			}
		}
		a.must(http.StatusNotFound, "POST", "/env/staging/hooks/"+id, body, "Authorization", "Bearer "+secret)
	})
}

// /v1 and /mcp follow their environment: an OpenAI client whose base URL is
// /env/prod/v1 and an MCP client connected to /env/prod/mcp run prod's version; the
// same clients without an environment run the saved one.
func TestOpenAIAndMCPClientsFollowTheirEnvironment(t *testing.T) {
	model := llmtest.New(t)
	model.Respond(func(r llmtest.Request) llmtest.Reply {
		return llmtest.Reply{Content: fmt.Sprint("system said: ", r.Messages[0].Content)}
	})
	a := newAPIWith(t, storetest.Real(t), model.Env(0))
	id, v1doc := a.flowDoc(chatFlow, mcpOn)
	a.must(http.StatusCreated, "PUT", "/api/flows/"+id, v1doc)
	a.must(http.StatusOK, "POST", "/api/flows/"+id+"/environments/prod/promote", nil)
	a.must(http.StatusOK, "PUT", "/api/flows/"+id, strings.Replace(string(v1doc), "You are a support desk.", "You are a pirate.", 1))

	ctx := context.Background()
	ask := func(base string) string {
		c := openai.NewClient(option.WithBaseURL(a.base+base), option.WithAPIKey(a.token), option.WithMaxRetries(0))
		res, err := c.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: id,
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}})
		if err != nil {
			t.Fatalf("%s: %v", base, err)
		}
		return res.Choices[0].Message.Content
	}
	if got := ask("/env/prod/v1/"); !strings.Contains(got, "support desk") {
		t.Errorf("/env/prod/v1 answered %q, want prod's prompt", got)
	}
	if got := ask("/v1/"); !strings.Contains(got, "pirate") {
		t.Errorf("/v1 answered %q, want the saved prompt", got)
	}

	call := func(endpoint string) string {
		c := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil)
		s, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: a.base + endpoint,
			HTTPClient: &http.Client{Transport: bearer{a.token}}, MaxRetries: -1}, nil)
		if err != nil {
			t.Fatalf("%s: %v", endpoint, err)
		}
		defer s.Close()
		res, err := s.CallTool(ctx, &mcp.CallToolParams{Name: id, Arguments: map[string]any{"messages": []any{map[string]any{"role": "user", "content": "hi"}}}})
		if err != nil || res.IsError {
			t.Fatalf("%s: %v %+v", endpoint, err, res)
		}
		return res.Content[0].(*mcp.TextContent).Text
	}
	if got := call("/env/prod/mcp"); !strings.Contains(got, "support desk") {
		t.Errorf("/env/prod/mcp answered %q, want prod's prompt", got)
	}
	if got := call("/mcp"); !strings.Contains(got, "pirate") {
		t.Errorf("/mcp answered %q, want the saved prompt", got)
	}
	a.must(http.StatusNotFound, "GET", "/env/staging/v1/models", nil)
}

// "current" through an environment is that environment's version for a fork, a replay
// and a version diff too, as for a new run: a fork or replay of a run on "current"
// through prod runs prod's version and records prod; without an environment it runs the
// saved one, as before environments.
func TestForkReplayAndDiffOnCurrentFollowTheEnvironment(t *testing.T) {
	storetest.Each(t, func(t *testing.T, r *store.Redis) {
		a := newAPI(t, r)
		id, v1doc := a.flowDoc("approval", nil)
		var v1, v2 server.SavedFlow
		a.must(http.StatusCreated, "PUT", "/api/flows/"+id, v1doc).into(t, &v1)
		a.must(http.StatusOK, "POST", "/api/flows/"+id+"/environments/prod/promote", map[string]any{})
		var d map[string]any
		json.Unmarshal(v1doc, &d)
		d["nodes"].([]any)[1].(map[string]any)["params"] = map[string]any{"expr": `{reply: ("Hi " + .customer + ", all fixed.")}`}
		v2doc, _ := json.Marshal(d)
		a.must(http.StatusOK, "PUT", "/api/flows/"+id, v2doc).into(t, &v2)

		base := "/api/flows/" + id + "/runs/"
		var s server.Started
		a.must(http.StatusAccepted, "POST", "/api/flows/"+id+"/runs", map[string]any{"input": map[string]any{"customer": "Ada"}}).into(t, &s)
		if got := a.settle(id, s.Run); got.Status != store.StatusWaiting {
			t.Fatalf("the run is %s, want waiting", got.Status)
		}
		var hist server.CheckpointList
		a.must(http.StatusOK, "GET", base+s.Run+"/checkpoints", nil).into(t, &hist)
		first := hist.Checkpoints[0].ID

		for _, c := range []struct {
			what, path string
			body       any
			header     []string
			version    string
			env        string
		}{
			{"a fork on current through ?env=prod", base + s.Run + "/fork?env=prod", map[string]any{"checkpoint": first, "current": true}, nil, v1.Version, "prod"},
			{"a fork on current through /env/prod", "/env/prod" + base + s.Run + "/fork", map[string]any{"checkpoint": first, "current": true}, nil, v1.Version, "prod"},
			{"a fork on current without an environment", base + s.Run + "/fork", map[string]any{"checkpoint": first, "current": true}, nil, v2.Version, ""},
			{"a fork on its original's version through prod", base + s.Run + "/fork?env=prod", map[string]any{"checkpoint": first}, nil, v2.Version, ""},
			{"a replay on current through the header", base + s.Run + "/replay", map[string]any{"version": "current"}, []string{server.EnvironmentHeader, "prod"}, v1.Version, "prod"},
			{"a replay from a checkpoint on current through prod", base + s.Run + "/replay?env=prod", map[string]any{"version": "current", "checkpoint": first}, nil, v1.Version, "prod"},
		} {
			var started server.Started
			a.must(http.StatusAccepted, "POST", c.path, c.body, c.header...).into(t, &started)
			if got := a.getRun(id, started.Run); got.Version != c.version || got.Environment != c.env {
				t.Errorf("%s: version %.12s in %q, want %.12s in %q", c.what, got.Version, got.Environment, c.version, c.env)
			}
		}

		var diff engine.VersionDiff
		a.must(http.StatusOK, "GET", "/api/flows/"+id+"/versions/"+v2.Version+"/diff?env=prod", nil).into(t, &diff)
		if diff.To != v1.Version {
			t.Errorf("a diff with the current version through prod compares with %.12s, want prod's %.12s", diff.To, v1.Version)
		}
		a.must(http.StatusOK, "GET", "/api/flows/"+id+"/versions/"+v1.Version+"/diff", nil).into(t, &diff)
		if diff.To != v2.Version {
			t.Errorf("a diff with the current version compares with %.12s, want the saved %.12s", diff.To, v2.Version)
		}
	})
}

// A bulk replay on "current" through prod runs prod's version and each replay records
// prod, as a single replay does (the job's replays recorded none); one made without an
// environment runs the saved version and records none.
func TestABulkReplayOnCurrentThroughAnEnvironmentRecordsIt(t *testing.T) {
	storetest.Each(t, func(t *testing.T, r *store.Redis) {
		a := newAPI(t, r)
		id, v1doc := a.flowDoc("linear", nil)
		var v1, v2 server.SavedFlow
		a.must(http.StatusCreated, "PUT", "/api/flows/"+id, v1doc).into(t, &v1)
		a.must(http.StatusOK, "POST", "/api/flows/"+id+"/environments/prod/promote", map[string]any{})
		a.must(http.StatusOK, "PUT", "/api/flows/"+id, strings.Replace(string(v1doc), "Hello, ", "Hi, ", 1)).into(t, &v2)
		orig := a.start(id, map[string]any{"input": map[string]any{"name": "Ada"}})
		a.settle(id, orig)

		ctx, stop := context.WithCancel(context.Background())
		defer stop()
		go func() {
			_ = a.e.NewBulkRunner(engine.BulkRunnerOptions{Every: 50 * time.Millisecond, Flows: func(context.Context) ([]string, error) { return []string{id}, nil }}).Run(ctx)
		}()
		body := map[string]any{"query": map[string]any{"since": "1h"}, "version": "current", "rate": 100, "by": "bulk-tester"}
		for _, c := range []struct {
			what, path string
			header     []string
			version    string
			env        string
		}{
			{"through ?env=prod", "/api/flows/" + id + "/replays?env=prod", nil, v1.Version, "prod"},
			{"through /env/prod", "/env/prod/api/flows/" + id + "/replays", nil, v1.Version, "prod"},
			{"through the header", "/api/flows/" + id + "/replays", []string{server.EnvironmentHeader, "prod"}, v1.Version, "prod"},
			{"without an environment", "/api/flows/" + id + "/replays", nil, v2.Version, ""},
		} {
			var made server.BulkCreated
			a.must(http.StatusAccepted, "POST", c.path, body, c.header...).into(t, &made)
			var rep engine.BulkReport
			eventually(t, 30*time.Second, func() string {
				a.must(http.StatusOK, "GET", "/api/flows/"+id+"/replays/"+made.Job, nil).into(t, &rep)
				if rep.Status != store.JobDone {
					return fmt.Sprintf("%s: job %s: %d of %d done", c.what, rep.Status, rep.Done, rep.Total)
				}
				return ""
			})
			if len(rep.Results) != 1 || rep.Results[0].Run != orig || rep.Results[0].Outcome != "done" {
				t.Fatalf("%s: the job's report is %+v, want the one run replayed", c.what, rep.Results)
			}
			if got := a.getRun(id, rep.Results[0].Replay); got.Version != c.version || got.Environment != c.env {
				t.Errorf("%s: the replay ran version %.12s in %q, want %.12s in %q", c.what, got.Version, got.Environment, c.version, c.env)
			} else if got.By != "bulk-tester" {
				t.Errorf("%s: the replay says it was started by %q, want who made the job", c.what, got.By)
			}
		}
	})
}

// The queues page's notes on where the steps of nodes no worker reads run are from the
// version the workers take their limits from (prod's, once promoted), not the saved
// one in dev, and the page says which version that is; a node only dev's version has
// takes dev's note, as it takes dev's limit.
func TestTheQueuesPageNotesAreForTheVersionTheWorkersServe(t *testing.T) {
	storetest.Each(t, func(t *testing.T, r *store.Redis) {
		a := newAPI(t, r)
		transform := func(id string) map[string]any {
			return map[string]any{"id": id, "type": "transform", "params": map[string]any{"expr": "{}"}}
		}
		node := func(id, typ string) map[string]any { return map[string]any{"id": id, "type": typ} }
		edge := func(from, to string) map[string]any { return map[string]any{"from": from, "to": to} }
		doc := func(id string, nodes []map[string]any, edges []map[string]any) []byte {
			b, _ := json.Marshal(map[string]any{"sluice": 1, "id": id, "nodes": nodes, "edges": edges})
			return b
		}
		// prod: in → t → out, t fused into in's step. dev: in starts t and u, each read
		// from its stream, and u → v, v fused into u's step.
		id, _ := a.flowDoc("linear", nil)
		var v1 server.SavedFlow
		a.must(http.StatusCreated, "PUT", "/api/flows/"+id, doc(id,
			[]map[string]any{node("in", "input"), transform("t"), node("out", "output")},
			[]map[string]any{edge("in", "t"), edge("t", "out")})).into(t, &v1)
		a.must(http.StatusOK, "POST", "/api/flows/"+id+"/environments/prod/promote", map[string]any{})
		a.must(http.StatusOK, "PUT", "/api/flows/"+id, doc(id,
			[]map[string]any{node("in", "input"), transform("t"), transform("u"), transform("v"), node("out", "output")},
			[]map[string]any{edge("in", "t"), edge("in", "u"), edge("u", "v"), edge("t", "out"), edge("v", "out")}))

		page := a.must(http.StatusOK, "GET", "/queues?flow="+id, nil, "Accept", "text/html").String()
		_, rest, ok := strings.Cut(page, `data-notes="`)
		if !ok {
			t.Fatalf("the queues page has no notes")
		}
		attr, _, _ := strings.Cut(rest, `"`)
		var notes map[string]string
		if err := json.Unmarshal([]byte(html.UnescapeString(attr)), &notes); err != nil {
			t.Fatalf("the notes are not JSON: %v: %s", err, attr)
		}
		if got := notes["t"]; !strings.HasPrefix(got, "runs inline after in:") {
			t.Errorf("t's note is %q, want prod's: it runs inline after in", got)
		}
		if got := notes["v"]; !strings.HasPrefix(got, "runs inline after u:") {
			t.Errorf("v (only dev's version has it) has the note %q, want dev's: it runs inline after u", got)
		}
		if _, ok := notes["u"]; ok {
			t.Errorf("u (only dev's version has it, read from its stream) has the note %q", notes["u"])
		}
		want := "Notes on nodes no worker reads are from version " + v1.Version[:12] + " (prod’s)"
		if !strings.Contains(page, want) {
			t.Errorf("the queues page does not say which version its notes are for (%q)", want)
		}
	})
}

// The runs list and a run's page say which environment's version a run started on; a
// run that named none shows none.
func TestTheRunPageAndTheRunsListShowTheEnvironment(t *testing.T) {
	storetest.Each(t, func(t *testing.T, r *store.Redis) {
		a := newAPI(t, r)
		id := a.saveFlow("linear", nil)
		a.must(http.StatusOK, "POST", "/api/flows/"+id+"/environments/prod/promote", map[string]any{})
		input := map[string]any{"input": map[string]any{"name": "Ada"}}
		prod := a.startIn("prod", id, input)
		var s server.Started
		a.must(http.StatusAccepted, "POST", "/api/flows/"+id+"/runs", input).into(t, &s)
		plain := s.Run
		a.settle(id, prod)
		a.settle(id, plain)

		list := a.must(http.StatusOK, "GET", "/runs?flow="+id, nil, "Accept", "text/html").String()
		row := func(run string) string {
			_, rest, ok := strings.Cut(list, `<tr data-run="`+run+`">`)
			if !ok {
				t.Fatalf("run %s is not in the runs list", run)
			}
			row, _, _ := strings.Cut(rest, "</tr>")
			return row
		}
		if got := row(prod); !strings.Contains(got, `data-env="prod"`) || !strings.Contains(got, ">prod</span>") {
			t.Errorf("the runs list's row of the prod run does not say prod: %s", got)
		}
		if got := row(plain); strings.Contains(got, "data-env=") {
			t.Errorf("the runs list's row of a run that named no environment shows one: %s", got)
		}

		page := a.must(http.StatusOK, "GET", "/flows/"+id+"/runs/"+prod, nil, "Accept", "text/html").String()
		if _, rest, ok := strings.Cut(page, `id="run-environment"`); !ok || !strings.Contains(rest[:min(len(rest), 200)], ">prod</span>") {
			t.Errorf("the prod run's page does not say it started on prod")
		}
		page = a.must(http.StatusOK, "GET", "/flows/"+id+"/runs/"+plain, nil, "Accept", "text/html").String()
		if strings.Contains(page, `id="run-environment"`) {
			t.Errorf("the page of a run that named no environment shows one")
		}
	})
}
