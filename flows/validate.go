package flows

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// Limits bound what a document may hold.
type Limits struct {
	MaxBytes  int // the whole document
	MaxNodes  int
	MaxString int // any one string inside params
}

// DefaultLimits are the limits unless the server is configured otherwise.
var DefaultLimits = Limits{MaxBytes: 2 << 20, MaxNodes: 500, MaxString: 256 << 10}

// EntryType is the component type that starts a run: every flow has exactly one.
const EntryType = "input"

// JoinType is the component type where the branches of a fork meet.
const JoinType = "join"

// Validate checks a document and returns every problem it finds, errors and warnings,
// sorted by position. It never panics, whatever the bytes.
func Validate(data []byte, reg *Registry, lim Limits) Problems {
	_, ps := Compile(data, reg, lim)
	return ps
}

// checker accumulates problems while it walks a document.
type checker struct {
	reg   *Registry
	lim   Limits
	raw   map[string]any // the document as plain JSON, for paths the struct loses
	doc   *Document
	probs Problems
	// nodeIndex maps a node id to its first index in doc.Nodes.
	nodeIndex map[string]int
	specs     map[string]*Spec           // node id -> spec, for nodes whose type is known
	params    map[string]json.RawMessage // node id -> params with defaults
	ports     map[string][]Port          // node id -> ports for its params
	// badParams marks nodes whose params already have problems: they are not built.
	badParams map[string]bool
	// secretPaths holds, per node index, the param paths reported as literal secrets.
	secretPaths map[int]map[string]bool
	// connected holds the ports (portKey) that some edge attaches to.
	connected map[string]bool
	// wsRule is the rule of the flow's workspace, once read.
	wsRule *WorkspaceRule
	// loose are the edges between existing nodes that failed the port checks: not run,
	// but followed when looking for unreachable nodes, so that one wrong edge or type
	// does not also mark everything after it as never running.
	loose []int
}

func (c *checker) add(p Problem) {
	if p.Severity == "" {
		p.Severity = SeverityError
	}
	c.probs = append(c.probs, p)
}

func (c *checker) nodeProblem(i int, code, path, format string, args ...any) {
	id := ""
	if i >= 0 && i < len(c.doc.Nodes) {
		id = c.doc.Nodes[i].ID
	}
	full := fmt.Sprintf("nodes[%d]", i)
	if path != "" {
		full += "." + path
	}
	c.add(Problem{Code: code, Node: id, Path: full, Message: fmt.Sprintf(format, args...)})
}

func (c *checker) edgeProblem(i int, code, path, format string, args ...any) {
	full := fmt.Sprintf("edges[%d]", i)
	if path != "" {
		full += "." + path
	}
	c.add(Problem{Code: code, Edge: c.doc.Edges[i].Key(), Path: full, Message: fmt.Sprintf(format, args...)})
}

// parse decodes and schema-checks the document. It returns false when the document
// cannot be read as a flow at all.
func (c *checker) parse(data []byte) (ok bool) {
	if c.lim.MaxBytes > 0 && len(data) > c.lim.MaxBytes {
		c.add(Problem{Code: CodeTooLarge, Message: fmt.Sprintf("document is %d bytes, the limit is %d", len(data), c.lim.MaxBytes)})
		return false
	}
	generic, err := DecodeJSON(data)
	if err != nil {
		c.add(Problem{Code: CodeSyntax, Message: "not valid JSON: " + describeJSONError(data, err)})
		return false
	}
	raw, isObj := generic.(map[string]any)
	if !isObj {
		c.add(Problem{Code: CodeWrongType, Message: fmt.Sprintf("a flow document is a JSON object, got %s", TypeName(generic))})
		return false
	}
	c.raw = raw
	if nodes, ok := raw["nodes"].([]any); ok && c.lim.MaxNodes > 0 && len(nodes) > c.lim.MaxNodes {
		c.add(Problem{Code: CodeTooManyNodes, Path: "nodes", Message: fmt.Sprintf("%d nodes, the limit is %d", len(nodes), c.lim.MaxNodes)})
		return false
	}
	if err := documentSchema.Validate(generic); err != nil {
		for _, p := range schemaProblems(err, nil) {
			if p.Path == "sluice" && p.Code != CodeMissingField {
				p.Code = CodeUnsupported
				p.Message = "\"sluice\" must be 1, the only format version this build reads"
			}
			p.Node = c.rawNodeID(p.Path)
			p.Edge = c.rawEdgeKey(p.Path)
			c.add(p)
		}
	}
	var doc Document
	if err := json.Unmarshal(data, &doc); err != nil {
		// The schema problems above already say what is wrong; add a generic one only
		// if there were none.
		if len(c.probs) == 0 {
			c.add(Problem{Code: CodeWrongType, Message: err.Error()})
		}
		return false
	}
	c.doc = &doc
	return true
}

