package store

import (
	"os"
	"regexp"
	"slices"
	"sort"
	"testing"
)

// Each script the engine acts on returns exactly the replies its Go type names: a reply
// added to a script without its constant (or a constant no script returns) fails here.
func TestScriptRepliesAreTheTypedOnes(t *testing.T) {
	for _, tc := range []struct {
		script string
		typed  []string
	}{
		{"fail.lua", []string{string(FailRetry), string(FailDead), string(FailDropped), string(FailStale)}},
		{"drop.lua", []string{string(DropDone), string(DropStale), string(DropRunning)}},
	} {
		b, err := os.ReadFile("lua/" + tc.script)
		if err != nil {
			t.Fatal(err)
		}
		// return 'x' and return {'x', ...}
		var got []string
		for _, m := range regexp.MustCompile(`return \{?'([a-z_]+)'`).FindAllStringSubmatch(string(b), -1) {
			if !slices.Contains(got, m[1]) {
				got = append(got, m[1])
			}
		}
		sort.Strings(got)
		want := slices.Clone(tc.typed)
		sort.Strings(want)
		if !slices.Equal(got, want) {
			t.Errorf("%s returns %v; its Go type names %v", tc.script, got, want)
		}
	}
}
