package server_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/flows"
	"github.com/sluicehq/sluice/flows/engine"
	"github.com/sluicehq/sluice/flows/examples"
	"github.com/sluicehq/sluice/server"
	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/storetest"
)

func TestComponentsListsTheRegistry(t *testing.T) {
	a := newAPI(t, storetest.Real(t))
	var list struct {
		Components []struct {
			Name   string          `json:"name"`
			Ports  []any           `json:"ports"`
			Params json.RawMessage `json:"params"`
		} `json:"components"`
	}
	a.must(200, "GET", "/api/components", nil).into(t, &list)
	names := map[string]bool{}
	for _, c := range list.Components {
		names[c.Name] = true
		if len(c.Ports) == 0 || len(c.Params) == 0 {
			t.Errorf("component %s lacks ports or params: %+v", c.Name, c)
		}
	}
	for _, s := range a.e.Registry().Specs() {
		if !names[s.Name] {
			t.Errorf("/api/components lacks %q", s.Name)
		}
	}
}

func TestSavingAnInvalidFlowAnswers400WithEveryProblem(t *testing.T) {
	a := newAPI(t, storetest.Real(t))
	id, doc := a.flowDoc("linear", func(d map[string]any) {
		ns := d["nodes"].([]any)
		ns[1].(map[string]any)["params"] = map[string]any{"expr": "{greeting: (.name +"}
		ns[2].(map[string]any)["type"] = "no-such-component"
		d["edges"] = append(d["edges"].([]any), map[string]any{"from": "out", "to": "ghost"})
	})
	r := a.must(http.StatusBadRequest, "PUT", "/api/flows/"+id, doc)
	e := r.errorBody(t)
	if e.Code != flows.Invalid || e.Flow != id {
		t.Errorf("error = %+v, want code invalid for flow %s", e, id)
	}
	codes := map[string]flows.Problem{}
	for _, p := range e.Problems {
		codes[p.Code] = p
		if p.Severity == "" || p.Path == "" || p.Message == "" {
			t.Errorf("problem lacks severity, path or message: %+v", p)
		}
	}
	if p := codes[flows.CodeJQSyntax]; p.Node != "greet" || p.Path != "nodes[1].params.expr" {
		t.Errorf("jq problem = %+v, want node greet at nodes[1].params.expr", p)
	}
	if p := codes[flows.CodeUnknownType]; p.Node != "shout" {
		t.Errorf("unknown type problem = %+v, want node shout", p)
	}
	if p := codes[flows.CodeDanglingEdge]; p.Edge == "" {
		t.Errorf("dangling edge problem = %+v, want the edge named", p)
	}
	// The raw answer uses the documented field names.
	var raw map[string]map[string]any
	json.Unmarshal(r.body, &raw)
	first := raw["error"]["problems"].([]any)[0].(map[string]any)
	for _, k := range []string{"severity", "code", "path", "message"} {
		if _, ok := first[k]; !ok {
			t.Errorf("problem JSON lacks %q: %v", k, first)
		}
	}
	// Nothing was saved.
	a.must(http.StatusNotFound, "GET", "/api/flows/"+id, nil)

	// A document whose id is not the URL's is refused, with the problem at "id".
	_, other := a.flowDoc("linear", nil)
	e = a.must(http.StatusBadRequest, "PUT", "/api/flows/"+id, other).errorBody(t)
	if len(e.Problems) != 1 || e.Problems[0].Code != flows.CodeInvalidID || e.Problems[0].Path != "id" {
		t.Errorf("id mismatch problems = %+v", e.Problems)
	}
	// Not JSON at all.
	e = a.must(http.StatusBadRequest, "PUT", "/api/flows/"+id, "{nope").errorBody(t)
	if len(e.Problems) == 0 || e.Problems[0].Code != flows.CodeSyntax {
		t.Errorf("syntax problems = %+v", e.Problems)
	}
}

