package engine_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/storetest"
)

func scripted(params string) string {
	return `{"sluice": 1, "id": "FLOW",
	 "settings": {"max_attempts": 3, "claim_after": "1s"},
	 "nodes": [
	  {"id": "in", "type": "input"},
	  {"id": "work", "type": "script", "params": ` + params + `},
	  {"id": "out", "type": "output", "params": {"value": ".done"}}
	 ],
	 "edges": [{"from": "in", "to": "work"}, {"from": "work", "to": "out"}]}`
}

func TestStepThatFailsTwiceIsRetriedAndCommitsOnce(t *testing.T) {
	storetest.Conformance(t, func(t *testing.T, r *store.Redis) {
		v := newEnv(t, r)
		p := v.compile(scripted(`{"fail": 2, "update": {"done": true}}`))
		v.work(p)
		run := v.run(p, `{}`)
		mustStatus(t, run, store.StatusSucceeded)
		if got := v.calls(p, run.ID, "work"); got != 3 {
			t.Errorf("work was called %d times, want 3 (two failures, one success)", got)
		}
		// The history has each failed attempt with its error, then the one commit.
		var work []store.Checkpoint
		var errs []string
		for _, c := range v.checkpoints(p, run.ID) {
			switch {
			case c.Node == "work" && c.Kind == store.KindError:
				errs = append(errs, fmt.Sprintf("%d:%s", c.Attempt, c.Error))
			case c.Node == "work":
				work = append(work, c)
			}
		}
		if len(work) != 1 || work[0].Attempt != 3 {
			t.Errorf("work checkpoints %+v, want exactly one, from attempt 3", work)
		}
		if got := strings.Join(errs, ", "); got != "1:scripted failure 1, 2:scripted failure 2" {
			t.Errorf("failed attempts in the history: %s, want both with their errors", got)
		}
		v.drained(p)
	})
}

