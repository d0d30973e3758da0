package engine_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/flows"
	"github.com/sluicehq/sluice/flows/engine"
	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/storetest"
)

const counter = `{"sluice": 1, "id": "FLOW",
 "settings": {"checkpoint_ttl": "1h", "keep_last": KEEP},
 "nodes": [
  {"id": "in", "type": "input"},
  {"id": "double", "type": "transform", "params": {"expr": "{n: (.n * 2)}"}},
  {"id": "plus", "type": "transform", "params": {"expr": "{n: (.n + 1)}"}},
  {"id": "out", "type": "output", "params": {"value": ".n"}}
 ],
 "edges": [{"from": "in", "to": "double"}, {"from": "double", "to": "plus"}, {"from": "plus", "to": "out"}]}`

func TestHistoryListsEveryStepWithItsStateAndDiffs(t *testing.T) {
	storetest.Conformance(t, func(t *testing.T, r *store.Redis) {
		v := newEnv(t, r)
		p := v.compile(strings.Replace(counter, "KEEP", "0", 1))
		v.work(p)
		run := v.run(p, `{"n": 5}`)
		mustStatus(t, run, store.StatusSucceeded)
		ctx := context.Background()
		cps, err := v.e.Checkpoints(ctx, p.Flow, run.ID)
		if err != nil {
			t.Fatal(err)
		}
		var nodes []string
		for _, c := range cps {
			nodes = append(nodes, c.Node)
		}
		if strings.Join(nodes, ",") != ",in,double,plus,out" {
			t.Fatalf("history %v", nodes)
		}
		for i, c := range cps[1:] {
			if c.Parent != cps[i].ID || c.Step != i+1 {
				t.Errorf("checkpoint %d: parent %s step %d, want parent %s step %d", i+1, c.Parent, c.Step, cps[i].ID, i+1)
			}
		}
		dbl, err := v.e.Checkpoint(ctx, p.Flow, run.ID, cps[2].ID)
		if err != nil {
			t.Fatal(err)
		}
		if string(dbl.Update) != `{"n":10}` || !strings.Contains(string(dbl.State), `"n":10`) {
			t.Errorf("double's checkpoint: update %s state %s", dbl.Update, dbl.State)
		}
		diff, err := v.e.Diff(ctx, p.Flow, run.ID, cps[1].ID, cps[3].ID)
		if err != nil {
			t.Fatal(err)
		}
		if len(diff) != 1 || diff[0].Path != "n" || diff[0].Op != "replace" || diff[0].From != json.Number("5") || diff[0].To != json.Number("11") {
			t.Errorf("diff %+v, want n replaced 5 → 11", diff)
		}
		if _, err := v.e.Checkpoint(ctx, p.Flow, run.ID, "1-1"); flows.ErrorCode(err) != flows.NotFound {
			t.Errorf("missing checkpoint: %v, want not found", err)
		}
		info, err := v.e.Info(ctx, p.Flow, run.ID)
		if err != nil || info.StorageBytes <= 0 {
			t.Errorf("storage bytes %d (%v), want the run's size", info.StorageBytes, err)
		}
	})
}

