package store_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/store"
)

// gitCmd runs the git binary in dir (the tests check what go-git wrote with real git).
func gitCmd(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=Setup", "GIT_AUTHOR_EMAIL=setup@example.com", "GIT_COMMITTER_NAME=Setup",
		"GIT_COMMITTER_EMAIL=setup@example.com", "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return string(out)
}

func needGit(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git binary to check the repository with")
	}
}

// A save's commit holds the flow's file and nothing else — not a file someone staged
// by hand, nor another changed file — with the author and message given; real git
// then finds the repository sound and the saved file clean, and the staged file still
// staged. A removed file is a removal.
func TestGitCommitHoldsOnlyTheSavedFilesWithTheirAuthor(t *testing.T) {
	needGit(t)
	root := t.TempDir()
	gitCmd(t, root, "init", "-q", "-b", "main")
	os.WriteFile(filepath.Join(root, "README.md"), []byte("app\n"), 0o644)
	flowsDir := filepath.Join(root, "flows")
	os.MkdirAll(filepath.Join(flowsDir, "acme"), 0o755)
	os.WriteFile(filepath.Join(flowsDir, "triage.json"), []byte(`{"v": 1}`), 0o644)
	os.WriteFile(filepath.Join(flowsDir, "other.json"), []byte(`{"other": 1}`), 0o644)
	gitCmd(t, root, "add", "-A")
	gitCmd(t, root, "commit", "-q", "-m", "start")

	g, err := store.OpenGitRepo(flowsDir)
	if err != nil {
		t.Fatal(err)
	}
	// Someone stages a file by hand; another flow file changes without being saved.
	os.WriteFile(filepath.Join(root, "notes.txt"), []byte("staged by hand\n"), 0o644)
	gitCmd(t, root, "add", "notes.txt")
	os.WriteFile(filepath.Join(flowsDir, "other.json"), []byte(`{"other": 2}`), 0o644)
	// The save: triage changes, and a workspace's flow and its cases are new.
	os.WriteFile(filepath.Join(flowsDir, "triage.json"), []byte(`{"v": 2}`), 0o644)
	os.WriteFile(filepath.Join(flowsDir, "acme", "triage.json"), []byte(`{"acme": 1}`), 0o644)
	os.WriteFile(filepath.Join(flowsDir, "acme", "triage.cases.json"), []byte(`{"cases": []}`), 0o644)
	h, err := g.Commit([]string{"triage.json", "acme/triage.json", "acme/triage.cases.json"}, store.Author{Name: "Ada Lovelace", Email: "ada@example.com"}, "Shorter prompt")
	if err != nil || len(h) != 40 {
		t.Fatalf("commit: %q %v", h, err)
	}
	if got := strings.TrimSpace(gitCmd(t, root, "log", "-1", "--format=%H|%an <%ae>|%cn|%s")); got != h+"|Ada Lovelace <ada@example.com>|Sluice|Shorter prompt" {
		t.Errorf("the commit: %s", got)
	}
	if got := strings.Fields(gitCmd(t, root, "show", "--name-only", "--format=", "HEAD")); strings.Join(got, " ") != "flows/acme/triage.cases.json flows/acme/triage.json flows/triage.json" {
		t.Errorf("the commit changed %v, want the three saved files only", got)
	}
	gitCmd(t, root, "fsck", "--strict")
	status := gitCmd(t, root, "status", "--porcelain")
	if strings.Contains(status, "triage") || !strings.Contains(status, "A  notes.txt") || !strings.Contains(status, " M flows/other.json") {
		t.Errorf("git status after the commit:\n%s", status)
	}
	if got := gitCmd(t, root, "show", "HEAD:README.md"); got != "app\n" {
		t.Errorf("README at HEAD: %q", got)
	}
	// Nothing changed: no commit.
	if h2, err := g.Commit([]string{"triage.json"}, store.Author{Name: "Ada", Email: "ada@example.com"}, "again"); err != nil || h2 != "" {
		t.Errorf("a commit of an unchanged file: %q %v, want none", h2, err)
	}
	// A deleted flow is a removal; its folder goes when empty.
	os.Remove(filepath.Join(flowsDir, "acme", "triage.json"))
	os.Remove(filepath.Join(flowsDir, "acme", "triage.cases.json"))
	if _, err := g.Commit([]string{"acme/triage.json", "acme/triage.cases.json"}, store.Author{Name: "Bo", Email: "bo@example.com"}, "Delete acme.triage"); err != nil {
		t.Fatal(err)
	}
	if got := gitCmd(t, root, "ls-tree", "-r", "--name-only", "HEAD"); strings.Contains(got, "acme") || !strings.Contains(got, "flows/triage.json") {
		t.Errorf("files at HEAD after the removal:\n%s", got)
	}
	gitCmd(t, root, "fsck", "--strict")
	if status := gitCmd(t, root, "status", "--porcelain"); strings.Contains(status, "acme") {
		t.Errorf("git status after the removal:\n%s", status)
	}
}

// A ref's flows, written into a folder: its flow and cases files, the workspaces'
// ones too, never its drafts; a later ref replaces them and removes what it lacks.
func TestGitSnapshotWritesTheFlowsOfARef(t *testing.T) {
	needGit(t)
	root := t.TempDir()
	gitCmd(t, root, "init", "-q", "-b", "main")
	write := func(rel, data string) {
		p := filepath.Join(root, rel)
		os.MkdirAll(filepath.Dir(p), 0o755)
		os.WriteFile(p, []byte(data), 0o644)
	}
	write("flows/a.json", `{"a": 1}`)
	write("flows/a.cases.json", `{"cases": 1}`)
	write("flows/acme/b.json", `{"b": 1}`)
	write("flows/.drafts/a.json", `{"draft": 1}`)
	write("flows/README.md", "docs")
	gitCmd(t, root, "add", "-A")
	gitCmd(t, root, "commit", "-q", "-m", "v1")
	gitCmd(t, root, "tag", "v1")
	write("flows/a.json", `{"a": 2}`)
	gitCmd(t, root, "rm", "-q", "flows/acme/b.json")
	gitCmd(t, root, "commit", "-q", "-am", "v2")

	g, err := store.OpenGitRepo(filepath.Join(root, "flows"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	v1, err := g.Resolve("v1")
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Snapshot(v1, dir); err != nil {
		t.Fatal(err)
	}
	read := func(rel string) string { b, _ := os.ReadFile(filepath.Join(dir, rel)); return string(b) }
	if read("a.json") != `{"a": 1}` || read("a.cases.json") != `{"cases": 1}` || read("acme/b.json") != `{"b": 1}` || read(".drafts/a.json") != "" || read("README.md") != "" {
		t.Errorf("snapshot of v1: a=%q cases=%q b=%q draft=%q readme=%q", read("a.json"), read("a.cases.json"), read("acme/b.json"), read(".drafts/a.json"), read("README.md"))
	}
	main, _ := g.Resolve("main")
	if err := g.Snapshot(main, dir); err != nil {
		t.Fatal(err)
	}
	if read("a.json") != `{"a": 2}` || read("acme/b.json") != "" {
		t.Errorf("snapshot of main: a=%q b=%q", read("a.json"), read("acme/b.json"))
	}
	if b, err := g.ReadAt(v1, "a.json"); err != nil || string(b) != `{"a": 1}` {
		t.Errorf("ReadAt v1 a.json: %q %v", b, err)
	}
	if _, err := g.Resolve("no-such-ref"); err == nil {
		t.Error("an unknown ref resolved")
	}
}
