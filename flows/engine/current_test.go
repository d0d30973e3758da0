package engine_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/flows/engine"
	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/storetest"
)

// Storing a version and making it current are two operations: a run started on, or
// forked from, an older version stores that version (so workers can load it) but leaves
// the flow's current version alone. Only publishing (saving) moves it.
func TestRunsOfAnOlderVersionLeaveCurrentAlone(t *testing.T) {
	storetest.Each(t, func(t *testing.T, r *store.Redis) {
		ctx := context.Background()
		v := newEnv(t, r)
		older := v.compile(threeSteps)
		newer, _, err := v.e.Compile([]byte(strings.Replace(strings.ReplaceAll(threeSteps, `"FLOW"`, `"`+older.Flow+`"`), `"sluice": 1,`, `"sluice": 1, "name": "newer",`, 1)))
		if err != nil {
			t.Fatal(err)
		}
		if newer.Version == older.Version {
			t.Fatal("the two versions must differ")
		}
		if err := v.e.Publish(ctx, newer); err != nil {
			t.Fatal(err)
		}
		current := func(when string) {
			t.Helper()
			got, err := r.CurrentVersion(ctx, older.Flow)
			if err != nil {
				t.Fatal(err)
			}
			if got != newer.Version {
				t.Errorf("%s: current version is %.12s (the older one), want %.12s", when, got, newer.Version)
			}
		}
		// A fresh engine has published nothing itself, as a process that only starts
		// runs of a pinned version.
		e2 := engine.New(r, v.reg, engine.Options{Logger: testLogger(t)})
		id, err := e2.Start(ctx, older, json.RawMessage(`{}`), engine.StartOptions{})
		if err != nil {
			t.Fatal(err)
		}
		current("after starting a run pinned to the older version")
		v.work(older)
		run := v.wait(older, id)
		mustStatus(t, run, store.StatusSucceeded)
		if run.Version != older.Version {
			t.Errorf("run version %.12s, want the older %.12s", run.Version, older.Version)
		}
		first := v.checkpoints(older, id)[0]
		fork, err := engine.New(r, v.reg, engine.Options{Logger: testLogger(t)}).Fork(ctx, older.Flow, id, first.ID, nil, engine.ForkOptions{})
		if err != nil {
			t.Fatal(err)
		}
		current("after forking a run of the older version")
		if got := v.wait(older, fork); got.Version != older.Version {
			t.Errorf("fork version %.12s, want the older %.12s", got.Version, older.Version)
		}
		// Publishing the older version again makes it current: that is a rollback.
		if err := v.e.Publish(ctx, older); err != nil {
			t.Fatal(err)
		}
		if got, _ := r.CurrentVersion(ctx, older.Flow); got != older.Version {
			t.Errorf("after publishing the older version again, current is %.12s, want %.12s", got, older.Version)
		}
	})
}
