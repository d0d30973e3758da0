package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/sluicehq/sluice/flows"
	"github.com/sluicehq/sluice/flows/engine"
	"github.com/sluicehq/sluice/store"
)

// openShared opens an engine on the Redis that flows' versions and schedules live in
// (the embedded one would be empty); close closes its Redis.
func openShared(ctx context.Context, cmd, url string, cf *componentFlags) (e *engine.Engine, close func(), err error) {
	if url == "" {
		return nil, nil, &exitError{code: 2, err: fmt.Errorf("%s needs the shared Redis: set REDIS_URL or --redis", cmd)}
	}
	env, err := cf.env(nil)
	if err != nil {
		return nil, nil, err
	}
	rdb, err := store.Open(ctx, store.Options{URL: url})
	if err != nil {
		return nil, nil, err
	}
	return newEngine(rdb, env, engine.Options{Logger: discardLog()}), func() { rdb.Close() }, nil
}

// addEnvFlag registers --env: the environment whose version "current" names, as a
// request's environment does in the API (docs/environments.md). SLUICE_ENV sets it as
// SLUICE_URL and SLUICE_WORKSPACE set the others.
func addEnvFlag(fs *flag.FlagSet) *string {
	return fs.String("env", envOr("SLUICE_ENV", ""), `the environment whose version "current" names, e.g. prod (env SLUICE_ENV); empty: the flow's current version, dev's (where saving lands)`)
}

// checkEnv refuses what cannot be an environment's name (exit 2).
func checkEnv(env string) error {
	if env != "" && !flows.ValidID(env) {
		return &exitError{code: 2, err: fmt.Errorf("--env %q is not an environment name", env)}
	}
	return nil
}

// currentPlan is the plan "current" names: environment env's version of flow, or, with
// no environment, the flow's current version (the first environment's), as before
// environments.
func currentPlan(ctx context.Context, e *engine.Engine, flow, env string) (*flows.Plan, error) {
	if env == "" {
		return e.CurrentPlan(ctx, flow)
	}
	return e.EnvPlan(ctx, flow, env)
}

func cmdVersions(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("versions", flag.ContinueOnError)
	fs.SetOutput(stderr)
	redisURL := fs.String("redis", envOr("REDIS_URL", ""), "Redis URL (required; env REDIS_URL)")
	asJSON := fs.Bool("json", false, "print JSON")
	envName := addEnvFlag(fs)
	cf := addComponentFlags(fs)
	fs.Usage = func() {
		fmt.Fprint(stderr, `Usage: sluice versions [flags] FLOW [VERSION [OTHER]]

  sluice versions FLOW               lists the flow's versions, newest first
  sluice versions FLOW VERSION       prints that version's flow document
  sluice versions FLOW VERSION OTHER prints what changed from VERSION to OTHER
                                     ("current" names the current version; with
                                     --env prod, prod's)

A version is its 64 hex digits or a unique prefix of at least 7. See docs/versions.md.

Flags:
`)
		fs.PrintDefaults()
	}
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if len(pos) < 1 || len(pos) > 3 {
		fs.Usage()
		return &exitError{code: 2, err: errors.New("versions: give a flow id")}
	}
	if err := checkEnv(*envName); err != nil {
		return err
	}
	e, closeRedis, err := openShared(ctx, "versions", *redisURL, cf)
	if err != nil {
		return err
	}
	defer closeRedis()
	flow := pos[0]
	switch len(pos) {
	case 1:
		h, err := e.Versions(ctx, flow)
		if err != nil {
			return err
		}
		if *asJSON {
			return printJSON(stdout, h)
		}
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "VERSION\tSAVED\tRUNS\tOK\tFAILED\tNOTE")
		for _, v := range h.Versions {
			saved := "—"
			if !v.SavedAt.IsZero() {
				saved = v.SavedAt.Local().Format("2006-01-02 15:04:05")
			}
			mark := ""
			if v.Current {
				mark = " (current)"
			}
			fmt.Fprintf(tw, "%.12s%s\t%s\t%d\t%d\t%d\t%s\n", v.VersionInfo.Version, mark, saved, v.Stats.Runs, v.Stats.Succeeded, v.Stats.Failed, v.Message)
		}
		fmt.Fprintf(tw, "(run figures from the flow's newest %d runs)\n", h.RunsLooked)
		return tw.Flush()
	case 2:
		v, err := e.Version(ctx, flow, pos[1])
		if err != nil {
			return err
		}
		if *asJSON {
			return printJSON(stdout, v)
		}
		_, err = stdout.Write(append(v.Document, '\n'))
		return err
	}
	from, to := pos[1], pos[2]
	if to == "current" {
		p, err := currentPlan(ctx, e, flow, *envName)
		if err != nil {
			return err
		}
		to = p.Version
	}
	d, err := e.DiffVersions(ctx, flow, from, to)
	if err != nil {
		return err
	}
	if *asJSON {
		return printJSON(stdout, d)
	}
	printDiff(stdout, d)
	return nil
}

