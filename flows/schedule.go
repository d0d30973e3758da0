package flows

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	_ "time/tzdata" // time zones validate the same on every host, with or without a zoneinfo

	"github.com/robfig/cron/v3"
)

// Schedule starts runs of a flow on a clock: one run per tick, with Input as the run's
// input. It is part of the flow's settings, so changing it makes a new version.
type Schedule struct {
	// Cron is a five-field cron expression (minute hour day-of-month month
	// day-of-week), a descriptor (@hourly, @daily, @weekly, @monthly, @yearly) or
	// "@every DURATION" (at least one second).
	Cron string `json:"cron"`
	// Input is every run's input; empty means {}.
	Input json.RawMessage `json:"input,omitempty"`
	// Timezone is the IANA zone the cron fields are read in; empty means UTC.
	Timezone string `json:"timezone,omitempty"`
	// Enabled false keeps the schedule in the document without starting runs.
	Enabled *bool `json:"enabled,omitempty"`
}

// IsEnabled reports whether the schedule starts runs (true unless "enabled": false).
func (s Schedule) IsEnabled() bool { return s.Enabled == nil || *s.Enabled }

// Key identifies a schedule by what it does — cron, time zone and input — and not by
// its position in the list, so that a pause (kept in Redis) stays with its schedule when
// others are added or removed. Editing a schedule gives it a new key.
func (s Schedule) Key() string {
	in := "{}"
	if len(s.Input) > 0 {
		if v, err := DecodeJSON(s.Input); err == nil {
			b, _ := json.Marshal(v) // canonical: compact, object keys sorted
			in = string(b)
		}
	}
	sum := sha256.Sum256([]byte(strings.TrimSpace(s.Cron) + "\x00" + s.Timezone + "\x00" + in))
	return hex.EncodeToString(sum[:6])
}

// Cron is a parsed schedule expression: it answers when it fires.
type Cron struct {
	spec  cron.Schedule
	every time.Duration // for "@every": ticks are the multiples of every since the Unix epoch
	loc   *time.Location
}

var cronParser = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// ParseCron parses a schedule's cron expression in a time zone ("" for UTC).
func ParseCron(expr, timezone string) (*Cron, error) {
	expr = strings.TrimSpace(expr)
	if strings.HasPrefix(expr, "TZ=") || strings.HasPrefix(expr, "CRON_TZ=") {
		return nil, fmt.Errorf("write the time zone in the schedule's \"timezone\", not in the expression")
	}
	loc, err := loadTimezone(timezone)
	if err != nil {
		return nil, err
	}
	if rest, ok := strings.CutPrefix(expr, "@every "); ok {
		d, err := time.ParseDuration(strings.TrimSpace(rest))
		if err != nil {
			return nil, fmt.Errorf("@every needs a duration such as 30s, 5m or 1h: %v", err)
		}
		if d < time.Second || d%time.Second != 0 {
			return nil, fmt.Errorf("@every %s: the interval is whole seconds, at least 1s", d)
		}
		return &Cron{every: d, loc: loc}, nil
	}
	spec, err := cronParser.Parse(expr)
	if err != nil {
		return nil, fmt.Errorf("%v (five fields: minute hour day-of-month month day-of-week, e.g. \"0 9 * * 1-5\"; or @hourly, @daily, @every 10m)", err)
	}
	if s, ok := spec.(*cron.SpecSchedule); ok {
		s.Location = loc
	}
	return &Cron{spec: spec, loc: loc}, nil
}

func loadTimezone(name string) (*time.Location, error) {
	if name == "" || name == "UTC" {
		return time.UTC, nil
	}
	if name == "Local" {
		return nil, fmt.Errorf("\"Local\" differs from host to host: name a zone such as Europe/Paris")
	}
	loc, err := time.LoadLocation(name)
	if err != nil {
		return nil, fmt.Errorf("unknown time zone %q (an IANA name such as Europe/Paris or America/New_York)", name)
	}
	return loc, nil
}

// Next is the first tick strictly after t (zero if there is none within five years).
func (c *Cron) Next(t time.Time) time.Time {
	if c.every > 0 {
		d := c.every.Milliseconds()
		return time.UnixMilli((t.UnixMilli()/d + 1) * d).UTC()
	}
	return c.spec.Next(t).UTC()
}

// Prev is the last tick at or before t (zero if there is none within five years).
func (c *Cron) Prev(t time.Time) time.Time {
	if c.every > 0 {
		d := c.every.Milliseconds()
		return time.UnixMilli(t.UnixMilli() / d * d).UTC()
	}
	// Look back over growing windows; the first window that holds a tick holds few,
	// so walking forward through it is short.
	for _, w := range []time.Duration{time.Minute, time.Hour, 24 * time.Hour, 32 * 24 * time.Hour, 367 * 24 * time.Hour, 5 * 366 * 24 * time.Hour} {
		tick := c.spec.Next(t.Add(-w))
		if tick.IsZero() || tick.After(t) {
			continue
		}
		for {
			n := c.spec.Next(tick)
			if n.IsZero() || n.After(t) {
				return tick.UTC()
			}
			tick = n
		}
	}
	return time.Time{}
}

// NextN lists the next n ticks after t.
func (c *Cron) NextN(t time.Time, n int) []time.Time {
	out := make([]time.Time, 0, n)
	for len(out) < n {
		t = c.Next(t)
		if t.IsZero() {
			break
		}
		out = append(out, t)
	}
	return out
}

// checkScheduleInputs checks every schedule's input as the entry node will check it when
// the schedule starts a run: a refused input would fail every tick.
func (c *checker) checkScheduleInputs(entry Component) {
	ic, ok := entry.(interface{ CheckInput(v any) error })
	if !ok {
		return
	}
	for i, s := range c.doc.Settings.Schedules {
		var in any = map[string]any{}
		if len(s.Input) > 0 {
			v, err := DecodeJSON(s.Input)
			if err != nil {
				continue // the document parsed, so this does not happen
			}
			in = v
		}
		if err := ic.CheckInput(in); err != nil {
			msg := err.Error()
			var fe *Error
			if errors.As(err, &fe) && fe.Message != "" {
				msg = fe.Message
			}
			c.add(Problem{Code: CodeInvalidValue, Path: fmt.Sprintf("settings.schedules[%d].input", i),
				Message: "the input node refuses this input: " + msg})
		}
	}
}
