package flows_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/sluicehq/sluice/flows"
)

func mustTime(t *testing.T, s string) time.Time {
	t.Helper()
	v, err := time.Parse(time.RFC3339, s)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func TestCronTicks(t *testing.T) {
	for _, tc := range []struct {
		name, cron, tz, at, prev, next string
	}{
		{"every ticks on multiples of its interval since the epoch, the same in every process", "@every 10s", "", "2026-03-01T10:00:07Z", "2026-03-01T10:00:00Z", "2026-03-01T10:00:10Z"},
		{"a tick exactly now is the previous tick, and the next is one interval on", "@every 1m", "", "2026-03-01T10:01:00Z", "2026-03-01T10:01:00Z", "2026-03-01T10:02:00Z"},
		{"five fields are read in the schedule's time zone", "0 9 * * *", "Europe/Paris", "2026-03-02T12:00:00Z", "2026-03-02T08:00:00Z", "2026-03-03T08:00:00Z"},
		{"weekdays only: Monday's tick follows Friday's", "30 6 * * 1-5", "", "2026-03-07T12:00:00Z", "2026-03-06T06:30:00Z", "2026-03-09T06:30:00Z"},
		{"a yearly tick is found a year back", "@yearly", "", "2026-06-01T00:00:00Z", "2026-01-01T00:00:00Z", "2027-01-01T00:00:00Z"},
		{"every minute: the tick at the start of this minute", "* * * * *", "", "2026-03-01T10:00:30Z", "2026-03-01T10:00:00Z", "2026-03-01T10:01:00Z"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := flows.ParseCron(tc.cron, tc.tz)
			if err != nil {
				t.Fatal(err)
			}
			at := mustTime(t, tc.at)
			if got := c.Prev(at); !got.Equal(mustTime(t, tc.prev)) {
				t.Errorf("Prev(%s) = %s, want %s", tc.at, got, tc.prev)
			}
			if got := c.Next(at); !got.Equal(mustTime(t, tc.next)) {
				t.Errorf("Next(%s) = %s, want %s", tc.at, got, tc.next)
			}
		})
	}
}

func TestCronRefusesWhatItCannotRun(t *testing.T) {
	for _, tc := range []struct{ cron, tz string }{
		{"0 0 9 * * *", ""}, {"61 * * * *", ""}, {"@fortnightly", ""}, {"@every 0s", ""}, {"@every 1500ms", ""},
		{"TZ=Europe/Paris 0 9 * * *", ""}, {"0 9 * * *", "Mars/Olympus"}, {"0 9 * * *", "Local"}, {"", ""},
	} {
		if _, err := flows.ParseCron(tc.cron, tc.tz); err == nil {
			t.Errorf("ParseCron(%q, %q) accepted it", tc.cron, tc.tz)
		}
	}
}

func TestScheduleKeyFollowsWhatItDoesNotWhereItIs(t *testing.T) {
	var a, b, c flows.Schedule
	_ = json.Unmarshal([]byte(`{"cron": "@hourly", "input": {"a": 1, "b": 2}}`), &a)
	_ = json.Unmarshal([]byte(`{"cron": "@hourly", "input": {"b": 2, "a": 1}, "enabled": false}`), &b)
	_ = json.Unmarshal([]byte(`{"cron": "@hourly", "input": {"a": 1, "b": 3}}`), &c)
	if a.Key() != b.Key() {
		t.Errorf("the same schedule written differently (key order, enabled) has two keys: %s, %s", a.Key(), b.Key())
	}
	if a.Key() == c.Key() {
		t.Errorf("schedules with different inputs share key %s", a.Key())
	}
}
