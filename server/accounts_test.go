package server_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/flows/nodes"
	"github.com/sluicehq/sluice/server"
	"github.com/sluicehq/sluice/store/storetest"
	"github.com/sluicehq/sluice/teams"
)

func TestSignInOutAndSessions(t *testing.T) {
	a := newAPI(t, storetest.Real(t))
	a.person("ada@example.com", "correct horse battery", map[string]teams.Role{teams.DefaultWorkspace: teams.Editor})

	// A browser with no session is sent to the sign-in page; the API says 401.
	b := a.browser()
	if r := b.send("GET", "/", nil, "Accept", "text/html"); r.status != http.StatusSeeOther || !strings.HasPrefix(r.header.Get("Location"), "/signin") {
		t.Fatalf("page without a session: %d %q", r.status, r.header.Get("Location"))
	}
	if r := b.api("GET", "/api/flows", ""); r.status != http.StatusUnauthorized {
		t.Fatalf("API without a session: %d", r.status)
	}

	// Session fixation: a cookie planted before sign-in is not the session after it,
	// and is worth nothing.
	b.cookies[server.SessionCookie] = "planted-by-someone-else-0123456789abcdef"
	b.signin("ada@example.com", "correct horse battery")
	if b.cookies[server.SessionCookie] == "planted-by-someone-else-0123456789abcdef" {
		t.Fatal("the planted session id was kept")
	}
	planted := a.browser()
	planted.cookies[server.SessionCookie] = "planted-by-someone-else-0123456789abcdef"
	planted.api("GET", "/api/me", "")
	if r := planted.api("GET", "/api/me", ""); r.status != http.StatusUnauthorized {
		t.Errorf("the planted cookie: %d", r.status)
	}
	var me struct {
		Who, Role string
		Can       map[string]bool
	}
	b.api("GET", "/api/me", "").into(t, &me)
	if me.Who != "ada@example.com" || me.Role != "editor" || !me.Can["edit"] || me.Can["admin"] {
		t.Fatalf("me = %+v", me)
	}

	// CSRF: a sign-in or sign-out form without the page's token is refused.
	other := a.browser()
	if r := other.send("POST", "/signin", url.Values{"email": {"ada@example.com"}, "password": {"correct horse battery"}}); r.status != http.StatusForbidden || other.cookies[server.SessionCookie] != "" {
		t.Errorf("sign-in without the CSRF token: %d, cookies %v", r.status, other.cookies)
	}
	if r := b.send("POST", "/signout", url.Values{}); r.status != http.StatusForbidden {
		t.Errorf("sign-out without the CSRF token: %d", r.status)
	}
	if r := b.api("GET", "/api/me", ""); r.status != 200 {
		t.Fatalf("the session ended by a forged sign-out: %d", r.status)
	}

	// Sign-out ends the session in Redis: a copy of the cookie stops working too.
	copied := a.browser()
	copied.cookies[server.SessionCookie] = b.cookies[server.SessionCookie]
	tok := b.csrf("/")
	if r := b.send("POST", "/signout", url.Values{"_csrf": {tok}}); r.status != http.StatusSeeOther {
		t.Fatalf("sign-out: %d %s", r.status, r)
	}
	eventually(t, 5*time.Second, func() string {
		if r := copied.api("GET", "/api/me", ""); r.status != http.StatusUnauthorized {
			return "the copied cookie still works after sign-out"
		}
		return ""
	})

	// A wrong password says nothing of whether the account exists, and is limited.
	w := a.browser()
	for i := 0; i < 5; i++ {
		tok := w.csrf("/signin")
		r := w.send("POST", "/signin", url.Values{"_csrf": {tok}, "email": {"ada@example.com"}, "password": {"wrong password!"}})
		if r.status != http.StatusUnauthorized || !strings.Contains(r.String(), "the email or the password is wrong") {
			t.Fatalf("wrong password %d: %d", i, r.status)
		}
	}
	tok = w.csrf("/signin")
	if r := w.send("POST", "/signin", url.Values{"_csrf": {tok}, "email": {"ada@example.com"}, "password": {"correct horse battery"}}); r.status != http.StatusTooManyRequests {
		t.Errorf("sign-in after 5 failures: %d, want 429", r.status)
	}
	tok = w.csrf("/signin")
	if r := w.send("POST", "/signin", url.Values{"_csrf": {tok}, "email": {"nobody@example.com"}, "password": {"whatever it is"}}); r.status != http.StatusUnauthorized || !strings.Contains(r.String(), "the email or the password is wrong") {
		t.Errorf("unknown account: %d", r.status)
	}
}

