package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/sluicehq/sluice/flows"
	"github.com/sluicehq/sluice/store"
)

// makeCurrent makes a stored version the flow's current version and records it in the
// flow's version history.
func (e *Engine) makeCurrent(ctx context.Context, p *flows.Plan, message string) error {
	// A flow with schedules, even disabled ones, is looked at by the schedulers: they move
	// the marker of a disabled or paused schedule past its ticks, so that enabling it
	// later does not run a tick from while it was off.
	// With environments, the schedules that run may be another environment's version's
	// (SchedulePlan): the flow stays looked at while any of them has schedules.
	scheduled, err := e.scheduled(ctx, p.Flow, p, true)
	if err != nil {
		return err
	}
	return e.rdb.SetCurrent(ctx, p.Flow, p.Version, store.CurrentOptions{Message: message, Scheduled: scheduled})
}

// PublishWithMessage publishes a plan (Publish) and notes message on its version.
func (e *Engine) PublishWithMessage(ctx context.Context, p *flows.Plan, message string) error {
	if err := e.StoreVersion(ctx, p); err != nil {
		return err
	}
	if err := e.makeCurrent(ctx, p, message); err != nil {
		return err
	}
	e.tellWorkers(p.Flow, -1) // the new current version's limits
	return nil
}

// VersionRuns are figures of one version's runs, from the flow's newest runs.
type VersionRuns struct {
	Runs      int   `json:"runs"`
	Succeeded int   `json:"succeeded"`
	Failed    int   `json:"failed"`
	Cancelled int   `json:"cancelled"`
	Active    int   `json:"active"` // queued, running or waiting
	Tokens    int64 `json:"tokens"`
	// MeanMS is the mean duration of the finished runs, from their start.
	MeanMS float64 `json:"mean_ms"`
}

// Version is one version of a flow's history.
type Version struct {
	store.VersionInfo
	Name  string       `json:"name,omitempty"`
	Nodes int          `json:"nodes"`
	Stats *VersionRuns `json:"runs,omitempty"`
	// By is who saved the version (store.NoteSavedBy); "" for one made from a file.
	By string `json:"by,omitempty"`
	// Environments are the environments that point at this version, in promotion order.
	Environments []string `json:"environments,omitempty"`
}

// VersionHistory is a flow's versions, newest first.
type VersionHistory struct {
	Flow     string    `json:"flow"`
	Current  string    `json:"current,omitempty"`
	Versions []Version `json:"versions"`
	// RunsLooked is how many of the flow's newest runs the figures are from.
	RunsLooked int `json:"runs_looked"`
	// Environments are the workspace's environments, in promotion order, with the
	// version each points at (docs/environments.md).
	Environments []EnvState `json:"environments"`
}

// statsWindow is how many of a flow's newest runs per-version figures are taken from.
const statsWindow = 2000

// maxVersions bounds how many versions a history lists.
const maxVersions = 500

// Versions returns a flow's version history, with figures of each version's runs.
func (e *Engine) Versions(ctx context.Context, flow string) (*VersionHistory, error) {
	if !flows.ValidFlowID(flow) {
		return nil, &flows.Error{Code: flows.NotFound, Flow: flow, Message: "no such flow"}
	}
	infos, current, err := e.rdb.Versions(ctx, flow, maxVersions)
	if err != nil {
		return nil, err
	}
	if len(infos) == 0 {
		return nil, &flows.Error{Code: flows.NotFound, Flow: flow, Message: "the flow has no saved version"}
	}
	sums, err := e.rdb.RunSummaries(ctx, flow, statsWindow)
	if err != nil {
		return nil, err
	}
	stats := runStats(sums)
	by, err := e.rdb.SavedBy(ctx, flow)
	if err != nil {
		return nil, err
	}
	envs, err := e.FlowEnvironments(ctx, flow)
	if err != nil {
		return nil, err
	}
	h := &VersionHistory{Flow: flow, Current: current, RunsLooked: len(sums), Versions: make([]Version, 0, len(infos)), Environments: envs}
	for _, vi := range infos {
		v := Version{VersionInfo: vi, Stats: stats[vi.Version], By: by[vi.Version]}
		for _, x := range envs {
			if x.Version == vi.Version {
				v.Environments = append(v.Environments, x.Name)
			}
		}
		if doc, err := e.rdb.VersionDoc(ctx, flow, vi.Version); err == nil {
			var head struct {
				Name  string            `json:"name"`
				Nodes []json.RawMessage `json:"nodes"`
			}
			_ = json.Unmarshal(doc, &head)
			v.Name, v.Nodes = head.Name, len(head.Nodes)
		}
		if v.Stats == nil {
			v.Stats = &VersionRuns{}
		}
		h.Versions = append(h.Versions, v)
	}
	return h, nil
}

