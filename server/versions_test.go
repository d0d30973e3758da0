package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/flows/engine"
	"github.com/sluicehq/sluice/server"
	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/storetest"
)

func TestVersionsHistoryDiffRollbackAndRunsByVersion(t *testing.T) {
	a := newAPI(t, storetest.Real(t))
	id, v1doc := a.flowDoc("linear", nil)
	var v1, v2 server.SavedFlow
	a.must(http.StatusCreated, "PUT", "/api/flows/"+id+"?message="+url.QueryEscape("first draft"), v1doc).into(t, &v1)
	r1 := a.settle(id, a.start(id, map[string]any{"input": map[string]any{"name": "Ada"}}))

	var d map[string]any
	json.Unmarshal(v1doc, &d)
	d["nodes"].([]any)[3].(map[string]any)["params"] = map[string]any{"value": "{shouted: .greeting}"}
	v2doc, _ := json.MarshalIndent(d, "", "  ")
	a.must(http.StatusOK, "PUT", "/api/flows/"+id+"?message=shout", v2doc).into(t, &v2)
	r2 := a.settle(id, a.start(id, map[string]any{"input": map[string]any{"name": "Bo"}}))
	if r2.Status != "succeeded" || string(r2.Output) != `{"shouted":"HELLO, BO!"}` {
		t.Fatalf("run of v2: %+v", r2)
	}

	var h engine.VersionHistory
	a.must(200, "GET", "/api/flows/"+id+"/versions", nil).into(t, &h)
	if len(h.Versions) != 2 || h.Current != v2.Version || h.Versions[0].Version != v2.Version || h.Versions[1].Version != v1.Version {
		t.Fatalf("history = %+v, want v2 then v1, v2 current", h)
	}
	if h.Versions[0].Message != "shout" || h.Versions[1].Message != "first draft" || !h.Versions[0].Current || h.Versions[1].Current {
		t.Errorf("notes and current: %+v", h.Versions)
	}
	if h.Versions[1].SavedAt.IsZero() || h.Versions[0].SavedAt.Before(h.Versions[1].SavedAt) {
		t.Errorf("saved times: %v, %v", h.Versions[0].SavedAt, h.Versions[1].SavedAt)
	}
	if s := h.Versions[1].Stats; s == nil || s.Runs != 1 || s.Succeeded != 1 {
		t.Errorf("figures of v1: %+v, want its one succeeded run", s)
	}

	var one engine.VersionDetail
	a.must(200, "GET", "/api/flows/"+id+"/versions/"+v1.Version[:10], nil).into(t, &one)
	var compact bytes.Buffer
	json.Compact(&compact, v1doc)
	if one.VersionInfo.Version != v1.Version || !bytes.Equal(one.Document, compact.Bytes()) {
		t.Errorf("version by prefix: %s, document %s", one.VersionInfo.Version, one.Document)
	}
	a.must(http.StatusNotFound, "GET", "/api/flows/"+id+"/versions/abc", nil)
	a.must(http.StatusNotFound, "GET", "/api/flows/"+id+"/versions/"+"0000000000", nil)

	var diff engine.VersionDiff
	a.must(200, "GET", "/api/flows/"+id+"/versions/"+v1.Version+"/diff", nil).into(t, &diff)
	if diff.To != v2.Version || len(diff.NodesChanged) != 1 || diff.NodesChanged[0].Node != "out" ||
		diff.NodesChanged[0].Changes[0].Path != "params.value" || len(diff.NodesAdded)+len(diff.NodesRemoved)+len(diff.EdgesAdded)+len(diff.EdgesRemoved) != 0 {
		t.Errorf("diff v1 -> current = %+v", diff)
	}

	// Runs can be filtered by version.
	var list server.RunList
	a.must(200, "GET", "/api/flows/"+id+"/runs?version="+v1.Version[:12], nil).into(t, &list)
	if len(list.Runs) != 1 || list.Runs[0].ID != r1.ID {
		t.Errorf("runs of v1: %d, want run %s", len(list.Runs), r1.ID)
	}
	a.must(http.StatusBadRequest, "GET", "/api/flows/"+id+"/runs?version=nothex", nil)
	// So can the runs page.
	page := a.must(200, "GET", "/runs?flow="+id+"&version="+v1.Version[:12], nil, "Accept", "text/html").String()
	if !strings.Contains(page, r1.ID) || strings.Contains(page, r2.ID) || strings.Count(page, `<option value="`+v1.Version[:12]+`" selected`) != 1 ||
		!strings.Contains(page, `<option value="`+v2.Version[:12]+`"`) {
		t.Errorf("the runs page filtered by v1 shows run 1 and not run 2, and offers both versions:\n%s", page)
	}

	// Rollback: v1 is current again, the file holds it, new runs take it.
	var rb server.RolledBack
	a.must(200, "POST", "/api/flows/"+id+"/rollback", map[string]string{"version": v1.Version[:8]}).into(t, &rb)
	if rb.Version != v1.Version || rb.Previous != v2.Version || !rb.FileWritten || !rb.Published {
		t.Errorf("rollback = %+v", rb)
	}
	if got := a.must(200, "GET", "/api/flows/"+id, nil); !bytes.Equal(got.body, v1doc) {
		t.Errorf("after rollback the file is %s, want v1 as saved", got.body)
	}
	if r := a.settle(id, a.start(id, map[string]any{"input": map[string]any{"name": "Cy"}})); string(r.Output) != `{"greeting":"HELLO, CY!"}` {
		t.Errorf("a run after rollback: %+v", r)
	}
	a.must(200, "GET", "/api/flows/"+id+"/versions", nil).into(t, &h)
	if h.Current != v1.Version || len(h.Versions) != 2 {
		t.Errorf("after rollback: current %.12s, %d versions", h.Current, len(h.Versions))
	}
	a.must(http.StatusBadRequest, "POST", "/api/flows/"+id+"/rollback", `{}`)
	a.must(http.StatusNotFound, "GET", "/api/flows/nosuchflow/versions", nil)
}

