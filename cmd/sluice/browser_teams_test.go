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
	asTokenIn(t, "", method, url, token, body, want, out)
}

// asTokenIn is asToken in workspace ws ("": the default).
func asTokenIn(t *testing.T, ws, method, url, token, body string, want int, out any) {
	t.Helper()
	req, _ := http.NewRequest(method, url, bytes.NewReader([]byte(body)))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	if ws != "" {
		req.Header.Set("Sluice-Workspace", ws)
	}
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
	emailOf := func(role string) string { return role + "-" + flowID[len(flowID)-8:] + "@example.com" }
	// The server's team store is the one every test on this Redis shares: what this
	// test makes there goes when it ends (after the server stopped).
	storetest.ForgetTeams(t, rdb, []string{emailOf("viewer"), emailOf("editor")}, nil)
	base := serveForBrowserEnv(t, dir, []string{"SLUICE_TOKEN=" + token})

	people := map[string]string{}
	for _, role := range []string{"viewer", "editor"} {
		email := emailOf(role)
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
			// The editor saves a change: the history says who saved the new version.
			b.inspect("greet")
			b.typeInto(`input[aria-label="Label"]`, "Say hello")
			b.click("#history-tab")
			b.click("#save-button")
			b.waitText("#save-state", "Saved")
			b.waitText(".version.current .version-by", "by "+email)
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

// A viewer of a workspace that marks run state sensitive opens a run's page: the run's
// status and its steps are there, its input, the approval's prompt and data, and the
// state are not (nor the canvas link or the fork and approval forms).
func TestBrowserAViewerOfASensitiveWorkspaceSeesTheRunsStatusNotItsState(t *testing.T) {
	rdb := storetest.Real(t)
	const token = "browser-sensitive-token-0123456789"
	flowID := storetest.FlowID(t)
	ws := "sens-" + flowID[len(flowID)-8:]
	email := "viewer-" + flowID[len(flowID)-8:] + "@example.com"
	storetest.DeleteFlowKeys(t, rdb, ws+"."+flowID)
	storetest.ForgetTeams(t, rdb, []string{email}, []string{ws})
	base := serveForBrowserEnv(t, t.TempDir(), []string{"SLUICE_TOKEN=" + token})

	asToken(t, "POST", base+"/api/workspaces", token, `{"id": "`+ws+`", "sensitive": true}`, http.StatusCreated, nil)
	doc, _ := json.Marshal(exampleDoc(t, "approval", flowID))
	asTokenIn(t, ws, "PUT", base+"/api/flows/"+flowID, token, string(doc), http.StatusCreated, nil)
	const secret = "Zed-secret-7"
	var run struct{ ID, Status string }
	asTokenIn(t, ws, "POST", base+"/api/flows/"+flowID+"/runs?wait=30s", token, `{"input": {"customer": "`+secret+`"}}`, http.StatusOK, &run)
	if run.Status != "waiting" {
		t.Fatalf("the run: %+v", run)
	}
	var inv struct{ Link string }
	asTokenIn(t, ws, "POST", base+"/api/members", token, `{"email": "`+email+`", "role": "viewer"}`, http.StatusCreated, &inv)

	b := newBrowser(t, base)
	b.noShots = true
	b.open(inv.Link)
	b.typeInto(`#reset-form input[name=password]`, "password-of-viewer")
	b.click(`#reset-form button[type=submit]`)
	b.waitFor("the password is set", `!!document.getElementById("reset-done")`)
	b.open("/signin")
	b.typeInto(`#signin-form input[name=email]`, email)
	b.typeInto(`#signin-form input[name=password]`, "password-of-viewer")
	b.click(`#signin-form button[type=submit]`)
	b.waitFor("signed in", `location.pathname !== "/signin"`)

	b.open("/flows/" + ws + "." + flowID + "/runs/" + run.ID)
	b.waitText("#run-status", "waiting")
	b.waitFor("the note that state is hidden", `!!document.getElementById("state-hidden") && document.getElementById("state-hidden").offsetParent !== null`)
	b.waitFor("the steps so far", `document.querySelectorAll("#timeline li[data-node=draft]").length === 1`)
	b.waitFor("where it waits", `!!document.querySelector(".approval[data-approval=review]")`)
	for what, cond := range map[string]string{
		"nothing of the state on the page": `!document.body.innerText.includes(` + "`" + secret + "`" + `) && !document.documentElement.outerHTML.includes(` + "`" + secret + "`" + `)`,
		"no approval or fork form":         `!document.querySelector("form.approval") && !document.querySelector("form.fork") && !document.querySelector("textarea")`,
		"no canvas link":                   `!document.getElementById("open-on-canvas")`,
	} {
		if ok, err := b.holds(cond); err != nil || !ok {
			t.Errorf("%s: %v", what, err)
		}
	}
}
