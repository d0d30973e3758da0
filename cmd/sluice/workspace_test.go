package main

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/store/storetest"
)

// `sluice worker --workspace acme` serves the files given as acme's flows: a run that
// serve (with no workers of its own) starts in acme is run by it, and the flow of the
// same id in the default workspace is another flow.
func TestAWorkerServesTheWorkspaceItIsGiven(t *testing.T) {
	r := storetest.Real(t)
	dir := t.TempDir()
	id, path := writeExampleFlow(t, dir, "linear", nil)
	ws := "acme-" + id[len(id)-8:]
	storetest.DeleteFlowKeys(t, r, id) // serve publishes the folder's own copy too
	storetest.DeleteFlowKeys(t, r, ws+"."+id)
	storetest.ForgetTeams(t, r, nil, []string{ws})
	if err := os.MkdirAll(filepath.Join(dir, ws), 0o755); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(path)
	if err := os.WriteFile(filepath.Join(dir, ws, id+".json"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	const token = "workspace-test-token-1"
	env := []string{"REDIS_URL=" + storetest.URL(), "SLUICE_TOKEN=" + token}
	srv := start(t, env, "serve", "--addr", "127.0.0.1:0", "--flows", dir, "--workers", "0")
	base := srv.waitLine(t, servingLine, 20*time.Second)[1]
	asToken(t, "POST", base+"/api/workspaces", token, `{"id": "`+ws+`"}`, http.StatusCreated, nil)
	worker := start(t, env, "worker", "--workspace", ws, filepath.Join(dir, ws, id+".json"))
	worker.waitLine(t, regexp.MustCompile(`msg="serving flow".*`+regexp.QuoteMeta(ws+"."+id)), 20*time.Second)

	req, _ := http.NewRequest("POST", base+"/api/flows/"+id+"/runs?wait=30s", strings.NewReader(`{"input": {"name": "Ada"}}`))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Sluice-Workspace", ws)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var run struct {
		Flow, Status string
		Error        any
	}
	if err := jsonDecode(resp, &run); err != nil {
		t.Fatal(err)
	}
	if run.Status != "succeeded" || run.Flow != ws+"."+id {
		t.Fatalf("the run in %s: %d %+v", ws, resp.StatusCode, run)
	}
}

func jsonDecode(resp *http.Response, v any) error {
	defer resp.Body.Close()
	return json.NewDecoder(resp.Body).Decode(v)
}

// A worker refuses a flow file of a workspace that reads a secret the operator gives
// another workspace (--secrets WORKSPACE:NAME), and serves the same file as that
// workspace's: a file dropped into a folder does not get past docs/teams.md's rule.
func TestAWorkerRefusesAFlowThatReadsAnotherWorkspacesSecret(t *testing.T) {
	storetest.Real(t)
	dir := t.TempDir()
	id := storetest.FlowID(t)
	doc := `{"sluice": 1, "id": "` + id + `", "nodes": [
		{"id": "in", "type": "input"},
		{"id": "call", "type": "http", "params": {"url": "https://example.com/", "headers": {"Authorization": {"$env": "TEAM_A_KEY"}}}},
		{"id": "out", "type": "output"}],
		"edges": [{"from": "in", "to": "call"}, {"from": "call", "to": "out"}]}`
	path := filepath.Join(dir, id+".json")
	if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	wsa, wsb := "wsa-"+id[len(id)-8:], "wsb-"+id[len(id)-8:]
	storetest.DeleteFlowKeys(t, storetest.Real(t), wsa+"."+id)
	env := []string{"REDIS_URL=" + storetest.URL(), "TEAM_A_KEY=team-a-secret", "SLUICE_SECRETS=" + wsa + ":TEAM_A_KEY"}
	refused := start(t, env, "worker", "--workspace", wsb, path)
	select {
	case err := <-refused.done:
		out := strings.Join(refused.allLines(), "\n")
		if err == nil || !strings.Contains(out, "nodes[1].params.headers.Authorization.$env") || !strings.Contains(out, "may not read the environment variable TEAM_A_KEY") {
			t.Fatalf("the worker of %s: %v\n%s", wsb, err, out)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("the worker did not refuse the flow within 60s")
	}
	served := start(t, env, "worker", "--workspace", wsa, path)
	served.waitLine(t, regexp.MustCompile(`msg="serving flow".*`+regexp.QuoteMeta(wsa+"."+id)), 30*time.Second)
}
