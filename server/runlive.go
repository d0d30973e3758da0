package server

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"time"

	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/templ/pages"
)

// liveScan is how many of the newest entries of a run's events stream the run page reads
// to tell what its steps are doing now.
const liveScan = 2000

// liveSteps is what the steps of a run still going are doing now, read from its recent
// events: started and not committed yet, or waiting for their turn under a provider's
// shared rate limit. It folds the events as the editor's run view does
// (ui/src/flow/runview.ts); nil when the run is finished or its events cannot be read.
func (s *Server) liveSteps(ctx context.Context, run *store.Run) []pages.LiveStep {
	if s.rdb == nil || store.Finished(run.Status) {
		return nil
	}
	evs, err := s.rdb.RecentRunEvents(ctx, run.Ref(), run.Created, liveScan)
	if err != nil {
		return nil
	}
	return foldLive(evs)
}

// foldLive folds a run's events, oldest first, into the steps in progress, in the order
// they last moved.
func foldLive(evs []store.Event) []pages.LiveStep {
	type live struct {
		step    pages.LiveStep
		started time.Time // when its attempt started (or first showed)
		at      string    // the event id that last moved it
	}
	steps := map[string]*live{}
	for _, ev := range evs {
		if ev.Node == "" {
			continue
		}
		var data struct {
			Attempt  int    `json:"attempt"`
			Waiting  bool   `json:"waiting"`
			Provider string `json:"provider"`
			Model    string `json:"model"`
		}
		_ = json.Unmarshal(ev.Data, &data)
		at := store.EventTime(ev.ID)
		cur := steps[ev.Node]
		if cur == nil {
			cur = &live{step: pages.LiveStep{Node: ev.Node}, started: at}
		}
		running := func() {
			cur.step.Status, cur.step.RateLimit, cur.step.Note = "running", false, ""
			cur.step.Since, cur.step.SinceISO = clock(cur.started)
		}
		switch ev.Type {
		case "start":
			cur.started = at
			cur.step.Attempt = data.Attempt
			running()
		case "retry", "resumed", "token", "tokens", "turn":
			if cur.step.Status != "running" {
				running()
			}
		case "rate_limit":
			if !data.Waiting {
				running()
				break
			}
			provider := data.Provider
			if provider == "" {
				provider = "the provider"
			}
			cur.step.Status, cur.step.RateLimit = "waiting", true
			cur.step.Note = "waiting for its turn under the rate limit of " + provider
			if data.Model != "" {
				cur.step.Note += fmt.Sprintf(" (model %s)", data.Model)
			}
			cur.step.Since, cur.step.SinceISO = clock(at)
		case "step", "dead", "retried":
			// Committed (or waiting for an approval, which the page shows by itself),
			// failed for good, or queued again: no longer in progress.
			delete(steps, ev.Node)
			continue
		default:
			continue
		}
		cur.at = ev.ID
		steps[ev.Node] = cur
	}
	out := make([]*live, 0, len(steps))
	for _, l := range steps {
		out = append(out, l)
	}
	sort.Slice(out, func(i, j int) bool { return store.CompareStreamIDs(out[i].at, out[j].at) < 0 })
	res := make([]pages.LiveStep, len(out))
	for i, l := range out {
		res[i] = l.step
	}
	return res
}

// clock is a time as the page shows it (the server's zone; the page's script rewrites it
// in the browser's from the RFC 3339 form).
func clock(t time.Time) (text, iso string) {
	if t.IsZero() {
		return "", ""
	}
	return t.Local().Format("15:04:05"), t.UTC().Format(time.RFC3339Nano)
}