func TestFlowsSaveGetListValidateExportImportDelete(t *testing.T) {
	a := newAPI(t, storetest.Real(t))
	id, doc := a.flowDoc("linear", nil)
	var saved server.SavedFlow
	a.must(http.StatusCreated, "PUT", "/api/flows/"+id, doc).into(t, &saved)
	if saved.ID != id || len(saved.Version) != 64 || !saved.Published {
		t.Errorf("saved = %+v", saved)
	}
	a.must(http.StatusOK, "PUT", "/api/flows/"+id, doc) // saving again replaces

	if got := a.must(200, "GET", "/api/flows/"+id, nil); !bytes.Equal(got.body, doc) {
		t.Errorf("GET returns %s, want the saved file", got.body)
	}
	var list server.FlowList
	a.must(200, "GET", "/api/flows", nil).into(t, &list)
	if len(list.Flows) != 1 || list.Flows[0].ID != id || !list.Flows[0].Valid || list.Flows[0].Version != saved.Version || list.Flows[0].Nodes != 4 || list.Flows[0].Name != "Linear pipeline" {
		t.Errorf("list = %+v", list)
	}

	var v server.Validation
	a.must(200, "POST", "/api/flows/validate", doc).into(t, &v)
	if !v.Valid || v.Version != saved.Version {
		t.Errorf("validation = %+v", v)
	}
	a.must(200, "POST", "/api/flows/validate", `{"sluice": 1, "id": "x", "nodes": []}`).into(t, &v)
	if v.Valid || len(v.Problems) == 0 || v.Problems[0].Code != flows.CodeNoInput {
		t.Errorf("validation of a flow without nodes = %+v", v)
	}

	exp := a.must(200, "GET", "/api/flows/"+id+"/export", nil)
	if cd := exp.header.Get("Content-Disposition"); !strings.Contains(cd, "attachment") || !strings.Contains(cd, id+".json") {
		t.Errorf("export Content-Disposition = %q", cd)
	}
	if !bytes.Equal(exp.body, doc) {
		t.Error("export is not the saved file")
	}

	// Import: the id is the document's; an existing flow is not replaced by accident.
	a.must(http.StatusConflict, "POST", "/api/flows", doc)
	a.must(http.StatusCreated, "POST", "/api/flows?overwrite=true", doc)
	id2, doc2 := a.flowDoc("triage", nil)
	// A multipart upload is what another site's form could send: refused.
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	fw, _ := mw.CreateFormFile("file", "triage.json")
	fw.Write(doc2)
	mw.Close()
	a.must(http.StatusUnsupportedMediaType, "POST", "/api/flows", buf.Bytes(), "Content-Type", mw.FormDataContentType())
	a.must(http.StatusNotFound, "GET", "/api/flows/"+id2, nil)
	r := a.must(http.StatusCreated, "POST", "/api/flows", doc2)
	if loc := r.header.Get("Location"); loc != "/api/flows/"+id2 {
		t.Errorf("import Location = %q", loc)
	}
	a.must(200, "GET", "/api/flows/"+id2, nil)
	a.must(http.StatusBadRequest, "POST", "/api/flows", `{"sluice": 1}`)

	a.must(http.StatusNoContent, "DELETE", "/api/flows/"+id, nil)
	a.must(http.StatusNotFound, "GET", "/api/flows/"+id, nil)
	a.must(http.StatusNotFound, "DELETE", "/api/flows/"+id, nil)
	a.must(http.StatusNotFound, "GET", "/api/flows/No..Such/export", nil)
}

// exampleCases are the examples that need no LLM, with an input and the output it gives.
var exampleCases = map[string]struct{ input, want string }{
	"linear": {`{"name": "Ada"}`, `{"greeting":"HELLO, ADA!"}`},
	"triage": {`{"intent": "code", "ticket": "build broken"}`, `{"answer":"Ticket for coding: build broken","log":["routed to coding"],"team":"coding"}`},
	"fanout": {`{"documents": ["a", "bb", "ccc"]}`, `{"results":[{"doc":"a","length":1},{"doc":"bb","length":2},{"doc":"ccc","length":3}],"total":6}`},
}

func TestStartToResultThroughTheAPIForEveryExampleThatNeedsNoLLM(t *testing.T) {
	storetest.Each(t, func(t *testing.T, r *store.Redis) {
		a := newAPI(t, r)
		for name, tc := range exampleCases {
			t.Run(name, func(t *testing.T) {
				id := a.saveFlow(name, nil)
				var got run
				a.must(http.StatusOK, "POST", "/api/flows/"+id+"/runs?wait=30s", fmt.Sprintf(`{"input": %s}`, tc.input)).into(t, &got)
				if got.Status != store.StatusSucceeded || string(got.Output) != tc.want {
					t.Errorf("run = %s %s (%s), want succeeded with %s", got.Status, got.Output, got.Error, tc.want)
				}
			})
		}
	})
	for _, id := range examples.IDs() {
		b, _ := examples.Read(id)
		_, covered := exampleCases[id]
		needsPerson := strings.Contains(string(b), `"approval"`)
		if !covered && !needsPerson && !strings.Contains(string(b), `"llm"`) && !strings.Contains(string(b), `"agent"`) {
			t.Errorf("example %s needs no LLM but has no case here", id)
		}
	}
}

