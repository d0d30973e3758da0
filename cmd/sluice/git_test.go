package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/flows/engine"
	"github.com/sluicehq/sluice/store/storetest"
)

func gitRun(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=Dev", "GIT_AUTHOR_EMAIL=dev@example.com", "GIT_COMMITTER_NAME=Dev",
		"GIT_COMMITTER_EMAIL=dev@example.com", "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return string(out)
}

// api sends a request to a serve with the token and returns the status and body.
func apiCall(t *testing.T, base, token, method, path, body string) (int, string) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, _ := http.NewRequest(method, base+path, rd)
	req.Header.Set("Authorization", "Bearer "+token)
	if method != "GET" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// serve --git-ref serves the flows as a ref has them, read-only, and follows a branch
// as it moves; worker --git-ref runs a ref's version of a file, whatever the disk has;
// serve --git-commit commits a save by the key that saved it.
func TestServeAndWorkerServeAGitRefAndSavesAreCommitted(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git binary to set up the repository with")
	}
	rdb := storetest.Real(t)
	root := t.TempDir()
	flowsDir := filepath.Join(root, "flows")
	os.MkdirAll(flowsDir, 0o755)
	gitRun(t, root, "init", "-q", "-b", "main")
	id, path := writeExampleFlow(t, flowsDir, "linear", nil)
	storetest.DeleteFlowKeys(t, rdb, id)
	storetest.ForgetServiceKeys(t, rdb, "deploy-bot") // the key it makes in serve's team store
	gitRun(t, root, "add", "-A")
	gitRun(t, root, "commit", "-q", "-m", "v1")
	gitRun(t, root, "tag", "v1")
	v1, _ := os.ReadFile(path)
	os.WriteFile(path, bytes.Replace(v1, []byte("Hello, "), []byte("Hi, "), 1), 0o644)
	gitRun(t, root, "commit", "-q", "-am", "v2")
	// The disk has a third content nobody committed.
	os.WriteFile(path, bytes.Replace(v1, []byte("Hello, "), []byte("Uncommitted, "), 1), 0o644)

	const token = "git-ref-test-token-41a"
	env := []string{"REDIS_URL=" + storetest.URL(), "SLUICE_TOKEN=" + token}
	p := start(t, env, "serve", "--addr", "127.0.0.1:0", "--flows", flowsDir, "--git-ref", "main", "--workers", "1")
	base := p.waitLine(t, servingLine, 30*time.Second)[1]
	runOutput := func() string {
		t.Helper()
		status, body := apiCall(t, base, token, "POST", "/api/flows/"+id+"/runs?wait=20s", `{"input": {"name": "Ada"}}`)
		var r struct {
			Output json.RawMessage `json:"output"`
		}
		if status != 200 || json.Unmarshal([]byte(body), &r) != nil {
			t.Fatalf("run: %d %s", status, body)
		}
		return string(r.Output)
	}
	if got := runOutput(); got != `{"greeting":"HI, ADA!"}` {
		t.Errorf("a run on the serve of main: %s, want main's (v2) output", got)
	}
	status, body := apiCall(t, base, token, "PUT", "/api/flows/"+id, string(v1))
	if status != http.StatusForbidden || !strings.Contains(body, `serves git ref \"main\"`) {
		t.Errorf("a save on a serve of a ref: %d %s", status, body)
	}
	// The branch moves: the serve follows it.
	os.WriteFile(path, bytes.Replace(v1, []byte("Hello, "), []byte("Hey, "), 1), 0o644)
	gitRun(t, root, "commit", "-q", "-am", "v3")
	deadline := time.Now().Add(30 * time.Second)
	for got := runOutput(); got != `{"greeting":"HEY, ADA!"}`; got = runOutput() {
		if time.Now().After(deadline) {
			t.Fatalf("the serve of main still runs %s after main moved", got)
		}
	}
	p.cmd.Process.Kill()

	// A worker at v1 publishes v1's version, not the disk's.
	e := engine.New(rdb, registry(nil), engine.Options{})
	plan, _, err := e.Compile(v1)
	if err != nil {
		t.Fatal(err)
	}
	w := start(t, env, "worker", "--git-ref", "v1", "--dispatch=false", "--schedule=false", path)
	w.waitLine(t, regexp.MustCompile(`msg="serving flow" flow=`+regexp.QuoteMeta(id)+` version=`+plan.Version[:12]), 30*time.Second)
	w.cmd.Process.Kill()

	// serve --git-commit: a save through the API is a commit by the key that saved.
	gitRun(t, root, "checkout", "-q", "--", ".")
	c := start(t, env, "serve", "--addr", "127.0.0.1:0", "--flows", flowsDir, "--git-commit", "--workers", "0")
	base = c.waitLine(t, servingLine, 30*time.Second)[1]
	status, body = apiCall(t, base, token, "POST", "/api/keys", `{"role": "editor", "service": "deploy-bot"}`)
	var key struct{ Key string }
	if status != http.StatusCreated || json.Unmarshal([]byte(body), &key) != nil {
		t.Fatalf("a key: %d %s", status, body)
	}
	if status, body = apiCall(t, base, key.Key, "PUT", "/api/flows/"+id+"?message=Back+to+hello", string(v1)); status != 200 {
		t.Fatalf("save: %d %s", status, body)
	}
	if got := gitRun(t, root, "log", "-1", "--format=%an <%ae>|%s"); !strings.Contains(got, "service deploy-bot") || !strings.Contains(got, "<deploy-bot@sluice.invalid>|Back to hello") {
		t.Errorf("the save's commit: %s", got)
	}
	if got := gitRun(t, root, "show", "HEAD:flows/"+id+".json"); !strings.Contains(got, "Hello, ") {
		t.Errorf("the committed file: %s", got)
	}
}

