package nodes

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/sluicehq/sluice/flows"
)

func templateSpec() flows.Spec {
	return flows.Spec{
		Name:     "template",
		Title:    "Template",
		Category: "data",
		Description: "Writes text from the state with a Go text/template (\"Ticket {{.id}}: {{.title}}\"; json and join " +
			"are available) and stores it under \"as\": a prompt, a message, a report.",
		Ports: []flows.Port{inPort, outPort},
		Params: json.RawMessage(`{
			"type": "object", "additionalProperties": false, "required": ["template"],
			"properties": {
				"template": {"type": "string", "format": "template", "description": "The text, a template over the node's input."},
				"as": {"type": "string", "pattern": "^[A-Za-z_][A-Za-z0-9_]*$", "default": "text", "description": "State key the text is stored under."}
			}
		}`),
		Example: json.RawMessage(`{"template": "{{range .results}}- {{.doc}}: {{.length}}\n{{end}}", "as": "report"}`),
		New:     newTemplate,
	}
}

// Template renders text from the state.
type Template struct {
	tpl *flows.Template
	as  string
}

func newTemplate(b *flows.Build) (flows.Component, error) {
	var p struct {
		Template string `json:"template"`
		As       string `json:"as"`
	}
	if err := b.Decode(&p); err != nil {
		return nil, err
	}
	t, err := flows.ParseTemplate(p.Template)
	if err != nil {
		return nil, &flows.Error{Code: flows.Invalid, Path: "params.template", Err: err}
	}
	return &Template{tpl: t, as: p.As}, nil
}

// Run renders the text; a template that fails on this state fails the step for good.
func (t *Template) Run(ctx context.Context, s *flows.Step) (*flows.Result, error) {
	text, err := t.tpl.Execute(ctx, s.Input)
	if err != nil {
		return nil, templateError(s.Node, "params.template", err)
	}
	return &flows.Result{Output: text, Update: map[string]any{t.as: text}}, nil
}

// templateError is how a template that fails to render fails its step: for good when the
// template does not fit the data, like any bad input; as a plain error (retried like
// any step that ran out of time) when the step's deadline or a cancel stopped it.
func templateError(node, path string, err error) error {
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return &flows.Error{Code: flows.Timeout, Node: node, Path: path, Err: err}
	}
	return flows.Permanent(&flows.Error{Code: flows.Invalid, Node: node, Path: path, Err: err})
}

var _ flows.Component = (*Template)(nil)
