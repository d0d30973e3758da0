package engine

import (
	"context"
	"fmt"
	"strings"

	"github.com/sluicehq/sluice/flows"
	"github.com/sluicehq/sluice/store"
)

// Environments (docs/environments.md) replace the single current version: each of a
// workspace's environments points at one version of each flow. The first environment
// is where saving lands (its pointer is the flow's current version); the others move
// only by promotion. This file resolves a version through an environment and moves
// environments; gating a promotion on the flow's test cases is the caller's (package
// cases runs them), and the engine refuses a gated promotion without a passing result.

// Environments returns workspace ws's environments, in promotion order.
func (e *Engine) Environments(ctx context.Context, ws string) ([]store.Environment, error) {
	return e.rdb.Environments(ctx, ws)
}

// environment finds env among the environments of flow's workspace.
func (e *Engine) environment(ctx context.Context, flow, env string) ([]store.Environment, int, error) {
	ws := store.WorkspaceOf(flow)
	envs, err := e.rdb.Environments(ctx, ws)
	if err != nil {
		return nil, 0, err
	}
	for i, x := range envs {
		if x.Name == env {
			return envs, i, nil
		}
	}
	return nil, 0, &flows.Error{Code: flows.NotFound, Flow: flow, Path: "environment",
		Message: fmt.Sprintf("no environment %q in workspace %q: it has %s", env, ws, envNames(envs))}
}

// Environment returns environment env of flow's workspace and whether it is the first
// (where saving lands).
func (e *Engine) Environment(ctx context.Context, flow, env string) (store.Environment, bool, error) {
	envs, i, err := e.environment(ctx, flow, env)
	if err != nil {
		return store.Environment{}, false, err
	}
	return envs[i], i == 0, nil
}

func envNames(envs []store.Environment) string {
	names := make([]string, len(envs))
	for i, x := range envs {
		names[i] = x.Name
	}
	return strings.Join(names, ", ")
}

// EnvVersion returns the version environment env points at for flow.
func (e *Engine) EnvVersion(ctx context.Context, flow, env string) (string, error) {
	envs, _, err := e.environment(ctx, flow, env)
	if err != nil {
		return "", err
	}
	vs, err := e.rdb.EnvironmentVersions(ctx, flow, envs)
	if err != nil {
		return "", err
	}
	v, ok := vs[env]
	if !ok {
		return "", &flows.Error{Code: flows.NotFound, Flow: flow, Path: "environment",
			Message: fmt.Sprintf("flow %q has no version in environment %q yet: promote one to it", flow, env)}
	}
	return v, nil
}

// EnvPlan returns the plan of the version environment env points at for flow: what a
// run started through that environment runs.
func (e *Engine) EnvPlan(ctx context.Context, flow, env string) (*flows.Plan, error) {
	v, err := e.EnvVersion(ctx, flow, env)
	if err != nil {
		return nil, err
	}
	return e.Plan(ctx, flow, v)
}

// SchedulePlan returns the plan whose schedules run for flow, and its environment:
// that of the last environment (in the workspace's order) that points at a version of
// the flow. Before anything was promoted that is the first one, which saving moves:
// schedules behave as they did before environments. Once prod has a version, prod's
// schedules run and dev's do not, so that no tick runs twice.
func (e *Engine) SchedulePlan(ctx context.Context, flow string) (*flows.Plan, string, error) {
	envs, err := e.rdb.Environments(ctx, store.WorkspaceOf(flow))
	if err != nil {
		return nil, "", err
	}
	vs, err := e.rdb.EnvironmentVersions(ctx, flow, envs)
	if err != nil {
		return nil, "", err
	}
	for i := len(envs) - 1; i >= 0; i-- {
		if v, ok := vs[envs[i].Name]; ok {
			p, err := e.Plan(ctx, flow, v)
			return p, envs[i].Name, err
		}
	}
	return nil, "", &flows.Error{Code: flows.NotFound, Flow: flow, Message: "flow has no published version"}
}