func TestAnIdleOrExpiredSessionEnds(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  func(*server.Config)
	}{
		{"idle", func(c *server.Config) { c.SessionIdle = time.Millisecond }},
		{"lifetime", func(c *server.Config) { c.SessionLifetime = time.Second }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := newAPI(t, storetest.Embedded(t), func(c *server.Config, _ *server.Deps) { tc.cfg(c); c.AuthCache = time.Millisecond })
			a.person("bo@example.com", "password-of-bo", map[string]teams.Role{teams.DefaultWorkspace: teams.Viewer})
			b := a.browser()
			b.signin("bo@example.com", "password-of-bo")
			eventually(t, 10*time.Second, func() string {
				if r := b.api("GET", "/api/me", ""); r.status != http.StatusUnauthorized {
					return "the session still works"
				}
				return ""
			})
		})
	}
}

func TestAPIKeys(t *testing.T) {
	a := newAPI(t, storetest.Real(t), func(c *server.Config, _ *server.Deps) { c.AuthFailures = 5 })
	ada := a.person("ada@example.com", "correct horse battery", map[string]teams.Role{teams.DefaultWorkspace: teams.Operator})
	b := a.browser()
	b.signin("ada@example.com", "correct horse battery")

	// A personal key: shown once, at most the maker's role.
	if r := b.api("POST", "/api/keys", `{"name": "ci", "role": "editor"}`); r.status != http.StatusForbidden {
		t.Errorf("an operator made an editor key: %d", r.status)
	}
	if r := b.api("POST", "/api/keys", `{"name": "ci", "role": "viewer", "service": "bot"}`); r.status != http.StatusForbidden {
		t.Errorf("an operator made a service key: %d", r.status)
	}
	var made struct {
		Key  string
		Info teams.APIKey
	}
	b.api("POST", "/api/keys", `{"name": "ci", "role": "operator", "expires_in": "720h"}`).into(t, &made)
	if !strings.HasPrefix(made.Key, made.Info.Prefix+"_") || made.Info.Expires == 0 || made.Info.Person != ada.ID {
		t.Fatalf("made %+v", made)
	}
	list := b.api("GET", "/api/keys", "").String()
	secret := strings.TrimPrefix(made.Key, made.Info.Prefix+"_")
	if !strings.Contains(list, made.Info.Prefix) || strings.Contains(list, secret) || strings.Contains(list, teams.Digest(made.Key)) {
		t.Errorf("the listing shows the key or its digest: %s", list)
	}
	key := []string{"Authorization", "Bearer " + made.Key}
	a.must(200, "GET", "/api/flows", nil, key...)
	a.must(http.StatusForbidden, "PUT", "/api/flows/x", `{}`, key...)
	if r := a.do("POST", "/api/keys", `{"role": "viewer"}`, key...); r.status != http.StatusForbidden {
		t.Errorf("a key made a key: %d", r.status)
	}
	eventually(t, 5*time.Second, func() string {
		var ks struct{ Keys []teams.APIKey }
		b.api("GET", "/api/keys", "").into(t, &ks)
		if len(ks.Keys) != 1 || ks.Keys[0].LastUsed == 0 {
			return "no last use recorded"
		}
		return ""
	})

	// Demoting the person limits their key at once (within the cache's second).
	if err := a.teams.SetRole(context.Background(), teams.DefaultWorkspace, ada.ID, teams.Viewer); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, func() string {
		if r := a.do("POST", "/api/flows/x/runs", `{}`, key...); r.status != http.StatusForbidden {
			return "the key of a demoted person still runs flows"
		}
		return ""
	})

	// Revoked: refused within a second.
	b.api("DELETE", "/api/keys/"+made.Info.Prefix, "")
	eventually(t, 5*time.Second, func() string {
		if r := a.do("GET", "/api/flows", nil, key...); r.status != http.StatusUnauthorized {
			return "a revoked key still works"
		}
		return ""
	})

	// Guessing keys is limited per address; the right token still gets through.
	limited := false
	for i := 0; i < 6 && !limited; i++ { // the revoked key's tries counted too
		guess, _ := teams.NewKey()
		r := a.do("GET", "/api/flows", nil, "Authorization", "Bearer "+guess)
		limited = r.status == http.StatusTooManyRequests
		if !limited && r.status != http.StatusUnauthorized {
			t.Fatalf("a guessed key: %d", r.status)
		}
	}
	if !limited {
		t.Error("6 guessed keys from one address were not limited (AuthFailures 5)")
	}
	a.must(200, "GET", "/api/flows", nil)
}

