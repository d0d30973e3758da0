package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/sluicehq/sluice/store/storetest"
)

// signedIn is a browser signed in as a person invited to workspace ws with role, on
// ws's settings page: the one-time link sets the password, the sign-in form signs in.
func signedIn(t *testing.T, base, token, ws, email, role string) *browser {
	t.Helper()
	var inv struct{ Link string }
	asToken(t, "POST", base+"/api/members?workspace="+ws, token, `{"email": "`+email+`", "role": "`+role+`"}`, http.StatusCreated, &inv)
	b := newBrowser(t, base)
	b.noShots = true // as in the teams test: several signed-in browsers
	b.open(inv.Link)
	b.typeInto(`#reset-form input[name=password]`, "password-of-"+role)
	b.click(`#reset-form button[type=submit]`)
	b.waitFor("the password is set", `!!document.getElementById("reset-done")`)
	b.open("/signin?next=" + url.QueryEscape("/settings?workspace="+ws))
	b.typeInto(`#signin-form input[name=email]`, email)
	b.typeInto(`#signin-form input[name=password]`, "password-of-"+role)
	b.click(`#signin-form button[type=submit]`)
	b.waitFor("signed in, on the settings page", `location.pathname === "/settings" && !!document.getElementById("whoami")`)
	return b
}

// An owner edits the workspace's environments on its settings page — adds one, names
// it, orders it, gates it, sets who may promote, requires cases of another — and saves
// them; a bad name is refused naming the row and nothing is lost. An editor sees the
// same environments with every control disabled, saying why.
func TestBrowserAnOwnerEditsTheEnvironmentsAndAnEditorSeesWhyNot(t *testing.T) {
	rdb := storetest.Real(t)
	const token = "browser-settings-token-0123456789"
	fid := storetest.FlowID(t)
	ws := "w" + fid[len(fid)-8:] // environments are per workspace: one of the test's own
	t.Cleanup(func() { rdb.Client.Del(context.Background(), "sluice:environments:"+ws) })
	base := serveForBrowserEnv(t, t.TempDir(), []string{"SLUICE_TOKEN=" + token})
	asToken(t, "POST", base+"/api/workspaces", token, `{"id": "`+ws+`"}`, http.StatusCreated, nil)

	owner := signedIn(t, base, token, ws, "owner-"+ws+"@example.com", "owner")
	owner.waitFor("the two environments of before", `[...document.querySelectorAll("#environment-list tbody tr")].map(r => r.querySelector(".env-name").value).join() === "dev,prod"`)
	owner.waitFor("dev has no gate, saying why", `(() => { const g = document.querySelector("#environment-list tbody tr .env-gate"); return g.disabled && g.title.includes("saving lands in the first environment"); })()`)

	// Add staging, gated, that operators may promote to, and move it before prod.
	owner.click("#environment-add")
	row := `#environment-list tbody tr:nth-child(3)`
	owner.typeInto(row+" .env-name", "staging")
	setRole := func(sel, role string) {
		t.Helper()
		evaluate[bool](owner, fmt.Sprintf(`(() => { const s = document.querySelector(%q); s.value = %q; s.dispatchEvent(new Event("change", {bubbles: true})); return true; })()`, sel, role))
	}
	setRole(row+" .env-role", "operator")
	owner.click(row + " .env-up")
	// prod, now third: only owners promote to it, and a flow without cases cannot.
	prod := `#environment-list tbody tr:nth-child(3)`
	owner.waitFor("prod is third", fmt.Sprintf(`document.querySelector(%q).value === "prod"`, prod+" .env-name"))
	owner.click(prod + " .env-require-cases")
	setRole(prod+" .env-role", "owner")

	// A fourth with a bad name is refused, naming where; nothing is saved.
	owner.click("#environment-add")
	owner.typeInto(`#environment-list tbody tr:nth-child(4) .env-name`, "QA!")
	owner.click("#environments-save")
	owner.waitText("#environments-error", "environments[3].name")
	owner.waitText("#environments-error", `"QA!" is not an environment name`)
	owner.waitFor("the row is marked", `document.querySelector("#environment-list tbody tr:nth-child(4)").classList.contains("invalid")`)
	var list struct {
		Environments []struct {
			Name         string `json:"name"`
			Gate         bool   `json:"gate"`
			RequireCases bool   `json:"require_cases"`
			Role         string `json:"role"`
		} `json:"environments"`
	}
	asToken(t, "GET", base+"/api/environments?workspace="+ws, token, "", http.StatusOK, &list)
	if len(list.Environments) != 2 {
		t.Fatalf("a refused save changed the environments: %+v", list.Environments)
	}
	owner.click(`#environment-list tbody tr:nth-child(4) .env-remove`)
	// A save reloads the page: the mark set before it is gone once the saved list shows
	// (the rows read dev,staging,prod before the save too).
	evaluate[bool](owner, `(window.unsaved = true)`)
	owner.click("#environments-save")
	owner.waitFor("the page shows what was saved", `!window.unsaved && [...document.querySelectorAll("#environment-list tbody tr")].map(r => r.querySelector(".env-name").value).join() === "dev,staging,prod"`)

	asToken(t, "GET", base+"/api/environments?workspace="+ws, token, "", http.StatusOK, &list)
	got, _ := json.Marshal(list.Environments)
	want := `[{"name":"dev","gate":false,"require_cases":false,"role":""},{"name":"staging","gate":true,"require_cases":false,"role":"operator"},{"name":"prod","gate":true,"require_cases":true,"role":"owner"}]`
	if string(got) != want {
		t.Errorf("saved environments:\n%s\nwant\n%s", got, want)
	}
	owner.waitFor("the saved roles are shown", `[...document.querySelectorAll("#environment-list .env-role")].map(s => s.value).join() === "editor,operator,owner"`)

	editor := signedIn(t, base, token, ws, "editor-"+ws+"@example.com", "editor")
	editor.waitFor("the editor sees the three", `document.querySelectorAll("#environment-list tbody tr").length === 3`)
	editor.waitText("#environments-readonly", "Only an owner of "+ws+" can change its environments; your role here is editor.")
	editor.waitFor("every control is disabled, saying why", `[...document.querySelectorAll("#environments-form input, #environments-form select, #environments-form button")].every(x => x.disabled && x.title.includes("Only an owner"))`)
	if r := evaluate[int](editor, `(async () => (await fetch("/api/environments?workspace=`+ws+`", {method: "PUT", headers: {"Content-Type": "application/json"}, body: '{"environments": [{"name": "dev"}]}'})).status)()`, chromedp.EvalAwaitPromise); r != http.StatusForbidden {
		t.Errorf("an editor's PUT /api/environments: %d, want 403", r)
	}
}
