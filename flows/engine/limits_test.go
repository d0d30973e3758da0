package engine_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/flows"
	"github.com/sluicehq/sluice/flows/engine"
	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/storetest"
)

// A step whose state would outgrow max_state_bytes fails for good with the size and the
// limit, before anything reaches Redis.
func TestAStateOverMaxStateBytesFailsTheStepWithTheFigures(t *testing.T) {
	storetest.Each(t, func(t *testing.T, r *store.Redis) {
		v := newEnv(t, r)
		p := v.compile(`{"sluice": 1, "id": "FLOW", "settings": {"max_state_bytes": 100000},
		 "nodes": [{"id": "in", "type": "input"}, {"id": "big", "type": "transform", "params": {"expr": "{blob: ([range(200000)] | map(\"x\") | add)}"}}, {"id": "out", "type": "output"}],
		 "edges": [{"from": "in", "to": "big"}, {"from": "big", "to": "out"}]}`)
		v.work(p)
		run := v.run(p, `{}`)
		mustStatus(t, run, store.StatusFailed)
		if run.ErrorNode != "big" || !strings.Contains(run.Error, "over max_state_bytes (100,000)") || !strings.Contains(run.Error, "200,0") {
			t.Errorf("error %q at node %q, want the state's size and the limit at node big", run.Error, run.ErrorNode)
		}
		if run.Dead != 1 {
			t.Errorf("dead letters %d, want 1 (a permanent failure, not retried)", run.Dead)
		}
		for _, c := range v.checkpoints(p, run.ID) {
			if c.Node == "big" && c.Kind == "step" {
				t.Errorf("the oversized step was committed: %+v", c)
			}
		}
	})
}

// A state nested deeper than any reader can decode is refused at commit: no run
// succeeds whose history could not be read back.
func TestADeeplyNestedStateIsRefusedAndTheHistoryStaysReadable(t *testing.T) {
	v := newEnv(t, storetest.Real(t))
	p := v.compile(`{"sluice": 1, "id": "FLOW",
	 "nodes": [{"id": "in", "type": "input"}, {"id": "deep", "type": "transform", "params": {"expr": "{x: reduce range(20000) as $i (1; [.])}"}}, {"id": "out", "type": "output"}],
	 "edges": [{"from": "in", "to": "deep"}, {"from": "deep", "to": "out"}]}`)
	v.work(p)
	run := v.run(p, `{}`)
	mustStatus(t, run, store.StatusFailed)
	if run.ErrorNode != "deep" || !strings.Contains(run.Error, "nests deeper than") {
		t.Errorf("error %q at node %q", run.Error, run.ErrorNode)
	}
	for _, c := range v.checkpoints(p, run.ID) {
		full, err := v.e.Checkpoint(context.Background(), p.Flow, run.ID, c.ID)
		if err != nil {
			t.Fatalf("checkpoint %s: %v", c.ID, err)
		}
		if _, err := json.Marshal(full); err != nil {
			t.Errorf("checkpoint %s cannot be written as JSON: %v", c.ID, err)
		}
	}
}

// An input over the flow's limit is refused when the run starts.
func TestAnInputOverMaxStateBytesIsRefusedAtStart(t *testing.T) {
	v := newEnv(t, storetest.Embedded(t))
	p := v.compile(`{"sluice": 1, "id": "FLOW", "settings": {"max_state_bytes": 2048},
	 "nodes": [{"id": "in", "type": "input"}, {"id": "out", "type": "output"}], "edges": [{"from": "in", "to": "out"}]}`)
	big, _ := json.Marshal(map[string]string{"text": strings.Repeat("x", 4000)})
	_, err := v.e.Start(context.Background(), p, big, engine.StartOptions{})
	if flows.ErrorCode(err) != flows.TooLarge || !strings.Contains(err.Error(), "over max_state_bytes (2,048)") {
		t.Fatalf("start: %v, want too_large with the limit", err)
	}
}

// A template that loops past its node's timeout fails at the deadline.
func TestATemplatePastItsTimeoutFailsAtTheDeadline(t *testing.T) {
	v := newEnv(t, storetest.Real(t))
	p := v.compile(`{"sluice": 1, "id": "FLOW", "settings": {"max_attempts": 1},
	 "nodes": [{"id": "in", "type": "input"}, {"id": "t", "type": "template", "timeout": "300ms", "params": {"template": "{{range 150000000}}{{end}}"}}, {"id": "out", "type": "output"}],
	 "edges": [{"from": "in", "to": "t"}, {"from": "t", "to": "out"}]}`)
	v.work(p)
	run := v.run(p, `{}`)
	mustStatus(t, run, store.StatusFailed)
	if run.ErrorNode != "t" || !strings.Contains(run.Error, "timed out") {
		t.Errorf("error %q at node %q, want a timeout at t", run.Error, run.ErrorNode)
	}
}