func deadLetterCase(t *testing.T, r *store.Redis, params, wantErr string) {
	v := newEnv(t, r)
	p := v.compile(scripted(params))
	v.work(p)
	run := v.run(p, `{}`)
	mustStatus(t, run, store.StatusFailed)
	if !strings.Contains(run.Error, wantErr) || run.ErrorNode != "work" {
		t.Errorf("run error %q at node %q, want %q at work", run.Error, run.ErrorNode, wantErr)
	}
	dead, err := r.DeadLetters(context.Background(), p.Flow, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(dead) != 1 || dead[0].Run != run.ID || dead[0].Node != "work" || !strings.Contains(dead[0].Error, wantErr) {
		t.Fatalf("dead letters %+v, want one for run %s at work", dead, run.ID)
	}
	if dead[0].Attempts != 3 {
		t.Errorf("dead letter after %d attempts, want max_attempts (3)", dead[0].Attempts)
	}
	if got := v.calls(p, run.ID, "work"); got != 3 {
		t.Errorf("work was called %d times, want 3", got)
	}
	v.drained(p)
}

func TestStepThatAlwaysFailsGoesToTheDeadLettersAfterMaxAttempts(t *testing.T) {
	storetest.Conformance(t, func(t *testing.T, r *store.Redis) {
		deadLetterCase(t, r, `{"always_fail": true}`, "scripted failure 3")
	})
}

func TestPanickingStepIsRecoveredLikeAnError(t *testing.T) {
	storetest.Each(t, func(t *testing.T, r *store.Redis) {
		deadLetterCase(t, r, `{"panic": 100}`, "component panicked: scripted panic 3")
	})
}

func TestPermanentErrorGoesToTheDeadLettersAtOnce(t *testing.T) {
	storetest.Each(t, func(t *testing.T, r *store.Redis) {
		v := newEnv(t, r)
		p := v.compile(scripted(`{"always_fail": true, "permanent": true}`))
		v.work(p)
		run := v.run(p, `{}`)
		mustStatus(t, run, store.StatusFailed)
		if got := v.calls(p, run.ID, "work"); got != 1 {
			t.Errorf("work was called %d times, want 1: a permanent error is not retried", got)
		}
		v.drained(p)
	})
}

func TestRetryingADeadLetterCompletesTheRun(t *testing.T) {
	storetest.Conformance(t, func(t *testing.T, r *store.Redis) {
		v := newEnv(t, r)
		// Fails its first three calls: dead after max_attempts; the retry is call 4.
		p := v.compile(scripted(`{"fail": 3, "update": {"done": "yes"}}`))
		v.work(p)
		run := v.run(p, `{}`)
		mustStatus(t, run, store.StatusFailed)
		dead, _ := r.DeadLetters(context.Background(), p.Flow, 10)
		if len(dead) != 1 {
			t.Fatalf("dead letters: %+v", dead)
		}
		if _, err := r.RetryDead(context.Background(), p.Flow, dead[0].ID); err != nil {
			t.Fatal(err)
		}
		run = v.wait(p, run.ID)
		for run.Status == store.StatusRunning || run.Status == store.StatusFailed && run.Dead == 0 && run.Finished == nil {
			time.Sleep(10 * time.Millisecond)
			run = v.wait(p, run.ID)
		}
		mustStatus(t, run, store.StatusSucceeded)
		if got := string(run.Output()); got != `"yes"` {
			t.Errorf("output %s after the retry, want \"yes\"", got)
		}
		if dead, _ := r.DeadLetters(context.Background(), p.Flow, 10); len(dead) != 0 {
			t.Errorf("dead letters after the retry: %+v, want none", dead)
		}
		v.drained(p)
	})
}

func TestCancelledRunDropsItsPendingSteps(t *testing.T) {
	storetest.Conformance(t, func(t *testing.T, r *store.Redis) {
		v := newEnv(t, r)
		p := v.compile(`{"sluice": 1, "id": "FLOW",
		 "nodes": [
		  {"id": "in", "type": "input"},
		  {"id": "slow", "type": "script", "params": {"sleep": "300ms"}},
		  {"id": "after", "type": "script", "params": {}},
		  {"id": "out", "type": "output"}
		 ],
		 "edges": [{"from": "in", "to": "slow"}, {"from": "slow", "to": "after"}, {"from": "after", "to": "out"}]}`)
		v.work(p)
		id := v.start(p, `{}`)
		deadline := time.Now().Add(10 * time.Second)
		for v.calls(p, id, "slow") == 0 && time.Now().Before(deadline) {
			time.Sleep(5 * time.Millisecond)
		}
		if err := v.e.Cancel(context.Background(), p.Flow, id); err != nil {
			t.Fatal(err)
		}
		run := v.wait(p, id)
		mustStatus(t, run, store.StatusCancelled)
		// Wait until the slow step's result has been dropped.
		for time.Now().Before(deadline) {
			if run, _ = v.e.Get(context.Background(), p.Flow, id); run.Live == 0 {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		if run.Live != 0 {
			t.Fatalf("live activations after cancel: %d", run.Live)
		}
		if got := v.calls(p, id, "after"); got != 0 {
			t.Errorf("the step after the cancelled one ran %d times, want 0", got)
		}
		if err := v.e.Cancel(context.Background(), p.Flow, id); err == nil || !strings.Contains(err.Error(), "already cancelled") {
			t.Errorf("cancelling twice: %v, want a conflict", err)
		}
		v.drained(p)
	})
}

func TestRetriedStepSeesTheTurnsItsEarlierAttemptsSaved(t *testing.T) {
	storetest.Each(t, func(t *testing.T, r *store.Redis) {
		v := newEnv(t, r)
		p := v.compile(scripted(`{"fail": 2, "turns": true, "final": true}`))
		v.work(p)
		run := v.run(p, `{}`)
		mustStatus(t, run, store.StatusSucceeded)
		if got := string(run.Outputs["work"]); got != `{"call":3,"turns":[{"call":1},{"call":2}]}` {
			t.Errorf("third attempt's output %s, want it to list the turns of attempts 1 and 2", got)
		}
		turns := 0
		for _, c := range v.checkpoints(p, run.ID) {
			if c.Kind == "turn" {
				turns++
			}
		}
		if turns != 3 {
			t.Errorf("%d turn entries in the history, want 3", turns)
		}
	})
}
