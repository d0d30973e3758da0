package engine

import (
	"context"
	"fmt"

	"github.com/sluicehq/sluice/flows"
)

// ReplayOptions say how a run is replayed.
type ReplayOptions struct {
	// Target is the version the replay runs on; nil: the original's.
	Target *flows.Plan
	// Checkpoint, when set, starts the replay from the state after that checkpoint of
	// the original (as a fork does); "" from the original's input.
	Checkpoint string
	// Reuse gives back the recorded output of every step whose node's definition and
	// input are unchanged, instead of calling its component again.
	Reuse bool
	// RunID names the replay (it must be new); "" generates one.
	RunID string
	// SameKeys makes the replay's outbound calls send the original's idempotency keys,
	// so that a receiver that did a call already does not do it again; by default a
	// replay is a new run and sends keys of its own.
	SameKeys bool
	// By is who asked for the replay (StartOptions.By).
	By string
	// Environment names the environment whose version Target is, when the replay was
	// started through one: the replay records it.
	Environment string
}

// Replay starts a new run that replays run: on a chosen version, with the same input or
// from one of its checkpoints. The two are linked both ways (the replay's replay_of, the
// original's replayed_as); nothing else of the original changes. The replay's outbound
// calls carry idempotency keys of its own (it is another run).
func (e *Engine) Replay(ctx context.Context, flow, run string, o ReplayOptions) (string, error) {
	orig, err := e.Get(ctx, flow, run)
	if err != nil {
		return "", err
	}
	from, err := e.Plan(ctx, flow, orig.Version)
	if err != nil && o.Target == nil {
		return "", err
	}
	plan := o.Target
	if plan == nil {
		plan = from
	}
	var pins map[string]Pin
	if o.Reuse {
		if from == nil {
			return "", &flows.Error{Code: flows.Conflict, Flow: flow, Path: "reuse", Message: fmt.Sprintf("version %.12s of run %s is no longer stored: its recorded outputs cannot be matched; replay without reuse", orig.Version, run)}
		}
		if pins, err = e.recordedOutputs(ctx, orig, from, plan); err != nil {
			return "", err
		}
	}
	keysOf := ""
	if o.SameKeys {
		keysOf = run
		if orig.KeysOf != "" {
			keysOf = orig.KeysOf // a replay of a replay keeps the first run's
		}
	}
	var id string
	if o.Checkpoint == "" {
		id, err = e.Start(ctx, plan, orig.Input, StartOptions{RunID: o.RunID, Trigger: "replay", ReplayOf: run, Pins: pins, KeysOf: keysOf, Environment: o.Environment, By: o.By})
	} else {
		id, err = e.Fork(ctx, flow, run, o.Checkpoint, nil, ForkOptions{Plan: plan, RunID: o.RunID, Replay: true, Pins: pins, KeysOf: keysOf, Environment: o.Environment, By: o.By})
	}
	if err != nil {
		return "", err
	}
	if err := e.rdb.LinkReplay(ctx, orig.Ref(), id); err != nil {
		e.log.Warn("replay: cannot link the original to its replay", "flow", flow, "run", run, "replay", id, "error", err)
	}
	return id, nil
}
