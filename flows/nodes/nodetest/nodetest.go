// Package nodetest provides a component whose behaviour a test scripts — sleep, fail a
// number of times, panic, count its calls — and a registry with it and the built-in
// components. It is for tests only; the sluice binary does not register it.
package nodetest

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/sluicehq/sluice/flows"
	"github.com/sluicehq/sluice/flows/nodes"
)

// Registry returns the built-in components plus "script", which counts its calls in rdb.
func Registry(rdb redis.UniversalClient) *flows.Registry {
	reg := nodes.NewRegistry(nil)
	reg.Register(ScriptSpec(rdb))
	return reg
}

// CountKey is where script counts the calls of one node in one run.
func CountKey(flow, run, node string) string {
	return fmt.Sprintf("sluicetest:{f:%s}:count:%s:%s", flow, run, node)
}

// TallyKey is the hash of call counts per process id of a flow's tallying scripts.
func TallyKey(flow string) string { return fmt.Sprintf("sluicetest:{f:%s}:tally", flow) }

// ScriptSpec is the spec of the scripted test component.
func ScriptSpec(rdb redis.UniversalClient) flows.Spec {
	return flows.Spec{
		Name:        "script",
		Title:       "Script (tests)",
		Category:    "test",
		Description: "A component whose behaviour a test scripts.",
		Ports: []flows.Port{
			{Name: flows.PortIn, Direction: "in", Type: flows.PortState, Multiple: true},
			{Name: flows.PortOut, Direction: "out", Type: flows.PortState},
		},
		Params: json.RawMessage(`{
			"type": "object", "additionalProperties": false,
			"properties": {
				"sleep": {"type": "string", "format": "duration", "description": "How long each call takes."},
				"fail": {"type": "integer", "minimum": 0, "description": "The first N calls of a run fail."},
				"panic": {"type": "integer", "minimum": 0, "description": "The first N calls of a run panic."},
				"permanent": {"type": "boolean", "description": "Failures are permanent."},
				"always_fail": {"type": "boolean"},
				"update": {"type": "object", "description": "The state update each call returns."},
				"final": {"type": "boolean", "description": "The call's output is a run output."},
				"tally": {"type": "boolean", "description": "Count calls per process too (TallyKey)."},
				"turns": {"type": "boolean", "description": "Save a turn per call; the output lists the turns earlier attempts saved."},
				"fail_when": {"type": "string", "format": "jq", "description": "Every call fails while this jq condition holds on the state (a poison pill)."}
			}
		}`),
		New: func(b *flows.Build) (flows.Component, error) {
			s := &Script{rdb: rdb}
			if err := b.Decode(&s.p); err != nil {
				return nil, err
			}
			if s.p.FailWhen != "" {
				q, err := flows.CompileJQ(s.p.FailWhen)
				if err != nil {
					return nil, err
				}
				s.failWhen = q
			}
			if s.p.Sleep != "" {
				d, err := time.ParseDuration(s.p.Sleep)
				if err != nil {
					return nil, err
				}
				s.sleep = d
			}
			return s, nil
		},
	}
}

// Script is the scripted component.
type Script struct {
	rdb redis.UniversalClient
	p   struct {
		Sleep      string         `json:"sleep"`
		Fail       int            `json:"fail"`
		Panic      int            `json:"panic"`
		Permanent  bool           `json:"permanent"`
		AlwaysFail bool           `json:"always_fail"`
		Update     map[string]any `json:"update"`
		Final      bool           `json:"final"`
		Tally      bool           `json:"tally"`
		Turns      bool           `json:"turns"`
		FailWhen   string         `json:"fail_when"`
	}
	sleep    time.Duration
	failWhen *flows.JQ
}

// Run counts the call, then sleeps, fails, panics or returns the scripted update.
func (s *Script) Run(ctx context.Context, step *flows.Step) (*flows.Result, error) {
	n, err := s.rdb.Incr(ctx, CountKey(step.Flow, step.Run, step.Node)).Result()
	if err != nil {
		return nil, err
	}
	s.rdb.Expire(ctx, CountKey(step.Flow, step.Run, step.Node), time.Hour)
	if s.p.Tally {
		s.rdb.HIncrBy(ctx, TallyKey(step.Flow), strconv.Itoa(os.Getpid()), 1)
	}
	if s.p.Turns {
		if err := step.SaveTurn(ctx, map[string]any{"call": n}); err != nil {
			return nil, err
		}
	}
	if s.sleep > 0 {
		select {
		case <-time.After(s.sleep):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	if int(n) <= s.p.Panic {
		panic(fmt.Sprintf("scripted panic %d", n))
	}
	poisoned := false
	if s.failWhen != nil {
		poisoned, _ = s.failWhen.Truthy(ctx, step.State, step.State)
	}
	if s.p.AlwaysFail || poisoned || int(n) <= s.p.Fail {
		err := fmt.Errorf("scripted failure %d", n)
		if s.p.Permanent {
			return nil, flows.Permanent(err)
		}
		return nil, err
	}
	upd := s.p.Update
	if upd == nil {
		upd = map[string]any{}
	}
	out := map[string]any{"call": n}
	if s.p.Turns {
		var turns []any
		for _, t := range step.Turns {
			var v any
			_ = json.Unmarshal(t, &v)
			turns = append(turns, v)
		}
		out["turns"] = turns
	}
	return &flows.Result{Output: out, Update: upd, Final: s.p.Final}, nil
}