func TestOwnersAndWhatOthersCannotDo(t *testing.T) {
	a := newAPI(t, storetest.Embedded(t))
	owner := a.person("olga@example.com", "password-of-olga", map[string]teams.Role{teams.DefaultWorkspace: teams.Owner})
	a.person("ed@example.com", "password-of-ed", map[string]teams.Role{teams.DefaultWorkspace: teams.Editor})
	o, e := a.browser(), a.browser()
	o.signin("olga@example.com", "password-of-olga")
	e.signin("ed@example.com", "password-of-ed")

	// Nobody changes their own role, not even an owner.
	if r := o.api("PUT", "/api/members/"+owner.ID, `{"role": "viewer"}`); r.status != http.StatusForbidden || !strings.Contains(r.String(), "your own role") {
		t.Errorf("an owner changed their own role: %d %s", r.status, r)
	}
	// An editor adds no secret name, nor members.
	if r := e.api("PUT", "/api/settings", `{"secrets": ["OPENAI_API_KEY"]}`); r.status != http.StatusForbidden {
		t.Errorf("an editor changed the secrets allow-list: %d", r.status)
	}
	if r := e.api("POST", "/api/members", `{"email": "eve@example.com", "role": "owner"}`); r.status != http.StatusForbidden {
		t.Errorf("an editor invited someone: %d", r.status)
	}
	// The owner invites: a new person gets a one-time link to set a password.
	var inv struct {
		Member struct{ ID string }
		Link   string
	}
	o.api("POST", "/api/members", `{"email": "vi@example.com", "role": "viewer"}`).into(t, &inv)
	if !strings.HasPrefix(inv.Link, "/reset?t=") {
		t.Fatalf("invite: %+v", inv)
	}
	v := a.browser()
	tok := v.csrf(inv.Link)
	q, _ := url.ParseQuery(strings.TrimPrefix(inv.Link, "/reset?"))
	if r := v.send("POST", "/reset", url.Values{"_csrf": {tok}, "t": q["t"], "password": {"short"}}); r.status != http.StatusBadRequest {
		t.Errorf("a short password: %d", r.status)
	}
	if r := v.send("POST", "/reset", url.Values{"_csrf": {tok}, "t": q["t"], "password": {"password-of-vi"}}); r.status != 200 || !strings.Contains(r.String(), "reset-done") {
		t.Fatalf("reset: %d %s", r.status, r)
	}
	if r := v.send("POST", "/reset", url.Values{"_csrf": {tok}, "t": q["t"], "password": {"password-again"}}); r.status != http.StatusNotFound {
		t.Errorf("a used link: %d", r.status)
	}
	v.signin("vi@example.com", "password-of-vi")
	if r := v.api("POST", "/api/flows/x/runs", `{}`); r.status != http.StatusForbidden || !strings.Contains(r.String(), "a viewer may not run flows") {
		t.Errorf("a viewer ran a flow: %d %s", r.status, r)
	}
	// Secrets: the owner sets them; a bad name is refused with where.
	if r := o.api("PUT", "/api/settings", `{"secrets": ["SLUICE_SECRET_OK", "bad name"]}`); r.status != http.StatusBadRequest || !strings.Contains(r.String(), "secrets[1]") {
		t.Errorf("a bad secret name: %d %s", r.status, r)
	}
	// Only names the operator lets flows read: never a setting of Sluice.
	if r := o.api("PUT", "/api/settings", `{"secrets": ["OPENAI_API_KEY"]}`); r.status != http.StatusBadRequest || !strings.Contains(r.String(), "setting of Sluice") {
		t.Errorf("an owner allowed OPENAI_API_KEY: %d %s", r.status, r)
	}
	if r := o.api("PUT", "/api/settings", `{"secrets": ["SLUICE_SECRET_OK"]}`); r.status != 200 {
		t.Fatalf("the owner's secrets: %d %s", r.status, r)
	}
	// The audit log has it all, and exports as JSON lines.
	log := o.api("GET", "/api/audit?format=jsonl", "").String()
	for _, want := range []string{`"action":"member.role"`, `"action":"secrets.change"`, `"action":"signin"`, `"who":"olga@example.com"`} {
		if !strings.Contains(log, want) {
			t.Errorf("the audit log lacks %s:\n%s", want, log)
		}
	}
	if r := e.api("GET", "/api/audit", ""); r.status != http.StatusForbidden {
		t.Errorf("an editor read the audit log: %d", r.status)
	}
}

