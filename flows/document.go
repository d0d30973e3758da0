package flows

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"
)

// FormatVersion is the value of "sluice" in every document this code reads.
const FormatVersion = 1

// Document is a flow as a person designs it and saves it: the JSON file is the export.
type Document struct {
	Sluice      int                 `json:"sluice"`
	ID          string              `json:"id"`
	Name        string              `json:"name,omitempty"`
	Description string              `json:"description,omitempty"`
	State       map[string]StateKey `json:"state,omitempty"`
	Settings    Settings            `json:"settings,omitzero"`
	Nodes       []Node              `json:"nodes"`
	Edges       []Edge              `json:"edges"`
	// Notes are sticky notes on the canvas: layout like positions, so they are not part
	// of the flow's version and nothing runs them.
	Notes []Note `json:"notes,omitempty"`
}

// Note is a sticky note on the editor's canvas.
type Note struct {
	ID       string    `json:"id"`
	Text     string    `json:"text"`
	Position *Position `json:"position,omitempty"`
	// Width and Height are the note's size in canvas pixels; zero takes the editor's default.
	Width  float64 `json:"width,omitempty"`
	Height float64 `json:"height,omitempty"`
	// Color is one of the editor's note colours: yellow (default), blue, green, pink.
	Color string `json:"color,omitempty"`
}

// StateKey declares one key of the run state.
type StateKey struct {
	Reducer     Reducer         `json:"reducer,omitempty"`
	Default     json.RawMessage `json:"default,omitempty"`
	Description string          `json:"description,omitempty"`
}

// Settings are the flow's runtime limits. Zero values take the defaults in
// DefaultSettings.
type Settings struct {
	MaxSteps      int      `json:"max_steps,omitempty"`
	MaxAttempts   int      `json:"max_attempts,omitempty"`
	ClaimAfter    Duration `json:"claim_after,omitzero"`
	StepTimeout   Duration `json:"step_timeout,omitzero"`
	CheckpointTTL Duration `json:"checkpoint_ttl,omitzero"`
	KeepLast      int      `json:"keep_last,omitempty"`
	MaxStateBytes int      `json:"max_state_bytes,omitempty"`
	// Partitions is how many partitions the flow's runs are spread over (0: the
	// server's default, 1 on a single Redis): see docs/scaling.md.
	Partitions int `json:"partitions,omitempty"`
	// Budget caps what the flow's model calls may spend; nil: no cap.
	Budget *Budget `json:"budget,omitempty"`
	// MCP offers the flow as a tool to MCP clients (sluice mcp, /mcp on serve).
	MCP bool `json:"mcp,omitempty"`
	// Schedules start runs on a clock (see schedule.go and docs/schedules.md).
	Schedules []Schedule `json:"schedules,omitempty"`
}

// Budget caps what a flow's model calls spend, per run and per flow per UTC day, in
// tokens (input and output) and, where the provider has prices, in US dollars. Zero
// fields are no cap. A model step that takes a run over its budget fails for good.
type Budget struct {
	RunTokens int64   `json:"run_tokens,omitempty"`
	RunUSD    float64 `json:"run_usd,omitempty"`
	DayTokens int64   `json:"day_tokens,omitempty"`
	DayUSD    float64 `json:"day_usd,omitempty"`
}

// Spend is what model calls spent: tokens, and dollars where the provider has prices.
type Spend struct {
	Tokens int64   `json:"tokens"`
	USD    float64 `json:"usd"`
}

// Hard limits of settings, checked at validation.
const (
	// MaxMaxSteps caps max_steps: a looping run writes checkpoints as fast as Redis
	// takes them, so the guard must trip in bounded time and space.
	MaxMaxSteps = 10000
	// DefaultMaxStateBytes is how large a run's state may grow unless a flow says.
	DefaultMaxStateBytes = 1 << 20
)

// DefaultSettings are what a flow gets for the settings it leaves out.
var DefaultSettings = Settings{
	MaxSteps:      100,
	MaxAttempts:   3,
	ClaimAfter:    Duration(30 * time.Second),
	StepTimeout:   Duration(5 * time.Minute),
	CheckpointTTL: Duration(24 * time.Hour),
	MaxStateBytes: DefaultMaxStateBytes,
}

