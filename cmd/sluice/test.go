package main

import (
	"context"
	"encoding/json"
	"encoding/xml"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/sluicehq/sluice/flows"
	"github.com/sluicehq/sluice/flows/cases"
	"github.com/sluicehq/sluice/flows/engine"
	"github.com/sluicehq/sluice/store"
)

// testTarget is one flow file's cases and the versions they run on.
type testTarget struct {
	file    string
	plan    *flows.Plan // the version tested
	env     string      // the environment whose version plan is ("current" with --env)
	other   *flows.Plan // --compare's, or nil
	cases   *cases.File
	results []cases.Result
	compare []cases.Result
}

func cmdTest(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	fs.SetOutput(stderr)
	version := fs.String("version", "", "test this version of each flow (64 hex digits, a prefix of 7 or more, or current) from its history in Redis instead of the file")
	compare := fs.String("compare", "", "also run the cases on this version (as --version, or another flow file) and compare")
	envName := addEnvFlag(fs)
	junit := fs.String("junit", "", "write the results as JUnit XML to this file, for CI systems")
	parallel := fs.Int("parallel", 4, "how many cases run at once")
	only := fs.String("case", "", "run only these cases, comma-separated ids")
	redisURL := fs.String("redis", envOr("REDIS_URL", ""), "Redis URL; empty starts the embedded Redis (env REDIS_URL)")
	timeout := fs.Duration("timeout", 0, "give up after this long (0: no limit; each case has its own timeout, default 2m)")
	logLevel := fs.String("log-level", envOr("SLUICE_LOG_LEVEL", "warn"), "debug, info, warn or error")
	cf := addComponentFlags(fs)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "Usage: sluice test [flags] FLOW.json...\n\nRuns the test cases of each flow (FLOW.cases.json beside FLOW.json) with in-process\n"+
			"workers and prints a table: case, pass or fail, why, tokens, cost, milliseconds.\n"+
			"With --compare, runs them on a second version too and shows both side by side.\n"+
			"Exits 1 when a case of the tested version fails, 2 on bad arguments.\n\nFlags:")
		fs.PrintDefaults()
	}
	files, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if len(files) == 0 {
		fs.Usage()
		return &exitError{code: 2, err: errors.New("test takes one or more flow files")}
	}
	if *parallel < 1 {
		return &exitError{code: 2, err: fmt.Errorf("--parallel %d: want 1 or more", *parallel)}
	}
	if err := checkEnv(*envName); err != nil {
		return err
	}
	log, err := newLogger(stderr, *logLevel)
	if err != nil {
		return err
	}
	env, err := cf.env(log)
	if err != nil {
		return err
	}
	defer env.Close()
	rdb, err := store.Open(ctx, store.Options{URL: *redisURL})
	if err != nil {
		return err
	}
	defer rdb.Close()
	e := newEngine(rdb, env, engine.Options{Logger: log, Partitions: envPartitions()})
	attach(ctx, env, rdb, e, &store.Library{Dir: filepath.Dir(files[0])})
	if *timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, *timeout)
		defer cancel()
	}

	var targets []*testTarget
	var flowIDs []string
	for _, file := range files {
		t, err := loadTarget(ctx, e, file, *version, *compare, *envName, stderr)
		if err != nil {
			return err
		}
		if t == nil {
			continue
		}
		targets = append(targets, t)
		flowIDs = append(flowIDs, t.plan.Flow)
	}
	if len(targets) == 0 {
		fmt.Fprintln(stdout, "no test cases found")
		return nil
	}
	wctx, stopWorker := context.WithCancel(ctx)
	w := e.NewWorker(engine.WorkerOptions{Flows: flowIDs, Grace: 5 * time.Second, Block: cliBlock})
	done := make(chan error, 1)
	go func() { done <- w.Run(wctx) }()
	defer func() { stopWorker(); <-done }()

	opts := cases.Options{Parallel: *parallel, Grader: env, Only: splitList(*only)}
	failed := 0
	for _, t := range targets {
		if t.results, err = cases.Run(ctx, e, t.plan, t.cases, opts); err != nil {
			return fmt.Errorf("%s: %w", t.file, err)
		}
		rep := cases.NewReport(t.plan.Flow, t.plan.Version, t.results)
		if err := cases.Record(ctx, rdb, rep); err != nil {
			log.Warn("cannot record the test result", "flow", t.plan.Flow, "error", err)
		}
		failed += rep.Failed
		if t.other != nil {
			if t.compare, err = cases.Run(ctx, e, t.other, t.cases, opts); err != nil {
				return fmt.Errorf("%s --compare: %w", t.file, err)
			}
			if err := cases.Record(ctx, rdb, cases.NewReport(t.other.Flow, t.other.Version, t.compare)); err != nil {
				log.Warn("cannot record the test result", "flow", t.other.Flow, "error", err)
			}
			printComparison(stdout, t)
		} else {
			printResults(stdout, t)
		}
	}
	if *junit != "" {
		if err := writeJUnit(*junit, targets); err != nil {
			return &exitError{code: 2, err: fmt.Errorf("--junit: %w", err)}
		}
	}
	if failed > 0 {
		return &exitError{code: 1, err: fmt.Errorf("%d %s failed", failed, pluralize(failed, "case"))}
	}
	return nil
}