func printDiff(w io.Writer, d *engine.VersionDiff) {
	fmt.Fprintf(w, "from %.12s to %.12s\n", d.From, d.To)
	if d.Empty() {
		fmt.Fprintln(w, "no changes (positions aside)")
		return
	}
	val := func(v any) string {
		b, _ := json.Marshal(v)
		if len(b) > 120 {
			return string(b[:119]) + "…"
		}
		return string(b)
	}
	change := func(indent string, c flows.ValueChange) {
		switch c.Op {
		case "add":
			fmt.Fprintf(w, "%s%s: + %s\n", indent, c.Path, val(c.To))
		case "remove":
			fmt.Fprintf(w, "%s%s: - %s\n", indent, c.Path, val(c.From))
		default:
			fmt.Fprintf(w, "%s%s: %s → %s\n", indent, c.Path, val(c.From), val(c.To))
		}
	}
	for _, c := range d.Flow {
		change("flow ", c)
	}
	for _, n := range d.NodesAdded {
		fmt.Fprintf(w, "+ node %s\n", n)
	}
	for _, n := range d.NodesRemoved {
		fmt.Fprintf(w, "- node %s\n", n)
	}
	for _, n := range d.NodesChanged {
		fmt.Fprintf(w, "~ node %s\n", n.Node)
		for _, c := range n.Changes {
			change("    ", c)
		}
	}
	for _, e := range d.EdgesAdded {
		fmt.Fprintf(w, "+ edge %s\n", e.Key())
	}
	for _, e := range d.EdgesRemoved {
		fmt.Fprintf(w, "- edge %s\n", e.Key())
	}
	for _, e := range d.EdgesChanged {
		fmt.Fprintf(w, "~ edge %s\n", e.To.Key())
		for _, c := range e.Changes {
			change("    ", c)
		}
	}
}

func cmdRollback(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("rollback", flag.ContinueOnError)
	fs.SetOutput(stderr)
	redisURL := fs.String("redis", envOr("REDIS_URL", ""), "Redis URL (required; env REDIS_URL)")
	dir := fs.String("flows", envOr("SLUICE_FLOWS", "./flows"), "directory of flow files: the flow's file there is rewritten with the version (env SLUICE_FLOWS)")
	message := fs.String("message", "", "a note for the version's history")
	cf := addComponentFlags(fs)
	fs.Usage = func() {
		fmt.Fprint(stderr, `Usage: sluice rollback [flags] FLOW VERSION

Makes an earlier version of a flow current again: new runs start on it, runs in flight
keep theirs. The flow's file in --flows is rewritten with that version, so that the
editor and workers started from the file agree. See docs/versions.md.

Flags:
`)
		fs.PrintDefaults()
	}
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 2 {
		fs.Usage()
		return &exitError{code: 2, err: errors.New("rollback: give a flow id and a version")}
	}
	e, closeRedis, err := openShared(ctx, "rollback", *redisURL, cf)
	if err != nil {
		return err
	}
	defer closeRedis()
	flow := pos[0]
	p, err := e.RollbackPlan(ctx, flow, pos[1])
	if err != nil {
		return err
	}
	lib := &store.Library{Dir: *dir}
	wrote := false
	if file, err := lib.Load(flow); err == nil {
		// The notes on the canvas stay, as the editor's rollback keeps them (docs/versions.md).
		draft, _ := lib.LoadDraft(flow)
		if err := lib.Save(flow, flows.KeepNotes(p.Source, draft, file)); err != nil {
			return err
		}
		wrote = true
	} else if flows.ErrorCode(err) != flows.NotFound {
		return err
	}
	// A rollback is a promotion into the first environment: the move and its record are
	// one step (engine.Promote).
	envs, err := e.Environments(ctx, store.WorkspaceOf(flow))
	if err != nil {
		return err
	}
	if _, err := e.Promote(ctx, flow, envs[0].Name, engine.PromoteOptions{Version: p.Version, By: cliUser(),
		Message: *message, Test: &store.PromotionTest{Gate: "skipped"}}); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "flow %s: version %.12s is current\n", flow, p.Version)
	if wrote {
		fmt.Fprintf(stdout, "wrote it to %s/%s.json\n", strings.TrimRight(*dir, "/"), flow)
	} else {
		fmt.Fprintf(stdout, "no %s.json in %s: no file written\n", flow, *dir)
	}
	return nil
}

