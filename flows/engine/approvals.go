package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/sluicehq/sluice/flows"
	"github.com/sluicehq/sluice/flows/nodes"
	"github.com/sluicehq/sluice/store"
)

// Resume answers an approval a run waits at, and the run continues. node may be empty
// when the run waits at exactly one node. A run that waits nowhere is a Conflict.
func (e *Engine) Resume(ctx context.Context, flow, run, node string, decision json.RawMessage) error {
	if _, err := nodes.ParseDecision(decision); err != nil {
		return err
	}
	r, err := e.Get(ctx, flow, run)
	if err != nil {
		return err
	}
	if node == "" {
		waiting := make([]string, 0, len(r.Waits))
		for n := range r.Waits {
			waiting = append(waiting, n)
		}
		sort.Strings(waiting)
		switch len(waiting) {
		case 0:
			return &flows.Error{Code: flows.Conflict, Flow: flow, Message: fmt.Sprintf("run %q is %s, not waiting for a decision", run, r.Status)}
		case 1:
			node = waiting[0]
		default:
			return &flows.Error{Code: flows.Invalid, Flow: flow, Path: "node", Message: fmt.Sprintf("run %q waits at several nodes (%s): name one", run, strings.Join(waiting, ", "))}
		}
	} else if !flows.ValidID(node) {
		return &flows.Error{Code: flows.Invalid, Flow: flow, Path: "node", Message: fmt.Sprintf("%q is not a node id", node)}
	}
	return e.rdb.ResumeRun(ctx, r.Ref(), node, decision)
}

// decideExpired takes the on_timeout decision for approvals of a flow's partition whose
// timeout has passed. Every worker does this; the resume script lets exactly one of them
// succeed.
func (e *Engine) decideExpired(ctx context.Context, flow string) {
	parts, err := e.rdb.Parts(ctx, flow)
	if err != nil {
		return
	}
	for _, p := range parts {
		e.decideExpiredIn(ctx, p)
	}
}

func (e *Engine) decideExpiredIn(ctx context.Context, p store.PartRef) {
	flow := p.Flow
	waits, err := e.rdb.ExpiredWaits(ctx, flow, p.Part, time.Now(), 50)
	if err != nil {
		return
	}
	for _, w := range waits {
		r, err := e.rdb.GetRun(ctx, flow, w.Run)
		if err != nil {
			_ = e.rdb.DropWait(ctx, w)
			continue
		}
		rec, ok := r.Waits[w.Node]
		if !ok {
			_ = e.rdb.DropWait(ctx, w)
			continue
		}
		var wr struct {
			OnTimeout string `json:"on_timeout"`
		}
		_ = json.Unmarshal(rec, &wr)
		if wr.OnTimeout != "approve" {
			wr.OnTimeout = "reject"
		}
		d, _ := json.Marshal(map[string]string{"decision": wr.OnTimeout, "by": "timeout", "at": time.Now().UTC().Format(time.RFC3339)})
		err = e.rdb.ResumeRun(ctx, w.RunRef, w.Node, d)
		switch flows.ErrorCode(err) {
		case flows.Conflict, flows.NotFound:
			_ = e.rdb.DropWait(ctx, w)
		}
		if err == nil {
			e.log.Info("approval timed out; decided for the person", "flow", flow, "run", w.Run, "node", w.Node, "decision", wr.OnTimeout)
		}
	}
}