// loadTarget reads a flow file, the version its cases run on and its cases file; nil
// when the flow has no cases file. "current" is environment env's version ("" none:
// the flow's current version).
func loadTarget(ctx context.Context, e *engine.Engine, file, version, compare, env string, stderr io.Writer) (*testTarget, error) {
	if cases.IsCasesFile(file) {
		return nil, nil // a glob such as flows/*.json matches the cases files too
	}
	filePlan, err := loadPlan(e, file, stderr)
	if err != nil {
		return nil, err
	}
	t := &testTarget{file: file, plan: filePlan}
	if version != "" {
		if t.plan, err = versionPlan(ctx, e, filePlan.Flow, version, env, stderr); err != nil {
			return nil, badVersion(file+" --version", err)
		}
		if version == "current" {
			t.env = env
		}
	}
	if compare != "" {
		if t.other, err = versionPlan(ctx, e, filePlan.Flow, compare, env, stderr); err != nil {
			return nil, badVersion(file+" --compare", err)
		}
	}
	cfile := cases.FileFor(file)
	data, err := os.ReadFile(cfile)
	if errors.Is(err, os.ErrNotExist) {
		fmt.Fprintf(stderr, "%s: no test cases (%s)\n", file, filepath.Base(cfile))
		return nil, nil
	}
	if err != nil {
		return nil, &exitError{code: 2, err: err}
	}
	ids := map[string]bool{}
	for id := range t.plan.Nodes {
		ids[id] = true
	}
	f, probs := cases.Parse(data, ids)
	if f != nil && f.Flow != "" && f.Flow != t.plan.Flow {
		probs = append(probs, flows.Problem{Severity: flows.SeverityError, Code: flows.CodeInvalidValue, Path: "flow",
			Message: fmt.Sprintf("the cases are flow %q's, not %q's", f.Flow, t.plan.Flow)})
		f = nil
	}
	for _, p := range probs {
		fmt.Fprintf(stderr, "%s: %s\n", cfile, p)
	}
	if f == nil {
		return nil, &exitError{code: 1, err: fmt.Errorf("%s: the cases file has %d problem(s)", cfile, len(probs.Errors()))}
	}
	t.cases = f
	return t, nil
}

// badVersion is the error of a version that cannot be had: a bad argument (exit 2),
// unless the version's flow file has problems (exit 1, as the file's own).
func badVersion(what string, err error) error {
	var ee *exitError
	if errors.As(err, &ee) {
		return err
	}
	return &exitError{code: 2, err: fmt.Errorf("%s: %w", what, err)}
}

