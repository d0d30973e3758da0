package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"time"

	"github.com/sluicehq/sluice/flows"
	"github.com/sluicehq/sluice/store"
)

// ttlOf is how long a finished run of the given version is kept.
func (e *Engine) ttlOf(ctx context.Context, flow, version string) time.Duration {
	if p, err := e.Plan(ctx, flow, version); err == nil {
		return p.Settings.CheckpointTTL.D()
	}
	return flows.DefaultSettings.CheckpointTTL.D()
}

// touch refreshes the retention of a finished run that someone looked at.
func (e *Engine) touch(ctx context.Context, r *store.Run) {
	if store.Finished(r.Status) {
		_ = e.rdb.Touch(ctx, r.Ref(), e.ttlOf(ctx, r.Flow, r.Version))
	}
}

// RunInfo is a run with what it costs to keep.
type RunInfo struct {
	*store.Run
	StorageBytes int64 `json:"storage_bytes"`
}

// Info returns a run with its storage cost in Redis, refreshing a finished run's
// retention.
func (e *Engine) Info(ctx context.Context, flow, run string) (*RunInfo, error) {
	r, err := e.Get(ctx, flow, run)
	if err != nil {
		return nil, err
	}
	e.touch(ctx, r)
	n, err := e.rdb.RunBytes(ctx, r.Ref())
	if err != nil {
		return nil, err
	}
	return &RunInfo{Run: r, StorageBytes: n}, nil
}

// ListQuery filters and pages a flow's runs, newest first.
type ListQuery struct {
	Status string    // only runs with this status ("" for all)
	Since  time.Time // created at or after (zero: no bound)
	Until  time.Time // created at or before (zero: no bound)
	Offset int
	Limit  int // default 50, at most 500

	// Version keeps only runs of this version (the full hash or a prefix of it).
	Version string
	// Trigger keeps only runs started so ("schedule:0"; "schedule" for any schedule).
	Trigger string
}

// List returns a page of a flow's runs and how many runs match in all (for a status
// filter, how many match among the runs it looked at: at most 10,000 are looked at).
func (e *Engine) List(ctx context.Context, flow string, q ListQuery) ([]*store.Run, int64, error) {
	if !flows.ValidFlowID(flow) {
		return nil, 0, &flows.Error{Code: flows.NotFound, Flow: flow, Message: "no such flow"}
	}
	if q.Limit <= 0 {
		q.Limit = 50
	}
	q.Limit = min(q.Limit, 500)
	q.Offset = max(q.Offset, 0)
	if q.Status != "" && !validStatus(q.Status) {
		return nil, 0, &flows.Error{Code: flows.Invalid, Path: "status", Message: fmt.Sprintf("unknown status %q: use queued, running, waiting, succeeded, failed or cancelled", q.Status)}
	}
	e.pruneRuns(ctx, flow) // what expired since the janitor last looked
	if q.Version != "" && (len(q.Version) > 64 || strings.Trim(strings.ToLower(q.Version), "0123456789abcdef") != "") {
		return nil, 0, &flows.Error{Code: flows.Invalid, Path: "version", Message: fmt.Sprintf("%q is not a version (hex digits)", q.Version)}
	}
	q.Version = strings.ToLower(q.Version)
	if q.Status == "" && q.Version == "" && q.Trigger == "" {
		ids, err := e.rdb.RunIDs(ctx, flow, q.Since, q.Until, int64(q.Offset), int64(q.Limit))
		if err != nil {
			return nil, 0, err
		}
		runs, err := e.rdb.GetRuns(ctx, ids)
		if err != nil {
			return nil, 0, err
		}
		total, err := e.countRuns(ctx, flow, q)
		return runs, total, err
	}
	// A status, version or trigger is not indexed: look through the newest runs.
	const chunk, scanCap = 200, 10000
	var out []*store.Run
	var matched int64
	for scanned := int64(0); scanned < scanCap; scanned += chunk {
		ids, err := e.rdb.RunIDs(ctx, flow, q.Since, q.Until, scanned, chunk)
		if err != nil {
			return nil, 0, err
		}
		runs, err := e.rdb.GetRuns(ctx, ids)
		if err != nil {
			return nil, 0, err
		}
		for _, r := range runs {
			if !q.matches(r) {
				continue
			}
			if matched >= int64(q.Offset) && len(out) < q.Limit {
				out = append(out, r)
			}
			matched++
		}
		if len(ids) < chunk {
			break
		}
	}
	return out, matched, nil
}

