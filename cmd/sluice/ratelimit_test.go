package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/flows/engine"
	"github.com/sluicehq/sluice/flows/nodes"
	"github.com/sluicehq/sluice/flows/nodes/llmtest"
	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/storetest"
)

// Three worker processes share one provider's rate limit through Redis: a burst of 100
// runs against a limit of 10 requests per 2 seconds (the providers file's window, so the
// test takes seconds, not minutes) never gives the provider more than 10 requests in
// any 2-second window, and no run fails: steps wait for their turn.
func TestRateLimitIsSharedByThreeWorkerProcesses(t *testing.T) {
	const limit, window, runs = 10, 2 * time.Second, 100
	r := storetest.Real(t)
	ctx := context.Background()

	var mu sync.Mutex
	var arrivals []time.Time
	model := llmtest.New(t)
	model.Respond(func(llmtest.Request) llmtest.Reply {
		mu.Lock()
		arrivals = append(arrivals, time.Now())
		mu.Unlock()
		return llmtest.Text("ok")
	})

	flow := storetest.FlowID(t)
	storetest.DeleteFlowKeys(t, r, flow)
	provider := "rl-" + flow[len(flow)-8:]
	t.Cleanup(func() {
		iter := r.Client.Scan(ctx, 0, "sluice:{rl:"+provider+"}:*", 100).Iterator()
		for iter.Next(ctx) {
			r.Client.Del(ctx, iter.Val())
		}
	})
	dir := t.TempDir()
	doc := fmt.Sprintf(`{"sluice": 1, "id": %q, "nodes": [
		{"id": "in", "type": "input"},
		{"id": "ask", "type": "llm", "params": {"provider": %q, "model": "m", "user": "{{.n}}"}},
		{"id": "out", "type": "output", "params": {"value": ".answer"}}],
		"edges": [{"from": "in", "to": "ask"}, {"from": "ask", "to": "out"}]}`, flow, provider)
	flowPath := filepath.Join(dir, flow+".json")
	providers := fmt.Sprintf(`{"providers": {%q: {"base_url": %q, "max_retries": 0, "rate_limit": {"requests": %d, "per": %q}}}}`,
		provider, model.URL, limit, window)
	provPath := filepath.Join(dir, "providers.json")
	for p, b := range map[string]string{flowPath: doc, provPath: providers} {
		if err := os.WriteFile(p, []byte(b), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	serving := regexp.MustCompile(`msg="serving flow"`)
	for range 3 {
		p := start(t, []string{"REDIS_URL=" + storetest.URL()}, "worker", flowPath, "--providers", provPath, "--log-level", "info")
		p.waitLine(t, serving, 20*time.Second)
	}

	// The runs are started from here; only the workers run them.
	retries := 0
	env := &nodes.Env{Providers: map[string]*nodes.Provider{provider: {Name: provider, BaseURL: model.URL, MaxRetries: &retries}}}
	e := engine.New(r, nodes.NewRegistry(env), engine.Options{})
	b, _ := os.ReadFile(flowPath)
	plan, _, err := e.Compile(b)
	if err != nil {
		t.Fatal(err)
	}
	ids := make([]string, runs)
	for i := range ids {
		if ids[i], err = e.Start(ctx, plan, json.RawMessage(fmt.Sprintf(`{"n": %d}`, i)), engine.StartOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	wctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	for _, id := range ids {
		run, err := e.Wait(wctx, flow, id)
		if err != nil {
			t.Fatalf("run %s: %v", id, err)
		}
		if run.Status != store.StatusSucceeded || run.LastError != "" {
			t.Errorf("run %s %s (last error %q), want succeeded at the first attempt", id, run.Status, run.LastError)
		}
	}

	mu.Lock()
	got := append([]time.Time(nil), arrivals...)
	mu.Unlock()
	if len(got) != runs {
		t.Fatalf("the provider got %d requests, want %d", len(got), runs)
	}
	sort.Slice(got, func(i, j int) bool { return got[i].Before(got[j]) })
	// Slots are granted on Redis's clock in whole milliseconds (up to 1 ms early), and a
	// request reaches the provider a moment after its grant, a moment that varies with
	// the load on the machine. A window short by less than that is the variation; an
	// eleventh slot in a window would come seconds early, not milliseconds.
	const jitter = 50 * time.Millisecond
	for i := 0; i+limit < len(got); i++ {
		if d := got[i+limit].Sub(got[i]); d < window-jitter {
			t.Errorf("requests %d to %d came within %s: %d requests in one %s window, the limit is %d", i, i+limit, d, limit+1, window, limit)
		}
	}
	// The steps that waited showed it: rate_limit events, waiting then going on.
	evs, err := r.EventsAfter(ctx, flow, "0-0", 100000)
	if err != nil {
		t.Fatal(err)
	}
	waiting := 0
	for _, ev := range evs {
		if ev.Type == "rate_limit" && strings.Contains(string(ev.Data), `"waiting":true`) {
			waiting++
		}
	}
	if waiting == 0 {
		t.Error("no step published that it waited for the rate limit")
	}
}