// versionPlan is the plan of v: another flow file (a path ending in .json), the flow's
// current version (environment env's, when env is not ""), or a version of its history
// (all of it or a prefix).
func versionPlan(ctx context.Context, e *engine.Engine, flow, v, env string, stderr io.Writer) (*flows.Plan, error) {
	if strings.HasSuffix(v, ".json") {
		p, err := loadPlan(e, v, stderr)
		if err == nil && p.Flow != flow {
			return nil, &exitError{code: 2, err: fmt.Errorf("%s is flow %q, not %q", v, p.Flow, flow)}
		}
		return p, err
	}
	if v == "current" {
		return currentPlan(ctx, e, flow, env)
	}
	full, err := e.ResolveVersion(ctx, flow, v)
	if err != nil {
		return nil, err
	}
	return e.Plan(ctx, flow, full)
}

func pluralize(n int, word string) string {
	if n == 1 {
		return word
	}
	return word + "s"
}

func verdict(pass bool) string {
	if pass {
		return "pass"
	}
	return "FAIL"
}

func short12(v string) string { return v[:min(12, len(v))] }

// printResults prints a flow's table: case, result, why, tokens, cost, ms; then totals.
func printResults(w io.Writer, t *testTarget) {
	fmt.Fprintf(w, "%s (flow %s, version %s%s)\n", t.file, t.plan.Flow, short12(t.plan.Version), envSuffix(t.env))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "CASE\tRESULT\tWHY\tTOKENS\tCOST\tMS")
	for _, r := range t.results {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t$%.4f\t%.0f\n", r.Case, verdict(r.Pass), oneLine(r.Why, 80), r.Tokens, r.CostUSD, r.DurationMS)
	}
	tw.Flush()
	s := cases.Summarize(t.plan.Version, t.results)
	fmt.Fprintf(w, "%d of %d passed (%.0f%%), %d tokens, $%.4f, %s\n\n", s.Passed, s.Cases, 100*s.PassRate, s.Tokens, s.CostUSD, msDuration(s.DurationMS))
}

// printComparison prints, per case, each version's verdict and how their outputs
// differ, then both versions' totals side by side.
func printComparison(w io.Writer, t *testTarget) {
	a, b := short12(t.plan.Version), short12(t.other.Version)
	fmt.Fprintf(w, "%s (flow %s): version %s (A) against %s (B)\n", t.file, t.plan.Flow, a, b)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "CASE\tA\tB\tWHY (A)\tWHY (B)")
	for i, ra := range t.results {
		rb := t.compare[i]
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", ra.Case, verdict(ra.Pass), verdict(rb.Pass), oneLine(ra.Why, 50), oneLine(rb.Why, 50))
	}
	tw.Flush()
	for i, ra := range t.results {
		rb := t.compare[i]
		changes := cases.DiffOutputs(ra.Output, rb.Output)
		if len(changes) == 0 {
			continue
		}
		fmt.Fprintf(w, "  %s: the outputs differ (A → B)\n", ra.Case)
		for j, c := range changes {
			if j == 10 {
				fmt.Fprintf(w, "    … %d more\n", len(changes)-j)
				break
			}
			fmt.Fprintf(w, "    %s %s: %s → %s\n", c.Op, c.Path, jsonShort(c.From), jsonShort(c.To))
		}
	}
	sa, sb := cases.Summarize(t.plan.Version, t.results), cases.Summarize(t.other.Version, t.compare)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "\tA %s\tB %s\n", a, b)
	fmt.Fprintf(tw, "pass rate\t%d/%d (%.0f%%)\t%d/%d (%.0f%%)\n", sa.Passed, sa.Cases, 100*sa.PassRate, sb.Passed, sb.Cases, 100*sb.PassRate)
	fmt.Fprintf(tw, "tokens\t%d\t%d\n", sa.Tokens, sb.Tokens)
	fmt.Fprintf(tw, "cost\t$%.4f\t$%.4f\n", sa.CostUSD, sb.CostUSD)
	fmt.Fprintf(tw, "latency (mean)\t%s\t%s\n", msDuration(mean(sa)), msDuration(mean(sb)))
	tw.Flush()
	fmt.Fprintln(w)
}

func mean(s cases.Summary) float64 {
	if s.Cases == 0 {
		return 0
	}
	return s.DurationMS / float64(s.Cases)
}