// boomFlow fails its runs whose input has "boom".
const boomFlow = `{"sluice": 1, "id": "x",
	"nodes": [{"id": "in", "type": "input", "params": {"schema": {"type": "object", "required": ["name"]}}},
	          {"id": "check", "type": "transform", "params": {"expr": "if .boom then error(\"boom\") else {greeting: (\"HELLO, \" + .name + \"!\")} end"}},
	          {"id": "out", "type": "output", "params": {"value": "{greeting}"}}],
	"edges": [{"from": "in", "to": "check"}, {"from": "check", "to": "out"}]}`

func TestRunsStartGetListCancel(t *testing.T) {
	a := newAPI(t, storetest.Real(t))
	id := a.saveFlow(boomFlow, nil)

	// 202 with the run id and where to find it.
	r := a.must(http.StatusAccepted, "POST", "/api/flows/"+id+"/runs", `{"input": {"name": "Bo"}, "status": "succeeded", "id": "mine"}`)
	var s server.Started
	r.into(t, &s)
	if s.Run == "" || s.Run == "mine" || s.Status != "queued" || r.header.Get("Location") != "/api/flows/"+id+"/runs/"+s.Run {
		t.Errorf("started = %+v, Location %q (server-controlled fields in the request must be ignored)", s, r.header.Get("Location"))
	}
	got := a.settle(id, s.Run)
	if got.Status != "succeeded" || string(got.Output) != `{"greeting":"HELLO, Bo!"}` || got.Steps != 3 {
		t.Errorf("run = %+v", got)
	}

	// An input the flow's input schema refuses: 400, and no run.
	if e := a.must(http.StatusBadRequest, "POST", "/api/flows/"+id+"/runs", `{"input": {"nome": "x"}}`).errorBody(t); e.Path != "input" || !strings.Contains(e.Message, "name") {
		t.Errorf("bad input error = %+v", e)
	}
	// A run that fails says where and why.
	bad := a.start(id, `{"input": {"name": "x", "boom": true}}`)
	if got := a.settle(id, bad); got.Status != "failed" || got.ErrorNode != "check" || !strings.Contains(got.Error, "boom") {
		t.Errorf("failing run = %+v", got)
	}
	// Input that is not JSON; a webhook that is not a URL.
	a.must(http.StatusBadRequest, "POST", "/api/flows/"+id+"/runs", `{"input": }`)
	e := a.must(http.StatusBadRequest, "POST", "/api/flows/"+id+"/runs", `{"webhook": "ftp://x"}`).errorBody(t)
	if e.Path != "webhook" {
		t.Errorf("bad webhook error = %+v", e)
	}
	a.must(http.StatusBadRequest, "POST", "/api/flows/"+id+"/runs?wait=soon", `{}`)
	a.must(http.StatusNotFound, "POST", "/api/flows/nosuchflow/runs", `{}`)
	a.must(http.StatusNotFound, "GET", "/api/flows/"+id+"/runs/rnosuchrun", nil)

	// List: newest first, filtered by status, paged.
	var list server.RunList
	a.must(200, "GET", "/api/flows/"+id+"/runs", nil).into(t, &list)
	if list.Total != 2 || len(list.Runs) != 2 || list.Runs[0].ID != bad || list.Runs[1].ID != s.Run {
		t.Fatalf("list = %+v", list)
	}
	a.must(200, "GET", "/api/flows/"+id+"/runs?status=succeeded", nil).into(t, &list)
	if list.Total != 1 || len(list.Runs) != 1 || list.Runs[0].ID != s.Run {
		t.Errorf("succeeded runs = %+v", list)
	}
	a.must(200, "GET", "/api/flows/"+id+"/runs?limit=1", nil).into(t, &list)
	if len(list.Runs) != 1 || list.NextOffset == nil || *list.NextOffset != 1 {
		t.Errorf("first page = %+v", list)
	}
	next := *list.NextOffset
	list = server.RunList{}
	a.must(200, "GET", fmt.Sprintf("/api/flows/%s/runs?limit=1&offset=%d", id, next), nil).into(t, &list)
	if len(list.Runs) != 1 || list.Runs[0].ID != s.Run || list.NextOffset != nil {
		t.Errorf("last page = %+v", list)
	}
	a.must(http.StatusBadRequest, "GET", "/api/flows/"+id+"/runs?status=sleeping", nil)
	a.must(http.StatusBadRequest, "GET", "/api/flows/"+id+"/runs?limit=-1", nil)

	// Cancel: a finished run cannot be cancelled (409).
	e = a.must(http.StatusConflict, "POST", "/api/flows/"+id+"/runs/"+s.Run+"/cancel", nil).errorBody(t)
	if e.Code != flows.Conflict {
		t.Errorf("cancel of a finished run: %+v", e)
	}
	a.must(http.StatusNotFound, "POST", "/api/flows/"+id+"/runs/rnosuchrun/cancel", nil)
}