func runStats(sums []store.RunSummary) map[string]*VersionRuns {
	out := map[string]*VersionRuns{}
	total := map[string]time.Duration{}
	for _, s := range sums {
		st := out[s.Version]
		if st == nil {
			st = &VersionRuns{}
			out[s.Version] = st
		}
		st.Runs++
		st.Tokens += s.Tokens
		switch s.Status {
		case store.StatusSucceeded:
			st.Succeeded++
		case store.StatusFailed:
			st.Failed++
		case store.StatusCancelled:
			st.Cancelled++
		default:
			st.Active++
		}
		if store.Finished(s.Status) && !s.Started.IsZero() && !s.Finished.IsZero() {
			total[s.Version] += s.Finished.Sub(s.Started)
		}
	}
	for v, st := range out {
		if n := st.Succeeded + st.Failed + st.Cancelled; n > 0 {
			st.MeanMS = float64(total[v].Microseconds()) / 1000 / float64(n)
		}
	}
	return out
}

// ResolveVersion turns a version or a unique prefix of one (at least 7 characters) of the
// flow's history into the full version.
func (e *Engine) ResolveVersion(ctx context.Context, flow, v string) (string, error) {
	v = strings.ToLower(strings.TrimSpace(v))
	if len(v) == 64 {
		return v, nil
	}
	if len(v) < 7 || strings.Trim(v, "0123456789abcdef") != "" {
		return "", &flows.Error{Code: flows.NotFound, Flow: flow, Path: "version", Message: fmt.Sprintf("%q is not a version: give its 64 hex digits or at least the first 7", v)}
	}
	infos, _, err := e.rdb.Versions(ctx, flow, maxVersions)
	if err != nil {
		return "", err
	}
	var found []string
	for _, vi := range infos {
		if strings.HasPrefix(vi.Version, v) {
			found = append(found, vi.Version)
		}
	}
	switch len(found) {
	case 0:
		return "", &flows.Error{Code: flows.NotFound, Flow: flow, Path: "version", Message: fmt.Sprintf("no version %s in the flow's history", v)}
	case 1:
		return found[0], nil
	}
	return "", &flows.Error{Code: flows.Conflict, Flow: flow, Path: "version", Message: fmt.Sprintf("%s names %d versions: give more digits", v, len(found))}
}

// VersionDetail is one version: its history entry, its document and its runs' figures.
type VersionDetail struct {
	Version
	Document json.RawMessage `json:"document"`
}

// Version returns one version of a flow, the document exactly as it was saved.
func (e *Engine) Version(ctx context.Context, flow, version string) (*VersionDetail, error) {
	v, err := e.ResolveVersion(ctx, flow, version)
	if err != nil {
		return nil, err
	}
	doc, err := e.rdb.VersionDoc(ctx, flow, v)
	if err != nil {
		return nil, err
	}
	vi, _, err := e.rdb.VersionInfoOf(ctx, flow, v)
	if err != nil {
		return nil, err
	}
	d := &VersionDetail{Version: Version{VersionInfo: vi}, Document: doc}
	var head struct {
		Name  string            `json:"name"`
		Nodes []json.RawMessage `json:"nodes"`
	}
	_ = json.Unmarshal(doc, &head)
	d.Name, d.Nodes = head.Name, len(head.Nodes)
	if sums, err := e.rdb.RunSummaries(ctx, flow, statsWindow); err == nil {
		d.Stats = runStats(sums)[v]
	}
	if d.Stats == nil {
		d.Stats = &VersionRuns{}
	}
	return d, nil
}

// VersionDiff is what changed from one version to another.
type VersionDiff struct {
	From string `json:"from"`
	To   string `json:"to"`
	*flows.DocumentDiff
}

// DiffVersions compares two versions of a flow (from the older).
func (e *Engine) DiffVersions(ctx context.Context, flow, from, to string) (*VersionDiff, error) {
	docs := make([]*flows.Document, 2)
	full := make([]string, 2)
	for i, v := range []string{from, to} {
		fv, err := e.ResolveVersion(ctx, flow, v)
		if err != nil {
			return nil, err
		}
		raw, err := e.rdb.VersionDoc(ctx, flow, fv)
		if err != nil {
			return nil, err
		}
		var d flows.Document
		if err := json.Unmarshal(raw, &d); err != nil {
			return nil, &flows.Error{Code: flows.Invalid, Flow: flow, Message: fmt.Sprintf("version %.12s is not a readable document: %v", fv, err)}
		}
		docs[i], full[i] = &d, fv
	}
	return &VersionDiff{From: full[0], To: full[1], DocumentDiff: flows.DiffDocuments(docs[0], docs[1])}, nil
}

// RollbackPlan is the plan of a version to roll back to: the version compiled again from
// Redis with today's components. A version that no longer compiles cannot be made
// current (its problems say why).
func (e *Engine) RollbackPlan(ctx context.Context, flow, version string) (*flows.Plan, error) {
	v, err := e.ResolveVersion(ctx, flow, version)
	if err != nil {
		return nil, err
	}
	doc, err := e.rdb.VersionDoc(ctx, flow, v)
	if err != nil {
		return nil, err
	}
	p, _, err := e.Compile(doc)
	if err != nil {
		return nil, err
	}
	if p.Flow != flow {
		return nil, &flows.Error{Code: flows.Invalid, Flow: flow, Message: fmt.Sprintf("version %.12s holds flow %q", v, p.Flow)}
	}
	return p, nil
}