func TestSchedulesThroughTheAPI(t *testing.T) {
	a := newAPI(t, storetest.Embedded(t))
	id := a.saveFlow(`{"sluice": 1, "id": "x",
		"settings": {"schedules": [{"cron": "0 9 * * 1-5", "timezone": "Europe/Paris", "input": {"report": "daily"}}, {"cron": "@hourly", "enabled": false}]},
		"nodes": [{"id": "in", "type": "input"}, {"id": "out", "type": "output"}], "edges": [{"from": "in", "to": "out"}]}`, nil)
	var list server.ScheduleList
	a.must(200, "GET", "/api/flows/"+id+"/schedules?next=3", nil).into(t, &list)
	if len(list.Schedules) != 2 {
		t.Fatalf("schedules = %+v", list)
	}
	s0 := list.Schedules[0]
	if s0.Cron != "0 9 * * 1-5" || !s0.Enabled || s0.Paused || len(s0.Next) != 3 {
		t.Fatalf("schedule 0 = %+v", s0)
	}
	paris, _ := time.LoadLocation("Europe/Paris")
	for _, n := range s0.Next {
		if l := n.In(paris); l.Hour() != 9 || l.Minute() != 0 || l.Weekday() == time.Saturday || l.Weekday() == time.Sunday {
			t.Errorf("next fire time %s is not 09:00 on a weekday in Paris", l)
		}
	}
	if s1 := list.Schedules[1]; s1.Enabled || len(s1.Next) != 0 {
		t.Errorf("a disabled schedule: %+v, want no next fire times", s1)
	}
	var v engine.ScheduleView
	a.must(200, "POST", "/api/flows/"+id+"/schedules/0/pause", nil).into(t, &v)
	if !v.Paused || len(v.Next) != 0 {
		t.Errorf("paused: %+v", v)
	}
	a.must(200, "GET", "/api/flows/"+id+"/schedules", nil).into(t, &list)
	if !list.Schedules[0].Paused {
		t.Error("the pause is not kept")
	}
	a.must(200, "POST", "/api/flows/"+id+"/schedules/0/resume", nil).into(t, &v)
	if v.Paused || len(v.Next) == 0 {
		t.Errorf("resumed: %+v", v)
	}
	a.must(http.StatusNotFound, "POST", "/api/flows/"+id+"/schedules/2/pause", nil)
	a.must(http.StatusNotFound, "POST", "/api/flows/"+id+"/schedules/x/pause", nil)

	// A bad cron is refused at save, at its path.
	_, bad := a.flowDoc(`{"sluice": 1, "id": "x", "settings": {"schedules": [{"cron": "every day"}]},
		"nodes": [{"id": "in", "type": "input"}], "edges": []}`, nil)
	var id2 string
	{
		var d map[string]any
		json.Unmarshal(bad, &d)
		id2 = d["id"].(string)
	}
	e := a.must(http.StatusBadRequest, "PUT", "/api/flows/"+id2, bad).errorBody(t)
	if len(e.Problems) != 1 || e.Problems[0].Code != "invalid_cron" || e.Problems[0].Path != "settings.schedules[0].cron" {
		t.Errorf("problems = %+v", e.Problems)
	}
}

