package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/user"
	"strings"
	"time"

	"github.com/sluicehq/sluice/flows"
	"github.com/sluicehq/sluice/flows/cases"
	"github.com/sluicehq/sluice/flows/engine"
	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/teams"
)

// promoteResult is what a promotion prints: the API's answer, or the same made here.
type promoteResult struct {
	Flow        string          `json:"flow"`
	Promotion   store.Promotion `json:"promotion"`
	Report      *cases.Report   `json:"report,omitempty"`
	FileWritten bool            `json:"file_written,omitempty"`
}

func cmdPromote(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("promote", flag.ContinueOnError)
	fs.SetOutput(stderr)
	to := fs.String("to", "", "the environment to promote to (required)")
	from := fs.String("from", "", "without VERSION: promote the version this environment has (default: the one before --to)")
	message := fs.String("message", "", "a note kept with the promotion")
	server := fs.String("server", envOr("SLUICE_URL", ""), "promote through this serve's API, e.g. https://sluice.example.com (env SLUICE_URL): its workers run the gate, roles and the audit log apply")
	token := fs.String("token", envOr("SLUICE_TOKEN", ""), "with --server: an API key or the token (env SLUICE_TOKEN)")
	workspace := fs.String("workspace", envOr("SLUICE_WORKSPACE", ""), "the flow's workspace (env SLUICE_WORKSPACE; an API key's own by default)")
	redisURL := fs.String("redis", envOr("REDIS_URL", ""), "without --server: promote directly on this Redis (env REDIS_URL)")
	dir := fs.String("flows", envOr("SLUICE_FLOWS", "./flows"), "without --server: the flows folder, with the flow's cases (FLOW.cases.json) for the gate and the file a promotion into the first environment rewrites (env SLUICE_FLOWS)")
	asJSON := fs.Bool("json", false, "print the promotion as JSON")
	cf := addComponentFlags(fs)
	fs.Usage = func() {
		fmt.Fprint(stderr, `Usage: sluice promote [flags] FLOW [VERSION] --to ENV

Points environment ENV at a version of FLOW (its 64 hex digits or a unique prefix of
at least 7; without VERSION, the version of --from, by default the environment before
ENV). An environment with a gate runs the flow's test cases on the version first and
refuses the promotion when one fails (exit 1, naming them). Rolling back is promoting
an older version. Runs in flight keep their version. See docs/environments.md.

With --server (SLUICE_URL) it asks that serve, as the key in SLUICE_TOKEN; without,
it works on REDIS_URL directly with the cases in --flows.

Flags:
`)
		fs.PrintDefaults()
	}
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if len(pos) < 1 || len(pos) > 2 || *to == "" {
		fs.Usage()
		return &exitError{code: 2, err: errors.New("promote: give a flow id, optionally a version, and --to ENV")}
	}
	if *from != "" && len(pos) == 2 {
		return &exitError{code: 2, err: errors.New("promote: give a version or --from, not both")}
	}
	req := struct {
		Version string `json:"version,omitempty"`
		From    string `json:"from,omitempty"`
		Message string `json:"message,omitempty"`
	}{From: *from, Message: *message}
	if len(pos) == 2 {
		req.Version = pos[1]
	}
	var out *promoteResult
	if *server != "" {
		out, err = promoteThrough(ctx, *server, *token, *workspace, pos[0], *to, req)
	} else {
		if *redisURL == "" {
			return &exitError{code: 2, err: errors.New("promote needs --server (SLUICE_URL) or the shared Redis (REDIS_URL or --redis)")}
		}
		env, eerr := cf.env(nil)
		if eerr != nil {
			return eerr
		}
		defer env.Close()
		rdb, oerr := store.Open(ctx, store.Options{URL: *redisURL})
		if oerr != nil {
			return oerr
		}
		defer rdb.Close()
		e := engine.New(rdb, registry(env), engine.Options{Logger: discardLog(), Partitions: envPartitions()})
		lib := &store.Library{Dir: *dir}
		attach(ctx, env, rdb, e, lib)
		flow := teams.Qualify(*workspace, pos[0])
		out, err = promoteOn(ctx, e, lib, flow, *to, engine.PromoteOptions{Version: req.Version, From: req.From, Message: req.Message, By: cliUser()}, env)
	}
	if err != nil {
		if flows.ErrorCode(err) == flows.Conflict {
			return &exitError{code: 1, err: err} // refused: the gate, or no cases where they are needed
		}
		return err
	}
	if *asJSON {
		return printJSON(stdout, out)
	}
	p := out.Promotion
	fmt.Fprintf(stdout, "flow %s: %s now runs version %.12s", out.Flow, p.Environment, p.Version)
	if p.Previous != "" && p.Previous != p.Version {
		fmt.Fprintf(stdout, " (was %.12s)", p.Previous)
	}
	fmt.Fprintln(stdout)
	if t := p.Test; t != nil {
		switch t.Gate {
		case "passed":
			fmt.Fprintf(stdout, "gate: %d of %d test cases passed\n", t.Passed, t.Cases)
		case "no cases":
			fmt.Fprintln(stdout, "gate: the flow has no test cases")
		}
	}
	if out.FileWritten {
		fmt.Fprintf(stdout, "wrote it to the flow's file\n")
	}
	return nil
}

