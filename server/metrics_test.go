package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"os"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/sluicehq/sluice/flows/engine/dispatch"
	"github.com/sluicehq/sluice/flows/nodes"
	"github.com/sluicehq/sluice/flows/nodes/llmtest"
	"github.com/sluicehq/sluice/store/storetest"
)

// scrape reads /metrics into sample values keyed by `name{label="v",...}` (labels
// sorted, the flow label left out), keeping only series of flow.
func scrape(t *testing.T, a *api, flow string) map[string]float64 {
	t.Helper()
	r := a.must(http.StatusOK, "GET", "/metrics", nil)
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(r.String()))
	if err != nil {
		t.Fatalf("/metrics is not the text format: %v", err)
	}
	out := map[string]float64{}
	for name, f := range fams {
		for _, m := range f.Metric {
			var labels []string
			mine := false
			for _, l := range m.Label {
				if l.GetName() == "flow" {
					mine = l.GetValue() == flow
					continue
				}
				labels = append(labels, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
			}
			if !mine {
				continue
			}
			sort.Strings(labels)
			key := name + "{" + strings.Join(labels, ",") + "}"
			switch f.GetType() {
			case dto.MetricType_COUNTER:
				out[key] = m.GetCounter().GetValue()
			case dto.MetricType_GAUGE:
				out[key] = m.GetGauge().GetValue()
			case dto.MetricType_HISTOGRAM:
				out[name+"_count{"+strings.Join(labels, ",")+"}"] = float64(m.GetHistogram().GetSampleCount())
			}
		}
	}
	return out
}

