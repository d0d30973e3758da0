package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/sluicehq/sluice/flows"
	"github.com/sluicehq/sluice/flows/nodes"
	"github.com/sluicehq/sluice/store"
)

// MaxSubflowDepth bounds how deep subflows nest (a flow that runs a flow that runs …),
// so flows that run each other cannot start runs without end.
const MaxSubflowDepth = 8

// Subflows runs flows as nodes of other flows (nodes.SubflowRunner). It finds the child
// flow in the library when it has one (publishing the file's version) or else takes the
// flow's current version in Redis, makes a worker serve it, starts the child run and
// waits for it within the parent step's deadline.
//
// The child run is linked to its parent step through the parent's checkpoint history:
// before the child starts, a turn {"subflow": {"flow", "run"}} is saved, so a retried
// parent step finds the child it started and waits for it instead of starting another
// (a child that failed is started anew). A child waiting for an approval keeps the parent
// step waiting until the step's deadline.
type Subflows struct {
	e *Engine

	mu      sync.Mutex
	lib     *store.Library
	workers []*Worker
	own     *Worker
	ownCtx  context.Context
	served  map[string]bool
	depth   map[string]int // child run -> nesting depth, for runs started here
}

// NewSubflows returns the subflow runner of e. Until Bind is called it uses Redis only
// and a worker of its own that lives as long as ctx of the first run needs.
func (e *Engine) NewSubflows() *Subflows {
	return &Subflows{e: e, served: map[string]bool{}, depth: map[string]int{}}
}

// Bind gives the runner a flow library to find child flows in (nil: Redis only) and the
// workers that serve them. Without workers it starts one of its own when a child flow
// first needs one, which stops when ctx ends.
func (s *Subflows) Bind(ctx context.Context, lib *store.Library, workers ...*Worker) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lib, s.workers, s.ownCtx = lib, workers, ctx
}

// subflowTurn is the turn a parent step saves before it starts a child run.
type subflowTurn struct {
	Subflow *struct {
		Flow string `json:"flow"`
		Run  string `json:"run"`
	} `json:"subflow,omitempty"`
}

// RunSubflow starts (or finds again) the child run and waits for its result.
func (s *Subflows) RunSubflow(ctx context.Context, step *flows.Step, flow string, input json.RawMessage) (*nodes.SubflowResult, error) {
	fail := func(code flows.Code, format string, args ...any) error {
		return flows.Permanent(&flows.Error{Code: code, Node: step.Node, Path: "params.flow", Message: fmt.Sprintf(format, args...)})
	}
	if !flows.ValidID(flow) {
		return nil, fail(flows.Invalid, "%q is not a flow id", flow)
	}
	// A flow of a workspace ("acme.triage", docs/teams.md) runs the subflows of its own
	// workspace: the bare id it names is qualified with it, never another's.
	if ws, _, ok := strings.Cut(step.Flow, "."); ok {
		flow = ws + "." + flow
	}
	if flow == step.Flow {
		return nil, fail(flows.Invalid, "flow %q cannot run itself as a subflow", flow)
	}
	s.mu.Lock()
	depth := s.depth[step.Flow+"\x00"+step.Run] + 1
	s.mu.Unlock()
	if depth > MaxSubflowDepth {
		return nil, fail(flows.Invalid, "subflows nest deeper than %d (do flows run each other?)", MaxSubflowDepth)
	}
	// A run started through an environment runs that environment's version of its
	// subflows, when the child has one there (docs/environments.md).
	env := ""
	var plan *flows.Plan
	if parent, err := s.e.Get(ctx, step.Flow, step.Run); err == nil && parent.Environment != "" {
		if p, err := s.e.EnvPlan(ctx, flow, parent.Environment); err == nil {
			plan, env = p, parent.Environment
		}
	}
	if plan == nil {
		p, err := s.plan(ctx, flow)
		if err != nil {
			return nil, err
		}
		plan = p
	}
	if err := s.serve(flow); err != nil {
		return nil, err
	}

	// A retried step: the child an earlier attempt started, if it can still finish.
	run := ""
	for i := len(step.Turns) - 1; i >= 0 && run == ""; i-- {
		var t subflowTurn
		if json.Unmarshal(step.Turns[i], &t) == nil && t.Subflow != nil && t.Subflow.Flow == flow {
			run = t.Subflow.Run
		}
	}
	if run != "" {
		r, err := s.e.Get(ctx, flow, run)
		switch {
		case flows.ErrorCode(err) == flows.NotFound:
			// Saved but never started (the worker stopped in between): start it now.
			if _, err := s.e.Start(ctx, plan, input, StartOptions{RunID: run, Caller: &Caller{Flow: step.Flow, Run: step.Run, Node: step.Node}, Environment: env}); err != nil && flows.ErrorCode(err) != flows.Conflict {
				return nil, err
			}
		case err != nil:
			return nil, err
		case r.Status == store.StatusFailed || r.Status == store.StatusCancelled:
			run = "" // start another
		}
	}
	if run == "" {
		run = NewRunID()
		if step.SaveTurn != nil {
			t := subflowTurn{Subflow: &struct {
				Flow string `json:"flow"`
				Run  string `json:"run"`
			}{flow, run}}
			if err := step.SaveTurn(ctx, t); err != nil {
				return nil, err
			}
		}
		if _, err := s.e.Start(ctx, plan, input, StartOptions{RunID: run, Caller: &Caller{Flow: step.Flow, Run: step.Run, Node: step.Node}, Environment: env}); err != nil {
			if flows.ErrorCode(err) == flows.Invalid {
				return nil, flows.Permanent(&flows.Error{Code: flows.Invalid, Node: step.Node, Path: "params.input",
					Message: fmt.Sprintf("subflow %q refused its input", flow), Err: err})
			}
			return nil, err
		}
		s.mu.Lock()
		s.depth[flow+"\x00"+run] = depth
		s.mu.Unlock()
		defer func() {
			s.mu.Lock()
			delete(s.depth, flow+"\x00"+run)
			s.mu.Unlock()
		}()
		// The live views of both flows show the link.
		if step.Emit != nil {
			step.Emit("subflow", map[string]any{"flow": flow, "run": run})
		}
		child := store.RunRef{Flow: flow, Run: run, Part: store.PartOf(run, s.e.partitions(plan))}
		s.e.events.emit(child, "", "parent", map[string]any{"flow": step.Flow, "run": step.Run, "node": step.Node})
	}

	// A child that waits for a person keeps this step waiting too, within its deadline;
	// the child's status events wake it, nothing polls.
	r, err := s.e.waitUntil(ctx, flow, run, func(r *store.Run) bool { return store.Finished(r.Status) })
	if err != nil {
		if ctx.Err() != nil {
			if r != nil && r.Status == store.StatusWaiting {
				return nil, fmt.Errorf("subflow %s run %s waits for an approval: %w", flow, run, ctx.Err())
			}
			return nil, fmt.Errorf("subflow %s run %s is still %s: %w", flow, run, statusOf(r), ctx.Err())
		}
		return nil, err
	}
	if r.Status == store.StatusSucceeded {
		out := r.Output()
		if out == nil {
			out = json.RawMessage("null")
		}
		return &nodes.SubflowResult{Flow: flow, Run: run, Output: out, Usage: r.Usage}, nil
	}
	where := ""
	if r.ErrorNode != "" {
		where = fmt.Sprintf(" at node %q", r.ErrorNode)
	}
	return nil, &flows.Error{Code: flows.Unavailable, Node: step.Node,
		Message: fmt.Sprintf("subflow %s run %s %s%s: %s", flow, run, r.Status, where, r.Error)}
}

