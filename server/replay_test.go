package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/flows/engine"
	"github.com/sluicehq/sluice/server"
	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/storetest"
)

func discountDoc(id, expr string) string {
	d := map[string]any{"sluice": 1, "id": id,
		"nodes": []any{
			map[string]any{"id": "in", "type": "input"},
			map[string]any{"id": "price", "type": "transform", "params": map[string]any{"expr": expr}},
			map[string]any{"id": "out", "type": "output", "params": map[string]any{"value": "{tier, discount}"}},
		},
		"edges": []any{map[string]any{"from": "in", "to": "price"}, map[string]any{"from": "price", "to": "out"}}}
	b, _ := json.Marshal(d)
	return string(b)
}

type runMoves struct {
	Version    string       `json:"version"`
	Moves      []store.Move `json:"moves"`
	ReplayOf   string       `json:"replay_of"`
	ReplayedAs []string     `json:"replayed_as"`
	Trigger    string       `json:"trigger"`
}

// Retry on a chosen version, its refusals, replay and compare, through the API.
func TestRetryOnAVersionReplayAndCompareThroughTheAPI(t *testing.T) {
	storetest.Each(t, func(t *testing.T, r *store.Redis) {
		a := newAPI(t, r)
		id := a.saveFlow(discountDoc("x", `{tier: "small", discount: (.customer | tonumber)}`), nil)
		base := "/api/flows/" + id
		var saved server.SavedFlow
		run1 := a.start(id, map[string]any{"input": map[string]any{"customer": "Ada", "amount": 50}})
		if got := a.settle(id, run1); got.Status != "failed" || got.ErrorNode != "price" {
			t.Fatalf("run = %+v, want failed at price", got)
		}
		var rm runMoves
		a.must(200, "GET", base+"/runs/"+run1, nil).into(t, &rm)
		broken := rm.Version

		// A version without the node: refused, naming it and suggesting a replay.
		a.must(http.StatusOK, "PUT", base, `{"sluice": 1, "id": "`+id+`", "nodes": [{"id": "in", "type": "input"}, {"id": "out", "type": "output", "params": {"value": "."}}], "edges": [{"from": "in", "to": "out"}]}`).into(t, &saved)
		e := a.must(http.StatusConflict, "POST", base+"/runs/"+run1+"/retry", `{"version": "current"}`).errorBody(t)
		if e.Node != "price" || !strings.Contains(e.Message, `has no node "price"`) || !strings.Contains(e.Message, "/replay") || e.Path != "version" {
			t.Errorf("refusal = %+v, want node price, what is missing and a replay suggested", e)
		}
		// What the node reads is not in the state it received.
		a.must(http.StatusOK, "PUT", base, discountDoc(id, `{tier: "small", discount: .coupon.percent}`)).into(t, &saved)
		e = a.must(http.StatusConflict, "POST", base+"/runs/"+run1+"/retry", `{"version": "`+saved.Version+`"}`).errorBody(t)
		if e.Node != "price" || !strings.Contains(e.Message, ".coupon") {
			t.Errorf("refusal = %+v, want node price and .coupon named", e)
		}
		a.must(http.StatusNotFound, "POST", base+"/runs/"+run1+"/retry", `{"version": "abc"}`)
		a.must(http.StatusNotFound, "POST", base+"/runs/rnosuchrun/retry", `{"version": "current"}`)

		// The fix: retry with the current version.
		a.must(http.StatusOK, "PUT", base, discountDoc(id, `{tier: "small", discount: (.amount / 10)}`)).into(t, &saved)
		var rl server.RetryList
		a.must(http.StatusOK, "POST", base+"/runs/"+run1+"/retry", `{"version": "current", "by": "ops"}`).into(t, &rl)
		if len(rl.Retried) != 1 || !rl.Retried[0].Moved || rl.Retried[0].From != broken || rl.Retried[0].To != saved.Version || rl.Retried[0].Attempt != 2 {
			t.Fatalf("retried = %+v, want one move from %.7s to %.7s, attempt 2", rl.Retried, broken, saved.Version)
		}
		if got := a.settle(id, run1); got.Status != "succeeded" || string(got.Output) != `{"discount":5,"tier":"small"}` {
			t.Fatalf("retried run = %+v", got)
		}
		a.must(200, "GET", base+"/runs/"+run1, nil).into(t, &rm)
		if rm.Version != saved.Version || len(rm.Moves) != 1 || rm.Moves[0].By != "ops" || rm.Moves[0].Node != "price" {
			t.Errorf("run after the retry: %+v", rm)
		}
		a.must(http.StatusConflict, "POST", base+"/runs/"+run1+"/retry", `{"version": "current"}`) // nothing dead any more

		// Replay it on the broken version: a new run, linked both ways; compare says
		// which node now fails.
		var st server.Started
		a.must(http.StatusAccepted, "POST", base+"/runs/"+run1+"/replay", `{"version": "`+broken[:12]+`"}`).into(t, &st)
		if got := a.settle(id, st.Run); got.Status != "failed" {
			t.Fatalf("replay on the broken version = %+v", got)
		}
		var cmp engine.Comparison
		a.must(http.StatusOK, "GET", base+"/runs/"+st.Run+"/compare", nil).into(t, &cmp)
		if cmp.From != run1 || cmp.To != st.Run || cmp.Summary != "1 same, 1 now fails, 1 not run now" {
			t.Errorf("compare = %+v", cmp)
		}
		var replay runMoves
		a.must(200, "GET", base+"/runs/"+st.Run, nil).into(t, &replay)
		a.must(200, "GET", base+"/runs/"+run1, nil).into(t, &rm)
		if replay.ReplayOf != run1 || replay.Trigger != "replay" || len(rm.ReplayedAs) != 1 || rm.ReplayedAs[0] != st.Run {
			t.Errorf("links: replay %+v, original %+v", replay, rm)
		}
		// With reuse on the current version, from the input: the same output.
		var done run
		a.must(http.StatusOK, "POST", base+"/runs/"+run1+"/replay?wait=30s", `{"version": "current", "reuse": true}`).into(t, &done)
		if done.Status != "succeeded" || string(done.Output) != `{"discount":5,"tier":"small"}` {
			t.Errorf("replay with reuse = %+v", done)
		}
		a.must(http.StatusOK, "GET", base+"/runs/"+run1+"/compare?with="+done.ID, nil).into(t, &cmp)
		if cmp.Summary != "3 same" {
			t.Errorf("compare with the replay on the same version: %q, want 3 same", cmp.Summary)
		}
		a.must(http.StatusBadRequest, "GET", base+"/runs/"+run1+"/compare?with="+run1, nil)
		a.must(http.StatusNotFound, "POST", base+"/runs/rnosuchrun/replay", nil)
		a.must(http.StatusNotFound, "POST", base+"/runs/"+run1+"/replay", `{"checkpoint": "1-1"}`)
	})
}

