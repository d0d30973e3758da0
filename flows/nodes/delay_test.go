package nodes

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/sluicehq/sluice/flows"
)

func TestDelayWaitsThenPassesTheStateOnAndStopsAtTheDeadline(t *testing.T) {
	c, err := delaySpec().New(&flows.Build{Node: &flows.Node{ID: "d"}, Params: json.RawMessage(`{"for": "20ms"}`)})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	res, err := c.Run(context.Background(), &flows.Step{})
	if err != nil || res.Update != nil {
		t.Fatalf("run: %+v %v", res, err)
	}
	if time.Since(start) < 20*time.Millisecond {
		t.Errorf("returned after %s, before the delay", time.Since(start))
	}
	long, _ := delaySpec().New(&flows.Build{Node: &flows.Node{ID: "d"}, Params: json.RawMessage(`{"for": "1h"}`)})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := long.Run(ctx, &flows.Step{}); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled delay: %v, want the context's error", err)
	}
}
