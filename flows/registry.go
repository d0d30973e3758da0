package flows

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// PortType says what travels on an edge: the run state (control flow) or a tool
// attachment. Only ports of the same type connect.
type PortType string

const (
	PortState PortType = "state"
	PortTool  PortType = "tool"
)

// Port is a named connection point of a component.
type Port struct {
	Name        string   `json:"name"`
	Direction   string   `json:"direction"` // "in" or "out"
	Type        PortType `json:"type"`
	Required    bool     `json:"required,omitempty"` // validation fails when nothing is connected
	Multiple    bool     `json:"multiple,omitempty"` // more than one edge may attach (inputs)
	Description string   `json:"description,omitempty"`
}

// Spec describes a component type: the registry's one source of truth for the palette,
// parameter forms, validation and docs.
type Spec struct {
	Name        string `json:"name"`
	Title       string `json:"title"`
	Category    string `json:"category"`
	Description string `json:"description"`
	Ports       []Port `json:"ports"`
	// RoutePorts names a parameter whose keys (an object) or items (an array of strings)
	// are further output ports, such as a router's routes.
	RoutePorts string `json:"route_ports,omitempty"`
	// Routing is true when a step chooses among its output ports, so edges from them are
	// conditional (a loop through them can end).
	Routing bool `json:"routing,omitempty"`
	// Fans is true when a step starts one branch per item of a list (fanout).
	Fans bool `json:"fans,omitempty"`
	// Params is the JSON Schema of the node's params. Properties may carry "format":
	// "jq", "template" or "duration", checked at validation; "x-secret": true marks a
	// credential that accepts only {"$env": "NAME"}; on an object property,
	// "x-secret-keys": "REGEXP" marks the members whose names match as credentials (a
	// string there is literal_secret, an {"$env"} object is what they take).
	Params json.RawMessage `json:"params"`
	// Example is a params object shown in the docs.
	Example json.RawMessage `json:"example,omitempty"`
	// New builds the component for one node of a compiled plan.
	New func(b *Build) (Component, error) `json:"-"`

	schema     *jsonschema.Schema
	secrets    []string
	secretKeys map[string]*regexp.Regexp
	defaults   map[string]json.RawMessage
}

// Build is what a constructor gets: the node and its params with defaults applied.
type Build struct {
	Flow   *Document
	Node   *Node
	Params json.RawMessage
}

// Decode strictly decodes the params into v.
func (b *Build) Decode(v any) error {
	dec := json.NewDecoder(bytes.NewReader(b.Params))
	dec.UseNumber()
	if err := dec.Decode(v); err != nil {
		return &Error{Code: Invalid, Node: b.Node.ID, Path: "params", Err: err}
	}
	return nil
}

// PortsFor returns the component's ports for the given params, route ports included.
func (s *Spec) PortsFor(params json.RawMessage) []Port {
	ports := append([]Port(nil), s.Ports...)
	if s.RoutePorts == "" || len(params) == 0 {
		return ports
	}
	var p map[string]json.RawMessage
	if json.Unmarshal(params, &p) != nil {
		return ports
	}
	for _, name := range routeNames(p[s.RoutePorts]) {
		if !hasPort(ports, name, "out") {
			ports = append(ports, Port{Name: name, Direction: "out", Type: PortState, Description: "route " + name})
		}
	}
	return ports
}

// routeNames reads route names from an object's keys (in document order) or an array of
// strings or of objects with a "name".
func routeNames(raw json.RawMessage) []string {
	var names []string
	dec := json.NewDecoder(bytes.NewReader(raw))
	tok, err := dec.Token()
	if err != nil {
		return nil
	}
	switch tok {
	case json.Delim('{'):
		for dec.More() {
			k, err := dec.Token()
			if err != nil {
				return names
			}
			names = append(names, fmt.Sprint(k))
			var skip json.RawMessage
			if dec.Decode(&skip) != nil {
				return names
			}
		}
	case json.Delim('['):
		for dec.More() {
			var item json.RawMessage
			if dec.Decode(&item) != nil {
				return names
			}
			var s string
			var o struct{ Name string }
			if json.Unmarshal(item, &s) == nil {
				names = append(names, s)
			} else if json.Unmarshal(item, &o) == nil && o.Name != "" {
				names = append(names, o.Name)
			}
		}
	}
	return names
}

func hasPort(ports []Port, name, dir string) bool {
	for _, p := range ports {
		if p.Name == name && p.Direction == dir {
			return true
		}
	}
	return false
}

// Port returns the named port in the given direction.
func (s *Spec) Port(params json.RawMessage, name, dir string) (Port, bool) {
	for _, p := range s.PortsFor(params) {
		if p.Name == name && p.Direction == dir {
			return p, true
		}
	}
	return Port{}, false
}

// Secrets are the params that hold credentials.
func (s *Spec) Secrets() []string { return s.secrets }

// Registry holds component specs by name. Build one per process (or per test); the
// same name registered twice panics, as does an invalid spec.
type Registry struct {
	mu         sync.RWMutex
	specs      map[string]*Spec
	secrets    *Secrets
	workspaces WorkspaceRules
	providers  ProviderCheck
}