func cmdSchedules(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("schedules", flag.ContinueOnError)
	fs.SetOutput(stderr)
	redisURL := fs.String("redis", envOr("REDIS_URL", ""), "Redis URL (required; env REDIS_URL)")
	next := fs.Int("next", 3, "how many next fire times to show")
	asJSON := fs.Bool("json", false, "print JSON")
	cf := addComponentFlags(fs)
	fs.Usage = func() {
		fmt.Fprint(stderr, `Usage: sluice schedules [flags] FLOW [pause|resume N]

  sluice schedules FLOW            lists the schedules that run: those of the last
                                   environment with a version of the flow (prod's once
                                   promoted, else dev's): next fire times, paused or
                                   not, recent runs
  sluice schedules FLOW pause N    pauses schedule N (0 is the first) in every process
  sluice schedules FLOW resume N   resumes it; ticks that passed meanwhile do not run

See docs/schedules.md.

Flags:
`)
		fs.PrintDefaults()
	}
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 && len(pos) != 3 {
		fs.Usage()
		return &exitError{code: 2, err: errors.New("schedules: give a flow id, and optionally pause or resume with a schedule number")}
	}
	e, closeRedis, err := openShared(ctx, "schedules", *redisURL, cf)
	if err != nil {
		return err
	}
	defer closeRedis()
	flow := pos[0]
	if len(pos) == 3 {
		var n int
		if _, err := fmt.Sscan(pos[2], &n); err != nil {
			return &exitError{code: 2, err: fmt.Errorf("schedules: %q is not a schedule number", pos[2])}
		}
		switch pos[1] {
		case "pause":
			err = e.PauseSchedule(ctx, flow, n)
		case "resume":
			err = e.ResumeSchedule(ctx, flow, n)
		default:
			return &exitError{code: 2, err: fmt.Errorf("schedules: %q: use pause or resume", pos[1])}
		}
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "flow %s: schedule %d %sd\n", flow, n, pos[1])
		return nil
	}
	version, list, err := e.Schedules(ctx, flow, *next, 5)
	if err != nil {
		return err
	}
	if *asJSON {
		return printJSON(stdout, map[string]any{"flow": flow, "version": version, "schedules": list})
	}
	if len(list) == 0 {
		fmt.Fprintf(stdout, "flow %s (version %.12s) has no schedules\n", flow, version)
		return nil
	}
	for _, s := range list {
		state := "on"
		switch {
		case !s.Enabled:
			state = "disabled in the flow"
		case s.Paused:
			state = "paused"
		}
		tz := s.Timezone
		if tz == "" {
			tz = "UTC"
		}
		fmt.Fprintf(stdout, "%d  %s (%s)  %s\n", s.Index, s.Cron, tz, state)
		for _, t := range s.Next {
			fmt.Fprintf(stdout, "   next %s\n", t.Local().Format(time.RFC1123))
		}
		for _, r := range s.Runs {
			fmt.Fprintf(stdout, "   run  %s  %s\n", r.ID, r.Status)
		}
	}
	return nil
}

func discardLog() *slog.Logger { return slog.New(slog.DiscardHandler) }

func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
