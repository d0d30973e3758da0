package flows

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"time"
)

// Plan is a compiled flow: immutable, shared by every run of its version. Workers only
// ever run plans.
type Plan struct {
	Flow     string
	Version  string // SHA-256 of the canonical document, hex
	Doc      *Document
	Source   []byte // the document as it was compiled (positions included)
	Settings Settings
	Reducers Reducers
	Entry    string
	// Order lists the nodes in topological order of the state edges (back edges of
	// loops ignored), then any others in document order.
	Order []string
	Nodes map[string]*PlanNode
	// Defaults is the initial state from the declared state keys.
	Defaults map[string]any
}

// PlanNode is one node of a plan.
type PlanNode struct {
	ID          string
	Type        string
	Spec        *Spec
	Component   Component
	Input       *JQ // nil: the node sees the whole state
	Output      *JQ // nil: the component's own update
	Timeout     time.Duration
	Concurrency int
	CacheTTL    time.Duration
	Retry       Retry      // with the defaults filled in
	Edges       []PlanEdge // state edges out of this node, in document order
	// Join is the join node where the branches this node starts meet, or "".
	Join  string
	Tools map[string]Tool // tools attached to the node's tools port, by tool name
	// Index is the node's position in the document.
	Index int
}

// IsJoin reports whether n is a join (where a fork's branches meet).
func (n *PlanNode) IsJoin() bool {
	return n != nil && n.Spec != nil && n.Spec.Name == JoinType
}

// Pure reports whether n's steps need no I/O (jq, templates): the engine runs them
// inline and fuses them into the commit of the step before. A join is not pure: its
// state is its branches', merged when it fires (but see JoinsInline).
func (n *PlanNode) Pure() bool {
	return !n.IsJoin() && n.pureComponent()
}

// Bounded reports whether n's component is pure and finishes in bounded time (Bounder):
// the engine runs its steps without a deadline timer.
func (n *PlanNode) Bounded() bool {
	return n.Pure() && n.boundedComponent()
}

// StepBounded reports whether a step of n, from its input mapping to the choice of its
// successors, finishes in bounded time: n is pure, its component says so (Bounder), and
// its mappings and its edges' conditions are of the shapes evaluated in bounded time.
// The engine runs such steps without a deadline timer, on its readers' goroutines and in
// a start, and fuses them after a step with side effects.
func (n *PlanNode) StepBounded() bool {
	return n.Bounded() && n.boundedMappings()
}

// JoinsInline reports whether n is a join whose step may run in the commit its fork's
// branches all arrived in (the engine's joinInline): it would be StepBounded but for
// being a join.
func (n *PlanNode) JoinsInline() bool {
	return n.IsJoin() && n.pureComponent() && n.boundedComponent() && n.boundedMappings()
}

func (n *PlanNode) pureComponent() bool {
	if n == nil || n.Spec == nil {
		return false
	}
	in, ok := n.Component.(Inliner)
	return ok && in.Inline()
}

func (n *PlanNode) boundedComponent() bool {
	b, ok := n.Component.(Bounder)
	return ok && b.Bounded()
}

// boundedMappings reports whether n's mappings and its edges' conditions are of the
// shapes evaluated in bounded time.
func (n *PlanNode) boundedMappings() bool {
	if (n.Input != nil && !n.Input.Bounded()) || (n.Output != nil && !n.Output.Bounded()) {
		return false
	}
	for _, e := range n.Edges {
		if e.Condition != nil && !e.Condition.Bounded() {
			return false
		}
	}
	return true
}

// PlanEdge is a state edge out of a node.
type PlanEdge struct {
	Key       string
	Port      string
	To        string
	ToPort    string
	Condition *JQ // nil: always taken when its port is chosen
}

// DefaultConcurrency is how many steps of one node a worker process runs at once.
const DefaultConcurrency = 16

// Compile validates a document and, when it has no errors, compiles it into a Plan.
// Problems holds every error and warning either way. It never panics.
func Compile(data []byte, reg *Registry, lim Limits) (plan *Plan, problems Problems) {
	c := &checker{reg: reg, lim: lim, nodeIndex: map[string]int{}, specs: map[string]*Spec{},
		params: map[string]json.RawMessage{}, ports: map[string][]Port{},
		badParams: map[string]bool{}, secretPaths: map[int]map[string]bool{}}
	defer func() {
		if r := recover(); r != nil {
			plan = nil
			problems = append(c.probs, Problem{Severity: SeverityError, Code: CodeInvalidValue,
				Message: fmt.Sprintf("internal error while compiling: %v", r)})
		}
		sortProblems(problems)
	}()
	if !c.parse(data) {
		return nil, c.probs
	}
	c.checkNodes()
	edges := c.checkEdges()
	c.checkPorts()
	entry := c.checkEntry()
	g := c.buildGraph(edges)
	joinOf := c.checkGraph(g, entry)
	comps := c.build(g)
	c.checkScheduleInputs(comps[entry])
	if c.probs.HasErrors() {
		return nil, c.probs
	}
	p, err := c.plan(data, g, entry, joinOf, comps)
	if err != nil {
		c.add(Problem{Code: CodeInvalidValue, Message: err.Error()})
		return nil, c.probs
	}
	return p, c.probs
}

