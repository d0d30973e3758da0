package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/store/storetest"
)

// asToken sends a JSON request with the server's token and decodes the answer.
func asToken(t *testing.T, method, url, token, body string, want int, out any) {
	t.Helper()
	req, _ := http.NewRequest(method, url, bytes.NewReader([]byte(body)))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != want {
		t.Fatalf("%s %s: %d, want %d", method, url, resp.StatusCode, want)
	}
	if out != nil {
		if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
			t.Fatal(err)
		}
	}
}

// What each role sees and can click: an owner invites a viewer and an editor; each
// sets a password through the one-time link and signs in. The viewer's buttons that
// change anything are disabled with the reason, and the pages only owners have are
// refused; the editor's are not.
func TestBrowserWhatEachRoleSeesAndCanClick(t *testing.T) {
	rdb := storetest.Real(t)
	const token = "browser-teams-token-0123456789"
	dir := t.TempDir()
	flowID := storetest.FlowID(t)
	storetest.DeleteFlowKeys(t, rdb, flowID)
	writeDoc(t, dir, exampleDoc(t, "linear", flowID))
	base := serveForBrowserEnv(t, dir, []string{"SLUICE_TOKEN=" + token})

	people := map[string]string{}
	for _, role := range []string{"viewer", "editor"} {
		email := role + "-" + flowID[len(flowID)-8:] + "@example.com"
		var inv struct{ Link string }
		asToken(t, "POST", base+"/api/members", token, `{"email": "`+email+`", "role": "`+role+`"}`, http.StatusCreated, &inv)
		people[role] = email
		b := newBrowser(t, base)
		b.noShots = true
		b.open(inv.Link)
		b.typeInto(`#reset-form input[name=password]`, "password-of-"+role)
		b.click(`#reset-form button[type=submit]`)
		b.waitFor("the password is set", `!!document.getElementById("reset-done")`)
		b.open("/")
		b.waitFor("the sign-in page", `location.pathname === "/signin"`)
		b.typeInto(`#signin-form input[name=email]`, email)
		b.typeInto(`#signin-form input[name=password]`, "password-of-"+role)
		b.click(`#signin-form button[type=submit]`)
		b.waitFor("signed in, on the flows page", `location.pathname === "/" && !!document.getElementById("whoami")`)
		b.waitText("#whoami", email)
		b.waitText("#role", role)

		create := `document.querySelector("#new-flow-form button[type=submit]")`
		row := `document.querySelector("#flow-list tbody tr")`
		switch role {
		case "viewer":
			b.waitFor("Create is disabled, saying why", create+`.disabled && `+create+`.title.includes("that needs the editor role")`)
			b.waitFor("Delete and Duplicate are disabled", `[...`+row+`.querySelectorAll("button")].every(x => x.disabled)`)
			b.waitFor("import is disabled", `document.getElementById("import-disabled").disabled`)
			b.waitFor("no members link", `!document.getElementById("members-link")`)
			b.open("/flows/" + flowID)
			b.waitFor("the editor's Save is disabled, saying why", `(() => { const s = document.getElementById("save-button"); return s && s.disabled && s.title.includes("a viewer may not change flows"); })()`)
			b.click("#run-tab")
			b.waitFor("Run is disabled", `(() => { const r = document.getElementById("run-button"); return r && r.disabled; })()`)
			b.open("/members")
			b.waitFor("the members page is refused", `document.body.innerText.includes("a viewer may not manage members")`)
		case "editor":
			b.waitFor("Create is enabled", `!`+create+`.disabled`)
			b.waitFor("no members link", `!document.getElementById("members-link")`)
			b.open("/flows/" + flowID)
			b.waitFor("Save is enabled", `(() => { const s = document.getElementById("save-button"); return s && !s.disabled; })()`)
		}
		// Both make a key of their own on the keys page, shown once.
		b.open("/keys")
		b.typeInto(`#key-form input[name=name]`, "laptop")
		b.click(`#key-form button[type=submit]`)
		b.waitFor("the key is shown once", `document.getElementById("new-key-value").textContent.startsWith("slk_")`)
		// Signing out ends it: the next page is the sign-in page.
		b.click("#signout")
		b.waitFor("signed out", `location.pathname === "/signin"`)
		b.open("/")
		b.waitFor("a page needs signing in again", `location.pathname === "/signin"`)
	}
	if !strings.Contains(people["viewer"], "@") {
		t.Fatal("no viewer")
	}
}
