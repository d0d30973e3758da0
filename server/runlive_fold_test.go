package server

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/store"
)

// The run page folds a run's events into its steps in progress as the editor's run view
// does: a rate-limit wait shows as waiting until the step goes on, and a step that
// commits, fails for good or is queued again is no longer in progress.
func TestFoldLiveStepsOfARun(t *testing.T) {
	ev := func(ms int, typ, node, data string) store.Event {
		e := store.Event{ID: fmt.Sprintf("%d-0", 1700000000000+ms), Type: typ, Node: node}
		if data != "" {
			e.Data = json.RawMessage(data)
		}
		return e
	}
	show := func(evs ...store.Event) string {
		var out []string
		for _, l := range foldLive(evs) {
			s := l.Node + ":" + l.Status
			if l.RateLimit {
				s += "(" + l.Note + ")"
			}
			if l.Attempt > 1 {
				s += fmt.Sprintf("#%d", l.Attempt)
			}
			out = append(out, s)
		}
		return strings.Join(out, " ")
	}
	wait := `{"waiting": true, "provider": "openai", "model": "gpt", "wait_ms": 900}`
	for _, tc := range []struct {
		name string
		evs  []store.Event
		want string
	}{
		{"a started step runs", []store.Event{ev(0, "start", "a", `{"attempt": 1}`)}, "a:running"},
		{"a rate-limit wait shows as waiting for it",
			[]store.Event{ev(0, "start", "a", `{"attempt": 1}`), ev(1, "rate_limit", "a", wait)},
			"a:waiting(waiting for its turn under the rate limit of openai (model gpt))"},
		{"the wait ends when the step goes on",
			[]store.Event{ev(0, "start", "a", `{"attempt": 1}`), ev(1, "rate_limit", "a", wait), ev(2, "rate_limit", "a", `{"waiting": false, "provider": "openai"}`)},
			"a:running"},
		{"a committed step is no longer in progress",
			[]store.Event{ev(0, "start", "a", `{"attempt": 1}`), ev(1, "rate_limit", "a", wait), ev(2, "step", "a", `{}`)}, ""},
		{"a step failed for good or queued again is no longer in progress",
			[]store.Event{ev(0, "start", "a", `{}`), ev(1, "start", "b", `{}`), ev(2, "dead", "a", `{}`), ev(3, "retried", "b", `{}`)}, ""},
		{"a retried attempt that waits again, its attempt shown, in the order the steps last moved",
			[]store.Event{ev(0, "start", "b", `{"attempt": 1}`), ev(1, "start", "a", `{"attempt": 2}`), ev(2, "rate_limit", "a", wait), ev(3, "token", "b", `{"text": "x"}`)},
			"a:waiting(waiting for its turn under the rate limit of openai (model gpt))#2 b:running"},
		{"events of the run itself are no step", []store.Event{ev(0, "run", "", `{"status": "running"}`)}, ""},
	} {
		if got := show(tc.evs...); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}
