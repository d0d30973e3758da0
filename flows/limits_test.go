package flows_test

import (
	"strings"
	"testing"

	"github.com/sluicehq/sluice/flows"
)

func TestCheckJSONRefusesWhatCouldNotBeReadBack(t *testing.T) {
	deep := func(n int) string { return strings.Repeat("[", n) + strings.Repeat("]", n) }
	for _, tc := range []struct {
		name, doc, want string
		max             int
	}{
		{name: "a small state passes", doc: `{"a":[1,{"b":"{[["}]}`, max: 100},
		{name: "brackets inside strings do not count", doc: `{"a":"` + strings.Repeat("[", 2000) + `\"["}`, max: 1 << 20},
		{name: "a state over the limit names its size and the limit", doc: `{"a":"` + strings.Repeat("x", 2000) + `"}`, max: 1024,
			want: "the state would be 2,008 bytes, over max_state_bytes (1,024)"},
		{name: "nesting at the limit passes", doc: deep(flows.MaxJSONDepth), max: 1 << 20},
		{name: "nesting past the limit is refused", doc: deep(flows.MaxJSONDepth + 1), max: 1 << 20, want: "the state nests deeper than 512 levels"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := flows.CheckJSON("the state", []byte(tc.doc), tc.max)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("got %v, want no error", err)
			case tc.want != "" && (err == nil || err.Error() != tc.want):
				t.Fatalf("got %v, want %q", err, tc.want)
			case tc.want != "" && flows.ErrorCode(err) != flows.TooLarge:
				t.Fatalf("code %s, want too_large", flows.ErrorCode(err))
			}
		})
	}
}
