package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/sluicehq/sluice/flows"
	"github.com/sluicehq/sluice/flows/engine"
	"github.com/sluicehq/sluice/server"
)

// cmdReplay replays the runs of a flow a query chooses: first what it would replay and
// what those runs spent; with --yes as a bulk replay job, worked on here with progress
// until it ends (another sluice replay --job, or any serve, takes it over if this
// process stops).
func cmdReplay(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("replay", flag.ContinueOnError)
	fs.SetOutput(stderr)
	redisURL := fs.String("redis", envOr("REDIS_URL", ""), "Redis URL (required; env REDIS_URL)")
	status := fs.String("status", "", "replay runs with this status (failed, succeeded, waiting, ...)")
	runVersion := fs.String("run-version", "", "replay runs of this version (a hash or a prefix)")
	node := fs.String("node", "", "replay runs that failed at (or wait at) this node")
	errText := fs.String("error", "", "replay runs whose error has this text")
	trigger := fs.String("trigger", "", "replay runs started so (schedule, schedule:0, ...)")
	since := fs.String("since", "", "replay runs started since: a duration back (24h) or an RFC 3339 time")
	until := fs.String("until", "", "replay runs started until: a duration back or an RFC 3339 time")
	version := fs.String("version", "original", `the version the replays run on: "current", a version, or "original" (each run's own)`)
	envName := addEnvFlag(fs)
	reuse := fs.Bool("reuse", false, "give back the recorded output of nodes whose definition and input are unchanged")
	sameKeys := fs.Bool("same-keys", false, "send each original's idempotency keys with its replay's calls (receivers then do them once)")
	rate := fs.Float64("rate", 10, "replays started per second at most")
	conc := fs.Int("concurrency", 8, "replays running at once")
	yes := fs.Bool("yes", false, "replay them (without it, only say how many and what they spent)")
	job := fs.String("job", "", "work on (or take over) this bulk replay job instead of making one")
	asJSON := fs.Bool("json", false, "print the report as JSON")
	cf := addComponentFlags(fs)
	fs.Usage = func() {
		fmt.Fprint(stderr, `Usage: sluice replay [flags] FLOW

Replays the runs of FLOW that the flags choose, each as a new run linked to its original,
and reports each run's comparison with its replay. Workers (sluice serve or sluice
worker) run the replays. Without --yes it only says how many runs it would replay and
what they spent. See docs/replay.md.

  sluice replay FLOW --status failed --since 24h --version current --yes
  sluice replay FLOW --status failed --since 24h --version current --env prod --yes

Flags:
`)
		fs.PrintDefaults()
	}
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		fs.Usage()
		return &exitError{code: 2, err: errors.New("replay: give a flow id")}
	}
	if err := checkEnv(*envName); err != nil {
		return err
	}
	flow := pos[0]
	e, closeRedis, err := openShared(ctx, "replay", *redisURL, cf)
	if err != nil {
		return err
	}
	defer closeRedis()
	id := *job
	if id == "" {
		q, err := server.BulkQueryOf(server.RunQuery{Status: *status, Version: *runVersion, Node: *node, Error: *errText, Trigger: *trigger, Since: *since, Until: *until}, time.Now())
		if err != nil {
			return &exitError{code: 2, err: err}
		}
		est, _, err := e.EstimateBulk(ctx, flow, q)
		if err != nil {
			return err
		}
		fmt.Fprintf(stderr, "%d %s to replay; they spent %d tokens", est.Runs, pluralRuns(est.Runs), est.Tokens)
		if est.CostUSD > 0 {
			fmt.Fprintf(stderr, " ($%.4f)", est.CostUSD)
		}
		fmt.Fprintln(stderr, ", about what replaying them without reuse costs again")
		if !*yes || est.Runs == 0 {
			if est.Runs > 0 {
				fmt.Fprintln(stderr, "add --yes to replay them")
			}
			return nil
		}
		target, inEnv, err := replayTarget(ctx, e, flow, *version, *envName)
		if err != nil {
			return err
		}
		if id, _, err = e.CreateBulk(ctx, flow, engine.BulkSpec{Query: q, Reuse: *reuse, SameKeys: *sameKeys, Rate: *rate, Concurrency: *conc, By: "cli", Environment: inEnv}, target); err != nil {
			return err
		}
		fmt.Fprintf(stderr, "bulk replay job %s\n", id)
		if target != nil {
			fmt.Fprintf(stderr, "the replays run on version %.12s%s\n", target.Version, envSuffix(inEnv))
		}
	}
	done := make(chan error, 1)
	go func() {
		for {
			took, err := e.RunBulk(ctx, flow, id)
			if err != nil || took || ctx.Err() != nil {
				done <- err
				return
			}
			// Another process holds the job: follow it, and take it over if it stops.
			select {
			case <-ctx.Done():
			case <-time.After(2 * time.Second):
			}
			if rep, err := e.BulkReport(ctx, flow, id); err != nil || rep.Status != "running" {
				done <- err
				return
			}
		}
	}()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case err := <-done:
			rep, rerr := e.BulkReport(context.WithoutCancel(ctx), flow, id)
			if rerr != nil {
				return rerr
			}
			if *asJSON {
				if perr := printJSON(stdout, rep); perr != nil {
					return perr
				}
			} else {
				for _, r := range rep.Results {
					line := r.Summary
					if r.Reason != "" {
						line = r.Reason
					}
					fmt.Fprintf(stdout, "%s\t%s\t%s\t%s\n", r.Run, r.Replay, r.Outcome, line)
				}
			}
			fmt.Fprintf(stderr, "job %s %s: %d done, %d failed, %d skipped of %d\n", id, rep.Status, rep.Done, rep.Failed, rep.Skipped, rep.Total)
			if err != nil && !errors.Is(err, context.Canceled) {
				return err
			}
			if rep.Failed > 0 {
				return &exitError{code: 1, err: fmt.Errorf("%d %s failed again", rep.Failed, pluralRuns(rep.Failed))}
			}
			return nil
		case <-tick.C:
			if rep, err := e.BulkReport(ctx, flow, id); err == nil {
				fmt.Fprintf(stderr, "%d/%d replayed (%d failed, %d skipped)\n", rep.Done+rep.Failed+rep.Skipped, rep.Total, rep.Failed, rep.Skipped)
			}
		}
	}
}

// replayTarget is the plan a replay runs on from the CLI: "original" none (each run's
// own), "current" the version of environment env (none: the flow's current version),
// else that version; and the environment the replays record (env, for "current").
func replayTarget(ctx context.Context, e *engine.Engine, flow, v, env string) (*flows.Plan, string, error) {
	switch v {
	case "", "original":
		return nil, "", nil
	case "current":
		p, err := currentPlan(ctx, e, flow, env)
		return p, env, err
	}
	full, err := e.ResolveVersion(ctx, flow, v)
	if err != nil {
		return nil, "", err
	}
	p, err := e.Plan(ctx, flow, full)
	return p, "", err
}

// envSuffix is " in ENV", or nothing for no environment.
func envSuffix(env string) string {
	if env == "" {
		return ""
	}
	return " in " + env
}

func pluralRuns(n int) string {
	if n == 1 {
		return "run"
	}
	return "runs"
}