// An input node's output is the run's input: its run keeps that once (the run hash's
// input), and the history — what the run page, the API's checkpoints, the CLI and MCP
// read — still shows it as the input node's output, in the list and for one checkpoint.
func TestAnInputNodesOutputIsKeptOnceAndTheHistoryShowsIt(t *testing.T) {
	storetest.Conformance(t, func(t *testing.T, r *store.Redis) {
		v := newEnv(t, r)
		p := v.compile(strings.Replace(counter, "KEEP", "0", 1))
		v.work(p)
		note := strings.Repeat("kept once ", 40)
		run := v.run(p, `{"n": 5, "note": "`+note+`"}`)
		mustStatus(t, run, store.StatusSucceeded)
		ctx := context.Background()
		raw, err := r.Client.XRange(ctx, store.FlowKeys(p.Flow).Ckpt(run.ID), "-", "+").Result()
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range raw {
			for f, v := range m.Values {
				if s, _ := v.(string); strings.Contains(s, note) {
					t.Errorf("checkpoint entry %s's %q holds the input again", m.ID, f)
				}
			}
		}
		want := `{"n":5,"note":"` + note + `"}`
		cps, err := v.e.Checkpoints(ctx, p.Flow, run.ID)
		if err != nil || len(cps) != 5 || cps[1].Node != "in" {
			t.Fatalf("history %+v %v", cps, err)
		}
		if string(cps[1].Output) != want {
			t.Errorf("the input node's output in the history is %q, want the input", cps[1].Output)
		}
		c, err := v.e.Checkpoint(ctx, p.Flow, run.ID, cps[1].ID)
		if err != nil || string(c.Output) != want {
			t.Errorf("the input node's checkpoint: output %q (%v), want the input", c.Output, err)
		}
		if string(cps[2].Output) != `{"n":10}` {
			t.Errorf("double's output %q, want {\"n\":10}", cps[2].Output)
		}
	})
}

func TestForkRerunsFromACheckpointWithAPatchAndLeavesTheOriginal(t *testing.T) {
	storetest.Conformance(t, func(t *testing.T, r *store.Redis) {
		v := newEnv(t, r)
		p := v.compile(strings.Replace(counter, "KEEP", "0", 1))
		v.work(p)
		orig := v.run(p, `{"n": 5}`)
		ctx := context.Background()
		cps, _ := v.e.Checkpoints(ctx, p.Flow, orig.ID)
		// Fork after "double" (n = 10) with n patched to 100: plus and out run again.
		id, err := v.e.Fork(ctx, p.Flow, orig.ID, cps[2].ID, json.RawMessage(`{"n": 100}`), engine.ForkOptions{})
		if err != nil {
			t.Fatal(err)
		}
		forked := v.wait(p, id)
		mustStatus(t, forked, store.StatusSucceeded)
		if got := string(forked.Output()); got != "101" {
			t.Errorf("fork output %s, want 101", got)
		}
		if forked.ParentRun != orig.ID || forked.ParentCkpt != cps[2].ID {
			t.Errorf("fork parent %s/%s, want %s/%s", forked.ParentRun, forked.ParentCkpt, orig.ID, cps[2].ID)
		}
		var nodes []string
		fcps, _ := v.e.Checkpoints(ctx, p.Flow, id)
		for _, c := range fcps {
			nodes = append(nodes, c.Node)
		}
		if strings.Join(nodes, ",") != ",plus,out" {
			t.Errorf("fork history %v, want the patched start, then plus and out only", nodes)
		}
		again, _ := v.e.Get(ctx, p.Flow, orig.ID)
		if string(again.Output()) != "11" || again.Steps != orig.Steps {
			t.Errorf("original changed: output %s steps %d", again.Output(), again.Steps)
		}
		// Bad input.
		if _, err := v.e.Fork(ctx, p.Flow, orig.ID, "1-1", nil, engine.ForkOptions{}); flows.ErrorCode(err) != flows.NotFound {
			t.Errorf("fork from a missing checkpoint: %v, want not found", err)
		}
		_, err = v.e.Fork(ctx, p.Flow, orig.ID, cps[2].ID, json.RawMessage(`[1]`), engine.ForkOptions{})
		var fe *flows.Error
		if flows.ErrorCode(err) != flows.Invalid || !asError(err, &fe) || fe.Path != "patch" {
			t.Errorf("fork with an array patch: %v, want invalid at path patch", err)
		}
		if _, err := v.e.Fork(ctx, p.Flow, orig.ID, cps[len(cps)-1].ID, nil, engine.ForkOptions{}); flows.ErrorCode(err) != flows.Invalid {
			t.Errorf("fork after the output node: %v, want invalid (nothing runs after it)", err)
		}
	})
}