// A run waiting at an approval moves to a new version: once decided, the steps after
// the approval are the new version's.
func TestAWaitingRunMovesToTheCurrentVersion(t *testing.T) {
	storetest.Each(t, func(t *testing.T, r *store.Redis) {
		a := newAPI(t, r)
		id, doc := a.flowDoc("approval", nil)
		a.must(http.StatusCreated, "PUT", "/api/flows/"+id, doc)
		base := "/api/flows/" + id + "/runs/"
		var waiting run
		a.must(http.StatusOK, "POST", "/api/flows/"+id+"/runs?wait=30s", `{"input": {"customer": "Ada"}}`).into(t, &waiting)
		if waiting.Status != "waiting" {
			t.Fatalf("run = %+v, want waiting", waiting)
		}
		// The new version sends a signed reply.
		fixed := strings.Replace(string(doc), `{sent: .reply}`, `{sent: (.reply + \" -- the team\")}`, 1)
		if fixed == string(doc) {
			t.Fatal("the edit did not apply")
		}
		a.must(http.StatusOK, "PUT", "/api/flows/"+id, fixed)
		var ml server.MoveList
		a.must(http.StatusOK, "POST", base+waiting.ID+"/move", `{"version": "current"}`).into(t, &ml)
		if len(ml.Moved) != 1 || ml.Moved[0].Node != "review" || ml.Moved[0].From == ml.Moved[0].To {
			t.Fatalf("moved = %+v", ml)
		}
		a.must(http.StatusOK, "POST", base+waiting.ID+"/resume", `{"decision": "approve"}`)
		if got := a.settle(id, waiting.ID); got.Status != "succeeded" || !strings.Contains(string(got.Output), "-- the team") {
			t.Errorf("moved run after approval = %+v, want the new version's signed reply", got)
		}
		var rm runMoves
		a.must(200, "GET", base+waiting.ID, nil).into(t, &rm)
		if len(rm.Moves) != 1 || !rm.Moves[0].Waiting {
			t.Errorf("moves = %+v, want one made while waiting", rm.Moves)
		}
		// A finished run does not move; nor one whose approval the version lacks.
		a.must(http.StatusConflict, "POST", base+waiting.ID+"/move", `{"version": "current"}`)
		var w2 run
		a.must(http.StatusOK, "POST", "/api/flows/"+id+"/runs?wait=30s", `{"input": {"customer": "Bo"}}`).into(t, &w2)
		a.must(http.StatusOK, "PUT", "/api/flows/"+id, `{"sluice": 1, "id": "`+id+`", "nodes": [{"id": "in", "type": "input"}, {"id": "out", "type": "output", "params": {"value": "."}}], "edges": [{"from": "in", "to": "out"}]}`)
		e := a.must(http.StatusConflict, "POST", base+w2.ID+"/move", `{"version": "current"}`).errorBody(t)
		if e.Node != "review" || !strings.Contains(e.Message, `no node "review"`) {
			t.Errorf("refusal = %+v", e)
		}
		a.must(http.StatusBadRequest, "POST", base+w2.ID+"/move", `{}`)
	})
}

