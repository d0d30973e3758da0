package flows_test

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/flows"
	"github.com/sluicehq/sluice/flows/examples"
	"github.com/sluicehq/sluice/flows/nodes"
)

var update = flag.Bool("update", false, "rewrite the golden files from the current output")

// testRegistry is the built-in registry plus a few components of category "test" that
// the built-ins do not provide yet: a tool port, a secret parameter and a template.
func testRegistry() *flows.Registry {
	reg := nodes.NewRegistry(nil)
	state := func(name, dir string) flows.Port {
		return flows.Port{Name: name, Direction: dir, Type: flows.PortState, Multiple: dir == "in"}
	}
	reg.Register(flows.Spec{
		Name: "test_agent", Title: "Test agent", Category: "test", Description: "Takes tools on its tools port.",
		Ports: []flows.Port{state("in", "in"), state("out", "out"),
			{Name: "tools", Direction: "in", Type: flows.PortTool, Multiple: true}},
		New: func(*flows.Build) (flows.Component, error) { return passThrough{}, nil },
	})
	reg.Register(flows.Spec{
		Name: "test_tool", Title: "Test tool", Category: "test", Description: "A tool for test_agent.",
		Ports: []flows.Port{{Name: "tool", Direction: "out", Type: flows.PortTool}},
		New:   func(*flows.Build) (flows.Component, error) { return echoTool{}, nil },
	})
	reg.Register(flows.Spec{
		Name: "test_fake_tool", Title: "Fake tool", Category: "test",
		Description: "Has a tool port but its component is not a tool.",
		Ports:       []flows.Port{{Name: "tool", Direction: "out", Type: flows.PortTool}},
		New:         func(*flows.Build) (flows.Component, error) { return passThrough{}, nil },
	})
	reg.Register(flows.Spec{
		Name: "test_secret", Title: "Test secret", Category: "test", Description: "Holds a credential and a template.",
		Ports: []flows.Port{state("in", "in"), state("out", "out")},
		Params: json.RawMessage(`{"type": "object", "additionalProperties": false,
			"properties": {
				"api_key": {"x-secret": true, "description": "The key."},
				"prompt": {"type": "string", "format": "template"}
			}}`),
		New: func(*flows.Build) (flows.Component, error) { return passThrough{}, nil },
	})
	return reg
}

type passThrough struct{}

func (passThrough) Run(context.Context, *flows.Step) (*flows.Result, error) {
	return &flows.Result{}, nil
}

type echoTool struct{ passThrough }

func (echoTool) ToolDef() flows.ToolDef {
	return flows.ToolDef{Name: "echo", Parameters: json.RawMessage(`{"type":"object"}`)}
}

func (echoTool) Call(_ context.Context, _ *flows.Step, args json.RawMessage) (any, error) {
	return args, nil
}

// limitsFor gives the limit cases small limits, so that their documents stay readable;
// every other case runs with the defaults.
func limitsFor(code string) flows.Limits {
	lim := flows.DefaultLimits
	switch code {
	case flows.CodeTooLarge:
		lim.MaxBytes = 512
	case flows.CodeTooManyNodes:
		lim.MaxNodes = 3
	case flows.CodeStringTooLong:
		lim.MaxString = 64
	}
	return lim
}

// checkGolden compares got with the golden file, or rewrites it with -update.
func checkGolden(t *testing.T, path string, got []byte) {
	t.Helper()
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./flows/ -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs (run go test ./flows/ -update and review the diff)\n--- got:\n%s\n--- want:\n%s", path, got, want)
	}
}

var describedRE = regexp.MustCompile(`"description"\s*:\s*"((?:[^"\\]|\\.)*)"`)

