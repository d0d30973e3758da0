package nodes

import (
	"context"
	"encoding/json"
	"time"

	"github.com/sluicehq/sluice/flows"
)

func delaySpec() flows.Spec {
	return flows.Spec{
		Name:     "delay",
		Title:    "Delay",
		Category: "flow",
		Description: "Waits for a while, then passes the state on: to pace calls to a rate-limited service, " +
			"or to try how parallel branches behave. The wait holds a worker slot; for waits of hours use an " +
			"approval with a timeout instead.",
		Ports: []flows.Port{inPort, outPort},
		Params: json.RawMessage(`{
			"type": "object", "additionalProperties": false, "required": ["for"],
			"properties": {
				"for": {"type": "string", "format": "duration", "description": "How long to wait, e.g. \"1s\"."}
			}
		}`),
		Example: json.RawMessage(`{"for": "1s"}`),
		New: func(b *flows.Build) (flows.Component, error) {
			var p struct {
				For flows.Duration `json:"for"`
			}
			if err := b.Decode(&p); err != nil {
				return nil, err
			}
			return &Delay{d: p.For.D()}, nil
		},
	}
}

// Delay waits, then passes the state on.
type Delay struct{ d time.Duration }

// Run waits for the delay or the step's deadline, whichever comes first.
func (d *Delay) Run(ctx context.Context, _ *flows.Step) (*flows.Result, error) {
	t := time.NewTimer(d.d)
	defer t.Stop()
	select {
	case <-t.C:
		return &flows.Result{}, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

var _ flows.Component = (*Delay)(nil)
