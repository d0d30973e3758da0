package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/sluicehq/sluice/flows"
	"github.com/sluicehq/sluice/store"
)

// Comparison is two runs of a flow compared node by node: usually a run and its replay.
type Comparison struct {
	From string `json:"from"` // the run compared (the original)
	To   string `json:"to"`   // the run compared with it (the replay)
	// Summary is one line: "12 same, 2 changed, 1 now fails".
	Summary string `json:"summary"`
	// Counts are the nodes by verdict.
	Counts map[string]int   `json:"counts"`
	Nodes  []NodeComparison `json:"nodes"`
}

// Verdicts of a node compared in two runs.
const (
	VerdictSame     = "same"      // it ran in both and gave the same output
	VerdictChanged  = "changed"   // it ran in both; its output differs
	VerdictNowFails = "now_fails" // it succeeded in the first run and fails in the second
	VerdictFixed    = "fixed"     // it failed in the first and succeeds in the second
	VerdictFails    = "fails"     // it fails in both
	VerdictNew      = "new"       // it ran only in the second
	VerdictNotRun   = "not_run"   // it ran only in the first
)

var verdictWords = []struct{ v, words string }{
	{VerdictSame, "same"}, {VerdictChanged, "changed"}, {VerdictNowFails, "now fails"}, {VerdictFixed, "fixed"},
	{VerdictFails, "still fails"}, {VerdictNew, "new"}, {VerdictNotRun, "not run now"},
}

// NodeComparison is one node in both runs.
type NodeComparison struct {
	Node    string       `json:"node"`
	Verdict string       `json:"verdict"`
	Before  *NodeOutcome `json:"before,omitempty"` // nil: it did not run in the first run
	After   *NodeOutcome `json:"after,omitempty"`
	// Changes are the differences of its output (or, for a node without one, of its
	// state update), from the first run's to the second's.
	Changes []Change `json:"changes,omitempty"`
}

// NodeOutcome is what a node did in one run: its last step's output, and over all its
// steps the tokens, cost and time.
type NodeOutcome struct {
	Status     string          `json:"status"` // succeeded, failed, waiting
	Steps      int             `json:"steps"`
	Output     json.RawMessage `json:"output,omitempty"`
	Update     json.RawMessage `json:"update,omitempty"`
	Error      string          `json:"error,omitempty"`
	Tokens     int64           `json:"tokens"`
	CostUSD    float64         `json:"cost_usd,omitempty"`
	DurationMS float64         `json:"duration_ms"`
	// Reused (or pinned): its last step gave back a recorded output and did not run.
	Reused bool `json:"reused,omitempty"`
}

// Compare compares run a with run b of flow node by node: status, output, tokens, cost
// and duration, with a summary line.
func (e *Engine) Compare(ctx context.Context, flow, a, b string) (*Comparison, error) {
	if a == b {
		return nil, &flows.Error{Code: flows.Invalid, Flow: flow, Path: "with", Message: "compare a run with another run"}
	}
	ra, err := e.Get(ctx, flow, a)
	if err != nil {
		return nil, err
	}
	rb, err := e.Get(ctx, flow, b)
	if err != nil {
		return nil, err
	}
	oa, err := e.outcomes(ctx, ra)
	if err != nil {
		return nil, err
	}
	ob, err := e.outcomes(ctx, rb)
	if err != nil {
		return nil, err
	}
	order := e.nodeOrder(ctx, rb, ra, oa, ob)
	c := &Comparison{From: a, To: b, Counts: map[string]int{}}
	for _, n := range order {
		nc := NodeComparison{Node: n, Before: oa[n], After: ob[n]}
		nc.Verdict, nc.Changes = compareOutcomes(nc.Before, nc.After)
		c.Counts[nc.Verdict]++
		c.Nodes = append(c.Nodes, nc)
	}
	var parts []string
	for _, w := range verdictWords {
		if n := c.Counts[w.v]; n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n, w.words))
		}
	}
	c.Summary = strings.Join(parts, ", ")
	if c.Summary == "" {
		c.Summary = "no node ran in either run"
	}
	return c, nil
}

func compareOutcomes(a, b *NodeOutcome) (string, []Change) {
	switch {
	case a == nil:
		return VerdictNew, nil
	case b == nil:
		return VerdictNotRun, nil
	case a.Status == store.StatusFailed && b.Status == store.StatusFailed:
		return VerdictFails, nil
	case a.Status == store.StatusFailed:
		return VerdictFixed, nil
	case b.Status == store.StatusFailed:
		return VerdictNowFails, nil
	}
	va, vb := a.Output, b.Output
	if len(va) == 0 && len(vb) == 0 {
		va, vb = a.Update, b.Update
	}
	x, _ := flows.DecodeJSON(orNull(va))
	y, _ := flows.DecodeJSON(orNull(vb))
	if ch := DiffValues(x, y); len(ch) > 0 {
		return VerdictChanged, ch
	}
	return VerdictSame, nil
}

func orNull(b json.RawMessage) json.RawMessage {
	if len(b) == 0 {
		return json.RawMessage("null")
	}
	return b
}

// outcomes folds a run's checkpoints into what each node did.
func (e *Engine) outcomes(ctx context.Context, r *store.Run) (map[string]*NodeOutcome, error) {
	cps, err := e.Checkpoints(ctx, r.Flow, r.ID)
	if err != nil {
		return nil, err
	}
	out := map[string]*NodeOutcome{}
	for _, c := range cps {
		if c.Node == "" || c.Kind == "input" || c.Kind == "send" {
			continue
		}
		o := out[c.Node]
		if o == nil {
			o = &NodeOutcome{}
			out[c.Node] = o
		}
		o.Tokens += c.Usage.InputTokens + c.Usage.OutputTokens
		o.CostUSD += c.Usage.CostUSD
		o.DurationMS += c.DurationMS
		switch c.Kind {
		case store.KindError:
			o.Status, o.Error = store.StatusFailed, c.Error
		case store.KindTurn, store.KindInterrupted:
		case "wait":
			o.Status = store.StatusWaiting
		default:
			o.Status, o.Error = store.StatusSucceeded, ""
			o.Steps++
			o.Output, o.Update, o.Reused = c.Output, c.Update, c.Pinned
		}
	}
	for n, o := range out {
		if o.Status == "" { // only turns: the step is still going, or was lost
			delete(out, n)
		}
	}
	return out, nil
}

// nodeOrder lists the nodes of either run in the order of the second run's plan (else
// the first's), then any others by id.
func (e *Engine) nodeOrder(ctx context.Context, rb, ra *store.Run, oa, ob map[string]*NodeOutcome) []string {
	seen := map[string]bool{}
	var out []string
	for _, r := range []*store.Run{rb, ra} {
		p, err := e.Plan(ctx, r.Flow, r.Version)
		if err != nil {
			continue
		}
		for _, n := range p.Order {
			if !seen[n] && (oa[n] != nil || ob[n] != nil) {
				seen[n] = true
				out = append(out, n)
			}
		}
	}
	var rest []string
	for _, m := range []map[string]*NodeOutcome{oa, ob} {
		for n := range m {
			if !seen[n] {
				seen[n] = true
				rest = append(rest, n)
			}
		}
	}
	slices.Sort(rest)
	return append(out, rest...)
}