// described is the case's behaviour as its document's top-level "description" states it.
func described(t *testing.T, data []byte) string {
	t.Helper()
	m := describedRE.FindSubmatch(data)
	if m == nil {
		t.Fatal("the case has no \"description\" saying what it pins")
	}
	s, err := strconv.Unquote(`"` + string(m[1]) + `"`)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

var caseNameRE = regexp.MustCompile(`^([a-z_]+)-[0-9]+\.json$`)

// TestInvalidDocuments runs every testdata/invalid/<code>-<n>.json: each yields exactly
// one error, of that code, located on the right node or edge; the golden file beside it
// pins the whole problem list, warnings included.
func TestInvalidDocuments(t *testing.T) {
	reg := testRegistry()
	files, err := filepath.Glob("testdata/invalid/*.json")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 30 {
		t.Fatalf("%d invalid cases, want at least 30", len(files))
	}
	covered := map[string]bool{}
	for _, file := range files {
		base := filepath.Base(file)
		m := caseNameRE.FindStringSubmatch(base)
		if m == nil {
			t.Errorf("%s: name it <code>-<n>.json", file)
			continue
		}
		code := m[1]
		covered[code] = true
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		t.Run(strings.TrimSuffix(base, ".json")+" "+described(t, data), func(t *testing.T) {
			plan, problems := flows.Compile(data, reg, limitsFor(code))
			if plan != nil {
				t.Errorf("compiled into a plan despite its errors")
			}
			errs := problems.Errors()
			if len(errs) != 1 || errs[0].Code != code {
				t.Errorf("want exactly one error with code %s, got:\n%s", code, problemLines(problems))
			}
			checkLocated(t, data, problems)
			got, _ := json.MarshalIndent(problems, "", "  ")
			checkGolden(t, strings.TrimSuffix(file, ".json")+".golden", append(got, '\n'))
		})
	}
	for _, code := range errorCodes {
		if !covered[code] {
			t.Errorf("no invalid case pins %s", code)
		}
	}
}

// errorCodes are the problem codes that are errors; the others (unreachable,
// branches_meet_without_join) are only ever warnings and are pinned by valid cases.
var errorCodes = []string{
	flows.CodeSyntax, flows.CodeTooLarge, flows.CodeTooManyNodes, flows.CodeStringTooLong,
	flows.CodeUnknownField, flows.CodeMissingField, flows.CodeWrongType, flows.CodeInvalidValue,
	flows.CodeUnsupported, flows.CodeInvalidID, flows.CodeDuplicateID, flows.CodeUnknownType,
	flows.CodeDanglingEdge, flows.CodeUnknownPort, flows.CodePortMismatch, flows.CodeDuplicateEdge,
	flows.CodeUnconnectedPort, flows.CodeNoInput, flows.CodeMultipleInputs, flows.CodeCycleWithoutExit,
	flows.CodeJQSyntax, flows.CodeTemplateSyntax, flows.CodeInvalidDuration, flows.CodeInvalidCron, flows.CodeLiteralSecret,
	flows.CodeJoinWithoutFork, flows.CodeInvalidParams, flows.CodeSecretNotAllowed,
}

var (
	nodePathRE = regexp.MustCompile(`^nodes\[(\d+)\]`)
	edgePathRE = regexp.MustCompile(`^edges\[(\d+)\]`)
)

// checkLocated asserts that a problem whose path points into a node names that node, and
// one that points into an edge names that edge, as the editor needs to mark it.
func checkLocated(t *testing.T, data []byte, problems flows.Problems) {
	t.Helper()
	var doc struct {
		Nodes []struct {
			ID string `json:"id"`
		} `json:"nodes"`
		Edges []flows.Edge `json:"edges"`
	}
	if json.Unmarshal(data, &doc) != nil {
		return // not a document whose parts can be named
	}
	for _, p := range problems {
		if m := nodePathRE.FindStringSubmatch(p.Path); m != nil {
			i, _ := strconv.Atoi(m[1])
			if want := doc.Nodes[i].ID; p.Node != want {
				t.Errorf("%s: node is %q, want %q", p, p.Node, want)
			}
		}
		if m := edgePathRE.FindStringSubmatch(p.Path); m != nil {
			i, _ := strconv.Atoi(m[1])
			if want := doc.Edges[i].Key(); p.Edge != want {
				t.Errorf("%s: edge is %q, want %q", p, p.Edge, want)
			}
		}
	}
}

func problemLines(ps flows.Problems) string {
	if len(ps) == 0 {
		return "  (no problems)"
	}
	var b strings.Builder
	for _, p := range ps {
		b.WriteString("  " + p.String() + "\n")
	}
	return b.String()
}

// TestValidDocuments compiles every testdata/valid/*.json and compares the plan's summary
// with its golden file. Only a case named warnings-*.json may have problems, and only
// warnings.
func TestValidDocuments(t *testing.T) {
	reg := testRegistry()
	files, err := filepath.Glob("testdata/valid/*.json")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no valid cases")
	}
	for _, file := range files {
		base := strings.TrimSuffix(filepath.Base(file), ".json")
		t.Run(base, func(t *testing.T) {
			data, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			plan, problems := flows.Compile(data, reg, flows.DefaultLimits)
			if plan == nil || problems.HasErrors() {
				t.Fatalf("does not compile:\n%s", problemLines(problems))
			}
			warningsOnly := strings.HasPrefix(base, "warnings-")
			if warningsOnly && len(problems) == 0 {
				t.Errorf("a warnings- case must have warnings")
			}
			if !warningsOnly && len(problems) > 0 {
				t.Errorf("want no problems, got:\n%s", problemLines(problems))
			}
			checkLocated(t, data, problems)
			checkGolden(t, filepath.Join("testdata/valid", base+".golden"), summary(plan, problems))
		})
	}
}

