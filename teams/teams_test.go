package teams_test

import (
	"strings"
	"testing"

	"github.com/sluicehq/sluice/teams"
)

func TestEachRoleHoldsThePermissionsOfTheOnesBefore(t *testing.T) {
	for _, tc := range []struct {
		role      teams.Role
		perm      teams.Perm
		sensitive bool
		want      bool
	}{
		{teams.Viewer, teams.Read, false, true},
		{teams.Viewer, teams.ReadState, false, true},
		{teams.Viewer, teams.ReadState, true, false},
		{teams.Operator, teams.ReadState, true, true},
		{teams.Viewer, teams.Run, false, false},
		{teams.Operator, teams.Run, false, true},
		{teams.Operator, teams.Edit, false, false},
		{teams.Editor, teams.Run, false, true},
		{teams.Editor, teams.Edit, false, true},
		{teams.Editor, teams.Admin, false, false},
		{teams.Owner, teams.Admin, false, true},
		{"", teams.Read, false, false},
		{"root", teams.Read, false, false},
	} {
		got, why := teams.Allows(tc.role, tc.perm, tc.sensitive)
		if got != tc.want || (!got && why == "") {
			t.Errorf("%q %s sensitive=%v: %v %q, want %v", tc.role, tc.perm, tc.sensitive, got, why, tc.want)
		}
	}
}

func TestFlowIDsOfWorkspaces(t *testing.T) {
	if teams.Qualify("default", "triage") != "triage" || teams.Qualify("acme", "triage") != "acme.triage" {
		t.Error("Qualify")
	}
	if ws, f := teams.Split("acme.triage"); ws != "acme" || f != "triage" {
		t.Errorf("Split = %q %q", ws, f)
	}
	if ws, f := teams.Split("triage"); ws != "default" || f != "triage" {
		t.Errorf("Split bare = %q %q", ws, f)
	}
	doc := "{\n  \"sluice\": 1,\n  \"id\":   \"other.triage\",\n  \"nodes\": [{\"id\": \"in\"}]\n}"
	got := string(teams.QualifyDocument("acme", []byte(doc)))
	if got != strings.Replace(doc, `"other.triage"`, `"acme.triage"`, 1) {
		t.Errorf("QualifyDocument moved more than the id:\n%s", got)
	}
	if got := string(teams.QualifyDocument("default", []byte(got))); !strings.Contains(got, `"id":   "triage"`) {
		t.Errorf("into the default workspace: %s", got)
	}
	if bad := string(teams.QualifyDocument("acme", []byte(`not json`))); bad != "not json" {
		t.Errorf("not JSON changed: %s", bad)
	}
}

func TestKeysAndPasswords(t *testing.T) {
	k, id := teams.NewKey()
	if got, ok := teams.ParseKey(k); !ok || got != id || !strings.HasPrefix(k, teams.KeyPrefix+id+"_") {
		t.Errorf("ParseKey(%q) = %q %v", k, got, ok)
	}
	for _, bad := range []string{"", "slk_", "slk_short_x", "token-of-sixteen-chars", "slk_0123456789_" + "short"} {
		if _, ok := teams.ParseKey(bad); ok {
			t.Errorf("ParseKey(%q) accepted", bad)
		}
	}
	teams.PasswordCost = 4
	if _, err := teams.HashPassword("short"); err == nil {
		t.Error("a short password was hashed")
	}
	if _, err := teams.HashPassword(strings.Repeat("x", 73)); err == nil {
		t.Error("a password over 72 bytes was hashed")
	}
	h, err := teams.HashPassword("long enough password")
	if err != nil || !teams.CheckPassword(h, "long enough password") || teams.CheckPassword(h, "long enough passwore") || teams.CheckPassword("", "x") {
		t.Errorf("passwords: %v", err)
	}
}
