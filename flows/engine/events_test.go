package engine_test

import (
	"context"
	"testing"
	"time"

	"github.com/sluicehq/sluice/flows"
	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/storetest"
)

// quickTalker streams a token the moment it starts, then holds its step until release.
type quickTalker struct{ release chan struct{} }

func (q quickTalker) Run(ctx context.Context, s *flows.Step) (*flows.Result, error) {
	s.Emit("token", map[string]any{"text": "Hel"})
	select {
	case <-q.release:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	s.Emit("token", map[string]any{"text": "lo"})
	return &flows.Result{Output: "Hello"}, nil
}

// A step's "start" event reaches the live views before anything the step emits: the
// views begin a step's streamed text afresh at "start", so a model that answers within
// the moment a step waits before it announces itself lost its first tokens.
func TestAStepIsAnnouncedBeforeItsFirstToken(t *testing.T) {
	r := storetest.Real(t)
	v := newEnv(t, r)
	release := make(chan struct{})
	v.reg.Register(flows.Spec{Name: "quick_talker", Title: "Quick talker", Category: "test", Description: "Streams at once.",
		Ports: []flows.Port{{Name: flows.PortIn, Direction: "in", Type: flows.PortState, Multiple: true}, {Name: flows.PortOut, Direction: "out", Type: flows.PortState}},
		New:   func(*flows.Build) (flows.Component, error) { return quickTalker{release: release}, nil }})
	p := v.compile(`{"sluice": 1, "id": "FLOW", "nodes": [{"id": "in", "type": "input"}, {"id": "talk", "type": "quick_talker"}],
		"edges": [{"from": "in", "to": "talk"}]}`)
	v.work(p)
	run := v.start(p, `{}`)

	// While the step is held, its first token and its announcement are both out; in order.
	ctx := context.Background()
	events := store.FlowKeys(p.Flow).Events()
	deadline := time.Now().Add(20 * time.Second)
	var order []string
	for {
		order = order[:0]
		for _, m := range r.Client.XRange(ctx, events, "-", "+").Val() {
			if m.Values["node"] == "talk" && m.Values["run"] == run {
				order = append(order, m.Values["type"].(string))
			}
		}
		if len(order) >= 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the held step's events: %v, want a start and a token", order)
		}
		time.Sleep(10 * time.Millisecond)
	}
	close(release)
	mustStatus(t, v.wait(p, run), store.StatusSucceeded)
	if order[0] != "start" {
		t.Errorf("the step's events came as %v, want its start before its first token", order)
	}
}