const approvalFlow = `{"sluice": 1, "id": "FLOW",
 "settings": {"claim_after": "400ms"},
 "nodes": [
  {"id": "in", "type": "input"},
  {"id": "draft", "type": "transform", "params": {"expr": "{reply: (\"Dear \" + .customer)}"}},
  {"id": "review", "type": "approval", "params": {"prompt": "Send the reply to {{.customer}}?", "data": "{reply}" TIMEOUT}},
  {"id": "send", "type": "transform", "params": {"expr": "{sent: .reply}"}},
  {"id": "drop", "type": "transform", "params": {"expr": "{sent: null}"}},
  {"id": "out", "type": "output", "params": {"value": "{sent, approval}"}}
 ],
 "edges": [{"from": "in", "to": "draft"}, {"from": "draft", "to": "review"},
  {"from": "review", "port": "approved", "to": "send"}, {"from": "review", "port": "rejected", "to": "drop"},
  {"from": "send", "to": "out"}, {"from": "drop", "to": "out"}]}`

func TestApprovalParksTheRunUntilAPersonDecides(t *testing.T) {
	storetest.Conformance(t, func(t *testing.T, r *store.Redis) {
		v := newEnv(t, r)
		p := v.compile(strings.Replace(approvalFlow, "TIMEOUT", "", 1))
		v.work(p)
		ctx := context.Background()

		id := v.start(p, `{"customer": "Ada"}`)
		run := v.wait(p, id)
		mustStatus(t, run, store.StatusWaiting)
		var w struct {
			Prompt string         `json:"prompt"`
			Data   map[string]any `json:"data"`
		}
		json.Unmarshal(run.Waits["review"], &w)
		if w.Prompt != "Send the reply to Ada?" || w.Data["reply"] != "Dear Ada" {
			t.Errorf("wait %s, want the rendered prompt and the reply to review", run.Waits["review"])
		}
		if err := v.e.Resume(ctx, p.Flow, id, "", json.RawMessage(`{"decision": "maybe"}`)); flows.ErrorCode(err) != flows.Invalid {
			t.Errorf("resume with a bad decision: %v, want invalid", err)
		}
		if err := v.e.Resume(ctx, p.Flow, id, "", json.RawMessage(`{"decision": "approve", "value": {"reply": "Dear Ada, thanks"}, "by": "bob"}`)); err != nil {
			t.Fatal(err)
		}
		run = v.wait(p, id)
		mustStatus(t, run, store.StatusSucceeded)
		if got := string(run.Output()); got != `{"approval":{"by":"bob","decision":"approve","edit":{"reply":"Dear Ada, thanks"}},"sent":"Dear Ada, thanks"}` {
			t.Errorf("approved with an edit: output %s", got)
		}
		if err := v.e.Resume(ctx, p.Flow, id, "", json.RawMessage(`{"decision": "approve"}`)); flows.ErrorCode(err) != flows.Conflict {
			t.Errorf("resume of a finished run: %v, want conflict", err)
		}

		id = v.start(p, `{"customer": "Bo"}`)
		mustStatus(t, v.wait(p, id), store.StatusWaiting)
		if err := v.e.Resume(ctx, p.Flow, id, "review", json.RawMessage(`{"decision": "reject", "comment": "tone"}`)); err != nil {
			t.Fatal(err)
		}
		run = v.wait(p, id)
		if got := string(run.Output()); got != `{"approval":{"comment":"tone","decision":"reject"},"sent":null}` {
			t.Errorf("rejected: output %s", got)
		}
		v.drained(p)
	})
}

func TestApprovalTimeoutDecidesForThePerson(t *testing.T) {
	storetest.Conformance(t, func(t *testing.T, r *store.Redis) {
		v := newEnv(t, r)
		p := v.compile(strings.Replace(approvalFlow, "TIMEOUT", `, "timeout": "300ms"`, 1))
		v.work(p)
		id := v.start(p, `{"customer": "Ada"}`)
		mustStatus(t, v.wait(p, id), store.StatusWaiting)
		var run *store.Run
		waitFor(t, "the timeout to decide", 15*time.Second, func() bool {
			run, _ = v.e.Get(context.Background(), p.Flow, id)
			return store.Finished(run.Status)
		})
		var out struct {
			Approval struct{ By, Decision, At string }
			Sent     *string
		}
		if err := json.Unmarshal(run.Output(), &out); err != nil {
			t.Fatal(err)
		}
		at, err := time.Parse(time.RFC3339, out.Approval.At)
		if out.Approval.By != "timeout" || out.Approval.Decision != "reject" || out.Sent != nil || err != nil || time.Since(at) > time.Minute {
			t.Errorf("after the timeout: output %s, want the default reject, by the timeout, when it passed", run.Output())
		}
	})
}

