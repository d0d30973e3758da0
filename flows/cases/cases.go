// Package cases owns a flow's test cases: the cases file kept beside the flow
// (FLOW.cases.json in the flows folder, so it is reviewed in git with it), its
// validation (every problem at its JSON path), the assertions a case's run must meet,
// and running a file's cases on a version of the flow with the engine. It holds no
// Redis code: runs go through the engine like any other.
package cases

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/sluicehq/sluice/flows"
)

//go:embed cases.schema.json
var schemaJSON []byte

// Schema is the JSON Schema of a cases file (published as docs/cases.schema.json).
func Schema() json.RawMessage { return schemaJSON }

var fileSchema = func() *jsonschema.Schema {
	s, err := flows.CompileSchema(schemaJSON)
	if err != nil {
		panic("cases: schema: " + err.Error())
	}
	return s
}()

// Suffix ends the name of a cases file: triage.json's cases are in triage.cases.json.
const Suffix = ".cases.json"

// FileFor is the cases file of the flow file path.
func FileFor(flowPath string) string {
	return strings.TrimSuffix(flowPath, ".json") + Suffix
}

// IsCasesFile reports whether path names a cases file rather than a flow.
func IsCasesFile(path string) bool { return strings.HasSuffix(path, Suffix) }

// File is a flow's cases file.
type File struct {
	Schema string `json:"$schema,omitempty"`
	Format int    `json:"sluice_cases"`
	Flow   string `json:"flow,omitempty"`
	Cases  []Case `json:"cases"`
}

// Case is one test of a flow: what its run starts with and what it must meet.
type Case struct {
	ID   string `json:"id"`
	Name string `json:"name,omitempty"`
	// Input is the run's input; nil with Start.
	Input json.RawMessage `json:"input,omitempty"`
	// Start starts the run at a node with a recorded state.
	Start *Start `json:"start,omitempty"`
	// Pins hold node outputs fixed for the case's run.
	Pins    map[string]Pin `json:"pins,omitempty"`
	Timeout flows.Duration `json:"timeout,omitzero"`
	Expect  []Assertion    `json:"expect"`
	// NodeOutputs are the outputs of the run the case was saved from, by node: what a
	// new run is compared with to say which nodes' output changed.
	NodeOutputs map[string]json.RawMessage `json:"node_outputs,omitempty"`
	Origin      *Origin                    `json:"origin,omitempty"`
}

// Start is a node to start at and the state it starts with.
type Start struct {
	Node  string          `json:"node"`
	State json.RawMessage `json:"state"`
}

// Pin is a node's fixed result (engine.Pin).
type Pin struct {
	Output json.RawMessage `json:"output,omitempty"`
	Update json.RawMessage `json:"update,omitempty"`
	Ports  []string        `json:"ports,omitempty"`
}

// Origin is the run a case was saved from.
type Origin struct {
	Run        string `json:"run,omitempty"`
	Version    string `json:"version,omitempty"`
	Checkpoint string `json:"checkpoint,omitempty"`
	SavedAt    string `json:"saved_at,omitempty"`
}

// Assertion is one check; exactly one of its kinds is set. Path (jq) selects what of
// the output Equals, Contains, Schema and Graded look at.
type Assertion struct {
	Name        string          `json:"name,omitempty"`
	Path        string          `json:"path,omitempty"`
	JQ          string          `json:"jq,omitempty"`
	Equals      json.RawMessage `json:"equals,omitempty"`
	Contains    json.RawMessage `json:"contains,omitempty"`
	Schema      json.RawMessage `json:"schema,omitempty"`
	Succeeds    *bool           `json:"succeeds,omitempty"`
	FailsAt     string          `json:"fails_at,omitempty"`
	MaxTokens   *int64          `json:"max_tokens,omitempty"`
	MaxCostUSD  *float64        `json:"max_cost_usd,omitempty"`
	MaxDuration *flows.Duration `json:"max_duration,omitempty"`
	Graded      *Graded         `json:"graded,omitempty"`
}

// Graded is a model-graded assertion: a rubric a named provider's model answers pass or
// fail to, with a reason.
type Graded struct {
	Provider string `json:"provider,omitempty"`
	Model    string `json:"model,omitempty"`
	Rubric   string `json:"rubric"`
}

// Kind names the assertion's kind: jq, equals, contains, schema, succeeds, fails_at,
// max_tokens, max_cost_usd, max_duration or graded ("" when none or several are set).
func (a *Assertion) Kind() string {
	kinds := a.kinds()
	if len(kinds) != 1 {
		return ""
	}
	return kinds[0]
}

func (a *Assertion) kinds() []string {
	var k []string
	add := func(set bool, name string) {
		if set {
			k = append(k, name)
		}
	}
	add(a.JQ != "", "jq")
	add(a.Equals != nil, "equals")
	add(a.Contains != nil, "contains")
	add(a.Schema != nil, "schema")
	add(a.Succeeds != nil, "succeeds")
	add(a.FailsAt != "", "fails_at")
	add(a.MaxTokens != nil, "max_tokens")
	add(a.MaxCostUSD != nil, "max_cost_usd")
	add(a.MaxDuration != nil, "max_duration")
	add(a.Graded != nil, "graded")
	return k
}

