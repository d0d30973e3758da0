package server

import (
	"testing"
	"time"

	"github.com/sluicehq/sluice/flows"
	"github.com/sluicehq/sluice/store"
)

func TestRecentStatsLeaveCancelledRunsOutOfTheRate(t *testing.T) {
	at := time.Unix(1000, 0)
	run := func(status string, took time.Duration) *store.Run {
		r := &store.Run{Status: status, Created: at}
		if store.Finished(status) {
			end := at.Add(took)
			r.Finished = &end
		}
		return r
	}
	for _, tc := range []struct {
		name       string
		runs       []*store.Run
		rate, mean string
	}{
		{"none finished", []*store.Run{run(store.StatusRunning, 0)}, "", ""},
		{"odd count: the middle one", []*store.Run{run(store.StatusSucceeded, time.Second), run(store.StatusFailed, 3*time.Second), run(store.StatusSucceeded, 2*time.Second)}, "66%", "2.00 s"},
		{"even count: the mean of the middle two", []*store.Run{run(store.StatusSucceeded, 100*time.Millisecond), run(store.StatusSucceeded, 300*time.Millisecond)}, "100%", "200 ms"},
		{"cancelled runs count for the time only", []*store.Run{run(store.StatusCancelled, time.Second), run(store.StatusSucceeded, time.Second), run(store.StatusRunning, 0)}, "100%", "1.00 s"},
		{"only cancelled", []*store.Run{run(store.StatusCancelled, time.Second)}, "—", "1.00 s"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := recentStats(tc.runs)
			if tc.rate == "" {
				if st != nil {
					t.Errorf("stats %+v, want none", st)
				}
				return
			}
			if st == nil || st.SuccessRate != tc.rate || st.Median != tc.mean {
				t.Errorf("stats %+v, want rate %s and median %s", st, tc.rate, tc.mean)
			}
		})
	}
	many := []*store.Run{}
	for i := 0; i < 199; i++ {
		many = append(many, run(store.StatusSucceeded, time.Second))
	}
	if st := recentStats(append(many, run(store.StatusFailed, time.Second))); st.SuccessRate != "99%" {
		t.Errorf("199 of 200: %s, want 99%% (rounded down, never 100%%)", st.SuccessRate)
	}
}

func TestUsageByNodeSumsCommittedStepsOnly(t *testing.T) {
	cps := []store.Checkpoint{
		{Kind: "input"},
		{Node: "ask", Kind: "step", Usage: flows.Usage{InputTokens: 100, OutputTokens: 10, CostUSD: 0.0003}},
		{Node: "ask", Kind: "error"},
		{Node: "tool", Kind: "step"},
		{Node: "ask", Kind: "turn", Usage: flows.Usage{InputTokens: 999}},
		{Node: "ask", Kind: "step", Usage: flows.Usage{InputTokens: 200, OutputTokens: 20, CacheReadTokens: 50, CostUSD: 0.00055}},
	}
	u := usageByNode(cps)
	if u == nil || len(u.Nodes) != 1 || u.Nodes[0].Node != "ask" || u.Nodes[0].Steps != 2 || u.Nodes[0].Input != 300 || u.Nodes[0].Cached != 50 || u.Nodes[0].Cost != "$0.0009" {
		t.Fatalf("usage %+v", u)
	}
	if u.Total.Steps != 3 || u.Total.Output != 30 || u.Total.Cost != "$0.0009" {
		t.Errorf("total %+v", u.Total)
	}
	if usageByNode(cps[:1]) != nil {
		t.Error("a run that spent no token has a usage table")
	}
}