func TestRetentionExpiresFinishedRunsOnlyAndKeepsTheLastCheckpoints(t *testing.T) {
	r := storetest.Real(t)
	v := newEnv(t, r)
	p := v.compile(strings.Replace(counter, "KEEP", "2", 1))
	v.work(p)
	ctx := context.Background()
	run := v.run(p, `{"n": 1}`)
	mustStatus(t, run, store.StatusSucceeded)
	k := store.FlowKeys(p.Flow)
	// The run's retention ends in about checkpoint_ttl (1h): its score in the expiry
	// set, where the janitor finds it.
	if at, err := r.Client.ZScore(ctx, k.Expiry(), run.ID).Result(); err != nil || time.Until(time.UnixMilli(int64(at))) <= 50*time.Minute || time.Until(time.UnixMilli(int64(at))) > time.Hour {
		t.Errorf("the run's retention ends at %v (%v), want in about checkpoint_ttl (1h)", time.UnixMilli(int64(at)), err)
	}
	cps, _ := v.e.Checkpoints(ctx, p.Flow, run.ID)
	if len(cps) != 2 || cps[1].Node != "out" {
		t.Errorf("keep_last 2: %d checkpoints left, want the last 2", len(cps))
	}
	// The state hash keeps the run's input too (its field "input"), which keep_last keeps.
	if h, _ := r.Client.HGetAll(ctx, k.State(run.ID)).Result(); len(h) != 3 || h["input"] != `{"n":1}` {
		t.Errorf("keep_last 2: state hash %v, want 2 states and the run's input", h)
	}
	// Reading a finished run refreshes its retention.
	r.Client.Expire(ctx, k.Run(run.ID), time.Minute)
	if _, err := v.e.Info(ctx, p.Flow, run.ID); err != nil {
		t.Fatal(err)
	}
	if ttl, _ := r.Client.TTL(ctx, k.Run(run.ID)).Result(); ttl <= 50*time.Minute {
		t.Errorf("TTL after a read %s, want it refreshed to about 1h", ttl)
	}
	// A waiting run never expires.
	ap := v.compile(strings.Replace(approvalFlow, "TIMEOUT", "", 1))
	v.work(ap)
	id := v.start(ap, `{"customer": "Ada"}`)
	mustStatus(t, v.wait(ap, id), store.StatusWaiting)
	for _, key := range store.FlowKeys(ap.Flow).RunKeys(id)[:3] {
		if ttl, _ := r.Client.TTL(ctx, key).Result(); ttl != -1 {
			t.Errorf("%s of a waiting run: TTL %s, want none", key, ttl)
		}
	}
}

func asError(err error, target **flows.Error) bool {
	e, ok := err.(*flows.Error)
	if ok {
		*target = e
	}
	return ok
}

