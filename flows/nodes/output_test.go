package nodes_test

import (
	"reflect"
	"testing"
)

func TestOutputIsFinalAndItsValueIsTheRunOutput(t *testing.T) {
	s := state(t, `{"answer": "42", "noise": true}`)
	for _, tc := range []struct {
		name, params string
		want         any
	}{
		{"the whole state by default", `{}`, s},
		{"a jq value", `{"value": "{answer}"}`, map[string]any{"answer": "42"}},
		{"a value with no output is null", `{"value": "empty"}`, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := run(t, build(t, "output", tc.params), s)
			if err != nil {
				t.Fatal(err)
			}
			if !res.Final {
				t.Error("an output's result is not marked final")
			}
			if !reflect.DeepEqual(res.Output, tc.want) {
				t.Errorf("output %#v, want %#v", res.Output, tc.want)
			}
			if res.Update != nil {
				t.Errorf("an output changes no state, got %v", res.Update)
			}
		})
	}
}

func TestOutputFailsPermanentlyOnAJQError(t *testing.T) {
	_, err := run(t, build(t, "output", `{"value": ".a | keys"}`), state(t, `{"a": 1}`))
	wantPermanent(t, err, "params.value", "keys cannot be applied")
}
