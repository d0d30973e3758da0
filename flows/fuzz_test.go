package flows_test

import (
	"strings"
	"testing"

	"github.com/sluicehq/sluice/flows"
)

// FuzzCompile feeds arbitrary bytes to parse, validate and compile. Whatever the bytes,
// Compile returns either a plan or at least one error, every problem is well formed, and
// nothing panics (Compile turns a panic into an "internal error" problem, which fails
// here). The seed corpus in testdata/fuzz/FuzzCompile holds the examples and some
// invalid documents; `make test` runs this for a few seconds.
func FuzzCompile(f *testing.F) {
	reg := testRegistry()
	// Small limits so that the fuzzer reaches the limit checks too.
	lim := flows.Limits{MaxBytes: 64 << 10, MaxNodes: 40, MaxString: 512}
	f.Fuzz(func(t *testing.T, data []byte) {
		plan, problems := flows.Compile(data, reg, lim)
		for _, p := range problems {
			if strings.Contains(p.Message, "internal error") {
				t.Fatalf("Compile panicked: %s\ninput: %q", p, data)
			}
			if p.Code == "" || (p.Severity != flows.SeverityError && p.Severity != flows.SeverityWarning) {
				t.Fatalf("malformed problem %+v", p)
			}
		}
		switch {
		case plan == nil && !problems.HasErrors():
			t.Fatalf("no plan and no error; problems: %v", problems)
		case plan != nil && problems.HasErrors():
			t.Fatalf("a plan despite errors: %v", problems.Errors())
		case plan != nil:
			again, _ := flows.Compile(data, reg, lim)
			if again == nil {
				t.Fatalf("the second compile of the same bytes failed")
			}
			if again.Version != plan.Version {
				t.Fatalf("compiling twice gave versions %s and %s", plan.Version, again.Version)
			}
			if len(plan.Order) != len(plan.Nodes) || plan.Nodes[plan.Entry] == nil {
				t.Fatalf("plan order %v does not cover its %d nodes, or entry %q is not a node", plan.Order, len(plan.Nodes), plan.Entry)
			}
		}
		if got := flows.Validate(data, reg, lim); len(got) != len(problems) {
			t.Fatalf("Validate gave %d problems, Compile %d", len(got), len(problems))
		}
	})
}