// A fused chain whose steps change the state, then leave it, then change it again,
// stores at its end the state after every update: a step that changes nothing reuses
// the state's JSON of the step before it only when that is the state it read.
func TestAFusedChainStoresTheStateAfterEveryUpdate(t *testing.T) {
	storetest.Each(t, func(t *testing.T, r *store.Redis) {
		v := newEnv(t, r)
		p := v.compile(`{"sluice": 1, "id": "FLOW", "nodes": [
		  {"id": "in", "type": "input"},
		  {"id": "a", "type": "transform", "params": {"expr": "{a: 1}"}},
		  {"id": "same", "type": "transform", "params": {"expr": "{}"}},
		  {"id": "b", "type": "transform", "params": {"expr": "{b: (.a + 1)}"}},
		  {"id": "again", "type": "transform", "params": {"expr": "{}"}},
		  {"id": "out", "type": "output", "params": {"value": "null"}}],
		 "edges": [{"from": "in", "to": "a"}, {"from": "a", "to": "same"}, {"from": "same", "to": "b"},
		   {"from": "b", "to": "again"}, {"from": "again", "to": "out"}]}`)
		v.work(p)
		run := v.run(p, `{"n": 0}`)
		mustStatus(t, run, store.StatusSucceeded)
		ctx := context.Background()
		cps, err := v.e.Checkpoints(ctx, p.Flow, run.ID)
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]string{"in": `{"n":0}`, "a": `{"a":1,"n":0}`, "same": `{"a":1,"n":0}`, "b": `{"a":1,"b":2,"n":0}`,
			"again": `{"a":1,"b":2,"n":0}`, "out": `{"a":1,"b":2,"n":0}`}
		for _, c := range cps {
			w, ok := want[c.Node]
			if !ok {
				continue
			}
			full, err := v.e.Checkpoint(ctx, p.Flow, run.ID, c.ID)
			if err != nil {
				t.Fatal(err)
			}
			if string(full.State) != w {
				t.Errorf("state after %s: %s, want %s", c.Node, full.State, w)
			}
		}
		// The stored state the run ends with, as Redis holds it.
		ref, _ := v.r.FindRun(ctx, p.Flow, run.ID)
		last := cps[len(cps)-1].ID
		b, err := v.r.LoadState(ctx, ref, last)
		if err != nil {
			t.Fatal(err)
		}
		if string(b) != want["out"] {
			t.Errorf("the state stored at the end of the commit: %s, want %s", b, want["out"])
		}
	})
}

// The pure steps after a step with side effects (here a scripted component, as a model
// call or an HTTP request would be) commit with it when they finish in bounded time: one
// checkpoint entry holds all three (ids "E.0", "E.1" and "E"), no activation is read for
// them, and the run's states are as if each had been a step of its own.
func TestPureStepsAfterAStepWithSideEffectsCommitWithIt(t *testing.T) {
	storetest.Each(t, func(t *testing.T, r *store.Redis) {
		v := newEnv(t, r)
		p := v.compile(`{"sluice": 1, "id": "FLOW", "nodes": [
		  {"id": "in", "type": "input"},
		  {"id": "work", "type": "script", "params": {"update": {"w": 1}}},
		  {"id": "t", "type": "transform", "params": {"expr": "{t: .w}"}},
		  {"id": "out", "type": "output", "params": {"value": ".t"}}],
		 "edges": [{"from": "in", "to": "work"}, {"from": "work", "to": "t"}, {"from": "t", "to": "out"}]}`)
		v.work(p)
		run := v.run(p, `{"n": 0}`)
		mustStatus(t, run, store.StatusSucceeded)
		if got := string(run.Output()); got != "1" {
			t.Errorf("output %s, want 1 (t's value)", got)
		}
		ctx := context.Background()
		cps, err := v.e.Checkpoints(ctx, p.Flow, run.ID)
		if err != nil {
			t.Fatal(err)
		}
		ids := map[string]string{}
		for _, c := range cps {
			ids[c.Node] = c.ID
		}
		entry := ids["out"]
		if entry == "" || ids["work"] != entry+".0" || ids["t"] != entry+".1" {
			t.Errorf("checkpoints work %q, t %q, out %q: want one entry E holding all three (E.0, E.1, E)", ids["work"], ids["t"], ids["out"])
		}
		want := map[string]string{"work": `{"n":0,"w":1}`, "t": `{"n":0,"t":1,"w":1}`, "out": `{"n":0,"t":1,"w":1}`}
		for node, w := range want {
			full, err := v.e.Checkpoint(ctx, p.Flow, run.ID, ids[node])
			if err != nil {
				t.Fatal(err)
			}
			if string(full.State) != w {
				t.Errorf("state after %s: %s, want %s", node, full.State, w)
			}
		}
		if run.Steps != 4 {
			t.Errorf("the run counts %d steps, want 4 (in, work, t, out)", run.Steps)
		}
	})
}
