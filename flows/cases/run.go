package cases

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/sluicehq/sluice/flows"
	"github.com/sluicehq/sluice/flows/engine"
	"github.com/sluicehq/sluice/store"
)

// DefaultTimeout bounds a case's run when the case sets no timeout.
const DefaultTimeout = 2 * time.Minute

// TriggerPrefix marks the runs of test cases: their trigger is "test:CASE".
const TriggerPrefix = "test:"

// Runner is what running cases needs of the engine.
type Runner interface {
	Start(ctx context.Context, plan *flows.Plan, input json.RawMessage, opts engine.StartOptions) (string, error)
	Wait(ctx context.Context, flow, run string) (*store.Run, error)
	Get(ctx context.Context, flow, run string) (*store.Run, error)
	Cancel(ctx context.Context, flow, run string) error
	Checkpoints(ctx context.Context, flow, run string) ([]store.Checkpoint, error)
	Checkpoint(ctx context.Context, flow, run, id string) (*store.Checkpoint, error)
}

var _ Runner = (*engine.Engine)(nil)

// Options say how cases run.
type Options struct {
	// Parallel is how many cases run at once (0 or 1: one after the other).
	Parallel int
	// Grader grades the graded assertions; nil fails them, saying so.
	Grader Grader
	// Only, when set, runs just the cases with these ids.
	Only []string
}

// Result is one case's verdict on one version of its flow.
type Result struct {
	Case    string `json:"case"`
	Name    string `json:"name,omitempty"`
	Version string `json:"version"`
	Run     string `json:"run,omitempty"`
	Pass    bool   `json:"pass"`
	// Why says, for a failed case, what failed first (every check is in Checks).
	Why    string  `json:"why,omitempty"`
	Checks []Check `json:"checks"`
	Status string  `json:"status"`
	// Output is the run's output (null when it produced none).
	Output     json.RawMessage `json:"output"`
	Tokens     int64           `json:"tokens"`
	CostUSD    float64         `json:"cost_usd"`
	DurationMS float64         `json:"duration_ms"`
	// NodeOutputs are each node's last output in the run.
	NodeOutputs map[string]json.RawMessage `json:"node_outputs,omitempty"`
	// Changed are the nodes whose output differs from the case's node_outputs (the run
	// it was saved from): where a regression starts.
	Changed []string `json:"changed,omitempty"`
}

// Summary totals a set of results.
type Summary struct {
	Version    string  `json:"version"`
	Cases      int     `json:"cases"`
	Passed     int     `json:"passed"`
	Failed     int     `json:"failed"`
	PassRate   float64 `json:"pass_rate"`
	Tokens     int64   `json:"tokens"`
	CostUSD    float64 `json:"cost_usd"`
	DurationMS float64 `json:"duration_ms"` // the sum of the cases' run durations
	// Failing names the cases that failed.
	Failing []string `json:"failing,omitempty"`
}

// Summarize totals results.
func Summarize(version string, rs []Result) Summary {
	s := Summary{Version: version, Cases: len(rs)}
	for _, r := range rs {
		if r.Pass {
			s.Passed++
		} else {
			s.Failed++
			s.Failing = append(s.Failing, r.Case)
		}
		s.Tokens += r.Tokens
		s.CostUSD += r.CostUSD
		s.DurationMS += r.DurationMS
	}
	if s.Cases > 0 {
		s.PassRate = float64(s.Passed) / float64(s.Cases)
	}
	return s
}

// Run runs the file's cases on plan, each as a run of its own (trigger "test:CASE"),
// and checks their assertions. Workers for the flow must be running somewhere (the
// caller's, or on the same Redis). A case that cannot start (a pin the version does
// not take) fails with the reason; only ctx ending stops the whole run.
func Run(ctx context.Context, e Runner, plan *flows.Plan, f *File, opts Options) ([]Result, error) {
	var chosen []*Case
	only := map[string]bool{}
	for _, id := range opts.Only {
		only[id] = true
	}
	for i := range f.Cases {
		if len(only) == 0 || only[f.Cases[i].ID] {
			chosen = append(chosen, &f.Cases[i])
		}
	}
	for _, id := range opts.Only {
		if f.Find(id) == nil {
			return nil, &flows.Error{Code: flows.NotFound, Flow: plan.Flow, Path: "cases", Message: fmt.Sprintf("no case %q", id)}
		}
	}
	out := make([]Result, len(chosen))
	n := max(opts.Parallel, 1)
	sem := make(chan struct{}, n)
	var wg sync.WaitGroup
	for i, c := range chosen {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			wg.Wait()
			return nil, ctx.Err()
		}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			out[i] = runCase(ctx, e, plan, c, opts.Grader)
		}()
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return out, nil
}