var nodePathRE = regexp.MustCompile(`^nodes\[(\d+)\]`)

// rawNodeID names the node a path points into, when it points into one.
func (c *checker) rawNodeID(path string) string {
	m := nodePathRE.FindStringSubmatch(path)
	if m == nil {
		return ""
	}
	i, _ := strconv.Atoi(m[1])
	nodes, _ := c.raw["nodes"].([]any)
	if i >= len(nodes) {
		return ""
	}
	n, _ := nodes[i].(map[string]any)
	id, _ := n["id"].(string)
	return id
}

var edgePathRE = regexp.MustCompile(`^edges\[(\d+)\]`)

// rawEdgeKey names the edge a path points into, when it points into one, as Edge.Key
// does: schema problems inside an edge are located on the canvas like the others.
func (c *checker) rawEdgeKey(path string) string {
	m := edgePathRE.FindStringSubmatch(path)
	if m == nil {
		return ""
	}
	i, _ := strconv.Atoi(m[1])
	edges, _ := c.raw["edges"].([]any)
	if i >= len(edges) {
		return ""
	}
	re, ok := edges[i].(map[string]any)
	if !ok {
		return ""
	}
	str := func(k string) string { s, _ := re[k].(string); return s }
	return Edge{ID: str("id"), From: str("from"), Port: str("port"), To: str("to"), ToPort: str("to_port")}.Key()
}

func describeJSONError(data []byte, err error) string {
	var se *json.SyntaxError
	var off int64 = -1
	if errors.As(err, &se) {
		off = se.Offset
	}
	var ue *json.UnmarshalTypeError
	if errors.As(err, &ue) {
		off = ue.Offset
	}
	if off < 0 || off > int64(len(data)) {
		return err.Error()
	}
	line := 1 + strings.Count(string(data[:off]), "\n")
	col := int(off) - strings.LastIndex(string(data[:off]), "\n")
	return fmt.Sprintf("line %d, column %d: %v", line, col, err)
}

// checkNodes checks ids, types and params of every node.
func (c *checker) checkNodes() {
	d := c.doc
	if d.ID != "" && !ValidFlowID(d.ID) {
		c.add(Problem{Code: CodeInvalidID, Path: "id", Message: fmt.Sprintf("flow id %q: use 1 to %d lower-case letters, digits, '-' or '_'", d.ID, MaxIDLen)})
	}
	for k, sk := range d.State {
		if len(sk.Default) == 0 {
			continue
		}
		v, err := DecodeJSON(sk.Default)
		if err != nil {
			c.add(Problem{Code: CodeInvalidValue, Path: "state." + k + ".default", Message: err.Error()})
			continue
		}
		// A default its reducer cannot merge into would fail every run at the first update.
		want := ""
		switch _, isObj := v.(map[string]any); {
		case v == nil:
		case sk.Reducer == Merge && !isObj:
			want = "an object"
		case sk.Reducer == Add:
			if _, ok := toRat(v); !ok {
				want = "a number"
			}
		}
		if want != "" {
			c.add(Problem{Code: CodeInvalidValue, Path: "state." + k + ".default",
				Message: fmt.Sprintf("the %s reducer needs %s, got %s; change the default or the reducer", sk.Reducer, want, TypeName(v))})
		}
	}
	for i := range d.Nodes {
		n := &d.Nodes[i]
		switch {
		case n.ID == "":
			// The schema already reported the missing id.
		default:
			if j, dup := c.nodeIndex[n.ID]; dup {
				c.nodeProblem(i, CodeDuplicateID, "id", "node id %q is already used by nodes[%d]", n.ID, j)
				continue
			}
			if !ValidID(n.ID) {
				c.nodeProblem(i, CodeInvalidID, "id", "node id %q: use 1 to %d lower-case letters, digits, '-' or '_'", n.ID, MaxIDLen)
			}
			// A node with an invalid id is still indexed, so that the edges to it resolve
			// and the id is the one problem reported, not a dangling edge as well.
			c.nodeIndex[n.ID] = i
		}
		if n.Input != "" {
			if _, err := CompileJQ(n.Input); err != nil {
				c.nodeProblem(i, CodeJQSyntax, "input", "%v", err)
			}
		}
		if n.Output != "" {
			if _, err := CompileJQ(n.Output); err != nil {
				c.nodeProblem(i, CodeJQSyntax, "output", "%v", err)
			}
		}
		if c.scanStrings(i) {
			c.badParams[n.ID] = true
		}
		if c.checkSecretRefs(i) {
			c.badParams[n.ID] = true
		}
		if n.Type == "" {
			continue
		}
		spec, ok := c.reg.Lookup(n.Type)
		if !ok {
			c.nodeProblem(i, CodeUnknownType, "type", "unknown component type %q", n.Type)
			continue
		}
		c.checkParams(i, spec)
	}
}

