package nodes

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/sluicehq/sluice/flows"
)

func inputSpec() flows.Spec {
	return flows.Spec{
		Name:     "input",
		Title:    "Input",
		Category: "io",
		Description: "Where a run starts. The run's input becomes the initial state: a JSON object is merged " +
			"into the state key by key; any other value is stored under \"input\". An optional JSON Schema " +
			"rejects bad input when the run is started.",
		Ports: []flows.Port{outPort},
		Params: json.RawMessage(`{
			"type": "object", "additionalProperties": false,
			"properties": {
				"schema": {"type": "object", "format": "json-schema", "description": "JSON Schema the run input must match."},
				"example": {"description": "An example input, prefilled in the editor's test-run panel."}
			}
		}`),
		Example: json.RawMessage(`{"schema": {"type": "object", "required": ["question"], "properties": {"question": {"type": "string"}}}}`),
		New:     newInput,
	}
}

// Input starts a run.
type Input struct {
	schema *jsonschema.Schema
}

func newInput(b *flows.Build) (flows.Component, error) {
	var p struct {
		Schema  json.RawMessage `json:"schema"`
		Example json.RawMessage `json:"example"`
	}
	if err := b.Decode(&p); err != nil {
		return nil, err
	}
	in := &Input{}
	if len(p.Schema) > 0 {
		s, err := flows.CompileSchema(p.Schema)
		if err != nil {
			return nil, &flows.Error{Code: flows.Invalid, Path: "params.schema", Message: err.Error()}
		}
		in.schema = s
	}
	return in, nil
}

// CheckInput checks a run's input against the schema before the run starts.
func (in *Input) CheckInput(v any) error {
	if in.schema == nil {
		return nil
	}
	if err := in.schema.Validate(v); err != nil {
		msg := err.Error()
		if i := strings.Index(msg, "\n"); i >= 0 {
			msg = strings.TrimSpace(msg[i+1:])
		}
		return &flows.Error{Code: flows.Invalid, Path: "input", Message: fmt.Sprintf("input does not match the input schema: %s", msg)}
	}
	return nil
}

// Run passes the state on; its output is the state the run started with.
func (in *Input) Run(_ context.Context, s *flows.Step) (*flows.Result, error) {
	return &flows.Result{Output: s.Input}, nil
}

var _ flows.Component = (*Input)(nil)
