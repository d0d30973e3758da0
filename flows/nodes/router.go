package nodes

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/sluicehq/sluice/flows"
)

// RouteDefault is the router's port for a state no rule matches.
const RouteDefault = "default"

func routerSpec(env *Env) flows.Spec {
	return flows.Spec{
		Name:     "router",
		Title:    "Router",
		Category: "flow",
		Description: "Sends the run down one route; each route is an output port named for it, and a route with " +
			"nothing connected ends the branch. In mode \"rules\" each route has a jq condition over the state and " +
			"the first that holds is taken, in the order written, else the \"default\" port. In mode \"llm\" each " +
			"route has a description and a model of any provider on the server (OpenAI-compatible or Anthropic) " +
			"classifies the prompt (article 000's intent classifier): its answer " +
			"must be one of the route names, else the run takes \"default\". The route taken is the output and, " +
			"with \"as\", is stored in the state.",
		Ports: []flows.Port{inPort,
			{Name: RouteDefault, Direction: "out", Type: flows.PortState, Description: "taken when no route matches"}},
		RoutePorts: "routes",
		Routing:    true,
		Params: json.RawMessage(`{
			"type": "object", "additionalProperties": false, "required": ["routes"],
			"properties": {
				"mode": {"type": "string", "enum": ["rules", "llm"], "default": "rules", "description": "rules: jq conditions; llm: a model picks the route."},
				"routes": {
					"type": "object", "minProperties": 1,
					"description": "Route name (an output port) to its jq condition (rules, tried in order) or to a description of when to take it (llm).",
					"propertyNames": {"pattern": "^[a-z][a-z0-9_]*$"},
					"additionalProperties": {"type": "string"}
				},` + modelParams + `,
				"prompt": {"type": "string", "format": "template", "default": "{{json .}}", "description": "llm: the text the model classifies, a template over the node's input."},
				"as": {"type": "string", "pattern": "^[A-Za-z_][A-Za-z0-9_]*$", "description": "State key the chosen route is stored under (e.g. intent)."}
			},
			"if": {"properties": {"mode": {"const": "llm"}}, "required": ["mode"]},
			"then": {"required": ["model"]},
			"else": {"properties": {"routes": {"additionalProperties": {"type": "string", "format": "jq"}}}}
		}`),
		Example: json.RawMessage(`{"routes": {"code": ".intent == \"code\"", "database": ".intent == \"database\""}}`),
		New:     func(b *flows.Build) (flows.Component, error) { return newRouter(env, b) },
	}
}

// Router picks one route by jq rules or by asking a model.
type Router struct {
	routes []route
	as     string
	// llm mode
	env    *Env
	llm    bool
	model  modelConfig
	prompt *flows.Template
	system string
	ttl    time.Duration
	budget budget
}

type route struct {
	name string
	cond *flows.JQ
	desc string
}

func newRouter(env *Env, b *flows.Build) (flows.Component, error) {
	var p struct {
		modelConfig
		Mode   string            `json:"mode"`
		Routes map[string]string `json:"routes"`
		Prompt string            `json:"prompt"`
		As     string            `json:"as"`
	}
	if err := b.Decode(&p); err != nil {
		return nil, err
	}
	r := &Router{env: env, llm: p.Mode == "llm", as: p.As}
	var raw struct {
		Routes json.RawMessage `json:"routes"`
	}
	_ = json.Unmarshal(b.Params, &raw)
	for _, name := range orderedKeys(raw.Routes) {
		if name == RouteDefault {
			return nil, &flows.Error{Code: flows.Invalid, Path: "params.routes." + name, Message: "\"default\" is the port for no match; name the route otherwise"}
		}
		rt := route{name: name, desc: p.Routes[name]}
		if !r.llm {
			q, err := flows.CompileJQ(p.Routes[name])
			if err != nil {
				return nil, &flows.Error{Code: flows.Invalid, Path: "params.routes." + name, Err: err}
			}
			rt.cond = q
		}
		r.routes = append(r.routes, rt)
	}
	if !r.llm {
		return r, nil
	}
	if _, err := env.providerIn(flowOf(b), p.Provider); err != nil {
		return nil, err
	}
	var err error
	if r.prompt, err = flows.ParseTemplate(p.Prompt); err != nil {
		return nil, &flows.Error{Code: flows.Invalid, Path: "params.prompt", Err: err}
	}
	r.model, r.ttl, r.budget = p.modelConfig, nodeCacheTTL(b), newBudget(b)
	var sb strings.Builder
	sb.WriteString("Classify the user's message into exactly one of these routes:\n")
	for _, rt := range r.routes {
		fmt.Fprintf(&sb, "- %s: %s\n", rt.name, rt.desc)
	}
	fmt.Fprintf(&sb, "- %s: none of the above\nAnswer with the route's name only, nothing else.", RouteDefault)
	r.system = sb.String()
	return r, nil
}

// Run evaluates the routes in order and chooses the first that holds, or asks the model.
func (r *Router) Run(ctx context.Context, s *flows.Step) (*flows.Result, error) {
	if r.llm {
		return r.classify(ctx, s)
	}
	for _, rt := range r.routes {
		ok, err := rt.cond.Truthy(ctx, s.Input, s.State)
		if err != nil {
			return nil, flows.Permanent(&flows.Error{Code: flows.Invalid, Node: s.Node, Path: "params.routes." + rt.name, Err: err})
		}
		if ok {
			return r.chose(rt.name), nil
		}
	}
	return r.chose(RouteDefault), nil
}

func (r *Router) chose(name string) *flows.Result {
	res := &flows.Result{Output: name, Ports: []string{name}}
	if r.as != "" {
		res.Update = map[string]any{r.as: name}
	}
	return res
}

// classify asks the model for a route name. An answer that is not exactly one of the
// names (ignoring case, quotes and a final period) takes the default route.
func (r *Router) classify(ctx context.Context, s *flows.Step) (*flows.Result, error) {
	text, err := r.prompt.Execute(ctx, s.Input)
	if err != nil {
		return nil, templateError(s.Node, "params.prompt", err)
	}
	req := r.model.request()
	req.Messages = []chatMessage{{Role: "system", Content: r.system}, {Role: "user", Content: text}}
	reply, _, err := r.env.chat(ctx, s, req, chatOptions{component: "router", cacheTTL: r.ttl, budget: r.budget})
	if err != nil {
		return nil, err
	}
	answer := strings.ToLower(strings.Trim(strings.TrimSpace(reply.Message.Content), "\"'`.*"))
	chosen := RouteDefault
	for _, rt := range r.routes {
		if answer == rt.name {
			chosen = rt.name
		}
	}
	res := r.chose(chosen)
	res.Usage, res.StateBytes = reply.Usage, len(text)
	return res, nil
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
