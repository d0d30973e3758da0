package nodes

import (
	"context"
	"encoding/json"
	"regexp"

	"github.com/sluicehq/sluice/flows"
)

// toolParams are the parameters of every component that can be an agent's tool.
const toolParams = `
	"tool_name": {"type": "string", "pattern": "^[a-zA-Z0-9_-]{1,64}$", "description": "Name the model calls the tool by; default the node id."},
	"tool_description": {"type": "string", "description": "What the tool does and when to use it, for the model."}`

// toolArgsParam describes the arguments of tools whose arguments the flow defines.
const toolArgsParam = `
	"tool_parameters": {"type": "object", "format": "json-schema", "description": "JSON Schema of the arguments the model passes; the templates see them as the input."}`

// toolConfig is what a tool component reads from toolParams.
type toolConfig struct {
	ToolName        string          `json:"tool_name"`
	ToolDescription string          `json:"tool_description"`
	ToolParameters  json.RawMessage `json:"tool_parameters"`
}

var toolNameRE = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

// def is the tool as the model sees it.
func (c toolConfig) def(b *flows.Build, description string, parameters json.RawMessage) flows.ToolDef {
	d := flows.ToolDef{Name: c.ToolName, Description: c.ToolDescription, Parameters: c.ToolParameters}
	if d.Name == "" && b.Node != nil {
		d.Name = b.Node.ID
	}
	if !toolNameRE.MatchString(d.Name) {
		d.Name = "tool"
	}
	if d.Description == "" {
		d.Description = description
	}
	if len(d.Parameters) == 0 {
		d.Parameters = parameters
	}
	return d
}

// toolInput is what a tool's templates and jq see: the model's arguments, an object.
func toolInput(args json.RawMessage) (any, error) {
	v, err := flows.DecodeJSON(args)
	if err != nil {
		return nil, err
	}
	if _, ok := v.(map[string]any); !ok && v != nil {
		return map[string]any{"input": v}, nil
	}
	if v == nil {
		return map[string]any{}, nil
	}
	return v, nil
}

// toolSet is a tool node that stands for several tools, known only when asked: an MCP
// server. An agent offers the model each of them instead of the node itself.
type toolSet interface {
	// Tools lists the tools as the model sees them.
	Tools(ctx context.Context, step *flows.Step) ([]flows.ToolDef, error)
	// CallTool calls the tool the model knows as name.
	CallTool(ctx context.Context, step *flows.Step, name string, args json.RawMessage) (any, error)
}

// stepFailure is a tool error that fails the agent's step (so it is retried) instead of
// going back to the model: the tool could not be reached at all.
type stepFailure struct{ err error }

func (e *stepFailure) Error() string { return e.err.Error() }
func (e *stepFailure) Unwrap() error { return e.err }

// failStep marks err as a stepFailure.
func failStep(err error) error { return &stepFailure{err: err} }