func statusOf(r *store.Run) string {
	if r == nil {
		return "unknown"
	}
	return r.Status
}

// plan returns the child flow's plan: the library file's version (stored in Redis, not
// made current: only saving a flow does that), else the current version in Redis.
func (s *Subflows) plan(ctx context.Context, flow string) (*flows.Plan, error) {
	s.mu.Lock()
	lib := s.lib
	s.mu.Unlock()
	if lib != nil {
		data, err := lib.Load(flow)
		switch {
		case err == nil:
			p, probs, err := s.e.Compile(data)
			if err != nil {
				return nil, flows.Permanent(&flows.Error{Code: flows.Invalid, Path: "params.flow",
					Message: fmt.Sprintf("subflow %q does not compile: %d problem(s), the first: %s", flow, len(probs.Errors()), firstProblem(probs))})
			}
			if p.Flow != flow {
				return nil, flows.Permanent(&flows.Error{Code: flows.Invalid, Path: "params.flow",
					Message: fmt.Sprintf("file %s.json holds flow %q", flow, p.Flow)})
			}
			if err := s.e.StoreVersion(ctx, p); err != nil {
				return nil, err
			}
			return p, nil
		case flows.ErrorCode(err) != flows.NotFound:
			return nil, err
		}
	}
	p, err := s.e.CurrentPlan(ctx, flow)
	if err != nil {
		if flows.ErrorCode(err) == flows.NotFound {
			return nil, flows.Permanent(&flows.Error{Code: flows.NotFound, Path: "params.flow",
				Message: fmt.Sprintf("no flow %q: it is neither in the flow library nor published in Redis", flow)})
		}
		return nil, err
	}
	return p, nil
}

func firstProblem(probs flows.Problems) string {
	if errs := probs.Errors(); len(errs) > 0 {
		return errs[0].String()
	}
	return "unknown"
}

// serve makes sure a worker of this process serves flow.
func (s *Subflows) serve(flow string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.served[flow] {
		return nil
	}
	if len(s.workers) > 0 {
		for _, w := range s.workers {
			w.Add(flow)
		}
		s.served[flow] = true
		return nil
	}
	if s.own == nil {
		ctx := s.ownCtx
		if ctx == nil {
			return errors.New("subflows: Bind was not called, so no worker can serve child flows")
		}
		s.own = s.e.NewWorker(WorkerOptions{Grace: 5 * time.Second})
		go func() { _ = s.own.Run(ctx) }()
	}
	s.own.Add(flow)
	s.served[flow] = true
	return nil
}

var _ nodes.SubflowRunner = (*Subflows)(nil)