// build constructs every node's component; a constructor's error becomes a problem.
func (c *checker) build(g *graph) map[string]Component {
	comps := map[string]Component{}
	for _, id := range g.ids {
		params, ok := c.params[id]
		spec := c.specs[id]
		if !ok || spec == nil {
			continue
		}
		i := g.index[id]
		comp, err := spec.New(&Build{Flow: c.doc, Node: &c.doc.Nodes[i], Params: params})
		if err != nil {
			path := "params"
			var fe *Error
			if errors.As(err, &fe) && fe.Path != "" {
				path = fe.Path
			}
			msg := err.Error()
			if fe != nil {
				msg = fe.Message
				if fe.Err != nil {
					if msg != "" {
						msg += ": "
					}
					msg += fe.Err.Error()
				}
			}
			c.nodeProblem(i, CodeInvalidParams, path, "%s", msg)
			continue
		}
		comps[id] = comp
	}
	for agent, tools := range g.tools {
		for _, t := range tools {
			if comp, ok := comps[t]; ok {
				if _, isTool := comp.(Tool); !isTool {
					c.nodeProblem(g.index[t], CodePortMismatch, "", "component %q cannot be used as a tool of %q", c.specs[t].Name, agent)
				}
			}
		}
	}
	return comps
}

func (c *checker) plan(data []byte, g *graph, entry string, joinOf map[string]string, comps map[string]Component) (*Plan, error) {
	d := c.doc
	version, err := Version(d)
	if err != nil {
		return nil, err
	}
	p := &Plan{
		Flow:     d.ID,
		Version:  version,
		Doc:      d,
		Source:   append([]byte(nil), data...),
		Settings: d.Settings.WithDefaults(),
		Reducers: ReducersOf(d),
		Entry:    entry,
		Nodes:    map[string]*PlanNode{},
		Defaults: map[string]any{},
	}
	for k, sk := range d.State {
		if len(sk.Default) > 0 {
			v, err := DecodeJSON(sk.Default)
			if err != nil {
				return nil, fmt.Errorf("state.%s.default: %v", k, err)
			}
			p.Defaults[k] = v
		}
	}
	for _, id := range g.ids {
		i := g.index[id]
		n := &d.Nodes[i]
		pn := &PlanNode{
			ID: id, Type: n.Type, Spec: c.specs[id], Component: comps[id],
			Timeout: n.Timeout.D(), Concurrency: n.Concurrency, Join: joinOf[id], Index: i,
		}
		if pn.Timeout == 0 {
			pn.Timeout = p.Settings.StepTimeout.D()
		}
		if pn.Concurrency == 0 {
			pn.Concurrency = DefaultConcurrency
		}
		if n.Cache != nil {
			pn.CacheTTL = n.Cache.TTL.D()
		}
		pn.Retry = n.Retry.WithDefaults(p.Settings)
		if n.Input != "" {
			pn.Input, _ = CompileJQ(n.Input)
		}
		if n.Output != "" {
			pn.Output, _ = CompileJQ(n.Output)
		}
		for _, e := range g.out[id] {
			de := d.Edges[e.edge]
			pe := PlanEdge{Key: de.Key(), Port: de.FromPort(), To: de.To, ToPort: de.InPort()}
			if de.Condition != "" {
				pe.Condition, _ = CompileJQ(de.Condition)
			}
			pn.Edges = append(pn.Edges, pe)
		}
		for _, t := range g.tools[id] {
			if tool, ok := comps[t].(Tool); ok {
				if pn.Tools == nil {
					pn.Tools = map[string]Tool{}
				}
				name := tool.ToolDef().Name
				if _, dup := pn.Tools[name]; dup {
					return nil, fmt.Errorf("node %q has two tools named %q", id, name)
				}
				pn.Tools[name] = tool
			}
		}
		p.Nodes[id] = pn
	}
	p.Order = topoOrder(g, entry)
	return p, nil
}

// topoOrder orders nodes by a depth-first walk from the entry that ignores back edges,
// then appends nodes the walk did not reach, in document order.
func topoOrder(g *graph, entry string) []string {
	var post []string
	state := map[string]int{} // 1 visiting, 2 done
	var visit func(n string)
	visit = func(n string) {
		state[n] = 1
		// Successors in reverse so that the reversed post-order keeps document order.
		out := g.out[n]
		for i := len(out) - 1; i >= 0; i-- {
			if state[out[i].to] == 0 {
				visit(out[i].to)
			}
		}
		state[n] = 2
		post = append(post, n)
	}
	if entry != "" {
		visit(entry)
	}
	order := make([]string, 0, len(g.ids))
	for i := len(post) - 1; i >= 0; i-- {
		order = append(order, post[i])
	}
	for _, id := range g.ids {
		if state[id] == 0 {
			order = append(order, id)
		}
	}
	return order
}

// Canonical returns the document's canonical JSON: the format's fields in a fixed order,
// state keys sorted, no insignificant space, and the layout-only fields (node positions,
// notes on the canvas) left out. Inside params and state defaults keys keep the order they are written in,
// because a component may give it meaning: a router tries its routes in that order, so
// two documents that differ only there must not share a version.
func Canonical(d *Document) ([]byte, error) {
	cp := *d
	cp.Notes = nil
	cp.Nodes = make([]Node, len(d.Nodes))
	for i, n := range d.Nodes {
		n.Position = nil
		cp.Nodes[i] = n
	}
	// encoding/json writes struct fields in declaration order, sorts map keys and
	// compacts a json.RawMessage without reordering it.
	return json.Marshal(&cp)
}

// Version is the SHA-256 of the canonical document: moving a node does not change it,
// any other edit does.
func Version(d *Document) (string, error) {
	b, err := Canonical(d)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]), nil
}

// NodeIDs returns the plan's node ids in document order.
func (p *Plan) NodeIDs() []string {
	ids := make([]string, 0, len(p.Nodes))
	for id := range p.Nodes {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return p.Nodes[ids[i]].Index < p.Nodes[ids[j]].Index })
	return ids
}
