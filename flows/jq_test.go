package flows_test

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/flows"
)

func mustJQ(t *testing.T, src string) *flows.JQ {
	t.Helper()
	q, err := flows.CompileJQ(src)
	if err != nil {
		t.Fatalf("CompileJQ(%q): %v", src, err)
	}
	return q
}

func TestJQEvaluatesOverInputAndState(t *testing.T) {
	ctx := context.Background()
	input := map[string]any{"items": []any{num("1"), num("2")}, "name": "ada"}
	state := map[string]any{"mode": "strict"}
	for _, tc := range []struct {
		name, src string
		want      []any
	}{
		{"the input is .", "{n: (.items | length), name}", []any{map[string]any{"n": 2, "name": "ada"}}},
		{"$state is the whole run state", "$state.mode", []any{"strict"}},
		{"every output is returned", ".items[]", []any{num("1"), num("2")}},
		{"no output is an empty list", "empty", nil},
		{"halt stops without an error", "1, halt, 2", []any{1}},
		{"$ENV is empty: no process environment", "$ENV", []any{map[string]any{}}},
		{"env is empty: no process environment", "env", []any{map[string]any{}}},
		{"inputs yields nothing: the expression reads no input", "[inputs]", []any{[]any{}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := mustJQ(t, tc.src).All(ctx, input, state)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("%s = %#v, want %#v", tc.src, got, tc.want)
			}
		})
	}
}

func TestJQSeesNoEnvironmentEvenWhenSet(t *testing.T) {
	t.Setenv("SLUICE_TEST_SECRET", "hunter2")
	got, err := mustJQ(t, `[$ENV.SLUICE_TEST_SECRET, env.SLUICE_TEST_SECRET]`).First(context.Background(), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, []any{nil, nil}) {
		t.Errorf("jq read the environment: %v", got)
	}
}

func TestJQTruthy(t *testing.T) {
	for src, want := range map[string]bool{
		"true": true, "false": false, "null": false, "0": true, `""`: true, "[]": true, "empty": false,
		".missing": false, "false, true": false,
	} {
		got, err := mustJQ(t, src).Truthy(context.Background(), map[string]any{}, nil)
		if err != nil {
			t.Fatalf("%s: %v", src, err)
		}
		if got != want {
			t.Errorf("Truthy(%s) = %v, want %v", src, got, want)
		}
	}
}

func TestJQAcceptsTypedGoValues(t *testing.T) {
	for _, tc := range []struct {
		name  string
		input any
		src   string
		want  any
	}{
		{"[]string", []string{"a", "b"}, ".[1]", "b"},
		{"map[string]string", map[string]string{"k": "v"}, ".k", "v"},
		{"int64", int64(41), ". + 1", 42},
		{"struct", struct {
			Name string `json:"name"`
		}{"ada"}, ".name", "ada"},
		{"json.Number", json.Number("2.5"), ". * 2", 5.0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := mustJQ(t, tc.src).First(context.Background(), tc.input, nil)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %#v, want %#v", got, tc.want)
			}
		})
	}
}

func TestJQErrors(t *testing.T) {
	for _, tc := range []struct{ src, want string }{
		{".[", "jq: unexpected EOF"},
		{"nosuch(1)", "jq: function not defined: nosuch/1"},
		{"$other", "jq: variable not defined: $other"},
	} {
		if _, err := flows.CompileJQ(tc.src); err == nil || err.Error() != tc.want {
			t.Errorf("CompileJQ(%q) = %v, want %q", tc.src, err, tc.want)
		}
	}
	_, err := mustJQ(t, `.a + 1`).All(context.Background(), map[string]any{"a": "text"}, nil)
	if err == nil || !strings.HasPrefix(err.Error(), "jq: ") || errors.Is(err, flows.ErrJQTimeout) {
		t.Errorf("a runtime error: got %v, want a jq: error that is not a timeout", err)
	}
	_, err = mustJQ(t, `error("custom")`).All(context.Background(), nil, nil)
	if err == nil || !strings.Contains(err.Error(), "custom") {
		t.Errorf("error(\"custom\"): got %v", err)
	}
}

// TestJQStopsAtItsDeadline runs expressions that never end on their own: each must
// return ErrJQTimeout once JQTimeout has passed, with no deadline from the caller.
func TestJQStopsAtItsDeadline(t *testing.T) {
	for _, src := range []string{"[range(1e9)]", "def f: f; f", "last(repeat(1))"} {
		t.Run(src, func(t *testing.T) {
			t.Parallel()
			_, err := mustJQ(t, src).All(context.Background(), nil, nil)
			if !errors.Is(err, flows.ErrJQTimeout) {
				t.Errorf("got %v, want ErrJQTimeout", err)
			}
		})
	}
}

func TestJQStopsWhenTheCallerCancels(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := mustJQ(t, "last(repeat(1))").All(ctx, nil, nil)
	if !errors.Is(err, flows.ErrJQTimeout) {
		t.Errorf("got %v, want ErrJQTimeout", err)
	}
}

func TestJQString(t *testing.T) {
	if got := mustJQ(t, ".a | length").String(); got != ".a | length" {
		t.Errorf("String() = %q", got)
	}
}