// After a scripted set of runs — successes, a cache hit, a failure, dead letters, model
// calls with known token counts and prices — the run, model, cache and dead-letter
// metrics hold exactly what happened, each series by flow and node, never by run.
func TestMetricsCountRunsModelCallsCacheAndDeadLetters(t *testing.T) {
	r := storetest.Real(t)
	llm := llmtest.New(t)
	read, zero := 1.0, 0
	env := &nodes.Env{Providers: map[string]*nodes.Provider{nodes.DefaultProvider: {Name: nodes.DefaultProvider, BaseURL: llm.URL, MaxRetries: &zero,
		Prices: map[string]*nodes.Price{"m1": {Input: 2, Output: 10, CacheRead: &read}}}}}
	a := newAPIWith(t, r, env)
	env.Observer = a.metrics
	llm.Reply(
		llmtest.Reply{Content: "one", PromptTokens: 100, CompletionTokens: 10},
		llmtest.Reply{Content: "two", PromptTokens: 200, CompletionTokens: 20, CacheReadTokens: 50},
		llmtest.Error(http.StatusBadRequest, "no such thing"),
	)
	id := a.saveFlow(`{"sluice": 1, "id": "x",
	 "nodes": [
	  {"id": "in", "type": "input"},
	  {"id": "ask", "type": "llm", "cache": {"ttl": "1h"}, "params": {"model": "m1", "user": "about {{.topic}}"}},
	  {"id": "check", "type": "script", "params": {"fail_when": ".fail", "permanent": true}},
	  {"id": "out", "type": "output", "params": {"value": ".answer"}}
	 ],
	 "edges": [{"from": "in", "to": "ask"}, {"from": "ask", "to": "check"}, {"from": "check", "to": "out"}]}`, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	d := dispatch.New(a.e, dispatch.Options{Flows: func(context.Context) ([]string, error) { return []string{id}, nil },
		Block: 100 * time.Millisecond, Refresh: 100 * time.Millisecond, Finished: a.metrics.RunFinished})
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	defer func() { cancel(); <-done }()

	var runs []string
	for i, tc := range []struct {
		input  string
		status string
	}{
		{`{"topic": "a"}`, "succeeded"},            // a model call: 100 in, 10 out
		{`{"topic": "a"}`, "succeeded"},            // the same prompt: a cache hit
		{`{"topic": "b"}`, "succeeded"},            // a model call: 200 in (50 from the provider's cache), 20 out
		{`{"topic": "a", "fail": true}`, "failed"}, // a cache hit, then check dead-letters
		{`{"topic": "c"}`, "failed"},               // the model refuses: ask dead-letters
	} {
		got := a.settle(id, a.start(id, `{"input": `+tc.input+`}`))
		if got.Status != tc.status {
			t.Fatalf("run %d (%s): %s (%s), want %s", i+1, tc.input, got.Status, got.Error, tc.status)
		}
		runs = append(runs, got.ID)
	}
	cost1 := (100*2.0 + 10*10.0) / 1e6
	cost2 := (150*2.0 + 50*1.0 + 20*10.0) / 1e6
	want := map[string]float64{
		`sluice_runs_finished_total{status="succeeded"}`:                      3,
		`sluice_runs_finished_total{status="failed"}`:                         2,
		`sluice_run_duration_seconds_count{status="succeeded"}`:               3,
		`sluice_run_duration_seconds_count{status="failed"}`:                  2,
		`sluice_model_calls_total{model="m1",node="ask",outcome="ok"}`:        2,
		`sluice_model_calls_total{model="m1",node="ask",outcome="error"}`:     1,
		`sluice_model_call_duration_seconds_count{model="m1",node="ask"}`:     3,
		`sluice_model_tokens_total{kind="input",model="m1",node="ask"}`:       300,
		`sluice_model_tokens_total{kind="output",model="m1",node="ask"}`:      30,
		`sluice_model_tokens_total{kind="cached",model="m1",node="ask"}`:      50,
		`sluice_model_cost_usd_total{model="m1",node="ask"}`:                  cost1 + cost2,
		`sluice_cache_lookups_total{node="ask",result="hit"}`:                 2,
		`sluice_cache_lookups_total{node="ask",result="miss"}`:                2,
		`sluice_dead_letters_total{node="check"}`:                             1,
		`sluice_dead_letters_total{node="ask"}`:                               1,
		`sluice_step_failures_total{node="check"}`:                            1,
		`sluice_step_failures_total{node="ask"}`:                              1,
		`sluice_steps_total{node="ask"}`:                                      4,
		`sluice_steps_total{node="check"}`:                                    3,
		`sluice_step_duration_seconds_count{component="llm",node="ask"}`:      4,
		`sluice_step_duration_seconds_count{component="script",node="check"}`: 3,
		`sluice_tokens_total{kind="input"}`:                                   300,
		`sluice_tokens_total{kind="output"}`:                                  30,
		`sluice_dead_letters{}`:                                               2,
	}
	// The dispatcher counts runs as it takes their results, and a worker counts a failed
	// step just after committing it: wait until every figure is in (or 30 s passed).
	matches := func(m map[string]float64) bool {
		for k, v := range want {
			if got, ok := m[k]; !ok || math.Abs(got-v) > 1e-12 {
				return false
			}
		}
		return true
	}
	deadline := time.Now().Add(30 * time.Second)
	var m map[string]float64
	for {
		m = scrape(t, a, id)
		if matches(m) || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	for k, v := range want {
		got, ok := m[k]
		if !ok || math.Abs(got-v) > 1e-12 {
			t.Errorf("%s = %v (present %v), want %v", k, got, ok, v)
		}
	}
	// The pages show the same: the third run's tokens and cost by node, and the flow's
	// success rate (3 of 5) on the flows page.
	page := a.must(http.StatusOK, "GET", "/flows/"+id+"/runs/"+runs[2], nil, "Accept", "text/html").String()
	for _, want := range []string{`id="run-usage"`, `<tr data-node="ask"><td class="mono">ask</td><td class="num">1</td><td class="num">200</td><td class="num">50</td><td class="num">20</td><td class="num">$0.0006</td></tr>`} {
		if !strings.Contains(page, want) {
			t.Errorf("the run page lacks %s", want)
		}
	}
	home := a.must(http.StatusOK, "GET", "/", nil, "Accept", "text/html").String()
	row := home[strings.Index(home, `data-flow="`+id+`"`):]
	row = row[:strings.Index(row, "</tr>")]
	if !strings.Contains(row, `>60%</span>`) || !strings.Contains(row, `class="num flow-median"`) {
		t.Errorf("the flows page's row of the flow lacks a 60%% success rate and a median: %s", row)
	}
	// The Grafana dashboard queries only metrics and labels /metrics serves.
	a.metrics.SetStateCache(a.e.StateCacheStats) // as cmd does
	checkDashboard(t, a)
	// No series is labelled by run.
	for k := range m {
		if strings.Contains(k, "run=") {
			t.Errorf("a series carries a run: %s", k)
		}
	}
}

// checkDashboard checks every metric name, label matcher and by (…) label in
// docs/grafana/sluice.json against what /metrics serves now, and that no figure read
// from Redis (the same in every process) is summed over instances.
func checkDashboard(t *testing.T, a *api) {
	t.Helper()
	b, err := os.ReadFile("../docs/grafana/sluice.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string
			Targets []struct{ Expr string }
		}
		Templating struct {
			List []struct {
				Definition string
			}
		}
	}
	if err := json.Unmarshal(b, &dash); err != nil {
		t.Fatalf("the dashboard is not JSON: %v", err)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(a.must(http.StatusOK, "GET", "/metrics", nil).String()))
	if err != nil {
		t.Fatal(err)
	}
	labels := map[string]map[string]bool{}
	shared := map[string]bool{} // read from Redis: every process serves the same figure
	for name, f := range fams {
		labels[name] = map[string]bool{}
		for _, m := range f.Metric {
			for _, l := range m.Label {
				labels[name][l.GetName()] = true
			}
		}
		shared[name] = strings.Contains(f.GetHelp(), "Read from Redis at each scrape")
	}
	exprs := []string{}
	for _, p := range dash.Panels {
		for _, tg := range p.Targets {
			exprs = append(exprs, tg.Expr)
		}
	}
	for _, v := range dash.Templating.List {
		exprs = append(exprs, v.Definition)
	}
	metric := regexp.MustCompile(`\b(sluice_[a-z_]+)(\{[^}]*\})?`)
	matcher := regexp.MustCompile(`([a-z_]+)\s*(=~|!~|!=|=)`)
	checked := map[string]bool{}
	for _, e := range exprs {
		aggs := aggregations(t, e)
		for _, m := range metric.FindAllStringSubmatchIndex(e, -1) {
			name := e[m[2]:m[3]]
			bucket := strings.HasSuffix(name, "_bucket")
			for _, suffix := range []string{"_bucket", "_count", "_sum"} {
				if base := strings.TrimSuffix(name, suffix); base != name && labels[base] != nil {
					name = base
				}
			}
			have, ok := labels[name]
			if !ok {
				t.Errorf("the dashboard queries %s, which /metrics does not serve (in %s)", e[m[2]:m[3]], e)
				continue
			}
			checked[name] = true
			if m[4] >= 0 {
				for _, l := range matcher.FindAllStringSubmatch(e[m[4]:m[5]], -1) {
					if !have[l[1]] {
						t.Errorf("the dashboard matches label %s of %s, which has none (in %s)", l[1], name, e)
					}
				}
			}
			// The labels an aggregation keeps (by) or drops (without) must be the
			// metric's own, the target labels Prometheus adds, or a bucket's le.
			var inner *aggregation
			for i, a := range aggs {
				if m[0] < a.start || m[0] >= a.end {
					continue
				}
				if inner == nil || a.start > inner.start {
					inner = &aggs[i]
				}
				for _, l := range a.labels {
					if !have[l] && l != "instance" && l != "job" && !(l == "le" && bucket) {
						t.Errorf("the dashboard groups %s by label %s, which it has none of (in %s)", name, l, e)
					}
				}
			}
			if shared[name] && inner != nil && inner.op != "max" && inner.op != "min" {
				t.Errorf("the dashboard takes the %s of %s over instances, which each serve the same figure from Redis: take max (in %s)", inner.op, name, e)
			}
		}
	}
	if len(checked) < 15 {
		t.Errorf("only %d metrics found in the dashboard's queries: %v", len(checked), checked)
	}
}

// aggregation is one PromQL aggregation in a query: its operator, the labels of its by
// or without clause, and the span of its argument.
type aggregation struct {
	op         string
	labels     []string
	start, end int
}

// aggregations finds the aggregations of a PromQL query, with their by (…) or
// without (…) clause before or after the argument.
func aggregations(t *testing.T, e string) []aggregation {
	t.Helper()
	op := regexp.MustCompile(`\b(sum|min|max|avg|count|group|stddev|stdvar|topk|bottomk|quantile)\s*(?:(?:by|without)\s*\(([^()]*)\)\s*)?\(`)
	after := regexp.MustCompile(`^\s*(?:by|without)\s*\(([^()]*)\)`)
	split := func(list string) []string {
		var ls []string
		for _, l := range strings.Split(list, ",") {
			if l = strings.TrimSpace(l); l != "" {
				ls = append(ls, l)
			}
		}
		return ls
	}
	var aggs []aggregation
	for _, m := range op.FindAllStringSubmatchIndex(e, -1) {
		a := aggregation{op: e[m[2]:m[3]], start: m[1], end: -1}
		if m[4] >= 0 {
			a.labels = split(e[m[4]:m[5]])
		}
		depth := 1
		for i := m[1]; i < len(e) && a.end < 0; i++ {
			switch e[i] {
			case '(':
				depth++
			case ')':
				if depth--; depth == 0 {
					a.end = i
				}
			}
		}
		if a.end < 0 {
			t.Errorf("unbalanced parentheses in %s", e)
			continue
		}
		if b := after.FindStringSubmatch(e[a.end+1:]); b != nil {
			a.labels = append(a.labels, split(b[1])...)
		}
		aggs = append(aggs, a)
	}
	return aggs
}