func TestCancelAWaitingRun(t *testing.T) {
	a := newAPI(t, storetest.Real(t))
	id := a.saveFlow("approval", nil)
	run := a.start(id, `{"input": {"customer": "Ada"}}`)
	if got := a.settle(id, run); got.Status != "waiting" {
		t.Fatalf("run = %+v, want waiting", got)
	}
	var got struct {
		Status string `json:"status"`
	}
	a.must(200, "POST", "/api/flows/"+id+"/runs/"+run+"/cancel", nil).into(t, &got)
	if got.Status != "cancelled" {
		t.Errorf("after cancel: %s", got.Status)
	}
	a.must(http.StatusConflict, "POST", "/api/flows/"+id+"/runs/"+run+"/resume", `{"decision": "approve"}`)
}

func TestResumeForkAndCheckpoints(t *testing.T) {
	storetest.Each(t, func(t *testing.T, r *store.Redis) {
		a := newAPI(t, r)
		id := a.saveFlow("approval", nil)
		base := "/api/flows/" + id + "/runs/"

		var waiting run
		a.must(http.StatusOK, "POST", "/api/flows/"+id+"/runs?wait=30s", `{"input": {"customer": "Ada"}}`).into(t, &waiting)
		w, ok := waiting.Waiting["review"]
		if waiting.Status != "waiting" || !ok || w.Prompt != "Send this reply to Ada?" || !strings.Contains(string(w.Data), "Dear Ada") {
			t.Fatalf("run = %+v, want waiting at review with the prompt and the reply", waiting)
		}
		// A decision the approval cannot take.
		a.must(http.StatusBadRequest, "POST", base+waiting.ID+"/resume", `{"decision": "maybe"}`)
		a.must(http.StatusNotFound, "POST", base+"rnosuchrun/resume", `{"decision": "approve"}`)

		var resumed run
		a.must(http.StatusOK, "POST", base+waiting.ID+"/resume", `{"decision": "approve", "value": {"reply": "Dear Ada, fixed."}, "comment": "ok"}`).into(t, &resumed)
		if resumed.Status != "running" && resumed.Status != "succeeded" {
			t.Errorf("after resume: %s", resumed.Status)
		}
		done := a.settle(id, waiting.ID)
		if done.Status != "succeeded" || string(done.Output) != `{"decision":"approve","sent":"Dear Ada, fixed."}` {
			t.Fatalf("resumed run = %+v", done)
		}
		// 409: the run waits for nobody now.
		e := a.must(http.StatusConflict, "POST", base+waiting.ID+"/resume", `{"decision": "approve"}`).errorBody(t)
		if e.Code != flows.Conflict || !strings.Contains(e.Message, "not waiting") {
			t.Errorf("resume of a finished run: %+v", e)
		}

		// History.
		var hist server.CheckpointList
		a.must(200, "GET", base+waiting.ID+"/checkpoints", nil).into(t, &hist)
		var kinds []string
		var draft, wait store.Checkpoint
		for _, c := range hist.Checkpoints {
			kinds = append(kinds, c.Node+":"+c.Kind)
			if c.Node == "draft" {
				draft = c
			}
			if c.Kind == "wait" {
				wait = c
			}
			if c.State != nil {
				t.Errorf("the history lists states: %+v", c)
			}
		}
		if got := strings.Join(kinds, " "); got != ":input in:step draft:step review:wait review:resume send:step out:step" {
			t.Errorf("history = %s", got)
		}
		var cp store.Checkpoint
		a.must(200, "GET", base+waiting.ID+"/checkpoints/"+draft.ID, nil).into(t, &cp)
		if !strings.Contains(string(cp.State), `"reply":"Dear Ada, your ticket is solved."`) || cp.Node != "draft" {
			t.Errorf("checkpoint = %+v", cp)
		}
		a.must(http.StatusNotFound, "GET", base+waiting.ID+"/checkpoints/1-1", nil)
		a.must(http.StatusNotFound, "GET", base+waiting.ID+"/checkpoints/nope", nil)

		var diff server.CheckpointDiff
		a.must(200, "GET", base+waiting.ID+"/checkpoints/"+draft.ID+"/diff", nil).into(t, &diff)
		if diff.From != draft.Parent || len(diff.Changes) != 1 || diff.Changes[0].Path != "reply" || diff.Changes[0].Op != "add" {
			t.Errorf("diff against the parent = %+v", diff)
		}
		a.must(200, "GET", base+waiting.ID+"/checkpoints/"+wait.ID+"/diff?from="+hist.Checkpoints[0].ID, nil).into(t, &diff)
		if len(diff.Changes) != 1 || diff.Changes[0].Path != "reply" {
			t.Errorf("diff from the input = %+v", diff)
		}

		// Fork from the wait with the reply edited: the fork waits again, a reject ends it.
		var started server.Started
		a.must(http.StatusAccepted, "POST", base+waiting.ID+"/fork", map[string]any{"checkpoint": wait.ID, "patch": map[string]any{"reply": "Hello again"}}).into(t, &started)
		fork := a.settle(id, started.Run)
		if fork.Status != "waiting" || fork.ParentRun != waiting.ID || fork.ParentCkpt != wait.ID || !strings.Contains(string(fork.Waiting["review"].Data), "Hello again") {
			t.Fatalf("fork = %+v", fork)
		}
		a.must(200, "POST", base+started.Run+"/resume", `{"decision": "reject", "node": "review"}`)
		if got := a.settle(id, started.Run); string(got.Output) != `{"decision":"reject","sent":null}` {
			t.Errorf("rejected fork = %+v", got)
		}
		a.must(http.StatusBadRequest, "POST", base+waiting.ID+"/fork", `{"patch": {}}`)
		a.must(http.StatusBadRequest, "POST", base+waiting.ID+"/fork", map[string]any{"checkpoint": wait.ID, "patch": []int{1}})
		a.must(http.StatusNotFound, "POST", base+waiting.ID+"/fork", `{"checkpoint": "1-1"}`)
	})
}