// checkParams validates one node's params against its component's schema and limits.
func (c *checker) checkParams(i int, spec *Spec) {
	n := &c.doc.Nodes[i]
	params := c.rawParams(i)
	pm, isObj := params.(map[string]any)
	if !isObj {
		// The document schema reported params that are not an object. The node keeps
		// its ports, so that its edges are still checked and nothing else is reported.
		c.specs[n.ID] = spec
		c.ports[n.ID] = spec.PortsFor(nil)
		return
	}
	bad := c.badParams[n.ID]
	// A credential written into the document is reported as such, not as a type error.
	secretPaths := c.secretPaths[i]
	if secretPaths == nil {
		secretPaths = map[string]bool{}
	}
	for _, s := range spec.secrets {
		v, ok := pm[s]
		if !ok {
			continue
		}
		if _, isStr := v.(string); isStr && !secretPaths["params."+s] {
			c.nodeProblem(i, CodeLiteralSecret, "params."+s, "a credential must be an environment reference such as {\"$env\": \"%s\"}, never the secret itself", envNameFor(s))
			secretPaths["params."+s] = true
			bad = true
		}
	}
	for param, re := range spec.secretKeys {
		members, _ := pm[param].(map[string]any)
		for k, v := range members {
			p := jsonPath([]string{"params", param, k})
			if _, isStr := v.(string); isStr && re.MatchString(k) && !secretPaths[p] {
				c.nodeProblem(i, CodeLiteralSecret, p, "%s carries a credential: write {\"$env\": \"%s%s\"} (the value in that environment variable of the worker), never the value itself", k, SecretPrefix, envNameFor(k))
				secretPaths[p] = true
				bad = true
			}
		}
	}
	if err := spec.schema.Validate(params); err != nil {
		for _, p := range schemaProblems(err, []string{fmt.Sprintf("nodes[%d]", i), "params"}) {
			if secretPaths[strings.TrimPrefix(p.Path, fmt.Sprintf("nodes[%d].", i))] {
				continue
			}
			p.Node = n.ID
			c.add(p)
		}
		bad = true
	}
	withDefaults, err := spec.WithDefaults(n.Params)
	if err != nil {
		return
	}
	c.specs[n.ID] = spec
	c.ports[n.ID] = spec.PortsFor(withDefaults)
	if !bad {
		c.params[n.ID] = withDefaults
	}
}

// rawParams returns node i's params as plain JSON (an empty object when absent).
func (c *checker) rawParams(i int) any {
	if rawNodes, ok := c.raw["nodes"].([]any); ok && i < len(rawNodes) {
		if rn, ok := rawNodes[i].(map[string]any); ok {
			if p, ok := rn["params"]; ok {
				return p
			}
		}
	}
	return map[string]any{}
}