// WithDefaults returns s with every zero field replaced by its default.
func (s Settings) WithDefaults() Settings {
	d := DefaultSettings
	if s.MaxSteps == 0 {
		s.MaxSteps = d.MaxSteps
	}
	if s.MaxAttempts == 0 {
		s.MaxAttempts = d.MaxAttempts
	}
	if s.ClaimAfter == 0 {
		s.ClaimAfter = d.ClaimAfter
	}
	if s.StepTimeout == 0 {
		s.StepTimeout = d.StepTimeout
	}
	if s.CheckpointTTL == 0 {
		s.CheckpointTTL = d.CheckpointTTL
	}
	if s.MaxStateBytes == 0 {
		s.MaxStateBytes = d.MaxStateBytes
	}
	return s
}

// Node is one component instance on the canvas.
type Node struct {
	ID          string          `json:"id"`
	Type        string          `json:"type"`
	Label       string          `json:"label,omitempty"`
	Description string          `json:"description,omitempty"`
	Position    *Position       `json:"position,omitempty"`
	Params      json.RawMessage `json:"params,omitempty"`
	Input       string          `json:"input,omitempty"`
	Output      string          `json:"output,omitempty"`
	Timeout     Duration        `json:"timeout,omitzero"`
	Concurrency int             `json:"concurrency,omitempty"`
	Cache       *Cache          `json:"cache,omitempty"`
	Retry       *Retry          `json:"retry,omitempty"`
}

// Retry says how a node's failed steps are retried: after Initial, then each wait
// Multiplier times the one before, at most Max, with ±20% jitter, until MaxAttempts
// deliveries.
type Retry struct {
	MaxAttempts int      `json:"max_attempts,omitempty"`
	Initial     Duration `json:"initial,omitzero"`
	Max         Duration `json:"max,omitzero"`
	Multiplier  float64  `json:"multiplier,omitempty"`
}

// DefaultRetry is the retry policy of nodes that do not set one: 1s then 2s, so a
// dependency that is down for a few seconds does not dead-letter work.
var DefaultRetry = Retry{Initial: Duration(time.Second), Max: Duration(time.Minute), Multiplier: 2}

// WithDefaults fills what r leaves out from DefaultRetry, and max_attempts from the
// flow's settings.
func (r *Retry) WithDefaults(s Settings) Retry {
	out := DefaultRetry
	out.MaxAttempts = s.MaxAttempts
	if r == nil {
		return out
	}
	if r.MaxAttempts > 0 {
		out.MaxAttempts = r.MaxAttempts
	}
	if r.Initial > 0 {
		out.Initial = r.Initial
	}
	if r.Max > 0 {
		out.Max = r.Max
	}
	if r.Multiplier >= 1 {
		out.Multiplier = r.Multiplier
	}
	if out.Max < out.Initial {
		out.Max = out.Initial
	}
	return out
}

// Position is where the editor draws a node; it is layout only and not part of the
// flow's version.
type Position struct {
	X float64 `json:"x"`
	Y float64 `json:"y"`
}

// Cache turns on result caching for a node (see the component docs).
type Cache struct {
	TTL Duration `json:"ttl"`
}

// Edge connects an output port of one node to an input port of another.
type Edge struct {
	ID        string `json:"id,omitempty"`
	From      string `json:"from"`
	Port      string `json:"port,omitempty"`
	To        string `json:"to"`
	ToPort    string `json:"to_port,omitempty"`
	Condition string `json:"condition,omitempty"`
}

// Default port names.
const (
	PortIn  = "in"
	PortOut = "out"
)

// FromPort is the edge's output port, "out" when left out.
func (e Edge) FromPort() string {
	if e.Port == "" {
		return PortOut
	}
	return e.Port
}

// InPort is the edge's input port, "in" when left out.
func (e Edge) InPort() string {
	if e.ToPort == "" {
		return PortIn
	}
	return e.ToPort
}

// Key identifies the edge in problems and events: its id, or from:port->to:to_port.
func (e Edge) Key() string {
	if e.ID != "" {
		return e.ID
	}
	return fmt.Sprintf("%s:%s->%s:%s", e.From, e.FromPort(), e.To, e.InPort())
}

// Duration is a time.Duration written as a Go duration string ("30s", "24h").
type Duration time.Duration

// D returns the time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

func (d Duration) MarshalJSON() ([]byte, error) {
	return json.Marshal(time.Duration(d).String())
}

func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("a duration is a string such as \"30s\"")
	}
	v, err := parseDuration(s)
	if err != nil {
		return err
	}
	*d = Duration(v)
	return nil
}

func parseDuration(s string) (time.Duration, error) {
	v, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("%q is not a duration such as \"500ms\", \"30s\" or \"24h\"", s)
	}
	if v < 0 {
		return 0, fmt.Errorf("%q is negative", s)
	}
	return v, nil
}

// Marshal returns the document as indented JSON, the form the library saves.
func (d *Document) Marshal() ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(d); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
