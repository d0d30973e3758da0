package nodes_test

import (
	"fmt"
	"reflect"
	"testing"

	"github.com/sluicehq/sluice/flows"
)

func TestTransformReturnsItsObjectAsTheUpdate(t *testing.T) {
	tr := build(t, "transform", `{"expr": "{total: (.items | add), mode: $state.mode}"}`)
	res, err := run(t, tr, state(t, `{"items": [1, 2, 3], "mode": "fast"}`))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"total": 6, "mode": "fast"}
	if !reflect.DeepEqual(res.Update, want) || !reflect.DeepEqual(res.Output, want) {
		t.Errorf("update %#v, output %#v; want %#v", res.Update, res.Output, want)
	}
}

func TestTransformOfNullChangesNothing(t *testing.T) {
	res, err := run(t, build(t, "transform", `{"expr": "null"}`), state(t, `{}`))
	if err != nil {
		t.Fatal(err)
	}
	if res.Update != nil || res.Output != nil {
		t.Errorf("update %v, output %v; want none", res.Update, res.Output)
	}
}

func TestTransformRefusesANonObject(t *testing.T) {
	for expr, want := range map[string]string{
		`.n`:          "transform must produce an object (the state update), got a number",
		`[.n]`:        "got an array",
		`"text"`:      "got a string",
		`.n | . == 1`: "got a boolean",
	} {
		_, err := run(t, build(t, "transform", `{"expr": `+quote(expr)+`}`), state(t, `{"n": 1}`))
		wantPermanent(t, err, "params.expr", want)
	}
}

func TestTransformFailsPermanentlyOnAJQError(t *testing.T) {
	_, err := run(t, build(t, "transform", `{"expr": "{x: (.a + 1)}"}`), state(t, `{"a": "text"}`))
	wantPermanent(t, err, "params.expr", "cannot add: string")
}

// TestTransformBoundedOnlyForFastShapes pins which transforms run without a deadline
// timer: those whose jq takes the fast path (an object of paths), never one that runs
// gojq (which might loop until its deadline).
func TestTransformBoundedOnlyForFastShapes(t *testing.T) {
	for expr, want := range map[string]bool{
		`{}`:                               true,
		`{total: .sum, who: $state.user}`:  true,
		`{n: (.items | length)}`:           false,
		`{x: (repeat(1) | select(false))}`: false,
	} {
		c := build(t, "transform", fmt.Sprintf(`{"expr": %q}`, expr))
		if got := c.(flows.Bounder).Bounded(); got != want {
			t.Errorf("transform %s: bounded %v, want %v", expr, got, want)
		}
	}
}