// runCase runs one case and checks it.
func runCase(ctx context.Context, e Runner, plan *flows.Plan, c *Case, g Grader) Result {
	res := Result{Case: c.ID, Name: c.Name, Version: plan.Version, Output: json.RawMessage("null")}
	failed := func(why string) Result {
		res.Status, res.Why = "error", why
		return res
	}
	opts := engine.StartOptions{Trigger: TriggerPrefix + c.ID}
	if len(c.Pins) > 0 {
		opts.Pins = map[string]engine.Pin{}
		for n, p := range c.Pins {
			opts.Pins[n] = engine.Pin{Output: p.Output, Update: p.Update, Ports: p.Ports}
		}
	}
	input := c.Input
	if c.Start != nil {
		opts.At, input = c.Start.Node, c.Start.State
	}
	id, err := e.Start(ctx, plan, input, opts)
	var fe *flows.Error
	if err != nil && errors.As(err, &fe) && strings.HasPrefix(fe.Path, "input") {
		// The flow refused the input: that is an outcome a case may expect
		// ({"succeeds": false}), not a mistake of the case.
		return check(ctx, res, c, &Outcome{Flow: plan.Flow, Status: StatusRefused, Error: err.Error()}, g)
	}
	if err != nil {
		return failed("the run did not start: " + err.Error())
	}
	res.Run = id
	timeout := c.Timeout.D()
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	wctx, cancel := context.WithTimeout(ctx, timeout)
	run, err := e.Wait(wctx, plan.Flow, id)
	cancel()
	o := &Outcome{Flow: plan.Flow, Run: id}
	switch {
	case err != nil && ctx.Err() != nil:
		return failed(ctx.Err().Error())
	case errors.Is(err, context.DeadlineExceeded):
		_ = e.Cancel(context.WithoutCancel(ctx), plan.Flow, id)
		o.Status = "timeout"
		o.Error = fmt.Sprintf("not finished after %s", timeout)
	case err != nil:
		return failed(err.Error())
	}
	if run != nil {
		if o.Status == "" {
			o.Status = run.Status
			o.Error, o.ErrorNode = run.Error, run.ErrorNode
		}
		o.Usage = run.Usage
		if out := run.Output(); out != nil {
			res.Output = out
			o.Output, _ = flows.DecodeJSON(out)
		}
		end := time.Now()
		if run.Finished != nil {
			end = *run.Finished
		}
		start := run.Created
		if run.Started != nil {
			start = *run.Started
		}
		o.Duration = end.Sub(start)
		if run.LastCkpt != "" {
			if cp, err := e.Checkpoint(ctx, plan.Flow, id, run.LastCkpt); err == nil && cp.State != nil {
				o.State, _ = flows.DecodeState(cp.State)
			}
		}
	}
	res = check(ctx, res, c, o, g)
	if cps, err := e.Checkpoints(ctx, plan.Flow, id); err == nil {
		res.NodeOutputs = NodeOutputs(cps)
	}
	res.Changed = Changed(c.NodeOutputs, res.NodeOutputs)
	return res
}

// StatusRefused is the outcome of a case whose input the flow refused: no run started.
const StatusRefused = "refused"

// check evaluates the case's assertions on the outcome.
func check(ctx context.Context, res Result, c *Case, o *Outcome, g Grader) Result {
	res.Status = o.Status
	res.Tokens = o.Usage.InputTokens + o.Usage.OutputTokens
	res.DurationMS = float64(o.Duration.Microseconds()) / 1000
	res.Pass = true
	for i := range c.Expect {
		ch := Evaluate(ctx, &c.Expect[i], o, g)
		o.Usage = o.Usage.Add(ch.Usage)
		res.Checks = append(res.Checks, ch)
		if !ch.Pass && res.Pass {
			res.Pass = false
			res.Why = ch.Kind + ": " + ch.Why
			if ch.Name != "" {
				res.Why = ch.Name + ": " + ch.Why
			}
		}
	}
	res.CostUSD = o.Usage.CostUSD // grading's cost counts: it is what the case cost
	return res
}

// NodeOutputs are each node's last output in a run's checkpoints.
func NodeOutputs(cps []store.Checkpoint) map[string]json.RawMessage {
	out := map[string]json.RawMessage{}
	for _, c := range cps {
		if c.Node == "" || !c.IsState() || c.Output == nil {
			continue
		}
		out[c.Node] = c.Output
	}
	return out
}

// Changed lists, sorted, the nodes whose output in got differs from want (a node in
// want that did not run this time counts as changed; nodes want does not know do not).
func Changed(want, got map[string]json.RawMessage) []string {
	var out []string
	for n, w := range want {
		g, ok := got[n]
		if !ok || !SameJSON(w, g) {
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out
}

// SameJSON reports whether two JSON texts are the same value.
func SameJSON(a, b json.RawMessage) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return string(a) == string(b)
	}
	return reflect.DeepEqual(x, y)
}

// DiffOutputs lists the differences between two outputs (JSON texts).
func DiffOutputs(a, b json.RawMessage) []flows.ValueChange {
	var x, y any
	_ = json.Unmarshal(a, &x)
	_ = json.Unmarshal(b, &y)
	return flows.DiffValues(x, y)
}