func TestDeadLettersListRetryDiscard(t *testing.T) {
	storetest.Each(t, func(t *testing.T, r *store.Redis) {
		a := newAPI(t, r)
		doc := `{"sluice": 1, "id": "x", "settings": {"max_attempts": 1},
			"nodes": [{"id": "in", "type": "input"}, {"id": "flaky", "type": "script", "params": {"fail": 1, "update": {"ok": true}}},
			          {"id": "out", "type": "output", "params": {"value": "{ok}"}}],
			"edges": [{"from": "in", "to": "flaky"}, {"from": "flaky", "to": "out"}]}`
		id := a.saveFlow(doc, nil)
		base := "/api/flows/" + id
		run1, run2 := a.start(id, nil), a.start(id, nil)
		for _, rid := range []string{run1, run2} {
			if got := a.settle(id, rid); got.Status != "failed" || got.ErrorNode != "flaky" || got.Dead != 1 {
				t.Fatalf("run %s = %+v, want failed at flaky with a dead letter", rid, got)
			}
		}
		var list server.DeadLetterList
		a.must(200, "GET", base+"/deadletters", nil).into(t, &list)
		if len(list.DeadLetters) != 2 {
			t.Fatalf("dead letters = %+v", list)
		}
		dl := map[string]store.DeadLetter{}
		for _, d := range list.DeadLetters {
			dl[d.Run] = d
			if d.Node != "flaky" || d.Attempts != 1 || !strings.Contains(d.Error, "scripted failure 1") {
				t.Errorf("dead letter = %+v", d)
			}
		}
		var q store.FlowQueues
		a.must(200, "GET", base+"/queues", nil).into(t, &q)
		if q.DeadLetters != 2 || nodeStats(q, "flaky").DeadLetters != 2 {
			t.Errorf("queues = %+v, want 2 dead letters at flaky", q)
		}

		// Retry: the activation runs again (the script succeeds on its second call).
		var rt server.Retried
		a.must(200, "POST", base+"/deadletters/"+dl[run1].ID+"/retry", nil).into(t, &rt)
		if rt.ID != dl[run1].ID || rt.Entry == "" {
			t.Errorf("retried = %+v", rt)
		}
		if got := a.settle(id, run1); got.Status != "succeeded" || string(got.Output) != `{"ok":true}` {
			t.Errorf("retried run = %+v", got)
		}
		a.must(http.StatusNotFound, "POST", base+"/deadletters/"+dl[run1].ID+"/retry", nil)

		// Discard: gone, the run stays failed.
		a.must(http.StatusNoContent, "DELETE", base+"/deadletters/"+dl[run2].ID, nil)
		a.must(http.StatusNotFound, "DELETE", base+"/deadletters/"+dl[run2].ID, nil)
		a.must(http.StatusNotFound, "DELETE", base+"/deadletters/not-an-id", nil)
		a.must(200, "GET", base+"/deadletters", nil).into(t, &list)
		if len(list.DeadLetters) != 0 {
			t.Errorf("dead letters after retry and discard = %+v", list)
		}
		if got := a.settle(id, run2); got.Status != "failed" {
			t.Errorf("discarded run = %+v", got)
		}
	})
}