// Approvals name people: one that needs an editor refuses an operator, and the run
// records who answered (as the server knows them, not as the request says).
func TestAnApprovalNeedsItsRoleAndRecordsWhoAnswered(t *testing.T) {
	a := newAPI(t, storetest.Real(t))
	id := a.saveFlow("approval", func(d map[string]any) {
		for _, n := range d["nodes"].([]any) {
			if n := n.(map[string]any); n["type"] == "approval" {
				n["params"].(map[string]any)["role"] = "editor"
			}
		}
	})
	a.person("op@example.com", "password-of-op", map[string]teams.Role{teams.DefaultWorkspace: teams.Operator})
	a.person("ed@example.com", "password-of-ed", map[string]teams.Role{teams.DefaultWorkspace: teams.Editor})
	op, ed := a.browser(), a.browser()
	op.signin("op@example.com", "password-of-op")
	ed.signin("ed@example.com", "password-of-ed")
	run := a.start(id, `{"input": {"customer": "Ada", "reply": "Dear Ada"}}`)
	if got := a.settle(id, run); got.Status != "waiting" {
		t.Fatalf("run = %+v, want waiting", got)
	}
	if r := op.api("POST", "/api/flows/"+id+"/runs/"+run+"/resume", `{"decision": "approve"}`); r.status != http.StatusForbidden || !strings.Contains(r.String(), "needs the editor role") {
		t.Fatalf("an operator answered an editor's approval: %d %s", r.status, r)
	}
	if r := ed.api("POST", "/api/flows/"+id+"/runs/"+run+"/resume", `{"decision": "approve", "by": "someone else", "value": {"reply": "Dear Ada, thanks"}}`); r.status != 200 {
		t.Fatalf("the editor's answer: %d %s", r.status, r)
	}
	if got := a.settle(id, run); got.Status != "succeeded" || !strings.Contains(string(got.Output), "Dear Ada, thanks") {
		t.Errorf("run %+v", got)
	}
	ck := a.must(200, "GET", "/api/flows/"+id+"/runs/"+run+"/checkpoints", nil).String()
	if !strings.Contains(ck, `"by":"ed@example.com"`) || strings.Contains(ck, "someone else") {
		t.Errorf("the checkpoints do not name who answered: %s", ck)
	}
	if log := a.must(200, "GET", "/api/audit?format=jsonl&action=run.resume", nil).String(); !strings.Contains(log, `"who":"ed@example.com"`) || !strings.Contains(log, run) {
		t.Errorf("the audit log: %s", log)
	}
}

