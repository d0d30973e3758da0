package store

import (
	"strings"
	"testing"
)

// Every transition gives the commit script as many arguments as the script reads for
// its op code, and the script reads the arities from the same table (the prelude): an
// op the Go side and the Lua side count differently cannot be written.
func TestEveryTransitionHasTheArityTheScriptChecks(t *testing.T) {
	k := PartKeys("f", 0)
	seen := map[string]bool{}
	for _, tr := range []Transition{Activate{Node: "n"}, Seed{Update: []byte("1"), State: []byte("{}")},
		Branch{Steps: []CommitStep{{Node: "b", State: []byte("{}"), Event: []byte("{}")}}},
		Joined{Steps: []CommitStep{{Node: "j", State: []byte("{}"), Event: []byte("{}")}}, Arrivals: []Ref{0}},
		OpenFork{Frame: "f1", Branches: 2, Join: "j"}, Split{Frame: "f1", More: 1},
		Arrive{Frame: "f1", Branch: "0", Join: "j"}, GiveBack{Frame: "f1", Join: "j"},
		CloseFork{Frame: "f1"}, Park{Record: []byte("{}")}} {
		code, key, args := tr.op(k)
		n, ok := opArity[code]
		if !ok {
			t.Errorf("%s: op code %q is not in opArity", Describe(tr), code)
			continue
		}
		if len(args) != n {
			t.Errorf("%s: %d arguments, the script reads %d", Describe(tr), len(args), n)
		}
		hasKey := false
		for _, a := range args {
			hasKey = hasKey || a == "KEY"
		}
		if hasKey != (key != "") {
			t.Errorf("%s: names stream %q, KEY among its arguments: %v", Describe(tr), key, hasKey)
		}
		seen[code] = true
	}
	// The ops of a commit's steps and of a start are made by commitCall.add, not by a
	// transition.
	seen[opFinal], seen[opTokens], seen[opTurn], seen[opStart], seen[opRunField] = true, true, true, true, true
	for code := range opArity {
		if !seen[code] {
			t.Errorf("op %q has no transition", code)
		}
	}
	p := scriptPrelude()
	if !strings.Contains(p, "local ARITY = {A = 3, B = 6, C = 1, F = 2, G = 2, H = 2, J = 6, N = 9, O = 5, P = 2, R = 4, S = 2, T = 2, U = 2, W = 2}") || !strings.Contains(p, "local STALE = 'stale'") {
		t.Errorf("prelude:\n%s", p)
	}
}
