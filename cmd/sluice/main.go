// Command sluice is the Sluice binary: the browser flow editor and API (serve), headless
// workers (worker), one-off runs (run), flow checks (validate), Langflow import (import),
// versions and schedules of flows, Kubernetes manifests (deploy) and the benchmark (bench).
// This package only wires the other packages together.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"

	"github.com/sluicehq/sluice/flows/engine"
	"github.com/sluicehq/sluice/store"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

// exitError carries a process exit code up to main.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }

type command struct {
	name    string
	summary string
	run     func(ctx context.Context, args []string, stdout, stderr io.Writer) error
}

func commands() []command {
	return []command{
		{"serve", "serve the editor, the API and in-process workers", cmdServe},
		{"worker", "run headless workers for flow files", cmdWorker},
		{"run", "run a flow file once and print its output", cmdRun},
		{"resume", "answer a run's approval and continue it", cmdResume},
		{"replay", "replay many runs of a flow on a version, with a report (replay FLOW --status failed --since 24h --version current)", cmdReplay},
		{"mcp", "serve flows as MCP tools on stdio", cmdMCP},
		{"validate", "check flow files and print every problem", cmdValidate},
		{"test", "run flows' test cases (FLOW.cases.json) and exit 1 on a failure", cmdTest},
		{"import", "convert a Langflow export into a flow (import langflow FILE.json)", cmdImport},
		{"versions", "list a flow's versions, show one, or compare two", cmdVersions},
		{"rollback", "make an earlier version of a flow current again", cmdRollback},
		{"promote", "point an environment at a version of a flow, after its gate (promote FLOW VERSION --to prod)", cmdPromote},
		{"schedules", "list a flow's schedules, pause or resume one", cmdSchedules},
		{"components", "list the components flows can use (--markdown, --json)", cmdComponents},
		{"deploy", "print Kubernetes manifests for flows (deploy kubernetes FLOW.json...)", cmdDeploy},
		{"bench", "measure Sluice against a bare go-redis loop", cmdBench},
		{"health", "probe a serve's /healthz: exit 0 when healthy (the image's HEALTHCHECK)", cmdHealth},
		{"token", "print the token serve keeps in its --token-file", cmdToken},
		{"version", "print the version", cmdVersion},
	}
}

// gcPercent is the binary's GOGC unless the operator sets one. A worker's heap is mostly
// the short-lived garbage of steps (decoded states, encoded checkpoints) over a small
// live set (plans, the state cache): collecting at 5× the live heap instead of 2× takes
// a third off the Go CPU of a run (docs/benchmarks.md), for a peak heap of about five
// times the live one. GOGC (and GOMEMLIMIT) override it.
const gcPercent = 400

func main() {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(gcPercent)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if err != nil {
		code := 1
		var ee *exitError
		if errors.As(err, &ee) {
			code = ee.code
		}
		if !errors.Is(err, flag.ErrHelp) && (ee == nil || ee.err != nil) {
			fmt.Fprintln(os.Stderr, "sluice:", err)
		}
		if errors.Is(err, flag.ErrHelp) {
			code = 0
		}
		os.Exit(code)
	}
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(stderr)
		if len(args) == 0 {
			return &exitError{code: 2, err: errors.New("no command given")}
		}
		return nil
	}
	for _, c := range commands() {
		if c.name == args[0] {
			return c.run(ctx, args[1:], stdout, stderr)
		}
	}
	usage(stderr)
	return &exitError{code: 2, err: fmt.Errorf("unknown command %q", args[0])}
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "Sluice: design multi-agent flows in the browser, run them durably on Redis Streams.")
	fmt.Fprintln(w, "\nUsage: sluice <command> [flags] [args]\n\nCommands:")
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-10s %s\n", c.name, c.summary)
	}
	fmt.Fprintln(w, "\nRun 'sluice <command> --help' for a command's flags.")
}

func cmdVersion(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("version", flag.ContinueOnError)
	fs.SetOutput(stderr)
	if err := fs.Parse(args); err != nil {
		return err
	}
	rev := ""
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" {
				rev = " " + s.Value
			}
		}
	}
	fmt.Fprintf(stdout, "sluice %s%s (%s %s/%s)\n", version, rev, runtime.Version(), runtime.GOOS, runtime.GOARCH)
	return nil
}

// envOr returns the environment variable name's value, or def when it is unset.
// addPartitionsFlag adds --partitions: how many partitions the runs of flows whose
// settings say nothing are spread over (env SLUICE_PARTITIONS; 0: the engine's default,
// on a Redis Cluster as many as spread evenly over its masters, else 1).
func addPartitionsFlag(fs *flag.FlagSet) *int {
	def, _ := strconv.Atoi(os.Getenv("SLUICE_PARTITIONS"))
	return fs.Int("partitions", def, fmt.Sprintf("partitions the runs of flows that set none in settings.partitions are spread over, 1 to %d (env SLUICE_PARTITIONS; 0: on a Redis Cluster as many as spread evenly over its masters, at least %d — 16 on 2 to 5 masters, 32 on 6, 64 on 12 — else 1)", store.MaxPartitions, engine.ClusterPartitions))
}

// checkPartitions refuses a --partitions out of range.
func checkPartitions(n int) error {
	if n < 0 || n > store.MaxPartitions {
		return &exitError{code: 2, err: fmt.Errorf("--partitions %d: want 1 to %d (0 for the default)", n, store.MaxPartitions)}
	}
	return nil
}

// envPartitions is SLUICE_PARTITIONS for the commands without the flag (0: default).
func envPartitions() int {
	n, _ := strconv.Atoi(os.Getenv("SLUICE_PARTITIONS"))
	return min(max(n, 0), store.MaxPartitions)
}

func envOr(name, def string) string {
	if v, ok := os.LookupEnv(name); ok {
		return v
	}
	return def
}

func newLogger(w io.Writer, level string) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(strings.ToUpper(level))); err != nil {
		return nil, &exitError{code: 2, err: fmt.Errorf("--log-level: %v", err)}
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: l})), nil
}

// parseArgs parses flags that may come before, between or after positional arguments
// ("sluice run flow.json --input {}"), and returns the positional ones.
func parseArgs(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		if fs.NArg() == 0 {
			return pos, nil
		}
		// A flows folder holds each flow's test cases beside it (FLOW.cases.json): a glob
		// such as flows/*.json names them too, and they are not flows.
		if !strings.HasSuffix(fs.Arg(0), store.CasesSuffix) {
			pos = append(pos, fs.Arg(0))
		}
		args = fs.Args()[1:]
	}
}