// TestExamplesCompileWithoutProblems pins the plan of every example flow: they are what
// the editor offers and what the runtime's tests run.
func TestExamplesCompileWithoutProblems(t *testing.T) {
	ids := examples.IDs()
	for _, want := range []string{"fanout", "linear", "triage"} {
		if !contains(ids, want) {
			t.Errorf("example %q is missing; have %v", want, ids)
		}
	}
	reg := nodes.NewRegistry(nil)
	for _, id := range ids {
		t.Run(id, func(t *testing.T) {
			data, err := examples.Read(id)
			if err != nil {
				t.Fatal(err)
			}
			plan, problems := flows.Compile(data, reg, flows.DefaultLimits)
			if plan == nil || len(problems) > 0 {
				t.Fatalf("example %s has problems:\n%s", id, problemLines(problems))
			}
			if plan.Flow != id {
				t.Errorf("example file %s.json holds flow %q; the file name must be the id", id, plan.Flow)
			}
			checkGolden(t, filepath.Join("testdata/examples", id+".golden"), summary(plan, problems))
		})
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// summary writes what a plan means for a run: version, entry, order, and per node its
// successors with ports and conditions and the join its fork meets at.
func summary(p *flows.Plan, problems flows.Problems) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "flow: %s\n", p.Flow)
	fmt.Fprintf(&b, "version: %s\n", p.Version)
	fmt.Fprintf(&b, "entry: %s\n", p.Entry)
	fmt.Fprintf(&b, "order: %s\n", strings.Join(p.Order, ", "))
	s := p.Settings
	fmt.Fprintf(&b, "settings: max_steps=%d max_attempts=%d claim_after=%s step_timeout=%s checkpoint_ttl=%s keep_last=%d\n",
		s.MaxSteps, s.MaxAttempts, s.ClaimAfter.D(), s.StepTimeout.D(), s.CheckpointTTL.D(), s.KeepLast)
	for i, sc := range s.Schedules {
		fmt.Fprintf(&b, "schedule %d: cron=%q timezone=%q input=%s enabled=%t key=%s\n", i, sc.Cron, sc.Timezone, sc.Input, sc.IsEnabled(), sc.Key())
	}
	if len(p.Reducers) > 0 {
		var rs []string
		for k, r := range p.Reducers {
			rs = append(rs, k+"="+string(r))
		}
		sort.Strings(rs)
		fmt.Fprintf(&b, "reducers: %s\n", strings.Join(rs, " "))
	}
	if len(p.Defaults) > 0 {
		d, _ := json.Marshal(p.Defaults)
		fmt.Fprintf(&b, "defaults: %s\n", d)
	}
	b.WriteString("nodes:\n")
	for _, id := range p.NodeIDs() {
		n := p.Nodes[id]
		fmt.Fprintf(&b, "  %s (%s)", id, n.Type)
		if n.Join != "" {
			fmt.Fprintf(&b, " join=%s", n.Join)
		}
		if n.Input != nil {
			fmt.Fprintf(&b, " input=%s", n.Input)
		}
		if n.Output != nil {
			fmt.Fprintf(&b, " output=%s", n.Output)
		}
		fmt.Fprintf(&b, " timeout=%s concurrency=%d", n.Timeout, n.Concurrency)
		if n.CacheTTL > 0 {
			fmt.Fprintf(&b, " cache=%s", n.CacheTTL)
		}
		b.WriteString("\n")
		for _, e := range n.Edges {
			fmt.Fprintf(&b, "    %s -> %s", e.Port, e.To)
			if e.ToPort != flows.PortIn {
				fmt.Fprintf(&b, ":%s", e.ToPort)
			}
			if e.Condition != nil {
				fmt.Fprintf(&b, " if %s", e.Condition)
			}
			b.WriteString("\n")
		}
		var tools []string
		for name := range n.Tools {
			tools = append(tools, name)
		}
		sort.Strings(tools)
		for _, name := range tools {
			fmt.Fprintf(&b, "    tool %s\n", name)
		}
	}
	if len(problems) > 0 {
		b.WriteString("problems:\n")
		for _, pr := range problems {
			fmt.Fprintf(&b, "  %s\n", pr)
		}
	}
	return b.Bytes()
}
