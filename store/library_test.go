package store_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/flows"
	"github.com/sluicehq/sluice/store"
)

func TestADraftLivesBesideTheFileAndOutOfTheLibrarysList(t *testing.T) {
	lib, err := store.NewLibrary(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if err := lib.Save("triage", []byte(`{"v":"published"}`)); err != nil {
		t.Fatal(err)
	}
	if err := lib.SaveDraft("triage", []byte(`{"v":"draft"}`)); err != nil {
		t.Fatal(err)
	}
	if err := lib.SaveDraft("only-draft", []byte(`{"v":"new"}`)); err != nil {
		t.Fatal(err)
	}

	// The file keeps the published document; the draft is apart, where flows/*.json does not reach.
	if b, _ := lib.Load("triage"); string(b) != `{"v":"published"}` {
		t.Errorf("file holds %s", b)
	}
	if b, _ := lib.LoadDraft("triage"); string(b) != `{"v":"draft"}` {
		t.Errorf("draft holds %s", b)
	}
	matches, _ := filepath.Glob(filepath.Join(lib.Dir, "*.json"))
	if len(matches) != 1 || filepath.Base(matches[0]) != "triage.json" {
		t.Errorf("flows/*.json matches %v, want only triage.json", matches)
	}
	files, _ := lib.List()
	if len(files) != 1 || files[0].ID != "triage" {
		t.Errorf("List = %v, want only the published triage", files)
	}
	drafts, _ := lib.Drafts()
	if len(drafts) != 2 || drafts[0].ID != "only-draft" || drafts[1].ID != "triage" {
		t.Errorf("Drafts = %v, want only-draft and triage", drafts)
	}
	if !lib.Exists("only-draft") || !lib.Exists("triage") || lib.Exists("nothing") {
		t.Error("Exists does not see files and drafts alike")
	}

	// Deleting a flow removes its draft; a flow that is only a draft can be deleted.
	if err := lib.Delete("triage"); err != nil {
		t.Fatal(err)
	}
	if _, err := lib.LoadDraft("triage"); flows.ErrorCode(err) != flows.NotFound {
		t.Errorf("draft after delete: %v, want not found", err)
	}
	if err := lib.Delete("only-draft"); err != nil {
		t.Errorf("delete a draft-only flow: %v", err)
	}
	if err := lib.Delete("only-draft"); flows.ErrorCode(err) != flows.NotFound {
		t.Errorf("delete again: %v, want not found", err)
	}
	if err := lib.DeleteDraft("triage"); flows.ErrorCode(err) != flows.NotFound {
		t.Errorf("delete a missing draft: %v, want not found", err)
	}
	if _, err := os.Stat(filepath.Join(lib.Dir, store.DraftDir)); err != nil {
		t.Errorf("drafts folder: %v", err)
	}
	if err := lib.SaveDraft("../x", []byte(`{}`)); flows.ErrorCode(err) != flows.Invalid {
		t.Errorf("a draft with a bad id: %v, want invalid", err)
	}
}

func TestAWorkspacesFlowsLiveInItsFolder(t *testing.T) {
	lib, err := store.NewLibrary(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"triage", "acme.triage", "acme.other"} {
		if err := lib.Save(id, []byte(`{"id": "`+id+`"}`)); err != nil {
			t.Fatal(err)
		}
		if err := lib.SaveDraft(id, []byte(`{}`)); err != nil {
			t.Fatal(err)
		}
		if err := lib.SaveCases(id, []byte(`{}`)); err != nil {
			t.Fatal(err)
		}
	}
	for path, want := range map[string]bool{"triage.json": true, "acme/triage.json": true, "acme/.drafts/other.json": true,
		"acme/triage.cases.json": true, "acme.triage.json": false, "acme.triage.cases.json": false} {
		if _, err := os.Stat(filepath.Join(lib.Dir, path)); (err == nil) != want {
			t.Errorf("%s exists: %v, want %v", path, err == nil, want)
		}
	}
	ids := func(fs []store.LibraryFile, err error) string {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, f := range fs {
			out = append(out, f.ID)
		}
		return strings.Join(out, " ")
	}
	if got := ids(lib.List()); got != "triage" {
		t.Errorf("List = %q", got)
	}
	if got := ids(lib.ListIn("acme")); got != "acme.other acme.triage" {
		t.Errorf("ListIn(acme) = %q", got)
	}
	if got := ids(lib.DraftsIn("acme")); got != "acme.other acme.triage" {
		t.Errorf("DraftsIn(acme) = %q", got)
	}
	if got := ids(lib.ListAll()); got != "triage acme.other acme.triage" {
		t.Errorf("ListAll = %q", got)
	}
	lib.Workspaces = []string{"acme"}
	if got := ids(lib.ListAll()); got != "acme.other acme.triage" {
		t.Errorf("ListAll of acme only = %q", got)
	}
	// The folder decides: a file copied in with a bare id is the workspace's flow.
	if err := os.WriteFile(filepath.Join(lib.Dir, "acme", "copied.json"), []byte(`{"id": "copied"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if b, _ := lib.Load("acme.copied"); string(b) != `{"id": "acme.copied"}` {
		t.Errorf("a bare id in acme's folder reads %s", b)
	}
	if _, err := lib.Load("../triage"); err == nil {
		t.Error("a path outside the folder was read")
	}
}