// scanStrings reports strings in node i's params that are too long or look like a
// secret, whatever the node's type. It returns true when it found any.
func (c *checker) scanStrings(i int) bool {
	bad := false
	walkStrings(c.rawParams(i), []string{"params"}, func(path []string, s string) {
		p := jsonPath(path)
		if c.lim.MaxString > 0 && len(s) > c.lim.MaxString {
			c.nodeProblem(i, CodeStringTooLong, p, "string of %d bytes, the limit is %d", len(s), c.lim.MaxString)
			bad = true
			return
		}
		if LooksLikeCredential(s) {
			c.nodeProblem(i, CodeLiteralSecret, p, "looks like a secret written into the flow; put it in an environment variable and write {\"$env\": \"NAME\"}")
			if c.secretPaths[i] == nil {
				c.secretPaths[i] = map[string]bool{}
			}
			c.secretPaths[i][p] = true
			bad = true
		}
	})
	return bad
}

// checkSecretRefs reports every {"$env": NAME} in node i's params whose variable flows
// may not read (Secrets.Check). It returns true when it found any.
//
// The flow's workspace (its id's) decides, within the operator's rule, with its
// owner's list (Registry.WorkspaceRules).
func (c *checker) checkSecretRefs(i int) bool {
	rule := c.reg.Secrets()
	ws := WorkspaceOf(c.doc.ID)
	bad := false
	var walk func(v any, path []string)
	walk = func(v any, path []string) {
		switch x := v.(type) {
		case map[string]any:
			if name, ok := x["$env"].(string); ok {
				owner, err := c.workspaceRule(ws)
				if err == nil {
					err = rule.CheckIn(ws, name, owner.Secrets)
				}
				if err != nil {
					c.nodeProblem(i, CodeSecretNotAllowed, jsonPath(append(path[:len(path):len(path)], "$env")), "%v", err)
					bad = true
				}
			}
			for k, e := range x {
				walk(e, append(path[:len(path):len(path)], k))
			}
		case []any:
			for j, e := range x {
				walk(e, append(path[:len(path):len(path)], strconv.Itoa(j)))
			}
		}
	}
	walk(c.rawParams(i), []string{"params"})
	return bad
}

// workspaceRule reads workspace ws's rule once per validation.
func (c *checker) workspaceRule(ws string) (WorkspaceRule, error) {
	if c.wsRule == nil {
		r, err := c.reg.WorkspaceRules().Rule(ws)
		if err != nil {
			return r, fmt.Errorf("the secrets workspace %q allows could not be read: %v", ws, err)
		}
		c.wsRule = &r
	}
	return *c.wsRule, nil
}

func envNameFor(param string) string {
	return strings.ToUpper(strings.NewReplacer("-", "_", ".", "_").Replace(param))
}

func walkStrings(v any, path []string, fn func([]string, string)) {
	switch x := v.(type) {
	case string:
		fn(path, x)
	case map[string]any:
		for k, vv := range x {
			walkStrings(vv, append(path[:len(path):len(path)], k), fn)
		}
	case []any:
		for i, vv := range x {
			walkStrings(vv, append(path[:len(path):len(path)], strconv.Itoa(i)), fn)
		}
	}
}

func portNames(ports []Port, dir string) string {
	var names []string
	for _, p := range ports {
		if p.Direction == dir {
			names = append(names, strconv.Quote(p.Name))
		}
	}
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}

func findPort(ports []Port, name, dir string) (Port, bool) {
	for _, p := range ports {
		if p.Name == name && p.Direction == dir {
			return p, true
		}
	}
	return Port{}, false
}

