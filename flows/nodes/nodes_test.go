package nodes_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/flows"
	"github.com/sluicehq/sluice/flows/nodes"
)

// build constructs a component of the built-in type typ from params, the way a compile
// does: defaults first, then the constructor.
func build(t *testing.T, typ, params string) flows.Component {
	t.Helper()
	c, err := tryBuild(typ, params)
	if err != nil {
		t.Fatalf("build %s %s: %v", typ, params, err)
	}
	return c
}

func tryBuild(typ, params string) (flows.Component, error) {
	spec, ok := nodes.NewRegistry(nil).Lookup(typ)
	if !ok {
		return nil, fmt.Errorf("no component %q", typ)
	}
	p, err := spec.WithDefaults(json.RawMessage(params))
	if err != nil {
		return nil, err
	}
	return spec.New(&flows.Build{Flow: &flows.Document{ID: "f"}, Node: &flows.Node{ID: "n", Type: typ}, Params: p})
}

func num(s string) json.Number { return json.Number(s) }

// quote writes s as a JSON string.
func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// run runs c for one step whose input and state are both v.
func run(t *testing.T, c flows.Component, v map[string]any) (*flows.Result, error) {
	t.Helper()
	return c.Run(context.Background(), &flows.Step{Flow: "f", Run: "r", Node: "n", Depth: 1, Attempt: 1, Input: v, State: v})
}

// state decodes JSON into a state as the runtime holds it (numbers as json.Number).
func state(t *testing.T, s string) map[string]any {
	t.Helper()
	m, err := flows.DecodeState([]byte(s))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// wantPermanent asserts err is a permanent Invalid error at path whose text says want.
func wantPermanent(t *testing.T, err error, path, want string) {
	t.Helper()
	var fe *flows.Error
	switch {
	case err == nil:
		t.Fatalf("no error, want one saying %q", want)
	case !flows.IsPermanent(err):
		t.Errorf("%v is retried; a bad state or expression cannot get better", err)
	case !errors.As(err, &fe) || fe.Path != path || fe.Node != "n":
		t.Errorf("%v: want node %q, path %q", err, "n", path)
	}
	if !strings.Contains(err.Error(), want) {
		t.Errorf("error %q does not say %q", err, want)
	}
}

func TestBuiltinsAreRegistered(t *testing.T) {
	var names []string
	for _, s := range nodes.NewRegistry(nil).Specs() {
		names = append(names, s.Name)
	}
	for _, want := range []string{"input", "output", "transform", "router", "fanout", "join"} {
		if !slices.Contains(names, want) {
			t.Errorf("%q is not registered; have %v", want, names)
		}
	}
}

// TestEverySpecIsDocumentedAndItsExampleValidates is what the palette, the parameter
// forms and docs/components.md rely on.
func TestEverySpecIsDocumentedAndItsExampleValidates(t *testing.T) {
	reg := nodes.NewRegistry(nil)
	for _, spec := range reg.Specs() {
		t.Run(spec.Name, func(t *testing.T) {
			if spec.Title == "" || spec.Description == "" || !slices.Contains(flows.Categories, spec.Category) {
				t.Errorf("title %q, category %q, description %q: all are needed", spec.Title, spec.Category, spec.Description)
			}
			var schema map[string]any
			if err := json.Unmarshal(spec.Params, &schema); err != nil || schema["type"] != "object" {
				t.Errorf("params schema %s is not an object schema", spec.Params)
			}
			props, _ := schema["properties"].(map[string]any)
			for name, p := range props {
				if d, _ := p.(map[string]any)["description"].(string); d == "" {
					t.Errorf("param %q has no description", name)
				}
			}
			// The example, in a flow of its own, must compile without errors.
			example := "{}"
			if len(spec.Example) > 0 {
				example = string(spec.Example)
			}
			doc := fmt.Sprintf(`{"sluice": 1, "id": "x", "nodes": [{"id": "in", "type": "input"}, {"id": "n", "type": %q, "params": %s}], "edges": [{"from": "in", "to": "n"}]}`, spec.Name, example)
			if spec.Name == "input" {
				doc = fmt.Sprintf(`{"sluice": 1, "id": "x", "nodes": [{"id": "n", "type": "input", "params": %s}], "edges": []}`, example)
			}
			if _, ok := spec.Port(spec.Example, flows.PortIn, "in"); !ok && spec.Name != "input" {
				// A tool only (mcp): attached to an agent.
				doc = fmt.Sprintf(`{"sluice": 1, "id": "x", "nodes": [{"id": "in", "type": "input"}, {"id": "a", "type": "agent", "params": {"model": "m", "user": "u"}}, {"id": "n", "type": %q, "params": %s}],
					"edges": [{"from": "in", "to": "a"}, {"from": "n", "port": "tool", "to": "a", "to_port": "tools"}]}`, spec.Name, example)
			}
			if _, ps := flows.Compile([]byte(doc), reg, flows.DefaultLimits); ps.HasErrors() {
				t.Errorf("the example params %s do not validate: %v", example, ps.Errors())
			}
		})
	}
}
