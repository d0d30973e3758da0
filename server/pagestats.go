package server

import (
	"fmt"
	"sort"
	"time"

	"github.com/sluicehq/sluice/flows"
	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/templ/pages"
)

// What the pages show of runs' cost and health: tokens and dollars by node on the run
// page, success rate and median duration on the flows page.

// costText shows an estimated cost in dollars ("" for none).
func costText(usd float64) string {
	switch {
	case usd <= 0:
		return ""
	case usd < 0.0001:
		return "<$0.0001"
	}
	return fmt.Sprintf("$%.4f", usd)
}

// usageByNode adds up the tokens and cost of a run's committed steps by node, in the
// order nodes first ran; nil when no step spent a token.
func usageByNode(ckpts []store.Checkpoint) *pages.Usage {
	byNode := map[string]*flows.Usage{}
	steps := map[string]int{}
	var order []string
	var total flows.Usage
	for _, cp := range ckpts {
		if !cp.IsState() || cp.Kind == "input" || cp.Kind == "send" {
			continue
		}
		u := byNode[cp.Node]
		if u == nil {
			u = &flows.Usage{}
			byNode[cp.Node] = u
			order = append(order, cp.Node)
		}
		*u = u.Add(cp.Usage)
		steps[cp.Node]++
		total = total.Add(cp.Usage)
	}
	if total.InputTokens == 0 && total.OutputTokens == 0 {
		return nil
	}
	row := func(node string, n int, u flows.Usage) pages.NodeUsage {
		return pages.NodeUsage{Node: node, Steps: n, Input: u.InputTokens, Output: u.OutputTokens, Cached: u.CacheReadTokens, Cost: costText(u.CostUSD)}
	}
	out := &pages.Usage{}
	all := 0
	for _, n := range order {
		if u := byNode[n]; u.InputTokens > 0 || u.OutputTokens > 0 {
			out.Nodes = append(out.Nodes, row(n, steps[n], *u))
		}
		all += steps[n]
	}
	out.Total = row("", all, total)
	return out
}

// recentRuns is how many of a flow's newest runs the flows page sums up.
const recentRuns = 50

// recentStats sums up a flow's newest runs (newest first): of those finished, the share
// that succeeded and the median time from creation to end. Cancelled runs are left out
// of the rate: a person stopped them. nil when none has finished.
func recentStats(runs []*store.Run) *pages.RunStats {
	var durations []time.Duration
	succeeded, judged := 0, 0
	for _, r := range runs {
		if !store.Finished(r.Status) || r.Finished == nil {
			continue
		}
		durations = append(durations, r.Finished.Sub(r.Created))
		if r.Status == store.StatusCancelled {
			continue
		}
		judged++
		if r.Status == store.StatusSucceeded {
			succeeded++
		}
	}
	if len(durations) == 0 {
		return nil
	}
	sort.Slice(durations, func(i, j int) bool { return durations[i] < durations[j] })
	mid := len(durations) / 2
	median := durations[mid]
	if len(durations)%2 == 0 {
		median = (durations[mid-1] + durations[mid]) / 2
	}
	st := &pages.RunStats{Finished: len(durations), Median: durationText(float64(median.Microseconds()) / 1000), SuccessRate: "—"}
	if judged > 0 {
		st.Percent = succeeded * 100 / judged
		st.SuccessRate = fmt.Sprintf("%d%%", st.Percent) // rounded down: one failure never shows 100%
	}
	return st
}
