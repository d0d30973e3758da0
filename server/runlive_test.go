package server_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/flows/nodes"
	"github.com/sluicehq/sluice/flows/nodes/llmtest"
	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/storetest"
)

// gateLimiter is a shared rate limiter that makes every model call wait for its turn
// until open is closed.
type gateLimiter struct{ open chan struct{} }

func (g gateLimiter) Take(context.Context, string, string, []nodes.LimitScope, string, int64, time.Duration) (time.Duration, bool, error) {
	select {
	case <-g.open:
		return 0, false, nil
	default:
		return 20 * time.Millisecond, false, nil
	}
}

func (gateLimiter) Mark(context.Context, string, []nodes.LimitScope, string, bool, int64) error {
	return nil
}

func (gateLimiter) Pause(context.Context, string, string, time.Duration) error { return nil }

// A step waiting for its turn under a provider's rate limit shows on the run page as
// waiting for that rate limit, in the timeline; once it goes on and commits, the run
// page shows its step and no wait.
func TestRunPageShowsAStepWaitingForTheRateLimit(t *testing.T) {
	r := storetest.Real(t)
	model := llmtest.New(t)
	model.Respond(func(llmtest.Request) llmtest.Reply { return llmtest.Text("ok") })
	gate := gateLimiter{open: make(chan struct{})}
	env := model.Env(0)
	env.Providers["limited"] = model.Provider("limited", 0)
	env.Providers["limited"].RateLimit = &nodes.RateLimit{Requests: 1}
	env.Limiter = gate
	a := newAPIWith(t, r, env)
	flow := a.saveFlow(`{"sluice": 1, "id": "rate-limit-page", "nodes": [
		{"id": "in", "type": "input"},
		{"id": "ask", "type": "llm", "params": {"provider": "limited", "model": "m", "user": "hi"}},
		{"id": "out", "type": "output"}],
		"edges": [{"from": "in", "to": "ask"}, {"from": "ask", "to": "out"}]}`, nil)
	id := a.start(flow, map[string]any{"input": map[string]any{}})
	page := func() string {
		return a.must(http.StatusOK, "GET", "/flows/"+flow+"/runs/"+id, nil, "Accept", "text/html").String()
	}
	liveRow := func(p string) string {
		i := strings.Index(p, `data-live-step=`)
		if i < 0 {
			return ""
		}
		j := strings.Index(p[i:], "</li>")
		return p[max(0, i-80) : i+j]
	}
	eventually(t, 10*time.Second, func() string {
		row := liveRow(page())
		if !strings.Contains(row, `class="live rate-limit"`) || !strings.Contains(row, `data-node="ask"`) ||
			!strings.Contains(row, "waiting for its turn under the rate limit of limited (model m)") || !strings.Contains(row, "status-waiting") {
			return "the run page shows no rate-limit wait of ask: " + row
		}
		return ""
	})
	if model.Calls() != 0 {
		t.Errorf("%d model calls while the limiter holds the step, want 0", model.Calls())
	}
	close(gate.open)
	if run := a.settle(flow, id); run.Status != store.StatusSucceeded {
		t.Fatalf("run %+v after its turn came", run)
	}
	p := page()
	if row := liveRow(p); row != "" {
		t.Errorf("a finished run's page still shows a step in progress: %s", row)
	}
	if !strings.Contains(p, `data-node="ask"`) {
		t.Error("the finished run's timeline has no step of ask")
	}
}