// CatalogPlans are the plans a worker takes flow's settings and its nodes' concurrency
// from, the deciding one first, and the environment whose version that one is: the
// version of the last environment (in the workspace's order) that has one, as for
// schedules — prod's once a version was promoted there, the current version before —
// then the earlier environments' versions, for the nodes only they have. A worker reads
// one stream per node whatever version an activation comes from, so one limit per node
// applies to all of them, and what was not promoted yet does not change what prod's
// runs get. Without the environments readable, the current version alone (and no
// environment). The queues page reads them too, to say what the workers serve.
func (e *Engine) CatalogPlans(ctx context.Context, flow string) ([]*flows.Plan, string) {
	var out []*flows.Plan
	envs, err := e.rdb.Environments(ctx, store.WorkspaceOf(flow))
	var vs map[string]string
	if err == nil {
		vs, err = e.rdb.EnvironmentVersions(ctx, flow, envs)
	}
	if err != nil {
		if p, err := e.CurrentPlan(ctx, flow); err == nil {
			out = append(out, p)
		}
		return out, ""
	}
	seen := map[string]bool{}
	deciding := ""
	for i := len(envs) - 1; i >= 0; i-- {
		v, ok := vs[envs[i].Name]
		if !ok || seen[v] {
			continue
		}
		seen[v] = true
		if p, err := e.Plan(ctx, flow, v); err == nil {
			if len(out) == 0 {
				deciding = envs[i].Name
			}
			out = append(out, p)
		}
	}
	return out, deciding
}

// scheduled reports whether the scheduler must look at flow: whether plan, or the
// version of any environment (but the first when skipFirst: saving is replacing it),
// has schedules. The scheduler then runs those of SchedulePlan.
func (e *Engine) scheduled(ctx context.Context, flow string, plan *flows.Plan, skipFirst bool) (bool, error) {
	if plan != nil && len(plan.Settings.Schedules) > 0 {
		return true, nil
	}
	envs, err := e.rdb.Environments(ctx, store.WorkspaceOf(flow))
	if err != nil {
		return false, err
	}
	vs, err := e.rdb.EnvironmentVersions(ctx, flow, envs)
	if err != nil {
		return false, err
	}
	for i, x := range envs {
		v, ok := vs[x.Name]
		if !ok || (i == 0 && skipFirst) {
			continue
		}
		if p, err := e.Plan(ctx, flow, v); err == nil && len(p.Settings.Schedules) > 0 {
			return true, nil
		}
	}
	return false, nil
}

// EnvState is one environment of a flow: where it points and its last promotion.
type EnvState struct {
	store.Environment
	// First says saving lands here.
	First bool `json:"first,omitempty"`
	// Version is the version it points at ("" none yet).
	Version string `json:"version,omitempty"`
	// Schedules says this environment's version's schedules are the ones that run.
	Schedules bool `json:"schedules,omitempty"`
	// Last is the last promotion into it (nil: none recorded, e.g. only saves).
	Last *store.Promotion `json:"last,omitempty"`
}

// FlowEnvironments returns each environment of flow's workspace and its version.
func (e *Engine) FlowEnvironments(ctx context.Context, flow string) ([]EnvState, error) {
	if !flows.ValidFlowID(flow) {
		return nil, &flows.Error{Code: flows.NotFound, Flow: flow, Message: "no such flow"}
	}
	envs, err := e.rdb.Environments(ctx, store.WorkspaceOf(flow))
	if err != nil {
		return nil, err
	}
	vs, err := e.rdb.EnvironmentVersions(ctx, flow, envs)
	if err != nil {
		return nil, err
	}
	proms, err := e.rdb.Promotions(ctx, flow, "", store.PromotionsMaxLen)
	if err != nil {
		return nil, err
	}
	out := make([]EnvState, len(envs))
	sched := -1
	for i, x := range envs {
		out[i] = EnvState{Environment: x, First: i == 0, Version: vs[x.Name]}
		if out[i].Version != "" {
			sched = i
		}
		for j := range proms {
			if proms[j].Environment == x.Name {
				out[i].Last = &proms[j]
				break
			}
		}
	}
	if sched >= 0 {
		out[sched].Schedules = true
	}
	return out, nil
}

// PromoteOptions say what to promote and what the promotion records.
type PromoteOptions struct {
	// Version is the version to promote (64 hex digits or a unique prefix); empty: the
	// version of environment From.
	Version string
	// From is the environment the version comes from ("": the one before the target).
	From string
	// By says who promotes (a person's email, a key's name, "cli").
	By string
	// Message is a note on the promotion (in the first environment, on the version too).
	Message string
	// Test is the result of the gate. A gated environment refuses a promotion without
	// one that passed (or says the flow has no cases, where the environment allows it).
	Test *store.PromotionTest
}

