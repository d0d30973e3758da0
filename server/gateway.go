package server

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"time"

	"github.com/sluicehq/sluice/flows"
	"github.com/sluicehq/sluice/flows/engine"
	"github.com/sluicehq/sluice/server/live"
	"github.com/sluicehq/sluice/store"
)

// gateway runs the library's flows for clients that do not speak Sluice's own API: MCP
// clients (mcp.go) and OpenAI-compatible ones (openai.go). A call starts a run, follows
// its live events and ends when the run finishes or waits for a person.
type gateway struct {
	lib *store.Library
	eng runEngine
	rdb *store.Redis
	hub *live.Hub
	log *slog.Logger
}

// plan is the plan a new run of flow starts on.
func (g *gateway) plan(ctx context.Context, flow string) (*flows.Plan, error) {
	id, ok := qualifyName(workspaceFrom(ctx), flow)
	if !ok {
		return nil, &flows.Error{Code: flows.NotFound, Flow: flow, Message: "no such flow"}
	}
	return planFor(ctx, g.lib, g.eng, id, "")
}

// flows returns the plans of the library's flows that keep accepts, by flow id order.
// Files that do not compile (and have no good version) are left out.
func (g *gateway) flows(ctx context.Context, keep func(*flows.Plan) bool) []*flows.Plan {
	files, err := g.lib.ListIn(workspaceFrom(ctx))
	if err != nil {
		g.log.Warn("cannot list the flow library", "error", err)
		return nil
	}
	var out []*flows.Plan
	for _, f := range files {
		p, err := g.plan(ctx, f.ID)
		if err != nil || p.Doc == nil || !keep(p) {
			continue
		}
		out = append(out, p)
	}
	return out
}

// inputSchema is the JSON Schema of the flow's input node (nil when it has none).
func inputSchema(p *flows.Plan) json.RawMessage {
	if p.Doc == nil {
		return nil
	}
	for _, n := range p.Doc.Nodes {
		if n.ID != p.Entry {
			continue
		}
		var params struct {
			Schema json.RawMessage `json:"schema"`
		}
		_ = json.Unmarshal(n.Params, &params)
		return params.Schema
	}
	return nil
}

// run starts a run of plan with input and calls onEvent (when not nil) with the run's
// live events until the run finishes or waits for a person; it returns the run as it
// then is. The run's id is returned as soon as it exists, also with an error.
func (g *gateway) run(ctx context.Context, plan *flows.Plan, input json.RawMessage, onEvent func(store.Event)) (string, *store.Run, error) {
	id, last, err := g.start(ctx, plan, input, engine.StartOptions{}, onEvent != nil)
	if err != nil {
		return id, nil, err
	}
	r, err := g.follow(ctx, plan, id, last, onEvent)
	return id, r, err
}

// start starts a run; with events, it also returns the flow's last event id before the
// start, from which follow reads the run's events without missing one.
func (g *gateway) start(ctx context.Context, plan *flows.Plan, input json.RawMessage, opts engine.StartOptions, events bool) (id, last string, err error) {
	if events && g.hub != nil {
		if last, err = g.rdb.LastEventID(ctx, plan.Flow); err != nil {
			return "", "", err
		}
	}
	opts.Environment = environmentFrom(ctx)
	id, err = g.eng.Start(ctx, plan, input, opts)
	return id, last, err
}

// follow calls onEvent (when not nil) with run id's events after last until the run
// finishes or waits for a person, and returns the run as it then is.
func (g *gateway) follow(ctx context.Context, plan *flows.Plan, id, last string, onEvent func(store.Event)) (*store.Run, error) {
	type outcome struct {
		r   *store.Run
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		r, err := g.eng.Wait(ctx, plan.Flow, id)
		done <- outcome{r, err}
	}()
	var msgs <-chan live.Message
	var dropped <-chan struct{}
	if onEvent != nil && g.hub != nil {
		cl := g.hub.NewClient(1024)
		defer g.hub.Remove(cl)
		if err := g.hub.Subscribe(cl, plan.Flow, id, last); err != nil {
			g.log.Debug("live events of a run are not available", "flow", plan.Flow, "run", id, "error", err)
		} else {
			msgs, dropped = cl.Messages(), cl.Dropped()
		}
	}
	// settled is the status the run's events last said it settled at.
	settled := ""
	settles := func(ev *store.Event, status string) bool {
		return ev != nil && ev.Type == "run" && strings.Contains(string(ev.Data), `"`+status+`"`)
	}
	deliver := func(m live.Message) *store.Event {
		var env live.Envelope
		if json.Unmarshal(m.Data, &env) != nil || env.Event == nil {
			return nil
		}
		onEvent(*env.Event)
		if env.Event.Type == "run" {
			var d struct {
				Status string `json:"status"`
			}
			_ = json.Unmarshal(env.Event.Data, &d)
			settled = d.Status
		}
		return env.Event
	}
	for {
		select {
		case s := <-done:
			if s.err != nil || msgs == nil || settled == s.r.Status {
				return s.r, s.err
			}
			// The run's last events may still be on their way: take them until the
			// event of its settling (the same commit wrote it after them).
			drain := time.NewTimer(2 * time.Second)
			defer drain.Stop()
			for {
				select {
				case m := <-msgs:
					if settles(deliver(m), s.r.Status) {
						return s.r, nil
					}
				case <-dropped:
					return s.r, nil
				case <-drain.C:
					return s.r, nil
				case <-ctx.Done():
					return s.r, nil
				}
			}
		case <-dropped:
			msgs, dropped = nil, nil // too slow: the run goes on, its events do not
		case m := <-msgs:
			deliver(m)
		}
	}
}

// cancel cancels a run whose caller went away.
func (g *gateway) cancel(flow, run string) {
	ctx, stop := context.WithTimeout(context.Background(), 5*time.Second)
	defer stop()
	if err := g.eng.Cancel(ctx, flow, run); err != nil {
		g.log.Warn("cannot cancel a run whose caller went away", "flow", flow, "run", run, "error", err)
	}
}

// answerText is what a run's output says as text: a string as it is; an object's
// "content", "answer", "reply" or "text" when it is a string; else the output's JSON.
func answerText(out json.RawMessage) string {
	if len(out) == 0 {
		return ""
	}
	var s string
	if json.Unmarshal(out, &s) == nil {
		return s
	}
	var obj map[string]json.RawMessage
	if json.Unmarshal(out, &obj) == nil {
		for _, k := range []string{"content", "answer", "reply", "text"} {
			if json.Unmarshal(obj[k], &s) == nil {
				return s
			}
		}
	}
	return string(out)
}
