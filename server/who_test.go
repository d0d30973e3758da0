package server_test

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/server"
	"github.com/sluicehq/sluice/store/storetest"
	"github.com/sluicehq/sluice/teams"
)

// Flows and runs say who changed or started them: each version who saved it (a
// person, a key, SLUICE_TOKEN; none for a file put in the folder), each run who started
// it (a person, a key, SLUICE_TOKEN, a fork's person) or what (the webhook ingress), in
// the API, the flow list, the runs list and the run page.
func TestFlowsAndRunsSayWhoChangedOrStartedThem(t *testing.T) {
	a := newAPI(t, storetest.Real(t), func(c *server.Config, _ *server.Deps) {
		c.HookSecret = func(string) string { return "hook-secret-of-who-1" }
	})
	a.person("ada@example.com", "password-of-ada", map[string]teams.Role{teams.DefaultWorkspace: teams.Editor})
	ada := a.browser()
	ada.signin("ada@example.com", "password-of-ada")
	key := a.serviceKey(teams.DefaultWorkspace, teams.Operator)
	prefix, _, _ := strings.Cut(strings.TrimPrefix(key, teams.KeyPrefix), "_")

	// Versions: ada saves, then SLUICE_TOKEN saves another, then a file is written.
	id, doc := a.flowDoc("linear", nil)
	if r := ada.api("PUT", "/api/flows/"+id, string(doc)); r.status != http.StatusCreated {
		t.Fatalf("ada's save: %d %s", r.status, r)
	}
	second := strings.Replace(string(doc), `"Linear pipeline"`, `"Linear pipeline 2"`, 1)
	a.must(http.StatusOK, "PUT", "/api/flows/"+id, second)
	third := strings.Replace(string(doc), `"Linear pipeline"`, `"Linear pipeline 3"`, 1)
	if err := os.WriteFile(filepath.Join(a.lib.Dir, id+".json"), []byte(third), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := a.sync.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	var h struct {
		Versions []struct{ Name, By string }
	}
	a.must(http.StatusOK, "GET", "/api/flows/"+id+"/versions", nil).into(t, &h)
	by := map[string]string{}
	for _, v := range h.Versions {
		by[v.Name] = v.By
	}
	if len(h.Versions) != 3 || by["Linear pipeline"] != "ada@example.com" || by["Linear pipeline 2"] != "SLUICE_TOKEN" || by["Linear pipeline 3"] != "" {
		t.Errorf("who saved each version: %+v", h.Versions)
	}
	// The flow list names who saved what the file holds; the token's save, for now.
	a.must(http.StatusOK, "PUT", "/api/flows/"+id, second)
	if home := a.must(http.StatusOK, "GET", "/", nil, "Accept", "text/html").String(); !strings.Contains(home, `saved by SLUICE_TOKEN`) {
		t.Error("the flow list does not say who saved the flow")
	}

	// Runs: a person, a key, the token, a fork and the webhook ingress.
	started := map[string]string{}
	var s run
	if r := ada.api("POST", "/api/flows/"+id+"/runs?wait=20s", `{"input": {"name": "Ada"}}`); r.status != http.StatusOK {
		t.Fatalf("ada's run: %d %s", r.status, r)
	} else {
		r.into(t, &s)
	}
	started[s.ID] = "ada@example.com"
	adaRun := s.ID
	a.must(http.StatusOK, "POST", "/api/flows/"+id+"/runs?wait=20s", `{"input": {"name": "Key"}}`, "Authorization", "Bearer "+key).into(t, &s)
	started[s.ID] = "service svc (key slk_" + prefix + ")"
	a.must(http.StatusOK, "POST", "/api/flows/"+id+"/runs?wait=20s", `{"input": {"name": "Tok"}}`).into(t, &s)
	started[s.ID] = "SLUICE_TOKEN"
	var ck struct{ Checkpoints []struct{ ID string } }
	a.must(http.StatusOK, "GET", "/api/flows/"+id+"/runs/"+adaRun+"/checkpoints", nil).into(t, &ck)
	if r := ada.api("POST", "/api/flows/"+id+"/runs/"+adaRun+"/fork?wait=20s", `{"checkpoint": "`+ck.Checkpoints[0].ID+`"}`); r.status != http.StatusOK {
		t.Fatalf("ada's fork: %d %s", r.status, r)
	} else {
		r.into(t, &s)
	}
	started[s.ID] = "ada@example.com"
	var hs server.Started
	a.must(http.StatusAccepted, "POST", "/hooks/"+id, `{"name": "Hook"}`, "Authorization", "Bearer hook-secret-of-who-1").into(t, &hs)
	hookRun := hs.Run
	a.settle(id, hookRun)

	var list struct {
		Runs []struct{ ID, By, Trigger string }
	}
	a.must(http.StatusOK, "GET", "/api/flows/"+id+"/runs", nil).into(t, &list)
	if len(list.Runs) != 5 {
		t.Fatalf("runs: %+v", list.Runs)
	}
	for _, r := range list.Runs {
		switch {
		case r.ID == hookRun:
			if r.Trigger != "hook" || r.By != "" {
				t.Errorf("the hook's run: %+v", r)
			}
		case r.By != started[r.ID]:
			t.Errorf("run %s was started by %q, the API says %q", r.ID, started[r.ID], r.By)
		}
	}
	runs := a.must(http.StatusOK, "GET", "/runs?flow="+id, nil, "Accept", "text/html").String()
	for _, want := range []string{`<td class="run-by small">ada@example.com</td>`, `<td class="run-by small">SLUICE_TOKEN</td>`, `<td class="run-by small">webhook</td>`, `<td class="run-by small">service svc (key slk_` + prefix + `)</td>`} {
		if !strings.Contains(runs, want) {
			t.Errorf("the runs page lacks %s", want)
		}
	}
	if page := a.must(http.StatusOK, "GET", "/flows/"+id+"/runs/"+adaRun, nil, "Accept", "text/html").String(); !strings.Contains(page, `started by <span id="run-by">ada@example.com</span>`) {
		t.Error("the run page does not say who started the run")
	}
}
