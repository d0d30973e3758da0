package server_test

import (
	"net/http"
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
