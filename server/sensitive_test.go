package server_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/sluicehq/sluice/server"
	"github.com/sluicehq/sluice/server/live"
	"github.com/sluicehq/sluice/store/storetest"
	"github.com/sluicehq/sluice/teams"
)

// sseUntil reads a Server-Sent Events stream as key until done says so (or fails
// after d), and returns every data line; subscribed is closed once the stream is
// subscribed.
func (a *api) sseUntil(path, key string, d time.Duration, subscribed chan struct{}, done func(data string) bool) []string {
	a.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", a.base+path, nil)
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		a.t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		a.t.Fatalf("GET %s: %d", path, resp.StatusCode)
	}
	var got []string
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		got = append(got, data)
		if strings.HasPrefix(data, `{"type":"subscribed"`) {
			close(subscribed)
		}
		if done(data) {
			return got
		}
	}
	a.t.Fatalf("GET %s: the stream ended (%v) after %d events without the one awaited", path, sc.Err(), len(got))
	return nil
}

// A workspace that marks run state sensitive shows its viewers the runs' statuses —
// lists, the run, the run page, live events over /ws and SSE — and none of their inputs,
// prompts, outputs, errors, checkpoints or events' data; its operators see everything.
func TestAViewerOfASensitiveWorkspaceSeesStatusesNotState(t *testing.T) {
	a := newAPI(t, storetest.Real(t))
	a.workspace("sens")
	in := []string{server.WorkspaceHeader, "sens"}
	a.must(http.StatusOK, "PUT", "/api/settings", `{"sensitive": true}`, in...)
	const secret = "Zed-secret-7"
	id, doc := a.flowDoc("approval", nil)
	fid, fdoc := a.flowDoc(`{"sluice": 1, "id": "x", "settings": {"max_attempts": 1}, "nodes": [
		{"id": "in", "type": "input"},
		{"id": "count", "type": "transform", "params": {"expr": "{n: (.customer | tonumber)}"}},
		{"id": "out", "type": "output"}],
		"edges": [{"from": "in", "to": "count"}, {"from": "count", "to": "out"}]}`, nil)
	storetest.DeleteFlowKeys(t, a.r, "sens."+id)
	storetest.DeleteFlowKeys(t, a.r, "sens."+fid)
	a.must(http.StatusCreated, "PUT", "/api/flows/"+id, doc, in...)
	a.must(http.StatusCreated, "PUT", "/api/flows/"+fid, fdoc, in...)
	viewer, operator := a.serviceKey("sens", teams.Viewer), a.serviceKey("sens", teams.Operator)
	as := func(key string) []string { return []string{"Authorization", "Bearer " + key} }

	// Live views first, so that they see the runs happen.
	wsAs := func(key string) *websocket.Conn {
		h := http.Header{}
		h.Set("Authorization", "Bearer "+key)
		c, _, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(a.base, "http")+"/ws?flow="+id, h)
		if err != nil {
			t.Fatal(err)
		}
		readUntil(t, c, 10*time.Second, func(m live.Envelope) bool { return m.Type == "subscribed" })
		return c
	}
	vws, ows := wsAs(viewer), wsAs(operator)
	defer vws.Close()
	defer ows.Close()
	sse, subscribed := make(chan []string, 1), make(chan struct{})
	go func() {
		sse <- a.sseUntil("/api/flows/"+id+"/events", viewer, 30*time.Second, subscribed, func(d string) bool {
			return strings.Contains(d, `"type":"run"`) && strings.Contains(d, "waiting")
		})
	}()
	select {
	case <-subscribed:
	case <-time.After(30 * time.Second):
		t.Fatal("the SSE stream did not subscribe")
	}

	var started run
	a.must(http.StatusOK, "POST", "/api/flows/"+id+"/runs?wait=20s", map[string]any{"input": map[string]any{"customer": secret}}, as(operator)...).into(t, &started)
	if started.Status != "waiting" {
		t.Fatalf("run %+v, want waiting", started)
	}
	rid := started.ID
	waitingStep := func(m live.Envelope) bool {
		return m.Type == "event" && m.Event.Type == "step" && m.Event.Node == "review"
	}
	// The operator's view carries the prompt (made from the state); the viewer's the
	// step and its status only.
	if got := readUntil(t, ows, 20*time.Second, waitingStep); !strings.Contains(string(got[len(got)-1].Event.Data), secret) {
		t.Fatalf("the operator's live view lacks the prompt: %s", got[len(got)-1].Event.Data)
	}
	got := readUntil(t, vws, 20*time.Second, waitingStep)
	if last := got[len(got)-1]; !strings.Contains(string(last.Event.Data), `"status":"waiting"`) {
		t.Errorf("the viewer's live view lacks the step's status: %s", last.Event.Data)
	}
	for _, m := range got {
		if b, _ := json.Marshal(m); strings.Contains(string(b), secret) {
			t.Errorf("the viewer's live view carries the state: %s", b)
		}
	}
	select {
	case lines := <-sse:
		if !strings.Contains(strings.Join(lines, "\n"), `"node":"review"`) {
			t.Errorf("the viewer's SSE stream lacks the steps: %q", lines)
		}
		for _, l := range lines {
			if strings.Contains(l, secret) {
				t.Errorf("the viewer's SSE stream carries the state: %s", l)
			}
		}
	case <-time.After(30 * time.Second):
		t.Fatal("no SSE events for the viewer")
	}

	// The run and the list: statuses only for the viewer, everything for the operator.
	v := a.must(http.StatusOK, "GET", "/api/flows/"+id+"/runs/"+rid, nil, as(viewer)...)
	var rv struct {
		Status      string
		StateHidden bool `json:"state_hidden"`
		Waiting     map[string]server.WaitView
	}
	v.into(t, &rv)
	if rv.Status != "waiting" || !rv.StateHidden || rv.Waiting["review"].Prompt != "" || strings.Contains(v.String(), secret) {
		t.Errorf("the run as the viewer sees it: %s", v)
	}
	if o := a.must(http.StatusOK, "GET", "/api/flows/"+id+"/runs/"+rid, nil, as(operator)...); !strings.Contains(o.String(), secret) {
		t.Errorf("the run as the operator sees it: %s", o)
	}
	if l := a.must(http.StatusOK, "GET", "/api/flows/"+id+"/runs", nil, as(viewer)...).String(); !strings.Contains(l, rid) || strings.Contains(l, secret) {
		t.Errorf("the run list as the viewer sees it: %s", l)
	}
	// Checkpoints, their diffs, comparisons and run files stay the operators'.
	for _, p := range []string{"/runs/" + rid + "/checkpoints", "/runs/" + rid + "/compare"} {
		r := a.do("GET", "/api/flows/"+id+p, nil, as(viewer)...)
		if r.status != http.StatusForbidden || r.header.Get("Sluice-Required-Role") != "operator" || strings.Contains(r.String(), secret) {
			t.Errorf("%s as the viewer: %d %s", p, r.status, r)
		}
	}
	// The run page: the status and the steps, no input, prompt or state.
	page := a.must(http.StatusOK, "GET", "/flows/"+id+"/runs/"+rid, nil, append(as(viewer), "Accept", "text/html")...).String()
	if !strings.Contains(page, `id="run-status">waiting`) || !strings.Contains(page, `id="state-hidden"`) || !strings.Contains(page, `data-node="draft"`) || strings.Contains(page, secret) {
		t.Errorf("the run page as the viewer sees it:\n%s", page)
	}
	if page := a.must(http.StatusOK, "GET", "/flows/"+id+"/runs/"+rid, nil, append(as(operator), "Accept", "text/html")...).String(); !strings.Contains(page, secret) || strings.Contains(page, `id="state-hidden"`) {
		t.Error("the run page as the operator sees it lacks the state")
	}

	// A failed run: the viewer sees where it failed, not the error (it quotes the state),
	// on the run, in lists and among the dead letters.
	var failed run
	a.must(http.StatusOK, "POST", "/api/flows/"+fid+"/runs?wait=20s", map[string]any{"input": map[string]any{"customer": secret}}, as(operator)...).into(t, &failed)
	if failed.Status != "failed" || !strings.Contains(failed.Error, secret) {
		t.Fatalf("the failing run as the operator sees it: %+v", failed)
	}
	v = a.must(http.StatusOK, "GET", "/api/flows/"+fid+"/runs/"+failed.ID, nil, as(viewer)...)
	if !strings.Contains(v.String(), `"error_node":"count"`) || strings.Contains(v.String(), secret) {
		t.Errorf("the failed run as the viewer sees it: %s", v)
	}
	for _, p := range []string{"/api/flows/" + fid + "/runs", "/api/flows/" + fid + "/deadletters"} {
		if r := a.must(http.StatusOK, "GET", p, nil, as(viewer)...); strings.Contains(r.String(), secret) || !strings.Contains(r.String(), failed.ID) {
			t.Errorf("%s as the viewer: %s", p, r)
		}
	}
	for _, p := range []string{"/runs?flow=" + fid, "/queues?flow=" + fid, "/flows/" + fid + "/runs/" + failed.ID} {
		if page := a.must(http.StatusOK, "GET", p, nil, append(as(viewer), "Accept", "text/html")...).String(); strings.Contains(page, secret) {
			t.Errorf("the page %s shows the viewer the error", p)
		}
	}
	if dl := a.must(http.StatusOK, "GET", "/api/flows/"+fid+"/deadletters", nil, as(operator)...).String(); !strings.Contains(dl, secret) {
		t.Errorf("the dead letters as the operator sees them: %s", dl)
	}
}

