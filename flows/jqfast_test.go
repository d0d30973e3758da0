package flows

import (
	"context"
	"reflect"
	"testing"

	"encoding/json"
)

// TestJQFastPathAgreesWithGojq pins that each expression of the shapes evaluated without
// gojq takes the fast path and gives exactly gojq's output, over inputs of every kind;
// where gojq fails (indexing a string), the fast path leaves it to gojq, so the error
// is gojq's too.
func TestJQFastPathAgreesWithGojq(t *testing.T) {
	inputs := []any{
		nil,
		map[string]any{},
		map[string]any{"a": json.Number("1"), "b": map[string]any{"c": "deep"}, "x y": true, "items": []any{json.Number("2")}},
		map[string]any{"a": map[string]any{"b": nil}},
		"a string",
		[]any{json.Number("1")},
		json.Number("3"),
	}
	state := map[string]any{"mode": "strict", "n": json.Number("7")}
	for _, src := range []string{
		".", "{}", "null", "true", "false", "1", "1.5", "1e2", `"text"`, "[]",
		".a", ".a.b", ".b.c", `."x y"`, `.["a"]`, `.b."c"`, "(.a)", "(.b).c",
		"$state", "$state.mode", "$state.missing.deeper",
		"{a: .a}", "{a}", "{a, b}", `{"x y": 1, b: .b.c}`, "{n: $state.n, k: {j: .a, e: {}}}", `{a: "lit", b: null, c: []}`,
	} {
		q, err := CompileJQ(src)
		if err != nil {
			t.Fatalf("%s: %v", src, err)
		}
		if !q.Bounded() {
			t.Errorf("%s does not take the fast path", src)
			continue
		}
		slow := &JQ{src: src, code: q.code}
		for _, in := range inputs {
			got, gotErr := q.All(context.Background(), in, state)
			want, wantErr := slow.All(context.Background(), in, state)
			if (gotErr == nil) != (wantErr == nil) || gotErr != nil && gotErr.Error() != wantErr.Error() {
				t.Errorf("%s on %#v: error %v, gojq's %v", src, in, gotErr, wantErr)
				continue
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("%s on %#v = %#v, gojq gives %#v", src, in, got, want)
			}
		}
	}
}

// TestJQOtherShapesRunGojq pins that expressions the fast path does not know are left to
// gojq whole: pipes, iteration, optional access, computed keys, variables other than
// $state, functions, interpolation.
func TestJQOtherShapesRunGojq(t *testing.T) {
	for _, src := range []string{
		".a | .b", ".items[]", ".a?", ".[0]", "{(.k): 1}", "{$state}", "$ENV", "length", `"\(.a)"`,
		".a == 1", "[.a]", "-1", "1, 2", `@base64 "x"`, "def f: .; f", ". as $x | $x", "..",
	} {
		q, err := CompileJQ(src)
		if err != nil {
			t.Fatalf("%s: %v", src, err)
		}
		if q.Bounded() {
			t.Errorf("%s takes the fast path", src)
		}
	}
}

// TestJQFastObjectIsNewEachTime pins that an object built by the fast path is a new map
// at every evaluation: a caller merging into one step's update must not change the next.
func TestJQFastObjectIsNewEachTime(t *testing.T) {
	q, _ := CompileJQ("{}")
	a, _ := q.First(context.Background(), nil, nil)
	a.(map[string]any)["k"] = 1
	b, _ := q.First(context.Background(), nil, nil)
	if len(b.(map[string]any)) != 0 {
		t.Errorf("the second evaluation of {} gave %v", b)
	}
}
