package nodes_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"sync"
	"testing"

	"github.com/sluicehq/sluice/flows"
	"github.com/sluicehq/sluice/flows/nodes"
)

// buildIn constructs a component of type typ with env, as a compile does.
func buildIn(t *testing.T, env *nodes.Env, typ, params string) flows.Component {
	t.Helper()
	c, err := tryBuildIn(env, typ, params)
	if err != nil {
		t.Fatalf("build %s %s: %v", typ, params, err)
	}
	return c
}

func tryBuildIn(env *nodes.Env, typ, params string) (flows.Component, error) {
	spec, ok := nodes.NewRegistry(env).Lookup(typ)
	if !ok {
		return nil, fmt.Errorf("no component %q", typ)
	}
	p, err := spec.WithDefaults(json.RawMessage(params))
	if err != nil {
		return nil, err
	}
	return spec.New(&flows.Build{Flow: &flows.Document{ID: "f"}, Node: &flows.Node{ID: "n", Type: typ}, Params: p})
}

// buildCached builds with the node's cache set to ttl.
func buildCached(t *testing.T, env *nodes.Env, typ, params, ttl string) flows.Component {
	t.Helper()
	spec, _ := nodes.NewRegistry(env).Lookup(typ)
	p, err := spec.WithDefaults(json.RawMessage(params))
	if err != nil {
		t.Fatal(err)
	}
	var d flows.Duration
	if err := json.Unmarshal([]byte(`"`+ttl+`"`), &d); err != nil {
		t.Fatal(err)
	}
	c, err := spec.New(&flows.Build{Flow: &flows.Document{ID: "f"}, Node: &flows.Node{ID: "n", Type: typ, Cache: &flows.Cache{TTL: d}}, Params: p})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// recorder is a step's Emit and SaveTurn.
type recorder struct {
	mu     sync.Mutex
	events []event
	turns  []json.RawMessage
}

type event struct {
	kind string
	data map[string]any
}

func (r *recorder) emit(kind string, data any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	m, _ := data.(map[string]any)
	r.events = append(r.events, event{kind, m})
}

func (r *recorder) save(_ context.Context, turn any) error {
	b, err := json.Marshal(turn)
	if err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.turns = append(r.turns, b)
	return nil
}

// newStep is a step over state s, recording what it emits and saves.
func newStep(s map[string]any) (*flows.Step, *recorder) {
	rec := &recorder{}
	return &flows.Step{Flow: "f", Run: "r", Node: "n", Version: "v1", Depth: 1, Attempt: 1, Input: s, State: s,
		Emit: rec.emit, SaveTurn: rec.save}, rec
}

// loopbackOK allows the loopback addresses the tests' httptest servers listen on.
func loopbackOK() *nodes.HTTPPolicy {
	return &nodes.HTTPPolicy{Allow: []nodes.AllowRule{{Prefix: netip.MustParsePrefix("127.0.0.0/8")}}}
}
