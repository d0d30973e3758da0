package server_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/server"
	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/storetest"
	"github.com/sluicehq/sluice/teams"
)

func gitIn(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return string(out)
}

// With commits on (serve --git-commit), a save is a commit of the flow's file by the
// person who saved, with the save's note as its message; a service key's change is
// the key's; a delete removes the files; nothing else of the folder goes in.
func TestASaveIsCommittedByWhoeverSaved(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git binary to check the repository with")
	}
	a := newAPI(t, storetest.Embedded(t), func(_ *server.Config, d *server.Deps) {
		gitIn(t, d.Library.Dir, "init", "-q", "-b", "main")
		g, err := store.OpenGitRepo(d.Library.Dir)
		if err != nil {
			t.Fatal(err)
		}
		d.Git = g
	})
	dir := a.lib.Dir
	a.person("ada@example.com", "password-ada", map[string]teams.Role{teams.DefaultWorkspace: teams.Editor})
	b := a.browser()
	b.signin("ada@example.com", "password-ada")
	os.WriteFile(dir+"/scratch.json", []byte(`{"not": "saved"}`), 0o644)

	id, doc := a.flowDoc("linear", nil)
	r := a.do("PUT", "/api/flows/"+id+"?message=First+cut", doc, "Authorization", "", "Cookie", b.cookie())
	if r.status != http.StatusCreated {
		t.Fatalf("save: %d %s", r.status, r.body)
	}
	if got := gitIn(t, dir, "log", "-1", "--format=%an <%ae>%n%B"); !strings.HasPrefix(got, "ada <ada@example.com>\nFirst cut\n\nSave flow "+id) {
		t.Errorf("the save's commit:\n%s", got)
	}
	if got := strings.TrimSpace(gitIn(t, dir, "show", "--name-only", "--format=", "HEAD")); got != id+".json" {
		t.Errorf("the commit holds %q, want the flow's file only", got)
	}

	var key struct{ Key string }
	a.must(http.StatusCreated, "POST", "/api/keys", map[string]any{"role": "editor", "service": "ci"}).into(t, &key)
	cases := `{"sluice_cases": 1, "cases": [{"id": "ada", "input": {"name": "Ada"}, "expect": [{"succeeds": true}]}]}`
	a.must(http.StatusOK, "PUT", "/api/flows/"+id+"/cases", cases, "Authorization", "Bearer "+key.Key)
	if got := gitIn(t, dir, "log", "-1", "--format=%an <%ae>|%s|%cn"); !strings.HasPrefix(got, "service ci (key slk_") || !strings.Contains(got, "<ci@sluice.invalid>|Save the test cases of flow "+id+"|Sluice") {
		t.Errorf("the cases' commit: %s", got)
	}
	a.must(http.StatusNoContent, "DELETE", "/api/flows/"+id, nil, "Authorization", "", "Cookie", b.cookie())
	if got := gitIn(t, dir, "ls-tree", "-r", "--name-only", "HEAD"); got != "" {
		t.Errorf("files at HEAD after the delete: %q", got)
	}
	if got := gitIn(t, dir, "log", "--format=%s"); strings.Count(got, "\n") != 3 || !strings.HasPrefix(got, "Delete flow "+id) {
		t.Errorf("history:\n%s", got)
	}
	if st := gitIn(t, dir, "status", "--porcelain"); st != "?? scratch.json\n" {
		t.Errorf("git status: %q, want only the file nobody saved", st)
	}
}

// gitAPI is an API whose library is a new git repository (branch main) it commits to.
func gitAPI(t *testing.T) *api {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git binary to check the repository with")
	}
	return newAPI(t, storetest.Embedded(t), func(_ *server.Config, d *server.Deps) {
		gitIn(t, d.Library.Dir, "init", "-q", "-b", "main")
		g, err := store.OpenGitRepo(d.Library.Dir)
		if err != nil {
			t.Fatal(err)
		}
		d.Git = g
	})
}

// postForm posts a page's form (with the flows page's CSRF token), as a browser does.
func (a *api) postForm(path string) res {
	a.t.Helper()
	page := a.must(http.StatusOK, "GET", "/", nil)
	m := csrfInput.FindStringSubmatch(page.String())
	if m == nil {
		a.t.Fatal("the flows page has no CSRF token")
	}
	h := append(a.bearer(), "Content-Type", "application/x-www-form-urlencoded", "Origin", a.base)
	for _, c := range (&http.Response{Header: page.header}).Cookies() {
		if c.Name == "sluice_csrf" {
			h = append(h, "Cookie", c.Name+"="+c.Value)
		}
	}
	return a.send("POST", path, strings.NewReader(url.Values{"_csrf": {m[1]}}.Encode()), h...)
}

