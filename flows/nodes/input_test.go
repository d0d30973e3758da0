package nodes_test

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/flows"
	"github.com/sluicehq/sluice/flows/nodes"
)

func TestInputChecksRunInputAgainstItsSchema(t *testing.T) {
	in := build(t, "input", `{"schema": {"type": "object", "required": ["question"], "properties": {"question": {"type": "string"}}}}`).(*nodes.Input)
	if err := in.CheckInput(state(t, `{"question": "why?"}`)); err != nil {
		t.Errorf("matching input refused: %v", err)
	}
	for _, tc := range []struct {
		name  string
		input any
		want  string
	}{
		{"a missing property", state(t, `{}`), "question"},
		{"a property of the wrong type", state(t, `{"question": 42}`), "want string"},
		{"not an object", "just text", "want object"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := in.CheckInput(tc.input)
			var fe *flows.Error
			if !errors.As(err, &fe) || fe.Code != flows.Invalid || fe.Path != "input" {
				t.Fatalf("got %v, want an Invalid error at input", err)
			}
			if !strings.Contains(err.Error(), "input does not match the input schema") || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not say what is wrong (%s)", err, tc.want)
			}
		})
	}
}

func TestInputWithoutSchemaTakesAnything(t *testing.T) {
	in := build(t, "input", `{"example": {"x": 1}}`).(*nodes.Input)
	for _, v := range []any{nil, "text", state(t, `{"a": [1]}`)} {
		if err := in.CheckInput(v); err != nil {
			t.Errorf("CheckInput(%v) = %v", v, err)
		}
	}
}

func TestInputPassesTheStateOn(t *testing.T) {
	s := state(t, `{"question": "why?"}`)
	res, err := run(t, build(t, "input", `{}`), s)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(res.Output, s) || res.Update != nil || res.Final {
		t.Errorf("result %+v; want the input as output and no update", res)
	}
}

func TestInputRefusesASchemaThatIsNotOne(t *testing.T) {
	_, err := tryBuild("input", `{"schema": {"type": 5}}`)
	var fe *flows.Error
	if !errors.As(err, &fe) || fe.Path != "params.schema" {
		t.Errorf("got %v, want an error at params.schema", err)
	}
}