func (q ListQuery) matches(r *store.Run) bool {
	switch {
	case q.Status != "" && r.Status != q.Status:
		return false
	case q.Version != "" && !strings.HasPrefix(r.Version, q.Version):
		return false
	case q.Trigger != "" && r.Trigger != q.Trigger && !strings.HasPrefix(r.Trigger, q.Trigger+":"):
		return false
	}
	return true
}

func (e *Engine) countRuns(ctx context.Context, flow string, q ListQuery) (int64, error) {
	return e.rdb.CountRuns(ctx, flow, q.Since, q.Until)
}

// pruneRuns removes the runs whose retention has passed from a flow's run index. Every
// worker's sweeper calls it every pruneEvery, so the index stays as small as the runs
// kept.
func (e *Engine) pruneRuns(ctx context.Context, flow string) {
	parts, err := e.rdb.Parts(ctx, flow)
	if err != nil {
		return
	}
	for _, p := range parts {
		e.prunePart(ctx, p)
	}
}

// prunePart prunes the run index of one partition of a flow.
func (e *Engine) prunePart(ctx context.Context, p store.PartRef) {
	const batch = 1000
	for {
		n, err := e.rdb.PruneRuns(ctx, p.Flow, p.Part, batch)
		if err != nil {
			if ctx.Err() == nil {
				e.log.Warn("cannot prune the run index", "flow", p.Flow, "partition", p.Part, "error", err)
			}
			return
		}
		if n < batch {
			return
		}
	}
}

func validStatus(s string) bool {
	switch s {
	case store.StatusQueued, store.StatusRunning, store.StatusWaiting, store.StatusSucceeded, store.StatusFailed, store.StatusCancelled:
		return true
	}
	return false
}

// Checkpoints returns a run's history in commit order, without states.
func (e *Engine) Checkpoints(ctx context.Context, flow, run string) ([]store.Checkpoint, error) {
	r, err := e.Get(ctx, flow, run)
	if err != nil {
		return nil, err
	}
	e.touch(ctx, r)
	start := "-"
	if r.KeptFrom != "" {
		start = r.KeptFrom // keep_last trimmed what came before
	}
	return e.rdb.Checkpoints(ctx, r.Ref(), start, 0)
}

// Checkpoint returns one checkpoint of a run with the state after it.
func (e *Engine) Checkpoint(ctx context.Context, flow, run, id string) (*store.Checkpoint, error) {
	r, err := e.Get(ctx, flow, run)
	if err != nil {
		return nil, err
	}
	e.touch(ctx, r)
	if !store.ValidStreamID(id) {
		return nil, &flows.Error{Code: flows.NotFound, Flow: flow, Message: fmt.Sprintf("run %q has no checkpoint %q", run, id)}
	}
	c, err := e.rdb.GetCheckpoint(ctx, r.Ref(), id)
	if err != nil || c.State != nil || !c.IsState() {
		return c, err
	}
	// A step fused into a later one's commit: its state is not stored, but it is the state
	// before the commit with the commit's updates up to this step applied.
	if c.State, err = e.fusedState(ctx, r, id); err != nil {
		return nil, err
	}
	return c, nil
}