// ForPlan parses a cases file against the nodes of plan; a file with an error is the
// flow's InvalidError, with every problem at its JSON path.
func ForPlan(data []byte, plan *flows.Plan) (*File, error) {
	nodes := make(map[string]bool, len(plan.Nodes))
	for id := range plan.Nodes {
		nodes[id] = true
	}
	f, probs := Parse(data, nodes)
	if f == nil {
		return nil, &flows.InvalidError{Flow: plan.Flow, Problems: probs}
	}
	return f, nil
}

// Load reads the cases file of plan's flow from a flows folder and parses it against
// the plan (ForPlan); a flow without one has none: nil and no error.
func Load(lib interface {
	LoadCases(flow string) ([]byte, error)
}, plan *flows.Plan) (*File, error) {
	data, err := lib.LoadCases(plan.Flow)
	if flows.ErrorCode(err) == flows.NotFound {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return ForPlan(data, plan)
}

// Parse reads a cases file and checks it: against the file's schema, then that ids are
// unique, each assertion has one kind, a case has an input or a start (not both), and,
// when nodes is not nil, that the nodes it names are the flow's. Every problem is
// returned, each at its JSON path; the file is nil when any is an error.
func Parse(data []byte, nodes map[string]bool) (*File, flows.Problems) {
	if probs := flows.SchemaProblems(fileSchema, data); len(probs) > 0 {
		return nil, probs
	}
	var f File
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := dec.Decode(&f); err != nil {
		return nil, flows.Problems{{Severity: flows.SeverityError, Code: flows.CodeSyntax, Message: err.Error()}}
	}
	probs := f.Check(nodes)
	if len(probs.Errors()) > 0 {
		return nil, probs
	}
	return &f, probs
}

// Check returns the problems of a decoded file beyond its schema (see Parse).
func (f *File) Check(nodes map[string]bool) flows.Problems {
	var probs flows.Problems
	bad := func(path, code, format string, args ...any) {
		probs = append(probs, flows.Problem{Severity: flows.SeverityError, Code: code, Path: path, Message: fmt.Sprintf(format, args...)})
	}
	hasNode := func(id string) bool { return nodes == nil || nodes[id] }
	seen := map[string]int{}
	for i, c := range f.Cases {
		at := fmt.Sprintf("cases[%d]", i)
		if !flows.ValidID(c.ID) {
			bad(at+".id", flows.CodeInvalidValue, "case id %q: use lower-case letters, digits, '-' and '_'", c.ID)
		}
		if j, dup := seen[c.ID]; dup {
			bad(at+".id", flows.CodeInvalidValue, "case id %q is also the id of cases[%d]", c.ID, j)
		} else {
			seen[c.ID] = i
		}
		if c.Start != nil && c.Input != nil {
			bad(at, flows.CodeInvalidValue, "a case has an input or a start, not both")
		}
		if c.Start != nil && !hasNode(c.Start.Node) {
			bad(at+".start.node", flows.CodeInvalidValue, "the flow has no node %q", c.Start.Node)
		}
		for _, n := range sortedKeys(c.Pins) {
			if !hasNode(n) {
				bad(at+".pins."+n, flows.CodeInvalidValue, "the flow has no node %q", n)
			}
		}
		for j, a := range c.Expect {
			ap := fmt.Sprintf("%s.expect[%d]", at, j)
			switch k := a.kinds(); {
			case len(k) == 0:
				bad(ap, flows.CodeMissingField, "an assertion needs one of jq, equals, contains, schema, succeeds, fails_at, max_tokens, max_cost_usd, max_duration, graded")
			case len(k) > 1:
				bad(ap, flows.CodeInvalidValue, "an assertion checks one thing; this one has %s: split it", strings.Join(k, " and "))
			case a.Path != "" && k[0] != "equals" && k[0] != "contains" && k[0] != "schema" && k[0] != "graded":
				bad(ap+".path", flows.CodeInvalidValue, "path selects what equals, contains, schema and graded look at; %s does not use it", k[0])
			}
			for field, src := range map[string]string{"jq": a.JQ, "path": a.Path} {
				if src == "" {
					continue
				}
				if _, err := compileJQ(src); err != nil {
					bad(ap+"."+field, flows.CodeJQSyntax, "not a valid jq: %v", err)
				}
			}
			if a.FailsAt != "" && a.FailsAt != "*" && !hasNode(a.FailsAt) {
				bad(ap+".fails_at", flows.CodeInvalidValue, "the flow has no node %q", a.FailsAt)
			}
		}
	}
	return probs
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// Marshal returns the file as indented JSON, the form it is saved in.
func (f *File) Marshal() ([]byte, error) {
	if f.Format == 0 {
		f.Format = 1
	}
	if f.Cases == nil {
		f.Cases = []Case{}
	}
	b, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// Find returns the case with id, or nil.
func (f *File) Find(id string) *Case {
	for i := range f.Cases {
		if f.Cases[i].ID == id {
			return &f.Cases[i]
		}
	}
	return nil
}
