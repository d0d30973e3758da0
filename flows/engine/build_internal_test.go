package engine

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/sluicehq/sluice/flows"
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