func nodeStats(q store.FlowQueues, node string) store.QueueStats {
	for _, n := range q.Nodes {
		if n.Node == node {
			return n
		}
	}
	return store.QueueStats{}
}

func TestQueuesShowLengthPendingLagAndConsumers(t *testing.T) {
	storetest.Each(t, func(t *testing.T, r *store.Redis) {
		a := newAPI(t, r)
		// Published but served by no worker of this test: activations wait in the stream.
		id, doc := a.flowDoc("linear", nil)
		plan, _, err := a.e.Compile(doc)
		if err != nil {
			t.Fatal(err)
		}
		ctx := t.Context()
		for i := 0; i < 3; i++ {
			if _, err := a.e.Start(ctx, plan, json.RawMessage(`{"name": "x"}`), engine.StartOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		var q store.FlowQueues
		a.must(200, "GET", "/api/flows/"+id+"/queues", nil).into(t, &q)
		in := nodeStats(q, "in")
		if q.Flow != id || len(q.Nodes) != 4 || in.Length != 3 || in.Lag != 3 || in.Pending != 0 {
			t.Fatalf("queues before any read = %+v", q)
		}
		// A consumer reads two and sits on them.
		acts, err := r.ReadNodes(ctx, "probe", []store.NodeRef{{Flow: id, Node: "in"}}, 2, 0)
		if err != nil || len(acts) != 2 {
			t.Fatalf("read: %v %v", acts, err)
		}
		a.must(200, "GET", "/api/flows/"+id+"/queues", nil).into(t, &q)
		in = nodeStats(q, "in")
		if in.Length != 3 || in.Pending != 2 || in.Lag != 1 {
			t.Errorf("queues after a read = %+v", in)
		}
		a.must(http.StatusNotFound, "GET", "/api/flows/nosuchflow/queues", nil)
		if r.Embedded() {
			return // the embedded Redis's XINFO and idle times are partial
		}
		if len(in.Consumers) != 1 || in.Consumers[0].Name != "probe" || in.Consumers[0].Pending != 2 || in.Consumers[0].IdleMS < 0 {
			t.Errorf("consumers = %+v", in.Consumers)
		}
		eventually(t, 5e9, func() string {
			a.must(200, "GET", "/api/flows/"+id+"/queues", nil).into(t, &q)
			if n := nodeStats(q, "in"); n.OldestPendingIdleMS < 20 {
				return fmt.Sprintf("oldest pending idle = %d ms, want it growing", n.OldestPendingIdleMS)
			}
			return ""
		})
	})
}

func TestSavedVersionRunsAtOnceWithoutRestart(t *testing.T) {
	a := newAPI(t, storetest.Real(t))
	id, doc := a.flowDoc("linear", nil)
	a.must(http.StatusCreated, "PUT", "/api/flows/"+id, doc)
	var got run
	a.must(200, "POST", "/api/flows/"+id+"/runs?wait=30s", `{"input": {"name": "Ada"}}`).into(t, &got)
	if string(got.Output) != `{"greeting":"HELLO, ADA!"}` {
		t.Fatalf("first version: %+v", got)
	}
	var d map[string]any
	json.Unmarshal(doc, &d)
	d["nodes"].([]any)[3].(map[string]any)["params"] = map[string]any{"value": "{shouted: .greeting}"}
	b, _ := json.Marshal(d)
	a.must(200, "PUT", "/api/flows/"+id, b)
	a.must(200, "POST", "/api/flows/"+id+"/runs?wait=30s", `{"input": {"name": "Ada"}}`).into(t, &got)
	if string(got.Output) != `{"shouted":"HELLO, ADA!"}` {
		t.Errorf("after saving a new version: %+v", got)
	}
}

func TestOpenAPIDocumentNamesEveryRoute(t *testing.T) {
	a := newAPI(t, storetest.Embedded(t))
	var doc struct {
		OpenAPI string                                `json:"openapi"`
		Paths   map[string]map[string]json.RawMessage `json:"paths"`
	}
	a.must(200, "GET", "/api/openapi.json", nil).into(t, &doc)
	if !strings.HasPrefix(doc.OpenAPI, "3.") {
		t.Errorf("openapi = %q", doc.OpenAPI)
	}
	routes := a.srv.Routes()
	if len(routes) < 30 {
		t.Fatalf("only %d routes: %v", len(routes), routes)
	}
	seen := map[string]bool{}
	for _, rt := range routes {
		method, path, _ := strings.Cut(rt, " ")
		if !strings.HasPrefix(path, "/api/") && !strings.HasPrefix(path, "/hooks/") && !strings.HasPrefix(path, "/v1/") &&
			path != "/mcp" && path != "/ws" && path != "/healthz" && path != "/readyz" && path != "/metrics" {
			continue // pages and their assets are not the API
		}
		p := openAPIPath(path)
		seen[strings.ToLower(method)+" "+p] = true
		if _, ok := doc.Paths[p][strings.ToLower(method)]; !ok {
			t.Errorf("route %s is not in openapi.json (as %s %s)", rt, strings.ToLower(method), p)
		}
	}
	for p, ops := range doc.Paths {
		for m := range ops {
			if m == "parameters" {
				continue
			}
			if !seen[m+" "+p] {
				t.Errorf("openapi.json has %s %s, which routes.go does not serve", m, p)
			}
		}
	}
	if !json.Valid(server.OpenAPI()) {
		t.Error("openapi.json is not JSON")
	}
}

// openAPIPath writes Echo's /a/:b as OpenAPI's /a/{b}.
func openAPIPath(p string) string {
	parts := strings.Split(p, "/")
	for i, s := range parts {
		if strings.HasPrefix(s, ":") {
			parts[i] = "{" + s[1:] + "}"
		}
	}
	return strings.Join(parts, "/")
}

func TestReadyzAndMetrics(t *testing.T) {
	a := newAPI(t, storetest.Real(t))
	a.must(200, "GET", "/readyz", nil, "Authorization", "")
	id := a.saveFlow("linear", nil)
	a.must(200, "POST", "/api/flows/"+id+"/runs?wait=30s", `{"input": {"name": "Ada"}}`)
	wants := []string{
		fmt.Sprintf(`sluice_steps_total{flow=%q,node="greet"} 1`, id),
		"sluice_commit_duration_seconds_bucket",
		fmt.Sprintf(`sluice_step_duration_seconds_count{component="transform",flow=%q,node="greet"} 1`, id),
		fmt.Sprintf(`sluice_queue_lag{flow=%q,node="greet"} 0`, id),
		fmt.Sprintf(`sluice_dead_letters{flow=%q} 0`, id),
		"sluice_cache_hits_total", "sluice_cache_misses_total", "sluice_redis_up 1",
	}
	// A worker counts a step just after its commit, which may be after the run finished:
	// wait until every line is there (or 30 s passed).
	var body string
	for deadline := time.Now().Add(30 * time.Second); ; {
		body = a.must(200, "GET", "/metrics", nil).String()
		all := true
		for _, want := range wants {
			all = all && strings.Contains(body, want)
		}
		if all || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	for _, want := range wants {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	a.must(http.StatusUnauthorized, "GET", "/metrics", nil, "Authorization", "")
}

var errEOF = io.EOF