// SetWorkspaceRules sets where validation finds what each workspace's owner allows its
// flows (nil: NoWorkspaceRules).
func (r *Registry) SetWorkspaceRules(w WorkspaceRules) {
	r.mu.Lock()
	r.workspaces = w
	r.mu.Unlock()
}

// WorkspaceRules is what SetWorkspaceRules set, or NoWorkspaceRules.
func (r *Registry) WorkspaceRules() WorkspaceRules {
	r.mu.RLock()
	defer r.mu.RUnlock()
	if r.workspaces == nil {
		return NoWorkspaceRules{}
	}
	return r.workspaces
}

// SetProviderCheck sets the operator's rule for the LLM providers each workspace's
// flows may name (the components that call models set it).
func (r *Registry) SetProviderCheck(c ProviderCheck) {
	r.mu.Lock()
	r.providers = c
	r.mu.Unlock()
}

// CheckProvider applies the rule SetProviderCheck set (none: every provider name is
// the components' business).
func (r *Registry) CheckProvider(ws, provider string) error {
	r.mu.RLock()
	c := r.providers
	r.mu.RUnlock()
	if c == nil {
		return nil
	}
	return c(ws, provider)
}

// SetSecrets sets the rule for the environment variables the registry's flows may read
// with {"$env": NAME}, which validation applies (nil: DefaultSecrets).
func (r *Registry) SetSecrets(s *Secrets) {
	r.mu.Lock()
	r.secrets = s
	r.mu.Unlock()
}

// Secrets is the rule SetSecrets set, or DefaultSecrets.
func (r *Registry) Secrets() *Secrets {
	r.mu.RLock()
	defer r.mu.RUnlock()
	if r.secrets == nil {
		return DefaultSecrets()
	}
	return r.secrets
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry { return &Registry{specs: map[string]*Spec{}} }

var specName = regexp.MustCompile(`^[a-z][a-z0-9_]*$`)

// Register adds spec. It panics on a duplicate name, an invalid name, a missing
// constructor or a parameter schema that does not compile: all programming errors.
func (r *Registry) Register(spec Spec) {
	if !specName.MatchString(spec.Name) {
		panic(fmt.Sprintf("flows: component name %q must be lower-case letters, digits and '_'", spec.Name))
	}
	if spec.New == nil {
		panic(fmt.Sprintf("flows: component %q has no constructor", spec.Name))
	}
	if len(spec.Params) == 0 {
		spec.Params = json.RawMessage(`{"type":"object","additionalProperties":false}`)
	}
	sch, info, err := compileParamSchema(spec.Name, spec.Params)
	if err != nil {
		panic(fmt.Sprintf("flows: component %q: params schema: %v", spec.Name, err))
	}
	spec.schema, spec.secrets, spec.secretKeys, spec.defaults = sch, info.secrets, info.secretKeys, info.defaults
	spec.Params = info.published
	for _, p := range spec.Ports {
		if p.Direction != "in" && p.Direction != "out" {
			panic(fmt.Sprintf("flows: component %q port %q: direction must be in or out", spec.Name, p.Name))
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, dup := r.specs[spec.Name]; dup {
		panic(fmt.Sprintf("flows: component %q registered twice", spec.Name))
	}
	s := spec
	r.specs[spec.Name] = &s
}

// Lookup returns the spec of a component type.
func (r *Registry) Lookup(name string) (*Spec, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	s, ok := r.specs[name]
	return s, ok
}

// Specs returns every spec, sorted by category then name.
func (r *Registry) Specs() []*Spec {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]*Spec, 0, len(r.specs))
	for _, s := range r.specs {
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Category != out[j].Category {
			return categoryRank(out[i].Category) < categoryRank(out[j].Category)
		}
		return out[i].Name < out[j].Name
	})
	return out
}

// Categories in palette order.
var Categories = []string{"io", "ai", "flow", "data", "tools", "human", "test"}

func categoryRank(c string) int {
	for i, x := range Categories {
		if x == c {
			return i
		}
	}
	return len(Categories)
}

// WithDefaults returns params with the schema's top-level defaults filled in.
func (s *Spec) WithDefaults(params json.RawMessage) (json.RawMessage, error) {
	p := map[string]json.RawMessage{}
	if len(params) > 0 && string(params) != "null" {
		if err := json.Unmarshal(params, &p); err != nil {
			return nil, err
		}
	}
	for k, v := range s.defaults {
		if _, ok := p[k]; !ok {
			p[k] = v
		}
	}
	return json.Marshal(p)
}

// CheckParams checks a node's params (with defaults applied) against the spec's schema,
// as validation does, and returns the first problem as an Invalid error at its path.
func (s *Spec) CheckParams(params json.RawMessage) error {
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(params))
	if err != nil {
		return &Error{Code: Invalid, Path: "params", Message: "params are not JSON: " + err.Error()}
	}
	if err := s.schema.Validate(v); err != nil {
		if probs := schemaProblems(err, []string{"params"}); len(probs) > 0 {
			return &Error{Code: Invalid, Path: probs[0].Path, Message: probs[0].Message}
		}
		return &Error{Code: Invalid, Path: "params", Message: err.Error()}
	}
	return nil
}