// The permission check reads Redis once per key and cache period, not per request:
// with a long cache, a key revoked in Redis behind the server's back still works in
// this process (no request read it again), and a session likewise; the default cache
// (1s) is what TestAPIKeys shows a revocation taking effect within.
func TestThePermissionCheckDoesNotReadRedisPerRequest(t *testing.T) {
	a := newAPI(t, storetest.Real(t), func(c *server.Config, _ *server.Deps) { c.AuthCache = time.Hour })
	key := a.serviceKey(teams.DefaultWorkspace, teams.Viewer)
	id, _ := teams.ParseKey(key)
	a.must(200, "GET", "/api/flows", nil, "Authorization", "Bearer "+key)
	ctx := context.Background()
	k, err := a.teams.Key(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	k.Revoked = time.Now().UnixMilli()
	if err := a.teams.SaveKey(ctx, k); err != nil { // in Redis only: this process is not told
		t.Fatal(err)
	}
	for i := 0; i < 50; i++ {
		a.must(200, "GET", "/api/flows", nil, "Authorization", "Bearer "+key)
	}
	// Another process (a second server on the same Redis) reads it afresh: refused.
	b := newAPI(t, a.r, func(c *server.Config, d *server.Deps) { d.Teams = a.teams })
	b.must(http.StatusUnauthorized, "GET", "/api/flows", nil, "Authorization", "Bearer "+key)
}

// The permission check makes no Redis round trip per request: the team store gets a
// Redis client of its own, and once a key and a session have been seen, requests with
// them — a read of flows, a run, an HTML page — send nothing on it. (With the default
// AuthCache of a second, each key or session is read again at most once a second, which
// is what lets a revocation apply everywhere within a second: TestAPIKeys.)
func TestAnAuthorizedRequestMakesNoRedisRoundTrip(t *testing.T) {
	r := storetest.Real(t)
	own := storetest.Real(t) // the team store's client: what it sends is what the check costs
	ns := newTeamsNS(t, r)
	// What workspaces let flows use is read on the other client: compiling is not the check.
	rules := r.Teams(ns).Rules(time.Second)
	a := newAPIWith(t, r, &nodes.Env{Workspaces: rules}, func(c *server.Config, d *server.Deps) {
		c.AuthCache = time.Hour
		d.Teams, d.Rules = own.Teams(ns), rules
	})
	id := a.saveFlow("linear", nil)
	run := a.start(id, `{"input": {"name": "Ada"}}`)
	a.settle(id, run)
	key := a.serviceKey(teams.DefaultWorkspace, teams.Viewer)
	a.person("vi@example.com", "password-of-vi", map[string]teams.Role{teams.DefaultWorkspace: teams.Viewer})
	b := a.browser()
	b.signin("vi@example.com", "password-of-vi")
	trips := storetest.CountRoundTrips(own)
	type request struct{ name, path string }
	requests := []request{{"the flows", "/api/flows"}, {"a run", "/api/flows/" + id + "/runs/" + run}, {"a page", "/runs?flow=" + id}}
	send := func(r request, who string) {
		var status int
		if who == "key" {
			status = a.do("GET", r.path, nil, "Authorization", "Bearer "+key, "Accept", "text/html").status
		} else {
			status = b.send("GET", r.path, nil, "Accept", "text/html").status
		}
		if status != http.StatusOK {
			t.Fatalf("%s with a %s: %d", r.name, who, status)
		}
	}
	for _, who := range []string{"key", "session"} {
		for _, r := range requests { // warm-up: the key and the session are read once
			send(r, who)
		}
		before, _ := trips.N()
		for i := 0; i < 20; i++ {
			for _, r := range requests {
				send(r, who)
			}
		}
		if n, sent := trips.N(); n != before {
			t.Errorf("60 requests with a %s made %d round trips to the team store: %q", who, n-before, sent[before:])
		}
	}
	if n, _ := trips.N(); n < 1 {
		t.Error("the warm-up read nothing: the count does not see the team store's client")
	}
}