func msDuration(ms float64) string {
	return (time.Duration(ms * float64(time.Millisecond))).Round(time.Millisecond).String()
}

func jsonShort(v any) string {
	if v == nil {
		return "(none)"
	}
	b, _ := json.Marshal(v)
	return oneLine(string(b), 60)
}

func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

// JUnit XML, as Jenkins, GitLab, GitHub Actions' reporters and CircleCI read it: a suite
// per flow and version, a test case per case.
type junitSuites struct {
	XMLName  xml.Name     `xml:"testsuites"`
	Name     string       `xml:"name,attr"`
	Tests    int          `xml:"tests,attr"`
	Failures int          `xml:"failures,attr"`
	Time     string       `xml:"time,attr"`
	Suites   []junitSuite `xml:"testsuite"`
}

type junitSuite struct {
	Name       string          `xml:"name,attr"`
	Tests      int             `xml:"tests,attr"`
	Failures   int             `xml:"failures,attr"`
	Errors     int             `xml:"errors,attr"`
	Time       string          `xml:"time,attr"`
	Timestamp  string          `xml:"timestamp,attr"`
	Properties []junitProperty `xml:"properties>property"`
	Cases      []junitCase     `xml:"testcase"`
}

type junitProperty struct {
	Name  string `xml:"name,attr"`
	Value string `xml:"value,attr"`
}

type junitCase struct {
	Name      string        `xml:"name,attr"`
	Classname string        `xml:"classname,attr"`
	Time      string        `xml:"time,attr"`
	Failure   *junitFailure `xml:"failure,omitempty"`
	SystemOut string        `xml:"system-out,omitempty"`
}

type junitFailure struct {
	Message string `xml:"message,attr"`
	Type    string `xml:"type,attr"`
	Text    string `xml:",chardata"`
}

func seconds(ms float64) string { return fmt.Sprintf("%.3f", ms/1000) }

func junitSuiteOf(file string, plan *flows.Plan, rs []cases.Result) junitSuite {
	s := cases.Summarize(plan.Version, rs)
	js := junitSuite{Name: plan.Flow + "@" + short12(plan.Version), Tests: s.Cases, Failures: s.Failed, Time: seconds(s.DurationMS),
		Timestamp:  time.Now().UTC().Format("2006-01-02T15:04:05"),
		Properties: []junitProperty{{"file", file}, {"flow", plan.Flow}, {"version", plan.Version}}}
	for _, r := range rs {
		c := junitCase{Name: r.Case, Classname: plan.Flow, Time: seconds(r.DurationMS),
			SystemOut: fmt.Sprintf("run %s: %s, %d tokens, $%.4f", r.Run, r.Status, r.Tokens, r.CostUSD)}
		if !r.Pass {
			var lines []string
			for _, ch := range r.Checks {
				lines = append(lines, fmt.Sprintf("%s %s: %s", verdict(ch.Pass), ch.Kind, ch.Why))
			}
			if len(r.Checks) == 0 {
				lines = append(lines, r.Why)
			}
			c.Failure = &junitFailure{Message: r.Why, Type: "assertion", Text: strings.Join(lines, "\n")}
		}
		js.Cases = append(js.Cases, c)
	}
	return js
}

// writeJUnit writes every target's results (and --compare's) as JUnit XML.
func writeJUnit(path string, targets []*testTarget) error {
	doc := junitSuites{Name: "sluice test"}
	var ms float64
	for _, t := range targets {
		suites := []junitSuite{junitSuiteOf(t.file, t.plan, t.results)}
		if t.other != nil {
			suites = append(suites, junitSuiteOf(t.file, t.other, t.compare))
		}
		for _, s := range suites {
			doc.Tests += s.Tests
			doc.Failures += s.Failures
			doc.Suites = append(doc.Suites, s)
		}
		ms += cases.Summarize("", t.results).DurationMS
	}
	doc.Time = seconds(ms)
	b, err := xml.MarshalIndent(doc, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append([]byte(xml.Header), append(b, '\n')...), 0o644)
}