// With serve --git-commit on a repository whose HEAD is detached, the editor's save
// succeeds and says it is not committed, and keeps saying so (a duplicate's editor too)
// until a save is committed: then the warning goes.
func TestBrowserASaveNotCommittedToGitIsShown(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git binary to set up the repository with")
	}
	rdb := storetest.Real(t)
	dir := t.TempDir()
	gitRun(t, dir, "init", "-q", "-b", "main")
	flowID, _ := writeExampleFlow(t, dir, "linear", nil)
	storetest.DeleteFlowKeys(t, rdb, flowID)
	storetest.DeleteFlowKeys(t, rdb, flowID+"-copy")
	gitRun(t, dir, "add", ".")
	gitRun(t, dir, "commit", "-q", "-m", "the flow")
	gitRun(t, dir, "checkout", "-q", "--detach")
	base := serveForBrowserEnv(t, dir, nil, "--git-commit")
	b := newBrowser(t, base)

	b.open("/flows/" + flowID)
	b.waitFor("the editor", `document.querySelectorAll(".react-flow__node").length === 4`)
	b.click("#save-button")
	b.waitText("#toast", "not committed to git")
	b.waitText("#git-warning", "saved, but not committed to git (git: HEAD is detached; check out a branch for saves to be committed to)")
	b.shot("editor-git-warning")

	// The duplicate is written on the detached HEAD too: its editor says so.
	b.open("/")
	b.click(fmt.Sprintf(`tr[data-flow=%q] form[action$="/duplicate"] button`, flowID))
	b.waitFor("the copy's editor", fmt.Sprintf(`location.pathname === "/flows/%s-copy" && document.querySelectorAll(".react-flow__node").length === 4`, flowID))
	b.waitText("#git-warning", "not committed to git")

	gitRun(t, dir, "checkout", "-q", "main")
	b.click("#save-button")
	b.waitFor("the warning gone once the save is committed", `!document.getElementById("git-warning")`)
	if got := gitRun(t, dir, "log", "-1", "--format=%s"); !strings.HasPrefix(got, "Save flow "+flowID+"-copy") {
		t.Errorf("the last commit is %q, want the copy's save", got)
	}
}

// serve --git-ref publishes the ref's flows before it says it serves, as a serve of a
// folder does (TestServePublishesItsFlowsBeforeItServes): as soon as the serving line
// is out, every flow of a ref with many has the ref's version in dev — not the disk's,
// which nobody committed — so a promotion or a run sent at once finds it.
func TestServeOfAGitRefPublishesItsFlowsBeforeItServes(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git binary to set up the repository with")
	}
	r := storetest.Real(t)
	root := t.TempDir()
	gitRun(t, root, "init", "-q", "-b", "main")
	e := engine.New(r, registry(nil), engine.Options{})
	ids, paths := make([]string, 300), make([]string, 300)
	for i := range ids {
		ids[i], paths[i] = writeExampleFlow(t, root, "linear", nil)
		storetest.DeleteFlowKeys(t, r, ids[i])
	}
	gitRun(t, root, "add", "-A")
	gitRun(t, root, "commit", "-q", "-m", "the flows")
	want := map[string]string{}
	for i, p := range paths {
		b, _ := os.ReadFile(p)
		plan, _, err := e.Compile(b)
		if err != nil {
			t.Fatal(err)
		}
		want[ids[i]] = plan.Version
		os.WriteFile(p, bytes.Replace(b, []byte("Hello, "), []byte("Uncommitted, "), 1), 0o644)
	}
	p := start(t, []string{"REDIS_URL=" + storetest.URL()}, "serve", "--addr", "127.0.0.1:0", "--flows", root, "--git-ref", "main", "--workers", "0")
	base := p.waitLine(t, servingLine, 60*time.Second)[1]
	for i := len(ids) - 1; i >= 0; i-- { // the last written first: the likeliest to be late
		resp, err := http.Get(base + "/api/flows/" + ids[i] + "/environments")
		if err != nil {
			t.Fatal(err)
		}
		var envs struct {
			Environments []engine.EnvState `json:"environments"`
		}
		json.NewDecoder(resp.Body).Decode(&envs)
		resp.Body.Close()
		if len(envs.Environments) == 0 || envs.Environments[0].Version != want[ids[i]] {
			t.Fatalf("flow %d of %d right after the serving line: %+v, want main's version %.12s in dev", i+1, len(ids), envs.Environments, want[ids[i]])
		}
	}
}
