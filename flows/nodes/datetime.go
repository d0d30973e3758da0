package nodes

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/sluicehq/sluice/flows"
)

func datetimeSpec() flows.Spec {
	return flows.Spec{
		Name:     "datetime",
		Title:    "Date and time",
		Category: "tools",
		Description: "The current date and time, in a time zone (IANA, such as Europe/Paris; default UTC): " +
			"{iso (RFC 3339), date, time, weekday, timezone, offset, unix}, and text in a Go layout when format is " +
			"given (\"Monday 2 January 2006, 15:04\"). As a step it is stored under \"as\" (a retried step reads the " +
			"clock again); attached to an agent's tools port the model asks for it, optionally in another time zone.",
		Ports: []flows.Port{inPort, outPort, toolPort},
		Params: json.RawMessage(`{
			"type": "object", "additionalProperties": false,
			"properties": {
				"timezone": {"type": "string", "default": "UTC", "description": "IANA time zone, e.g. Europe/Paris or America/New_York."},
				"format": {"type": "string", "description": "Also write the time as text in this Go layout, e.g. Monday 2 January 2006, 15:04."},
				"as": {"type": "string", "pattern": "^[A-Za-z_][A-Za-z0-9_]*$", "default": "now", "description": "State key the time is stored under (as a step)."},` + toolParams + `
			}
		}`),
		Example: json.RawMessage(`{"timezone": "Europe/Paris", "format": "Monday 2 January 2006", "as": "today"}`),
		New:     newDatetime,
	}
}

// Datetime tells the time.
type Datetime struct {
	loc    *time.Location
	format string
	as     string
	def    flows.ToolDef
	now    func() time.Time
}

var datetimeToolArgs = json.RawMessage(`{"type": "object", "additionalProperties": false,
	"properties": {"timezone": {"type": "string", "description": "IANA time zone such as Asia/Tokyo; default the node's."}}}`)

func newDatetime(b *flows.Build) (flows.Component, error) {
	var p struct {
		toolConfig
		Timezone string `json:"timezone"`
		Format   string `json:"format"`
		As       string `json:"as"`
	}
	if err := b.Decode(&p); err != nil {
		return nil, err
	}
	loc, err := loadZone(p.Timezone)
	if err != nil {
		return nil, &flows.Error{Code: flows.Invalid, Path: "params.timezone", Message: err.Error()}
	}
	d := &Datetime{loc: loc, format: p.Format, as: p.As, now: time.Now}
	p.ToolParameters = nil
	d.def = p.def(b, "Get the current date and time (the model has no clock of its own).", datetimeToolArgs)
	return d, nil
}

// loadZone reads an IANA zone name ("" and UTC are UTC); the tables are in the binary
// (flows imports time/tzdata), so it works without the system's.
func loadZone(name string) (*time.Location, error) {
	if name == "" || strings.EqualFold(name, "utc") {
		return time.UTC, nil
	}
	loc, err := time.LoadLocation(name)
	if err != nil || strings.HasPrefix(name, "/") || strings.Contains(name, "..") {
		return nil, fmt.Errorf("%q is not an IANA time zone (such as Europe/Paris)", name)
	}
	return loc, nil
}

func (d *Datetime) tell(loc *time.Location) map[string]any {
	t := d.now().In(loc)
	out := map[string]any{"iso": t.Format(time.RFC3339), "date": t.Format("2006-01-02"), "time": t.Format("15:04:05"),
		"weekday": t.Weekday().String(), "timezone": loc.String(), "offset": t.Format("-07:00"), "unix": t.Unix()}
	if d.format != "" {
		out["text"] = t.Format(d.format)
	}
	return out
}

// Run stores the time.
func (d *Datetime) Run(_ context.Context, _ *flows.Step) (*flows.Result, error) {
	v := d.tell(d.loc)
	return &flows.Result{Output: v, Update: map[string]any{d.as: v}}, nil
}

// ToolDef offers the clock to a model.
func (d *Datetime) ToolDef() flows.ToolDef { return d.def }

// Call tells the time in the node's zone or the one the model names.
func (d *Datetime) Call(_ context.Context, _ *flows.Step, args json.RawMessage) (any, error) {
	var a struct {
		Timezone string `json:"timezone"`
	}
	if len(args) > 0 {
		if err := json.Unmarshal(args, &a); err != nil {
			return nil, fmt.Errorf(`call it with {} or {"timezone": "Europe/Paris"}`)
		}
	}
	loc := d.loc
	if a.Timezone != "" {
		l, err := loadZone(a.Timezone)
		if err != nil {
			return nil, err
		}
		loc = l
	}
	return d.tell(loc), nil
}

var (
	_ flows.Component = (*Datetime)(nil)
	_ flows.Tool      = (*Datetime)(nil)
)