// Importing a flow and duplicating one write a flow's file: each is committed at once,
// as a save is, not at the flow's first save.
func TestImportAndDuplicateAreCommitted(t *testing.T) {
	a := gitAPI(t)
	dir := a.lib.Dir
	id, doc := a.flowDoc("linear", nil)
	a.must(http.StatusCreated, "POST", "/api/flows?message=From+the+old+server", doc)
	if got := gitIn(t, dir, "log", "-1", "--format=%B"); !strings.HasPrefix(got, "From the old server\n\nImport flow "+id) {
		t.Errorf("the import's commit:\n%s", got)
	}
	if got := strings.TrimSpace(gitIn(t, dir, "show", "--name-only", "--format=", "HEAD")); got != id+".json" {
		t.Errorf("the import's commit holds %q, want the flow's file", got)
	}

	r := a.postForm("/flows/" + id + "/duplicate")
	if r.status != http.StatusSeeOther || r.header.Get("Location") != "/flows/"+id+"-copy" {
		t.Fatalf("duplicate: %d %s", r.status, r.header.Get("Location"))
	}
	if got := gitIn(t, dir, "log", "-1", "--format=%s"); got != "Duplicate flow "+id+" as "+id+"-copy\n" {
		t.Errorf("the duplicate's commit: %q", got)
	}
	if got := strings.TrimSpace(gitIn(t, dir, "show", "--name-only", "--format=", "HEAD")); got != id+"-copy.json" {
		t.Errorf("the duplicate's commit holds %q, want the copy's file", got)
	}
	if st := gitIn(t, dir, "status", "--porcelain"); st != "" {
		t.Errorf("git status after the import and the duplicate: %q, want clean", st)
	}
}

// A save that cannot be committed (HEAD detached) is still saved and answered 200, with
// the reason in the Sluice-Warning header; it is logged and counted. Once HEAD is on a
// branch again, the next save commits the flow as it then is, without a warning.
func TestASaveThatIsNotCommittedSaysSo(t *testing.T) {
	a := gitAPI(t)
	dir := a.lib.Dir
	id, doc := a.flowDoc("linear", nil)
	if r := a.do("PUT", "/api/flows/"+id, doc); r.status != http.StatusCreated || r.header.Get(server.WarningHeader) != "" {
		t.Fatalf("first save: %d %q", r.status, r.header.Get(server.WarningHeader))
	}
	gitIn(t, dir, "checkout", "-q", "--detach")

	var d map[string]any
	json.Unmarshal(doc, &d)
	d["name"] = "Renamed while detached"
	doc2, _ := json.Marshal(d)
	r := a.do("PUT", "/api/flows/"+id, doc2)
	want := "saved, but not committed to git (git: HEAD is detached; check out a branch for saves to be committed to); the flow's next save commits its files"
	if r.status != http.StatusOK || r.header.Get(server.WarningHeader) != want {
		t.Fatalf("a save on a detached HEAD: %d, %s: %q\nwant %q", r.status, server.WarningHeader, r.header.Get(server.WarningHeader), want)
	}
	var got map[string]any
	a.must(http.StatusOK, "GET", "/api/flows/"+id, nil).into(t, &got)
	if got["name"] != "Renamed while detached" {
		t.Errorf("the save was lost: %v", got["name"])
	}
	if m := a.must(http.StatusOK, "GET", "/metrics", nil).String(); !strings.Contains(m, "sluice_git_commit_failures_total 1\n") {
		t.Errorf("the failure is not counted:\n%s", m)
	}
	if !strings.Contains(a.logs.String(), "git: the change is saved but not committed") {
		t.Errorf("the failure is not logged")
	}

	gitIn(t, dir, "checkout", "-q", "main")
	d["name"] = "Back on main"
	doc3, _ := json.Marshal(d)
	if r := a.do("PUT", "/api/flows/"+id, doc3); r.status != http.StatusOK || r.header.Get(server.WarningHeader) != "" {
		t.Fatalf("a save back on main: %d %q", r.status, r.header.Get(server.WarningHeader))
	}
	if got := gitIn(t, dir, "show", "HEAD:"+id+".json"); !strings.Contains(got, "Back on main") {
		t.Errorf("the flow's next save did not commit it as it is:\n%s", got)
	}
}