// PromotionTarget is what a promotion would move: the environment and the full version.
type PromotionTarget struct {
	Environment store.Environment
	First       bool
	From        string
	Version     string
}

// PromotionTarget resolves what promoting flow to env with o would do, without doing
// it: the environment (with its gate and role) and the version. The version must be
// in the flow's history (saved at some time) and still compile.
func (e *Engine) PromotionTarget(ctx context.Context, flow, env string, o PromoteOptions) (*PromotionTarget, error) {
	envs, i, err := e.environment(ctx, flow, env)
	if err != nil {
		return nil, err
	}
	t := &PromotionTarget{Environment: envs[i], First: i == 0, From: o.From}
	v := o.Version
	if v == "" {
		if t.From == "" {
			if i == 0 {
				return nil, &flows.Error{Code: flows.Invalid, Flow: flow, Path: "version",
					Message: fmt.Sprintf("%q is the first environment: name the version to promote to it", env)}
			}
			t.From = envs[i-1].Name
		}
		if v, err = e.EnvVersion(ctx, flow, t.From); err != nil {
			return nil, err
		}
	} else if t.From != "" {
		if _, _, err := e.environment(ctx, flow, t.From); err != nil {
			return nil, err
		}
	}
	if t.Version, err = e.ResolveVersion(ctx, flow, v); err != nil {
		return nil, err
	}
	if _, err := e.RollbackPlan(ctx, flow, t.Version); err != nil {
		return nil, err
	}
	return t, nil
}

// Promote points environment env of flow at a version (PromoteOptions) and records who
// did it, when, from where, with which test result and the version env pointed at
// before (read in the same step as the move). Runs in flight keep their version; new
// runs through env start on this one. Promoting into the first environment makes the
// version current: it is a rollback (the caller rewrites the flow's file first, and
// publishes nothing more: this is the move).
func (e *Engine) Promote(ctx context.Context, flow, env string, o PromoteOptions) (*store.Promotion, error) {
	t, err := e.PromotionTarget(ctx, flow, env, o)
	if err != nil {
		return nil, err
	}
	if t.Environment.Gate && !t.First {
		switch {
		case o.Test == nil:
			return nil, &flows.Error{Code: flows.Conflict, Flow: flow, Path: "test",
				Message: fmt.Sprintf("environment %q is gated: the flow's test cases must pass on %.12s before it is promoted there", env, t.Version)}
		case o.Test.Gate == "no cases" && t.Environment.RequireCases:
			return nil, &flows.Error{Code: flows.Conflict, Flow: flow, Path: "cases",
				Message: fmt.Sprintf("environment %q needs test cases, and flow %q has none: add some before promoting it", env, flow)}
		case o.Test.Gate != "passed" && o.Test.Gate != "no cases":
			return nil, &flows.Error{Code: flows.Conflict, Flow: flow, Path: "cases",
				Message: fmt.Sprintf("promotion to %q refused: %d of %d test cases fail on %.12s: %s", env, len(o.Test.Failing), o.Test.Cases, t.Version, strings.Join(o.Test.Failing, ", "))}
		}
	}
	plan, err := e.Plan(ctx, flow, t.Version)
	if err != nil {
		return nil, err
	}
	// Its streams' consumer groups exist before any run is started there.
	if err := e.StoreVersion(ctx, plan); err != nil {
		return nil, err
	}
	envs, i, err := e.environment(ctx, flow, env)
	if err != nil {
		return nil, err
	}
	p := &store.Promotion{Version: t.Version, From: t.From, By: o.By, Message: o.Message, Test: o.Test}
	if err := e.rdb.Promote(ctx, flow, envs, i, p); err != nil {
		return nil, err
	}
	if sched, err := e.scheduled(ctx, flow, plan, false); err == nil {
		if err := e.rdb.SetScheduled(ctx, flow, sched); err != nil {
			return p, err
		}
	}
	return p, nil
}

// Promotions returns flow's promotions, newest first, of environment env ("": all).
func (e *Engine) Promotions(ctx context.Context, flow, env string, n int64) ([]store.Promotion, error) {
	if !flows.ValidFlowID(flow) {
		return nil, &flows.Error{Code: flows.NotFound, Flow: flow, Message: "no such flow"}
	}
	if env != "" {
		if _, _, err := e.environment(ctx, flow, env); err != nil {
			return nil, err
		}
	}
	return e.rdb.Promotions(ctx, flow, env, n)
}