// checkEdges checks that edges join existing nodes through existing ports of one type.
// It returns the edges that are sound, for the graph checks.
func (c *checker) checkEdges() []int {
	c.connected = map[string]bool{}
	var good []int
	ids := map[string]int{}
	conns := map[string]int{}
	for i, e := range c.doc.Edges {
		if e.ID != "" {
			if j, dup := ids[e.ID]; dup {
				c.edgeProblem(i, CodeDuplicateID, "id", "edge id %q is already used by edges[%d]", e.ID, j)
			}
			ids[e.ID] = i
		}
		if e.Condition != "" {
			if _, err := CompileJQ(e.Condition); err != nil {
				c.edgeProblem(i, CodeJQSyntax, "condition", "%v", err)
			}
		}
		ok := true
		for _, end := range []struct{ field, id string }{{"from", e.From}, {"to", e.To}} {
			if end.id == "" {
				ok = false // the schema reported it
				continue
			}
			if _, exists := c.nodeIndex[end.id]; !exists {
				c.edgeProblem(i, CodeDanglingEdge, end.field, "no node %q", end.id)
				ok = false
			}
		}
		// An end whose port exists counts as connected even when the edge has another
		// problem: one wrong edge is reported once, not again as a required port left
		// unconnected at its other end.
		if _, found := findPort(c.ports[e.From], e.FromPort(), "out"); found {
			c.connected[portKey(e.From, "out", e.FromPort())] = true
		}
		if _, found := findPort(c.ports[e.To], e.InPort(), "in"); found {
			c.connected[portKey(e.To, "in", e.InPort())] = true
		}
		if !ok {
			continue
		}
		fromPorts, fromKnown := c.ports[e.From]
		toPorts, toKnown := c.ports[e.To]
		if !fromKnown || !toKnown {
			c.loose = append(c.loose, i) // unknown type, reported on the node
			continue
		}
		out, okOut := findPort(fromPorts, e.FromPort(), "out")
		if !okOut {
			c.edgeProblem(i, CodeUnknownPort, "port", "node %q (%s) has no output port %q; it has %s", e.From, c.specs[e.From].Name, e.FromPort(), portNames(fromPorts, "out"))
			ok = false
		}
		in, okIn := findPort(toPorts, e.InPort(), "in")
		if !okIn {
			c.edgeProblem(i, CodeUnknownPort, "to_port", "node %q (%s) has no input port %q; it has %s", e.To, c.specs[e.To].Name, e.InPort(), portNames(toPorts, "in"))
			ok = false
		}
		if !ok {
			c.loose = append(c.loose, i)
			continue
		}
		if out.Type != in.Type {
			c.edgeProblem(i, CodePortMismatch, "", "%s port %q of %q cannot connect to %s port %q of %q", out.Type, out.Name, e.From, in.Type, in.Name, e.To)
			c.loose = append(c.loose, i)
			continue
		}
		if out.Type == PortTool && e.Condition != "" {
			c.edgeProblem(i, CodeInvalidValue, "condition", "a tool edge attaches a tool; it cannot have a condition")
		}
		conn := e.From + "\x00" + e.FromPort() + "\x00" + e.To + "\x00" + e.InPort()
		if j, dup := conns[conn]; dup && e.Condition == "" && c.doc.Edges[j].Condition == "" {
			c.edgeProblem(i, CodeDuplicateEdge, "", "same connection as edges[%d]", j)
			continue
		}
		conns[conn] = i
		good = append(good, i)
	}
	return good
}

// portKey names one port of one node in checker.connected.
func portKey(node, dir, port string) string { return node + "\x00" + dir + "\x00" + port }

// checkPorts reports required ports with nothing connected.
func (c *checker) checkPorts() {
	for i, n := range c.doc.Nodes {
		if idx, ok := c.nodeIndex[n.ID]; !ok || idx != i {
			continue
		}
		for _, p := range c.ports[n.ID] {
			if p.Required && !c.connected[portKey(n.ID, p.Direction, p.Name)] {
				c.nodeProblem(i, CodeUnconnectedPort, "", "required %s port %q has nothing connected", p.Direction+"put", p.Name)
			}
		}
	}
}

// checkEntry reports a missing input node or more than one.
func (c *checker) checkEntry() string {
	var entries []int
	for i, n := range c.doc.Nodes {
		if n.Type == EntryType {
			entries = append(entries, i)
		}
	}
	switch len(entries) {
	case 0:
		if _, ok := c.raw["nodes"]; !ok {
			return "" // the missing "nodes" field is the problem already reported
		}
		c.add(Problem{Code: CodeNoInput, Path: "nodes", Message: "the flow has no input node: add one where runs start"})
		return ""
	case 1:
		return c.doc.Nodes[entries[0]].ID
	default:
		for _, i := range entries[1:] {
			c.nodeProblem(i, CodeMultipleInputs, "type", "a flow has exactly one input node; %q is the first", c.doc.Nodes[entries[0]].ID)
		}
		return c.doc.Nodes[entries[0]].ID
	}
}
