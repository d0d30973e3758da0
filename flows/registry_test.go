package flows_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/flows"
	"github.com/sluicehq/sluice/flows/nodes"
)

func newPassThrough(*flows.Build) (flows.Component, error) { return passThrough{}, nil }

// mustPanic runs fn and returns the panic's message, failing when there is none.
func mustPanic(t *testing.T, fn func()) (msg string) {
	t.Helper()
	defer func() {
		r := recover()
		if r == nil {
			t.Fatal("did not panic")
		}
		msg = fmt.Sprint(r)
	}()
	fn()
	return ""
}

func TestRegisterPanicsOnProgrammingErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		spec flows.Spec
		want string
	}{
		{"an upper-case name", flows.Spec{Name: "Router", New: newPassThrough}, `component name "Router"`},
		{"a name with a dash", flows.Spec{Name: "my-node", New: newPassThrough}, `component name "my-node"`},
		{"a name starting with a digit", flows.Spec{Name: "1node", New: newPassThrough}, `component name "1node"`},
		{"an empty name", flows.Spec{New: newPassThrough}, `component name ""`},
		{"no constructor", flows.Spec{Name: "x"}, `component "x" has no constructor`},
		{"a params schema that does not compile", flows.Spec{Name: "x", New: newPassThrough,
			Params: json.RawMessage(`{"type": "objekt"}`)}, `component "x": params schema`},
		{"params that are not JSON", flows.Spec{Name: "x", New: newPassThrough,
			Params: json.RawMessage(`{`)}, `component "x": params schema`},
		{"a port with no direction", flows.Spec{Name: "x", New: newPassThrough,
			Ports: []flows.Port{{Name: "in", Type: flows.PortState}}}, `port "in": direction must be in or out`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reg := flows.NewRegistry()
			msg := mustPanic(t, func() { reg.Register(tc.spec) })
			if !strings.Contains(msg, tc.want) {
				t.Errorf("panic %q does not say %q", msg, tc.want)
			}
			if len(reg.Specs()) != 0 {
				t.Errorf("the refused spec was registered")
			}
		})
	}
}

func TestRegisterTwicePanics(t *testing.T) {
	reg := flows.NewRegistry()
	reg.Register(flows.Spec{Name: "x", New: newPassThrough})
	msg := mustPanic(t, func() { reg.Register(flows.Spec{Name: "x", New: newPassThrough}) })
	if !strings.Contains(msg, `component "x" registered twice`) {
		t.Errorf("panic %q", msg)
	}
	// Registering the built-ins twice is the same mistake.
	mustPanic(t, func() { nodes.Register(nodes.NewRegistry(nil), nil) })
}

func TestRegistriesAreIsolated(t *testing.T) {
	a, b := flows.NewRegistry(), flows.NewRegistry()
	a.Register(flows.Spec{Name: "only_in_a", Title: "A", New: newPassThrough})
	if _, ok := b.Lookup("only_in_a"); ok {
		t.Error("a spec registered in one registry is visible in another")
	}
	b.Register(flows.Spec{Name: "only_in_a", Title: "B", New: newPassThrough})
	sa, _ := a.Lookup("only_in_a")
	sb, _ := b.Lookup("only_in_a")
	if sa.Title != "A" || sb.Title != "B" {
		t.Errorf("titles %q and %q, want A and B", sa.Title, sb.Title)
	}
	if _, ok := nodes.NewRegistry(nil).Lookup("test_agent"); ok {
		t.Error("the test components leaked into the built-in registry")
	}
}

func TestSpecsAreInPaletteOrder(t *testing.T) {
	reg := flows.NewRegistry()
	for _, s := range []struct{ name, cat string }{
		{"zeta", "io"}, {"custom", "mine"}, {"beta", "flow"}, {"alpha", "flow"}, {"input", "io"}, {"chat", "ai"},
	} {
		reg.Register(flows.Spec{Name: s.name, Category: s.cat, New: newPassThrough})
	}
	var got []string
	for _, s := range reg.Specs() {
		got = append(got, s.Category+"/"+s.Name)
	}
	want := []string{"io/input", "io/zeta", "ai/chat", "flow/alpha", "flow/beta", "mine/custom"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Specs() order %v, want %v", got, want)
	}
}