// cliUser is who a promotion made from the command line records.
func cliUser() string {
	who := "cli"
	if u, err := user.Current(); err == nil && u.Username != "" {
		who += " (" + u.Username
		if h, err := os.Hostname(); err == nil {
			who += "@" + h
		}
		who += ")"
	}
	return who
}

// promoteThrough asks a serve to promote: POST /api/flows/FLOW/environments/ENV/promote.
func promoteThrough(ctx context.Context, base, token, ws, flow, env string, req any) (*promoteResult, error) {
	if token == "" {
		return nil, &exitError{code: 2, err: errors.New("promote --server needs an API key or the token: set SLUICE_TOKEN or --token")}
	}
	u, err := url.Parse(strings.TrimRight(base, "/"))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, &exitError{code: 2, err: fmt.Errorf("--server %q: give the serve's http(s) address", base)}
	}
	body, _ := json.Marshal(req)
	ctx, cancel := context.WithTimeout(ctx, 15*time.Minute) // the gate runs every case
	defer cancel()
	r, err := http.NewRequestWithContext(ctx, http.MethodPost, u.String()+"/api/flows/"+url.PathEscape(flow)+"/environments/"+url.PathEscape(env)+"/promote", bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("Authorization", "Bearer "+token)
	if ws != "" {
		r.Header.Set("Sluice-Workspace", ws)
	}
	resp, err := http.DefaultClient.Do(r)
	if err != nil {
		return nil, fmt.Errorf("promote through %s: %w", u.Host, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		var e struct {
			Error struct {
				Code    flows.Code `json:"code"`
				Message string     `json:"message"`
			} `json:"error"`
		}
		if json.Unmarshal(b, &e) != nil || e.Error.Message == "" {
			return nil, fmt.Errorf("%s answered %s", u.Host, resp.Status)
		}
		return nil, &flows.Error{Code: e.Error.Code, Flow: flow, Message: fmt.Sprintf("%s (%s)", e.Error.Message, resp.Status)}
	}
	var out promoteResult
	if err := json.Unmarshal(b, &out); err != nil {
		return nil, fmt.Errorf("%s answered what is not a promotion: %w", u.Host, err)
	}
	return &out, nil
}

// promoteOn promotes directly on Redis: the gate's cases run with in-process workers,
// and a promotion into the first environment rewrites the flow's file, as a rollback.
func promoteOn(ctx context.Context, e *engine.Engine, lib *store.Library, flow, env string, o engine.PromoteOptions, grader cases.Grader) (*promoteResult, error) {
	t, err := e.PromotionTarget(ctx, flow, env, o)
	if err != nil {
		return nil, err
	}
	o.Version, o.From = t.Version, t.From
	out := &promoteResult{Flow: flow}
	plan, err := e.RollbackPlan(ctx, flow, t.Version)
	if err != nil {
		return nil, err
	}
	switch {
	case t.First:
		if file, err := lib.Load(flow); err == nil {
			draft, _ := lib.LoadDraft(flow)
			if err := lib.Save(flow, flows.KeepNotes(plan.Source, draft, file)); err != nil {
				return nil, err
			}
			out.FileWritten = true
		} else if flows.ErrorCode(err) != flows.NotFound {
			return nil, err
		}
		// e.Promote below moves the first environment (the flow's current version).
		o.Test = &store.PromotionTest{Gate: "skipped"}
	case t.Environment.Gate:
		f, err := cases.Load(lib, plan)
		if err != nil {
			return nil, err
		}
		if f != nil {
			wctx, stop := context.WithCancel(ctx)
			w := e.NewWorker(engine.WorkerOptions{Flows: []string{flow}, Grace: 5 * time.Second})
			done := make(chan error, 1)
			go func() { done <- w.Run(wctx) }()
			defer func() { stop(); <-done }()
		}
		test, rep, err := cases.Gate(ctx, e, plan, f, cases.Options{Parallel: 4, Grader: grader})
		if err != nil {
			return nil, err
		}
		if rep != nil {
			if err := cases.Record(ctx, e.Redis(), rep); err != nil {
				return nil, err
			}
		}
		o.Test, out.Report = test, rep
		if test.Gate == "failed" {
			return out, &flows.Error{Code: flows.Conflict, Flow: flow, Path: "cases",
				Message: fmt.Sprintf("promotion of %.12s to %q refused: %d of %d test cases fail: %s", t.Version, env, len(test.Failing), test.Cases, strings.Join(test.Failing, ", "))}
		}
	default:
		o.Test = &store.PromotionTest{Gate: "off"}
	}
	p, err := e.Promote(ctx, flow, env, o)
	if err != nil {
		return nil, err
	}
	out.Promotion = *p
	return out, nil
}
