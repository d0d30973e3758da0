package engine

import (
	"context"
	"log/slog"

	"github.com/sluicehq/sluice/store"
)

// Webhooker is implemented by components whose node sends the run's result to a URL
// when the run finishes (the output component's webhook).
type Webhooker interface {
	Webhook() string
}

// HasWebhook reports whether a run's result goes to a webhook: one given when it started,
// or one of an output node of its flow's version (for a finished run, of an output node
// that produced a value, as the dispatcher sends it).
func (e *Engine) HasWebhook(ctx context.Context, run *store.Run) bool {
	return len(e.WebhookTargets(ctx, run, store.Finished(run.Status))) > 0
}

// WebhookTargets lists a run's webhooks: the one given when it started, then its
// output nodes'; produced keeps only the output nodes that produced a value.
func (e *Engine) WebhookTargets(ctx context.Context, run *store.Run, produced bool) []string {
	var out []string
	seen := map[string]bool{}
	add := func(u string) {
		if u != "" && !seen[u] {
			seen[u] = true
			out = append(out, u)
		}
	}
	add(run.Webhook)
	if plan, err := e.Plan(ctx, run.Flow, run.Version); err == nil {
		for _, id := range plan.Order {
			n := plan.Nodes[id]
			if w, ok := n.Component.(Webhooker); ok {
				if _, did := run.Outputs[id]; did || !produced {
					add(w.Webhook())
				}
			}
		}
	}
	return out
}

// Logger is the engine's logger, for the parts around it (the result dispatcher).
func (e *Engine) Logger() *slog.Logger { return e.log }

// ConsumerName returns a consumer name no other consumer of this process or any other
// has: a result dispatcher's, a worker's.
func (e *Engine) ConsumerName() string { return e.consumerName() }

// Emit appends a live event of a run outside any commit (a delivery that went to the
// dead letters), batched with the others; it never blocks on Redis.
func (e *Engine) Emit(ref store.RunRef, node, kind string, data any) {
	e.events.emit(ref, node, kind, data)
}