// fusedState recomputes the state after step id of a commit of fused steps: the stored
// state the commit started from, with the updates of its steps up to id applied with the
// run version's reducers, as the worker did.
func (e *Engine) fusedState(ctx context.Context, r *store.Run, id string) ([]byte, error) {
	plan, err := e.Plan(ctx, r.Flow, r.Version)
	if err != nil {
		return nil, err
	}
	steps, err := e.rdb.Checkpoints(ctx, r.Ref(), store.EntryOf(id), 1)
	if err != nil || len(steps) == 0 {
		return nil, err
	}
	base, err := e.rdb.LoadState(ctx, r.Ref(), steps[0].Parent)
	if err != nil {
		return nil, err
	}
	state, err := flows.DecodeState(base)
	if err != nil {
		return nil, err
	}
	for _, c := range steps {
		if len(c.Update) > 0 {
			upd, err := flows.DecodeState(c.Update)
			if err != nil {
				return nil, err
			}
			if state, err = plan.Reducers.Apply(state, upd); err != nil {
				return nil, err
			}
		}
		if c.ID == id {
			return json.Marshal(state)
		}
	}
	return nil, &flows.Error{Code: flows.NotFound, Flow: r.Flow, Message: fmt.Sprintf("run %q has no checkpoint %q", r.ID, id)}
}

// Change is one difference between two states.
type Change struct {
	Path string `json:"path"` // JSON path, e.g. messages[2].content
	Op   string `json:"op"`   // add, remove, replace
	From any    `json:"from,omitempty"`
	To   any    `json:"to,omitempty"`
}

// Diff returns the changes from checkpoint a's state to checkpoint b's.
func (e *Engine) Diff(ctx context.Context, flow, run, a, b string) ([]Change, error) {
	ca, err := e.Checkpoint(ctx, flow, run, a)
	if err != nil {
		return nil, err
	}
	cb, err := e.Checkpoint(ctx, flow, run, b)
	if err != nil {
		return nil, err
	}
	if ca.State == nil || cb.State == nil {
		return nil, &flows.Error{Code: flows.Invalid, Flow: flow, Message: "only checkpoints with a state can be compared (not turns)"}
	}
	sa, err := flows.DecodeJSON(ca.State)
	if err != nil {
		return nil, err
	}
	sb, err := flows.DecodeJSON(cb.State)
	if err != nil {
		return nil, err
	}
	return DiffValues(sa, sb), nil
}

// DiffValues compares two JSON values: objects key by key, arrays index by index.
func DiffValues(a, b any) []Change {
	var out []Change
	diffAt("", a, b, &out)
	return out
}

func diffAt(path string, a, b any, out *[]Change) {
	switch x := a.(type) {
	case map[string]any:
		if y, ok := b.(map[string]any); ok {
			keys := map[string]bool{}
			for k := range x {
				keys[k] = true
			}
			for k := range y {
				keys[k] = true
			}
			sorted := make([]string, 0, len(keys))
			for k := range keys {
				sorted = append(sorted, k)
			}
			sort.Strings(sorted)
			for _, k := range sorted {
				p := k
				if path != "" {
					p = path + "." + k
				}
				va, ina := x[k]
				vb, inb := y[k]
				switch {
				case !ina:
					*out = append(*out, Change{Path: p, Op: "add", To: vb})
				case !inb:
					*out = append(*out, Change{Path: p, Op: "remove", From: va})
				default:
					diffAt(p, va, vb, out)
				}
			}
			return
		}
	case []any:
		if y, ok := b.([]any); ok {
			for i := 0; i < max(len(x), len(y)); i++ {
				p := fmt.Sprintf("%s[%d]", path, i)
				switch {
				case i >= len(x):
					*out = append(*out, Change{Path: p, Op: "add", To: y[i]})
				case i >= len(y):
					*out = append(*out, Change{Path: p, Op: "remove", From: x[i]})
				default:
					diffAt(p, x[i], y[i], out)
				}
			}
			return
		}
	}
	if !jsonEqual(a, b) {
		if path == "" {
			path = "."
		}
		*out = append(*out, Change{Path: path, Op: "replace", From: a, To: b})
	}
}

func jsonEqual(a, b any) bool { return reflect.DeepEqual(a, b) }
