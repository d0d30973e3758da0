package engine

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"sync"
	"time"

	"github.com/sluicehq/sluice/flows"
)

// runFunc runs a job's component.
type runFunc func(ctx context.Context, j *job) (*flows.Result, error)

// middleware wraps a runFunc with one concern, as watermill's router middlewares wrap
// handlers.
type middleware func(runFunc) runFunc

// component is the innermost runFunc: the node's component itself. Secret values that
// come back from it (an upstream echoing a header) go no further: not into a
// checkpoint, event, dead letter or log line (flows/secrets.go).
func component(ctx context.Context, j *job) (*flows.Result, error) {
	res, err := j.node.Component.Run(ctx, j.step)
	if err == nil && res == nil {
		res = &flows.Result{}
	}
	return flows.RedactStep(j.plan.Flow, res, err)
}

// pinned is the runFunc of a step whose output is pinned for its run: what the pin holds,
// without running the component.
func pinned(_ context.Context, j *job) (*flows.Result, error) {
	res := &flows.Result{Ports: j.pin.Ports, Pinned: true}
	if len(j.pin.Output) > 0 {
		v, err := flows.DecodeJSON(j.pin.Output)
		if err != nil {
			return nil, flows.Permanent(&flows.Error{Code: flows.Invalid, Node: j.node.ID, Path: "pins." + j.node.ID + ".output", Err: err})
		}
		res.Output = v
	}
	if len(j.pin.Update) > 0 {
		u, err := flows.DecodeState(j.pin.Update)
		if err != nil {
			return nil, flows.Permanent(&flows.Error{Code: flows.Invalid, Node: j.node.ID, Path: "pins." + j.node.ID + ".update", Err: err})
		}
		res.Update = u
	}
	return res, nil
}

// chain applies middlewares, the first one outermost.
func chain(f runFunc, mws ...middleware) runFunc {
	for i := len(mws) - 1; i >= 0; i-- {
		f = mws[i](f)
	}
	return f
}

// withDeadline runs the step under its node's timeout and says so when it ran out.
func withDeadline(next runFunc) runFunc {
	return func(ctx context.Context, j *job) (*flows.Result, error) {
		sctx, cancel := context.WithTimeout(ctx, j.node.Timeout)
		defer cancel()
		res, err := next(sctx, j)
		if err != nil && ctx.Err() == nil && errors.Is(sctx.Err(), context.DeadlineExceeded) {
			err = fmt.Errorf("step timed out after %s: %w", j.node.Timeout, err)
		}
		return res, err
	}
}

// withRecover turns a panic in the component into an error.
func withRecover(next runFunc) runFunc {
	return func(ctx context.Context, j *job) (res *flows.Result, err error) {
		defer func() {
			if r := recover(); r != nil {
				_, err = flows.RedactStep(j.plan.Flow, nil, fmt.Errorf("component panicked: %v\n%s", r, truncate(string(debug.Stack()), 2000)))
				res = nil
			}
		}()
		return next(ctx, j)
	}
}

// withAnnounce tells the live views that a step is running once it has taken a moment,
// or before the first event the step emits, whichever comes first: the views start a
// step's streamed text afresh at "start", so a token that came before it would be lost.
func (e *Engine) withAnnounce(next runFunc) runFunc {
	return func(ctx context.Context, j *job) (*flows.Result, error) {
		a := j.a
		var once sync.Once
		announce := func() {
			once.Do(func() {
				j.emitted.Store(true)
				e.events.emit(a.Ref(), a.Node, "start", map[string]any{"status": "running", "attempt": a.Attempt()})
			})
		}
		t := time.AfterFunc(50*time.Millisecond, announce)
		defer t.Stop()
		if j.step != nil && j.step.Emit != nil {
			emit := j.step.Emit
			j.step.Emit = func(kind string, data any) {
				announce()
				emit(kind, data)
			}
		}
		return next(ctx, j)
	}
}

// errRunCancelled is the cause of a step's context when its run was cancelled.
var errRunCancelled = errors.New("the run was cancelled")

// withCancel registers the step as in flight, so that cancelling its run (here, or in
// another process, seen by the cancel watch) cancels its context with errRunCancelled.
func (w *Worker) withCancel(next runFunc) runFunc {
	return func(ctx context.Context, j *job) (*flows.Result, error) {
		sctx, cancel := context.WithCancelCause(ctx)
		defer cancel(nil)
		w.inflight.setCancel(j.a, cancel)
		defer w.inflight.setCancel(j.a, nil)
		return next(sctx, j)
	}
}

// execute runs a job through the middlewares and builds its commit. It reports the
// component's time; err is the step's failure.
func (w *Worker) execute(j *job) (*built, error) {
	run := w.run
	switch {
	case j.node.Bounded(), j.node.JoinsInline():
		run = w.runBounded
	case j.node.Pure():
		run = w.runPure
	}
	if j.pin != nil {
		run = pinned
	}
	started := time.Now()
	res, err := run(w.stepCtx(j), j)
	dur := time.Since(started)
	if err != nil {
		return nil, err
	}
	b, err := w.e.build(w.hard, j, w.consumer, res, dur)
	if err != nil && len(res.Turns) > 0 && j.step.SaveTurn != nil {
		// The step fails after its last turns: they go in its history anyway, as they
		// would have one by one (the model's reply that the output mapping refused).
		for _, t := range res.Turns {
			if serr := j.step.SaveTurn(w.hard, t); serr != nil {
				break
			}
		}
	}
	return b, err
}
