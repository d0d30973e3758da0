package engine

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/sluicehq/sluice/flows"
	"github.com/sluicehq/sluice/store"
)

// TestStepEventIsWhatEncodingJSONWrites pins that the hand-written event of a plain step
// is byte for byte what json.Marshal writes for it, for the durations and kinds a step
// has; steps with more to say go through encoding/json.
func TestStepEventIsWhatEncodingJSONWrites(t *testing.T) {
	for _, kind := range []string{"step", "join", "resume", "wait"} {
		for _, d := range []time.Duration{0, time.Microsecond, 1500 * time.Microsecond, 123456789 * time.Microsecond, 3 * time.Hour} {
			ms := float64(d.Microseconds()) / 1000
			want, _ := json.Marshal(map[string]any{"status": "done", "duration_ms": ms, "kind": kind})
			if got := stepEvent(kind, d, &flows.Result{}); string(got) != string(want) {
				t.Errorf("%s after %s: %s, encoding/json writes %s", kind, d, got, want)
			}
		}
	}
	got := stepEvent("step", time.Millisecond, &flows.Result{Ports: []string{"yes"}, Pinned: true})
	want := `{"duration_ms":1,"kind":"step","pinned":true,"ports":["yes"],"status":"done"}`
	if string(got) != want {
		t.Errorf("a step with ports and a pin: %s, want %s", got, want)
	}
}

// TestGateRuleOnTheRunStatus pins the gate's decision on a run's status, the one rule the
// worker applies before a step runs.
func TestGateRuleOnTheRunStatus(t *testing.T) {
	for _, tc := range []struct {
		name                 string
		status               string
		known, cancelledHere bool
		goOn, cancelled      bool
	}{
		{"a running run goes on", store.StatusRunning, true, false, true, false},
		{"a queued run goes on", store.StatusQueued, true, false, true, false},
		{"a waiting run goes on (a resume)", store.StatusWaiting, true, false, true, false},
		{"a failed run's branches in flight go on", store.StatusFailed, true, false, true, false},
		{"a cancelled run stops, and is remembered", store.StatusCancelled, true, false, false, true},
		{"a succeeded run stops", store.StatusSucceeded, true, false, false, false},
		{"a run that is gone stops", "", true, false, false, false},
		{"unknown status: the step runs", "", false, false, true, false},
		{"unknown status, seen cancelled here: it stops", "", false, true, false, false},
		{"a status read wins over this process's memory", store.StatusRunning, true, true, true, false},
	} {
		goOn, cancelled := runGoesOn(tc.status, tc.known, tc.cancelledHere)
		if goOn != tc.goOn || cancelled != tc.cancelled {
			t.Errorf("%s: goOn %v cancelled %v, want %v %v", tc.name, goOn, cancelled, tc.goOn, tc.cancelled)
		}
	}
}

// TestInitialStateIsTheInputOnlyWhenNothingChangesIt pins the shortcut Start takes (the
// input's JSON for the state's): only where InitialState gives the same bytes.
func TestInitialStateIsTheInputOnlyWhenNothingChangesIt(t *testing.T) {
	appendMsgs := flows.Reducers{"msgs": flows.Append}
	for _, tc := range []struct {
		name string
		plan *flows.Plan
		in   any
		same bool
	}{
		{"no defaults, no reducers", &flows.Plan{}, map[string]any{"a": 1.0}, true},
		{"a reducer on another key", &flows.Plan{Reducers: appendMsgs}, map[string]any{"a": 1.0}, true},
		{"an append reducer on an input key", &flows.Plan{Reducers: appendMsgs}, map[string]any{"msgs": []any{"x"}}, false},
		{"declared defaults", &flows.Plan{Defaults: map[string]any{"d": true}}, map[string]any{"a": 1.0}, false},
		{"an input that is not an object", &flows.Plan{}, "text", false},
	} {
		if got := sameAsInput(tc.plan, tc.in); got != tc.same {
			t.Errorf("%s: same %v, want %v", tc.name, got, tc.same)
		}
		if tc.same {
			state, err := InitialState(tc.plan, tc.in)
			if err != nil {
				t.Fatal(err)
			}
			a, _ := json.Marshal(state)
			b, _ := json.Marshal(tc.in)
			if string(a) != string(b) {
				t.Errorf("%s: the state %s is not the input %s", tc.name, a, b)
			}
		}
	}
}