// A bulk replay through the API: the estimate first, then a job that a runner works
// on, its progress and report, and a bulk move of waiting runs.
func TestBulkReplayAndBulkMoveThroughTheAPI(t *testing.T) {
	storetest.Each(t, func(t *testing.T, r *store.Redis) {
		a := newAPI(t, r)
		id := a.saveFlow(discountDoc("x", `{tier: "small", discount: (.customer | tonumber)}`), nil)
		base := "/api/flows/" + id
		for i := 0; i < 6; i++ {
			rid := a.start(id, map[string]any{"input": map[string]any{"customer": "Ada", "amount": 10 * i}})
			if got := a.settle(id, rid); got.Status != "failed" {
				t.Fatalf("run = %+v", got)
			}
		}
		var est engine.BulkEstimate
		a.must(http.StatusOK, "POST", base+"/replays", `{"query": {"status": "failed", "since": "24h", "error": "tonumber"}, "dry_run": true}`).into(t, &est)
		if est.Runs != 6 {
			t.Fatalf("estimate = %+v, want 6 runs", est)
		}
		a.must(http.StatusBadRequest, "POST", base+"/replays", `{"query": {"since": "yesterday"}}`)
		a.must(http.StatusOK, "PUT", base, discountDoc(id, `{tier: "small", discount: (.amount / 10)}`))
		var made server.BulkCreated
		a.must(http.StatusAccepted, "POST", base+"/replays", `{"query": {"status": "failed", "since": "24h"}, "version": "current", "rate": 100}`).into(t, &made)
		if made.Job == "" || made.Estimate.Runs != 6 {
			t.Fatalf("made = %+v", made)
		}
		ctx, stop := context.WithCancel(context.Background())
		defer stop()
		go func() {
			_ = a.e.NewBulkRunner(engine.BulkRunnerOptions{Every: 50 * time.Millisecond, Flows: func(context.Context) ([]string, error) { return []string{id}, nil }}).Run(ctx)
		}()
		var rep engine.BulkReport
		eventually(t, 30*time.Second, func() string {
			a.must(http.StatusOK, "GET", base+"/replays/"+made.Job, nil).into(t, &rep)
			if rep.Status != store.JobDone {
				return fmt.Sprintf("job %s: %d of %d done", rep.Status, rep.Done, rep.Total)
			}
			return ""
		})
		if rep.Done != 6 || len(rep.Results) != 6 || rep.Results[0].Summary != "1 same, 1 fixed, 1 new" {
			t.Errorf("report = %+v", rep)
		}
		var jobs server.BulkJobList
		a.must(http.StatusOK, "GET", base+"/replays", nil).into(t, &jobs)
		if len(jobs.Jobs) != 1 || jobs.Jobs[0].ID != made.Job {
			t.Errorf("jobs = %+v", jobs)
		}
		a.must(http.StatusConflict, "POST", base+"/replays/"+made.Job+"/cancel", nil)
		a.must(http.StatusNotFound, "GET", base+"/replays/bjnosuchjob", nil)

		// Waiting runs in bulk.
		wid, doc := a.flowDoc("approval", nil)
		a.must(http.StatusCreated, "PUT", "/api/flows/"+wid, doc)
		for _, c := range []string{"Ada", "Bo"} {
			var w run
			a.must(http.StatusOK, "POST", "/api/flows/"+wid+"/runs?wait=30s", `{"input": {"customer": "`+c+`"}}`).into(t, &w)
		}
		a.must(http.StatusOK, "PUT", "/api/flows/"+wid, strings.Replace(string(doc), `{sent: .reply}`, `{sent: (.reply + \" -- the team\")}`, 1))
		var bm server.BulkMoved
		a.must(http.StatusOK, "POST", "/api/flows/"+wid+"/runs/move", `{"version": "current", "query": {"node": "review"}}`).into(t, &bm)
		if len(bm.Moved) != 2 || len(bm.Refused) != 0 {
			t.Errorf("bulk move = %+v, want both waiting runs moved", bm)
		}
	})
}
