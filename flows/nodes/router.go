package nodes

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"

	"github.com/sluicehq/sluice/flows"
)

// RouteDefault is the router's port for a state no rule matches.
const RouteDefault = "default"

func routerSpec() flows.Spec {
	return flows.Spec{
		Name:     "router",
		Title:    "Router",
		Category: "flow",
		Description: "Sends the run down one route. Each route is an output port named for it with a jq " +
			"condition over the state; the first route whose condition holds is taken, in the order written, " +
			"else the \"default\" port. A route with nothing connected ends the branch.",
		Ports: []flows.Port{inPort,
			{Name: RouteDefault, Direction: "out", Type: flows.PortState, Description: "taken when no route matches"}},
		RoutePorts: "routes",
		Routing:    true,
		Params: json.RawMessage(`{
			"type": "object", "additionalProperties": false, "required": ["routes"],
			"properties": {
				"routes": {
					"type": "object", "minProperties": 1,
					"description": "Route name (an output port) to jq condition, tried in order.",
					"propertyNames": {"pattern": "^[a-z][a-z0-9_]*$"},
					"additionalProperties": {"type": "string", "format": "jq"}
				}
			}
		}`),
		Example: json.RawMessage(`{"routes": {"code": ".intent == \"code\"", "database": ".intent == \"database\""}}`),
		New:     newRouter,
	}
}

// Router picks one route by jq rules.
type Router struct {
	routes []route
}

type route struct {
	name string
	cond *flows.JQ
}

func newRouter(b *flows.Build) (flows.Component, error) {
	var p struct {
		Routes map[string]string `json:"routes"`
	}
	if err := b.Decode(&p); err != nil {
		return nil, err
	}
	r := &Router{}
	var raw struct {
		Routes json.RawMessage `json:"routes"`
	}
	_ = json.Unmarshal(b.Params, &raw)
	for _, name := range orderedKeys(raw.Routes) {
		if name == RouteDefault {
			return nil, &flows.Error{Code: flows.Invalid, Path: "params.routes." + name, Message: "\"default\" is the port for no match; name the route otherwise"}
		}
		q, err := flows.CompileJQ(p.Routes[name])
		if err != nil {
			return nil, &flows.Error{Code: flows.Invalid, Path: "params.routes." + name, Err: err}
		}
		r.routes = append(r.routes, route{name: name, cond: q})
	}
	return r, nil
}

// Run evaluates the routes in order and chooses the first that holds.
func (r *Router) Run(ctx context.Context, s *flows.Step) (*flows.Result, error) {
	for _, rt := range r.routes {
		ok, err := rt.cond.Truthy(ctx, s.Input, s.State)
		if err != nil {
			return nil, flows.Permanent(&flows.Error{Code: flows.Invalid, Node: s.Node, Path: "params.routes." + rt.name, Err: err})
		}
		if ok {
			return &flows.Result{Output: rt.name, Ports: []string{rt.name}}, nil
		}
	}
	return &flows.Result{Output: RouteDefault, Ports: []string{RouteDefault}}, nil
}

// orderedKeys returns an object's keys in the order they are written.
func orderedKeys(raw json.RawMessage) []string {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil
	}
	var keys []string
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return keys
		}
		keys = append(keys, fmt.Sprint(t))
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return keys
		}
	}
	return keys
}

var _ flows.Component = (*Router)(nil)