// A sensitive workspace's test cases hold runs' inputs and outputs ("Save as test case"
// copies them) and their results the outputs of the cases' runs: its viewers read
// neither, only each version's pass and fail counts and which cases failed; its
// operators read everything, as any run's state.
func TestAViewerOfASensitiveWorkspaceCannotReadItsTestCases(t *testing.T) {
	a := newAPI(t, storetest.Real(t))
	a.workspace("sens")
	in := []string{server.WorkspaceHeader, "sens"}
	a.must(http.StatusOK, "PUT", "/api/settings", `{"sensitive": true}`, in...)
	const secret = "Zed-secret-9"
	id, doc := a.flowDoc(`{"sluice": 1, "id": "x", "nodes": [{"id": "in", "type": "input"}, {"id": "out", "type": "output"}],
		"edges": [{"from": "in", "to": "out"}]}`, nil)
	storetest.DeleteFlowKeys(t, a.r, "sens."+id)
	a.must(http.StatusCreated, "PUT", "/api/flows/"+id, doc, in...)
	viewer, operator, editor := a.serviceKey("sens", teams.Viewer), a.serviceKey("sens", teams.Operator), a.serviceKey("sens", teams.Editor)
	as := func(key string) []string { return []string{"Authorization", "Bearer " + key} }

	var started run
	a.must(http.StatusOK, "POST", "/api/flows/"+id+"/runs?wait=20s", map[string]any{"input": map[string]any{"customer": secret}}, as(operator)...).into(t, &started)
	if started.Status != "succeeded" {
		t.Fatalf("run %+v, want succeeded", started)
	}
	a.must(http.StatusCreated, "POST", "/api/flows/"+id+"/cases", map[string]any{"run": started.ID, "id": "saved"}, as(editor)...)
	// A second case that fails: its why quotes the output.
	var cv server.CasesView
	a.must(http.StatusOK, "GET", "/api/flows/"+id+"/cases", nil, as(operator)...).into(t, &cv)
	if !strings.Contains(string(cv.File), secret) {
		t.Fatalf("the cases as the operator sees them lack the saved run's input: %s", cv.File)
	}
	var file map[string]any
	json.Unmarshal(cv.File, &file)
	file["cases"] = append(file["cases"].([]any), map[string]any{"id": "fails", "input": map[string]any{"customer": secret}, "expect": []any{map[string]any{"equals": "something else"}}})
	a.must(http.StatusOK, "PUT", "/api/flows/"+id+"/cases", file, as(editor)...)
	var rep struct {
		Version string
		Failed  int
	}
	a.must(http.StatusOK, "POST", "/api/flows/"+id+"/cases/run", map[string]any{}, as(editor)...).into(t, &rep)
	if rep.Failed != 1 {
		t.Fatalf("the cases' report: %+v, want one failed", rep)
	}

	for _, p := range []string{"/cases", "/tests/" + rep.Version} {
		r := a.do("GET", "/api/flows/"+id+p, nil, as(viewer)...)
		if r.status != http.StatusForbidden || r.header.Get("Sluice-Required-Role") != "operator" || strings.Contains(r.String(), secret) {
			t.Errorf("%s as the viewer: %d %s, want 403 needing the operator role", p, r.status, r)
		}
		if o := a.must(http.StatusOK, "GET", "/api/flows/"+id+p, nil, as(operator)...); !strings.Contains(o.String(), secret) {
			t.Errorf("%s as the operator: %s, want the cases' inputs and outputs", p, o)
		}
	}
	var sums server.TestSummaries
	l := a.must(http.StatusOK, "GET", "/api/flows/"+id+"/tests", nil, as(viewer)...)
	l.into(t, &sums)
	if last := sums.Versions[rep.Version]; last.Cases != 2 || last.Failed != 1 || len(last.Verdicts) != 2 || strings.Contains(l.String(), secret) {
		t.Errorf("each version's last test as the viewer sees it: %s, want the counts and verdicts without why", l)
	}
	if o := a.must(http.StatusOK, "GET", "/api/flows/"+id+"/tests", nil, as(operator)...); !strings.Contains(o.String(), secret) {
		t.Errorf("each version's last test as the operator sees it: %s, want the why of the failed case", o)
	}
}
