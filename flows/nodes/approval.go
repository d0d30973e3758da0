package nodes

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/sluicehq/sluice/flows"
)

// Approval ports.
const (
	PortApproved = "approved"
	PortRejected = "rejected"
)

func approvalSpec() flows.Spec {
	return flows.Spec{
		Name:     "approval",
		Title:    "Approval",
		Category: "human",
		Description: "Parks the run as waiting until a person decides: approve, reject, or approve with an " +
			"edited value. The person sees the prompt and the data to review. The decision is stored under " +
			"\"result_key\"; an edited value (an object) is merged into the state. The run continues on the " +
			"\"approved\" or \"rejected\" port; a port with nothing connected ends the branch. The record holds who " +
			"answered (by), when (at) and the edit (edit). Waiting runs " +
			"survive restarts of every process. With a timeout, the on_timeout decision is taken for the person.",
		Ports: []flows.Port{inPort,
			{Name: PortApproved, Direction: "out", Type: flows.PortState, Description: "the person approved"},
			{Name: PortRejected, Direction: "out", Type: flows.PortState, Description: "the person rejected, or the timeout did"}},
		Routing: true,
		Params: json.RawMessage(`{
			"type": "object", "additionalProperties": false,
			"properties": {
				"prompt": {"type": "string", "format": "template", "default": "Approve this?", "description": "What the person is asked (a template over the state)."},
				"data": {"type": "string", "format": "jq", "default": ".", "description": "jq over the state: what the person reviews."},
				"timeout": {"type": "string", "format": "duration", "description": "Decide for the person after this long; none waits forever."},
				"on_timeout": {"enum": ["approve", "reject"], "default": "reject", "description": "The decision taken when the timeout passes."},
				"result_key": {"type": "string", "pattern": "^[A-Za-z_][A-Za-z0-9_]*$", "default": "approval", "description": "State key the decision is stored under."},
				"role": {"enum": ["operator", "editor", "owner"], "default": "operator", "description": "The least role in the flow's workspace a person needs to answer (docs/teams.md)."},
				"group": {"type": "string", "minLength": 1, "description": "A group (from single sign-on) the person answering must be in, besides the role; who answered, when and with what edit is recorded under the result key (by, at, edit)."}
			}
		}`),
		Example: json.RawMessage(`{"prompt": "Send this reply to {{.customer}}?", "data": "{reply}", "timeout": "24h", "on_timeout": "reject"}`),
		New:     newApproval,
	}
}

// Approval waits for a person's decision.
type Approval struct {
	prompt    *flows.Template
	data      *flows.JQ
	timeout   flows.Duration
	onTimeout string
	key       string
}

func newApproval(b *flows.Build) (flows.Component, error) {
	var p struct {
		Prompt    string         `json:"prompt"`
		Data      string         `json:"data"`
		Timeout   flows.Duration `json:"timeout"`
		OnTimeout string         `json:"on_timeout"`
		ResultKey string         `json:"result_key"`
		Role      string         `json:"role"`  // checked by the server, which knows who answers
		Group     string         `json:"group"` // likewise
	}
	if err := b.Decode(&p); err != nil {
		return nil, err
	}
	a := &Approval{timeout: p.Timeout, onTimeout: p.OnTimeout, key: p.ResultKey}
	var err error
	if a.prompt, err = flows.ParseTemplate(p.Prompt); err != nil {
		return nil, &flows.Error{Code: flows.Invalid, Path: "params.prompt", Err: err}
	}
	if a.data, err = flows.CompileJQ(p.Data); err != nil {
		return nil, &flows.Error{Code: flows.Invalid, Path: "params.data", Err: err}
	}
	return a, nil
}

// Decision is a person's answer to an approval.
type Decision struct {
	Decision string         `json:"decision"`          // "approve" or "reject"
	Value    map[string]any `json:"value,omitempty"`   // an edited value, merged into the state
	Comment  string         `json:"comment,omitempty"` // why
	By       string         `json:"by,omitempty"`      // who (or "timeout")
	At       string         `json:"at,omitempty"`      // when (RFC 3339; the server sets it)
}

// ParseDecision checks a resume input: {"decision": "approve"|"reject", "value": {...},
// "comment": "...", "by": "...", "at": "RFC 3339"}.
func ParseDecision(raw json.RawMessage) (*Decision, error) {
	v, err := flows.DecodeJSON(raw)
	if err != nil {
		return nil, &flows.Error{Code: flows.Invalid, Path: "decision", Message: "not JSON: " + err.Error()}
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, &flows.Error{Code: flows.Invalid, Path: "decision", Message: fmt.Sprintf("a decision is an object such as {\"decision\": \"approve\"}, got %s", flows.TypeName(v))}
	}
	var d Decision
	for k, x := range m {
		switch k {
		case "decision", "comment", "by", "at":
			s, ok := x.(string)
			if !ok {
				return nil, &flows.Error{Code: flows.Invalid, Path: "decision." + k, Message: "must be a string"}
			}
			switch k {
			case "decision":
				d.Decision = s
			case "comment":
				d.Comment = s
			case "by":
				d.By = s
			case "at":
				d.At = s
			}
		case "value":
			o, ok := x.(map[string]any)
			if !ok {
				return nil, &flows.Error{Code: flows.Invalid, Path: "decision.value", Message: "an edited value is an object of state keys"}
			}
			d.Value = o
		default:
			return nil, &flows.Error{Code: flows.Invalid, Path: "decision." + k, Message: fmt.Sprintf("unknown field %q", k)}
		}
	}
	if d.Decision != "approve" && d.Decision != "reject" {
		return nil, &flows.Error{Code: flows.Invalid, Path: "decision.decision", Message: "must be \"approve\" or \"reject\""}
	}
	return &d, nil
}

// Run parks the run the first time; resumed, it applies the decision.
func (a *Approval) Run(ctx context.Context, s *flows.Step) (*flows.Result, error) {
	if s.Resume == nil {
		prompt, err := a.prompt.Execute(ctx, s.Input)
		if err != nil {
			return nil, templateError(s.Node, "params.prompt", err)
		}
		data, err := a.data.First(ctx, s.Input, s.State)
		if err != nil {
			return nil, flows.Permanent(&flows.Error{Code: flows.Invalid, Node: s.Node, Path: "params.data", Err: err})
		}
		return &flows.Result{Output: map[string]any{"prompt": prompt}, Wait: &flows.Wait{Prompt: prompt, Data: data, Timeout: a.timeout, OnTimeout: a.onTimeout}}, nil
	}
	d, err := ParseDecision(s.Resume)
	if err != nil {
		return nil, flows.Permanent(err)
	}
	rec := map[string]any{"decision": d.Decision}
	if d.Comment != "" {
		rec["comment"] = d.Comment
	}
	if d.By != "" {
		rec["by"] = d.By
	}
	if d.At != "" {
		rec["at"] = d.At // when: the server and the timeout record it
	}
	if len(d.Value) > 0 {
		rec["edit"] = d.Value
	}
	upd := map[string]any{}
	for k, v := range d.Value {
		upd[k] = v
	}
	upd[a.key] = rec
	port := PortApproved
	if d.Decision == "reject" {
		port = PortRejected
	}
	return &flows.Result{Output: rec, Update: upd, Ports: []string{port}}, nil
}

var _ flows.Component = (*Approval)(nil)