func TestRunsFilterByTriggerAndNameTheScheduleThatStartedThem(t *testing.T) {
	a := newAPI(t, storetest.Embedded(t))
	ctx := context.Background()
	id := a.saveFlow(`{"sluice": 1, "id": "x",
		"settings": {"schedules": [{"cron": "@every 1h", "input": {"n": 0}}, {"cron": "@every 2h", "input": {"n": 1}}]},
		"nodes": [{"id": "in", "type": "input"}, {"id": "out", "type": "output"}], "edges": [{"from": "in", "to": "out"}]}`, nil)
	plan, err := a.e.CurrentPlan(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	// Both schedules were last seen hours ago: one pass of a scheduler starts the run of
	// each one's latest missed tick.
	now := time.Now()
	var scheduled [2]string
	for i, sc := range plan.Settings.Schedules {
		if err := a.r.SeeSchedule(ctx, id, sc.Key(), now.Add(-5*time.Hour)); err != nil {
			t.Fatal(err)
		}
		scheduled[i] = engine.ScheduleRunID(sc.Key(), now.Truncate(time.Duration(i+1)*time.Hour))
	}
	s := a.e.NewScheduler(engine.SchedulerOptions{Flows: func(context.Context) ([]string, error) { return []string{id}, nil }})
	if _, err := s.Tick(ctx); err != nil {
		t.Fatal(err)
	}
	manual := a.start(id, map[string]any{"input": map[string]any{"n": "by hand"}})
	for _, r := range []string{scheduled[0], scheduled[1], manual} {
		if got := a.settle(id, r); got.Status != "succeeded" {
			t.Fatalf("run %s: %+v", r, got)
		}
	}

	ids := func(query string) []string {
		t.Helper()
		var list server.RunList
		a.must(200, "GET", "/api/flows/"+id+"/runs"+query, nil).into(t, &list)
		var out []string
		for _, r := range list.Runs {
			out = append(out, r.ID+"="+r.Trigger)
		}
		sort.Strings(out)
		return out
	}
	for _, c := range []struct {
		query string
		want  []string
	}{
		{"", []string{manual + "=", scheduled[0] + "=schedule:0", scheduled[1] + "=schedule:1"}},
		{"?trigger=schedule", []string{scheduled[0] + "=schedule:0", scheduled[1] + "=schedule:1"}},
		{"?trigger=schedule:0", []string{scheduled[0] + "=schedule:0"}},
		{"?trigger=schedule:1", []string{scheduled[1] + "=schedule:1"}},
		{"?trigger=schedule:2", nil},
	} {
		want := append([]string(nil), c.want...)
		sort.Strings(want)
		if got := ids(c.query); strings.Join(got, " ") != strings.Join(want, " ") {
			t.Errorf("GET runs%s = %v, want %v", c.query, got, want)
		}
	}

	// The runs page: the filter, and a badge naming the schedule on the runs it started.
	rows := regexp.MustCompile(`(?s)<tr data-run="([^"]+)">(.*?)</tr>`)
	shown := func(query string) map[string]string {
		t.Helper()
		page := a.must(200, "GET", "/runs?flow="+id+query, nil, "Accept", "text/html").String()
		out := map[string]string{}
		for _, m := range rows.FindAllStringSubmatch(page, -1) {
			badge := regexp.MustCompile(`<span class="badge trigger">([^<]*)</span>`).FindStringSubmatch(m[2])
			out[m[1]] = ""
			if badge != nil {
				out[m[1]] = badge[1]
			}
		}
		return out
	}
	if got := shown(""); len(got) != 3 || got[scheduled[0]] != "schedule 0" || got[scheduled[1]] != "schedule 1" || got[manual] != "" {
		t.Errorf("the runs page: %v, want the two scheduled runs badged with their schedule and the other not", got)
	}
	if got := shown("&trigger=schedule"); len(got) != 2 || got[scheduled[0]] != "schedule 0" || got[scheduled[1]] != "schedule 1" {
		t.Errorf("the runs page started by a schedule: %v, want the two scheduled runs", got)
	}
	if got := shown("&trigger=schedule:1"); len(got) != 1 || got[scheduled[1]] != "schedule 1" {
		t.Errorf("the runs page started by schedule 1: %v, want its run alone", got)
	}
	page := a.must(200, "GET", "/runs?flow="+id+"&trigger=schedule", nil, "Accept", "text/html").String()
	if !strings.Contains(page, `<option value="schedule" selected>`) {
		t.Errorf("the runs page filtered by trigger does not show its filter")
	}
	page = a.must(200, "GET", "/runs?flow="+id+"&trigger=schedule:1", nil, "Accept", "text/html").String()
	if !strings.Contains(page, `<option value="schedule:1" selected>schedule 1</option>`) {
		t.Errorf("the runs page filtered by schedule 1 does not show its filter")
	}

	// A run's page says which schedule started it.
	started := regexp.MustCompile(`started by <span class="badge trigger" id="run-trigger">([^<]*)</span>`)
	for run, want := range map[string]string{scheduled[0]: "schedule 0", scheduled[1]: "schedule 1", manual: ""} {
		page := a.must(200, "GET", "/flows/"+id+"/runs/"+run, nil, "Accept", "text/html").String()
		got := ""
		if m := started.FindStringSubmatch(page); m != nil {
			got = m[1]
		}
		if got != want {
			t.Errorf("the page of run %s says started by %q, want %q", run, got, want)
		}
	}
}

// Notes are layout, not part of a version: a rollback brings back what the version runs
// and keeps the notes the canvas has now, the draft's when there is one, else the file's.
func TestARollbackKeepsTheNotesOnTheCanvas(t *testing.T) {
	storetest.Each(t, func(t *testing.T, r *store.Redis) {
		a := newAPI(t, r)
		id, v1doc := a.flowDoc("linear", nil)
		var v1, v2 server.SavedFlow
		a.must(http.StatusCreated, "PUT", "/api/flows/"+id, v1doc).into(t, &v1)
		var d map[string]any
		json.Unmarshal(v1doc, &d)
		d["nodes"].([]any)[3].(map[string]any)["params"] = map[string]any{"value": "{shouted: .greeting}"}
		d["notes"] = []any{map[string]any{"id": "n1", "text": "Shouts since v2.", "position": map[string]any{"x": 0, "y": 200}}}
		v2doc, _ := json.Marshal(d)
		a.must(http.StatusOK, "PUT", "/api/flows/"+id, v2doc).into(t, &v2)

		notes := func(doc []byte) string {
			t.Helper()
			var d struct {
				Notes []struct{ Text string } `json:"notes"`
			}
			if err := json.Unmarshal(doc, &d); err != nil {
				t.Fatal(err)
			}
			var out []string
			for _, n := range d.Notes {
				out = append(out, n.Text)
			}
			return strings.Join(out, " | ")
		}
		// Without a draft: the saved file's note stays.
		a.must(200, "POST", "/api/flows/"+id+"/rollback", map[string]string{"version": v1.Version}).into(t, new(server.RolledBack))
		file := a.must(200, "GET", "/api/flows/"+id, nil).body
		if got := notes(file); got != "Shouts since v2." {
			t.Errorf("after rolling back with no draft the notes are %q, want the saved file's", got)
		}
		var h engine.VersionHistory
		a.must(200, "GET", "/api/flows/"+id+"/versions", nil).into(t, &h)
		if h.Current != v1.Version {
			t.Errorf("current %.12s, want v1 %.12s: the notes changed the version", h.Current, v1.Version)
		}
		if r := a.settle(id, a.start(id, map[string]any{"input": map[string]any{"name": "Cy"}})); string(r.Output) != `{"greeting":"HELLO, CY!"}` {
			t.Errorf("a run after rollback: %+v", r)
		}

		// With a draft: the draft's notes, the ones the editor showed, stay; the draft goes.
		d["notes"] = append(d["notes"].([]any), map[string]any{"id": "n2", "text": "Written in the draft."})
		draft, _ := json.Marshal(d)
		a.must(200, "PUT", "/api/flows/"+id+"/draft", draft)
		a.must(200, "POST", "/api/flows/"+id+"/rollback", map[string]string{"version": v2.Version}).into(t, new(server.RolledBack))
		if got := notes(a.must(200, "GET", "/api/flows/"+id, nil).body); got != "Shouts since v2. | Written in the draft." {
			t.Errorf("after rolling back from a draft the notes are %q, want the draft's", got)
		}
		a.must(http.StatusNotFound, "GET", "/api/flows/"+id+"/draft", nil)
	})
}