func TestSpecJSONIsWhatTheEditorGets(t *testing.T) {
	reg := testRegistry()
	spec, ok := reg.Lookup("test_secret")
	if !ok {
		t.Fatal("test_secret is not registered")
	}
	b, err := json.Marshal(spec)
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Name   string       `json:"name"`
		Ports  []flows.Port `json:"ports"`
		Params struct {
			Properties map[string]struct {
				Type        string         `json:"type"`
				Required    []string       `json:"required"`
				Secret      bool           `json:"x-secret"`
				Description string         `json:"description"`
				Properties  map[string]any `json:"properties"`
			} `json:"properties"`
		} `json:"params"`
	}
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	key := got.Params.Properties["api_key"]
	if key.Type != "object" || !reflect.DeepEqual(key.Required, []string{"$env"}) || key.Properties["$env"] == nil {
		t.Errorf("the secret param does not carry the env-reference schema: %s", b)
	}
	if !key.Secret || key.Description != "The key." {
		t.Errorf("the secret param lost x-secret or its description: %+v", key)
	}
	// The form lists params in the order the component writes them.
	if i, j := bytes.Index(b, []byte(`"api_key"`)), bytes.Index(b, []byte(`"prompt"`)); i < 0 || j < i {
		t.Errorf("params are not in the order written: %s", b)
	}
	if bytes.Contains(b, []byte(`"New"`)) || len(got.Ports) != 2 {
		t.Errorf("unexpected JSON form: %s", b)
	}
	if !reflect.DeepEqual(spec.Secrets(), []string{"api_key"}) {
		t.Errorf("Secrets() = %v", spec.Secrets())
	}
}

func TestSpecWithoutParamsTakesNone(t *testing.T) {
	reg := flows.NewRegistry()
	reg.Register(flows.Spec{Name: "bare", New: newPassThrough})
	spec, _ := reg.Lookup("bare")
	b, _ := json.Marshal(spec)
	if !bytes.Contains(b, []byte(`"params":{"type":"object","additionalProperties":false}`)) {
		t.Errorf("JSON form %s does not say it takes no params", b)
	}
}

func TestPortsForAddsRoutePortsFromParams(t *testing.T) {
	reg := flows.NewRegistry()
	reg.Register(flows.Spec{Name: "switch", RoutePorts: "routes", New: newPassThrough,
		Ports: []flows.Port{{Name: "in", Direction: "in", Type: flows.PortState},
			{Name: "default", Direction: "out", Type: flows.PortState}}})
	spec, _ := reg.Lookup("switch")
	outs := func(params string) []string {
		var names []string
		for _, p := range spec.PortsFor(json.RawMessage(params)) {
			if p.Direction == "out" {
				names = append(names, p.Name)
				if p.Type != flows.PortState {
					t.Errorf("route port %q has type %s", p.Name, p.Type)
				}
			}
		}
		return names
	}
	for _, tc := range []struct {
		name, params string
		want         []string
	}{
		{"object keys in the order written", `{"routes": {"zeta": ".z", "alpha": ".a"}}`, []string{"default", "zeta", "alpha"}},
		{"an array of names", `{"routes": ["yes", "no"]}`, []string{"default", "yes", "no"}},
		{"an array of objects with a name", `{"routes": [{"name": "big", "when": "x"}, {"name": "small"}]}`, []string{"default", "big", "small"}},
		{"a route named like a fixed port is not added twice", `{"routes": {"default": "."}}`, []string{"default"}},
		{"no routes", `{}`, []string{"default"}},
		{"params that are not an object", `[1]`, []string{"default"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := outs(tc.params); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("output ports %v, want %v", got, tc.want)
			}
		})
	}
	if p, ok := spec.Port(json.RawMessage(`{"routes": {"hot": "."}}`), "hot", "out"); !ok || p.Name != "hot" {
		t.Errorf("Port(hot) = %v, %v", p, ok)
	}
	if _, ok := spec.Port(json.RawMessage(`{"routes": {"hot": "."}}`), "hot", "in"); ok {
		t.Error("a route is an output port, not an input")
	}
}

func TestWithDefaultsFillsWhatIsLeftOut(t *testing.T) {
	spec, _ := nodes.NewRegistry(nil).Lookup("fanout")
	got, err := spec.WithDefaults(json.RawMessage(`{"items": ".docs"}`))
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	_ = json.Unmarshal(got, &m)
	want := map[string]any{"items": ".docs", "as": "item", "max_items": 1000.0}
	if !reflect.DeepEqual(m, want) {
		t.Errorf("WithDefaults = %v, want %v", m, want)
	}
	if _, err := spec.WithDefaults(json.RawMessage(`[1]`)); err == nil {
		t.Error("params that are not an object: no error")
	}
}
