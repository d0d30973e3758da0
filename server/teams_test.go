package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/server"
	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/storetest"
	"github.com/sluicehq/sluice/teams"
	"golang.org/x/crypto/bcrypt"
)

func init() { teams.PasswordCost = bcrypt.MinCost } // tests sign in often

// person adds someone with a password and roles by workspace.
func (a *api) person(email, password string, roles map[string]teams.Role) teams.Person {
	a.t.Helper()
	h, err := teams.HashPassword(password)
	if err != nil {
		a.t.Fatal(err)
	}
	p := teams.Person{Email: email, Hash: h}
	ctx := context.Background()
	if err := a.teams.CreatePerson(ctx, &p); err != nil {
		a.t.Fatal(err)
	}
	for ws, r := range roles {
		if err := a.teams.SetRole(ctx, ws, p.ID, r); err != nil {
			a.t.Fatal(err)
		}
	}
	return p
}

// workspace creates a workspace through the API (with the token).
func (a *api) workspace(id string) {
	a.t.Helper()
	a.must(http.StatusCreated, "POST", "/api/workspaces", map[string]any{"id": id})
}

// browser is a cookie jar that remembers what the server set.
type browser struct {
	a       *api
	cookies map[string]string
}

func (a *api) browser() *browser { return &browser{a: a, cookies: map[string]string{}} }

func (b *browser) cookie() string {
	var parts []string
	for k, v := range b.cookies {
		parts = append(parts, k+"="+v)
	}
	return strings.Join(parts, "; ")
}

// send is a request with the browser's cookies and no token; it does not follow
// redirects and keeps the cookies set.
func (b *browser) send(method, path string, form url.Values, header ...string) res {
	b.a.t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, _ := http.NewRequest(method, b.a.base+path, body)
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Origin", b.a.base)
	}
	if ck := b.cookie(); ck != "" {
		req.Header.Set("Cookie", ck)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Do(req)
	if err != nil {
		b.a.t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	for _, c := range resp.Cookies() {
		if c.MaxAge < 0 || c.Value == "" {
			delete(b.cookies, c.Name)
		} else {
			b.cookies[c.Name] = c.Value
		}
	}
	return res{status: resp.StatusCode, header: resp.Header, body: data}
}

// csrf loads a page and returns its forms' CSRF token.
func (b *browser) csrf(path string) string {
	b.a.t.Helper()
	r := b.send("GET", path, nil, "Accept", "text/html")
	m := csrfInput.FindStringSubmatch(r.String())
	if m == nil {
		b.a.t.Fatalf("GET %s: no CSRF token in the page (status %d)", path, r.status)
	}
	return m[1]
}

// signin signs in through the form and fails the test unless it works.
func (b *browser) signin(email, password string) {
	b.a.t.Helper()
	tok := b.csrf("/signin")
	r := b.send("POST", "/signin", url.Values{"_csrf": {tok}, "email": {email}, "password": {password}, "next": {"/"}})
	if r.status != http.StatusSeeOther || b.cookies[server.SessionCookie] == "" {
		b.a.t.Fatalf("sign-in as %s: status %d, cookies %v; %s", email, r.status, b.cookies, r)
	}
}

// api sends an API request as the browser (JSON, same origin).
func (b *browser) api(method, path string, body string, header ...string) res {
	b.a.t.Helper()
	h := append([]string{"Authorization", "", "Cookie", b.cookie(), "Origin", b.a.base}, header...)
	var bd any
	if body != "" {
		bd = body
	}
	return b.a.do(method, path, bd, h...)
}

// probe sends a request and reads its answer, but not an event stream's (it never ends).
func (a *api) probe(method, path string, header ...string) (int, http.Header) {
	a.t.Helper()
	r := a.answer(method, path, header...)
	return r.status, r.header
}

// answer is probe with the body of the answer (none for an event stream).
func (a *api) answer(method, path string, header ...string) res {
	a.t.Helper()
	req, _ := http.NewRequest(method, a.base+path, nil)
	if method != "GET" {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(header); i += 2 {
		if header[i+1] != "" {
			req.Header.Set(header[i], header[i+1])
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req = req.WithContext(ctx)
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Do(req)
	if err != nil {
		a.t.Fatalf("%s %s: %v", method, path, err)
	}
	var body []byte
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		body, _ = io.ReadAll(resp.Body)
	}
	cancel()
	resp.Body.Close()
	return res{status: resp.StatusCode, header: resp.Header, body: body}
}

// leastRole is the role each permission needs, written out here apart from package
// teams, as docs/teams.md shows it: the test compares the server with this.
// Promote is the environment's role: prod's (":env" in the walk) is editor by default.
var leastRole = map[teams.Perm]int{teams.Read: 1, teams.ReadRun: 1, teams.ReadState: 1, teams.Run: 2, teams.Edit: 3, teams.Promote: 3, teams.Admin: 4}
var roleRank = map[teams.Role]int{teams.Viewer: 1, teams.Operator: 2, teams.Editor: 3, teams.Owner: 4}

func TestEveryRouteIsInThePermissionTable(t *testing.T) {
	a := newAPI(t, storetest.Embedded(t))
	served := map[string]bool{}
	for _, rt := range a.srv.Routes() {
		served[rt] = true
		if _, ok := teams.Routes[rt]; !ok {
			t.Errorf("route %s is not in teams.Routes: say what it needs there (and in docs/teams.md)", rt)
		}
	}
	for rt := range teams.Routes {
		if !served[rt] {
			t.Errorf("teams.Routes has %s, which routes.go does not serve", rt)
		}
	}
}

// TestEveryRouteRoleAndWorkspaceIsWhatTheTableSays walks every route as a member of
// each role of the default workspace (and of no other), in that workspace and in
// another, signed in and with an API key of the role, and as SLUICE_TOKEN: a request
// is refused by the permission check exactly when the table says so.
func TestEveryRouteRoleAndWorkspaceIsWhatTheTableSays(t *testing.T) {
	a := newAPI(t, storetest.Embedded(t))
	a.workspace("acme")
	type who struct {
		name   string
		role   teams.Role
		header []string
	}
	var people []who
	for _, r := range teams.Roles {
		email := string(r) + "@example.com"
		a.person(email, "password-"+string(r), map[string]teams.Role{teams.DefaultWorkspace: r})
		b := a.browser()
		b.signin(email, "password-"+string(r))
		people = append(people, who{"signed-in " + string(r), r, []string{"Authorization", "", "Cookie", b.cookie()}})
		var made struct{ Key string }
		a.must(http.StatusCreated, "POST", "/api/keys", map[string]any{"role": r, "service": "svc-" + string(r)}).into(t, &made)
		people = append(people, who{"key of a " + string(r), r, []string{"Authorization", "Bearer " + made.Key}})
	}
	people = append(people, who{"SLUICE_TOKEN", "token", []string{"Authorization", "Bearer " + testToken}})

	cells := 0
	for _, rt := range a.srv.Routes() {
		perm := teams.Routes[rt]
		if perm == teams.Public {
			continue
		}
		method, path, _ := strings.Cut(rt, " ")
		for _, ws := range []string{teams.DefaultWorkspace, "acme"} {
			for _, p := range people {
				var want bool
				switch {
				case p.role == "token":
					want = true
				case strings.HasPrefix(p.name, "key") && ws != teams.DefaultWorkspace:
					want = false // a key acts in its own workspace only, whatever the route
				case perm == teams.Self:
					want = true
				case perm == teams.Instance:
					want = false
				default:
					want = ws == teams.DefaultWorkspace && roleRank[p.role] >= leastRole[perm]
				}
				status, h := a.probe(method, concrete(path), append(p.header, server.WorkspaceHeader, ws)...)
				refused := status == http.StatusForbidden && h.Get("Sluice-Required-Role") != ""
				if status == http.StatusUnauthorized {
					t.Errorf("%s as %s in %s: 401", rt, p.name, ws)
				}
				if refused == want {
					t.Errorf("%s as %s in %s: status %d (required %q); the table says allowed=%v", rt, p.name, ws, status, h.Get("Sluice-Required-Role"), want)
				}
				cells++
			}
		}
	}
	t.Logf("%d cells", cells)
	if cells < 500 {
		t.Fatalf("only %d cells walked", cells)
	}
}

// TestEveryRouteAndRoleOfASensitiveWorkspaceIsWhatTheTableSays walks every route as a
// member of each role of a workspace that marks run state sensitive, signed in and with
// an API key of the role, and as SLUICE_TOKEN. The flow it reads has a run, checkpoints,
// a run file, test cases and a test result, each carrying one marker. A request is
// refused by the permission check exactly when the table says so, with read_state the
// operator's there; no answer to a role without read_state carries the marker (read_run
// gives it statuses only); every answer of a read_state or read_run route to a role
// with it does.
func TestEveryRouteAndRoleOfASensitiveWorkspaceIsWhatTheTableSays(t *testing.T) {
	r := storetest.Real(t)
	files, err := store.NewFiles(r, store.FilesOptions{})
	if err != nil {
		t.Fatal(err)
	}
	a := newAPI(t, r, func(_ *server.Config, d *server.Deps) { d.Files = files })
	const ws, marker = "sens", "Quill-marker-31"
	a.workspace(ws)
	in := []string{server.WorkspaceHeader, ws}
	a.must(http.StatusOK, "PUT", "/api/settings", `{"sensitive": true}`, in...)
	id, doc := a.flowDoc(`{"sluice": 1, "id": "x", "nodes": [{"id": "in", "type": "input"},
		{"id": "seen", "type": "transform", "params": {"expr": "{seen: .customer}"}}, {"id": "out", "type": "output"}],
		"edges": [{"from": "in", "to": "seen"}, {"from": "seen", "to": "out"}]}`, nil)
	a.forgetFlow(ws + teams.Sep + id)
	a.must(http.StatusCreated, "PUT", "/api/flows/"+id, doc, in...)

	up := a.must(http.StatusCreated, "POST", "/api/flows/"+id+"/files", []byte("the text of "+marker),
		append([]string{"Content-Type", "text/plain", "X-File-Name", marker + ".txt"}, in...)...)
	var file map[string]any
	up.into(t, &file)
	var done, other run // two runs, to compare
	for _, r := range []*run{&done, &other} {
		a.must(http.StatusOK, "POST", "/api/flows/"+id+"/runs?wait=20s", map[string]any{"input": map[string]any{"customer": marker, "file": file}}, in...).into(t, r)
		if r.Status != "succeeded" {
			t.Fatalf("run %+v, want succeeded", r)
		}
	}
	var ckpts struct {
		Checkpoints []struct{ ID, Node string } `json:"checkpoints"`
	}
	a.must(http.StatusOK, "GET", "/api/flows/"+id+"/runs/"+done.ID+"/checkpoints", nil, in...).into(t, &ckpts)
	ckpt := "" // the step that added the marker: its diff shows it
	for _, c := range ckpts.Checkpoints {
		if c.Node == "seen" {
			ckpt = c.ID
		}
	}
	if ckpt == "" {
		t.Fatalf("no checkpoint of the node seen: %+v", ckpts)
	}
	// A saved case and one that fails (its why quotes the output), and their result.
	a.must(http.StatusCreated, "POST", "/api/flows/"+id+"/cases", map[string]any{"run": done.ID, "id": "saved"}, in...)
	var cv server.CasesView
	a.must(http.StatusOK, "GET", "/api/flows/"+id+"/cases", nil, in...).into(t, &cv)
	var cases map[string]any
	if err := json.Unmarshal(cv.File, &cases); err != nil {
		t.Fatal(err)
	}
	cases["cases"] = append(cases["cases"].([]any), map[string]any{"id": "fails", "input": map[string]any{"customer": marker}, "expect": []any{map[string]any{"equals": "something else"}}})
	a.must(http.StatusOK, "PUT", "/api/flows/"+id+"/cases", cases, in...)
	var tested struct {
		Version string
		Failed  int
	}
	a.must(http.StatusOK, "POST", "/api/flows/"+id+"/cases/run", map[string]any{}, in...).into(t, &tested)
	if tested.Failed != 1 {
		t.Fatalf("the cases' report: %+v, want one failed", tested)
	}
	// GET routes name this flow, run, checkpoint, file and version; the others a flow
	// that does not exist (an editor's DELETE must not take the flow from the next).
	reading := strings.NewReplacer(":flow", id, ":run", done.ID, ":ckpt", ckpt,
		":file", file["$file"].(string), ":version", tested.Version, ":env", "prod")

	type who struct {
		name   string
		role   teams.Role
		header []string
	}
	var people []who
	for _, r := range teams.Roles {
		email := string(r) + "@sens.example.com"
		a.person(email, "password-"+string(r), map[string]teams.Role{ws: r})
		b := a.browser()
		b.signin(email, "password-"+string(r))
		people = append(people, who{"signed-in " + string(r), r, []string{"Authorization", "", "Cookie", b.cookie()}})
		people = append(people, who{"key of a " + string(r), r, []string{"Authorization", "Bearer " + a.serviceKey(ws, r)}})
	}
	people = append(people, who{"SLUICE_TOKEN", "token", []string{"Authorization", "Bearer " + testToken}})
	// The levels of a sensitive workspace, as docs/teams.md shows them.
	least := map[teams.Perm]int{}
	for p, n := range leastRole {
		least[p] = n
	}
	least[teams.ReadState] = roleRank[teams.Operator]

	cells := 0
	for _, rt := range a.srv.Routes() {
		perm := teams.Routes[rt]
		if perm == teams.Public {
			continue
		}
		method, path, _ := strings.Cut(rt, " ")
		target := concrete(path)
		if method == http.MethodGet {
			target = reading.Replace(path)
			if strings.HasSuffix(path, "/compare") {
				target += "?with=" + other.ID
			}
		}
		for _, p := range people {
			var want bool
			switch {
			case p.role == "token", perm == teams.Self:
				want = true
			case perm == teams.Instance:
				want = false
			default:
				want = roleRank[p.role] >= least[perm]
			}
			canState := p.role == "token" || roleRank[p.role] >= least[teams.ReadState]
			got := a.answer(method, target, append(p.header, server.WorkspaceHeader, ws)...)
			cells++
			refused := got.status == http.StatusForbidden && got.header.Get("Sluice-Required-Role") != ""
			if got.status == http.StatusUnauthorized {
				t.Errorf("%s as %s: 401", rt, p.name)
			}
			if refused == want {
				t.Errorf("%s as %s: status %d (required %q); the table says allowed=%v", rt, p.name, got.status, got.header.Get("Sluice-Required-Role"), want)
				continue
			}
			if method != http.MethodGet || refused || path == "/ws" {
				continue // /ws answers a websocket client only: TestAViewerOfASensitiveWorkspaceSeesStatusesNotState reads it
			}
			if !canState && strings.Contains(got.String(), marker) {
				t.Errorf("%s as %s: the answer carries the run's state, which a %s may not see here:\n%.400s", rt, p.name, p.role, got)
			}
			if canState && (perm == teams.ReadState || perm == teams.ReadRun) {
				stream := strings.HasPrefix(got.header.Get("Content-Type"), "text/event-stream")
				if got.status != http.StatusOK || (!stream && !strings.Contains(got.String(), marker)) {
					t.Errorf("%s as %s: status %d without the run's state:\n%.400s", rt, p.name, got.status, got)
				}
			}
			if !canState && perm == teams.ReadRun && got.status != http.StatusOK {
				t.Errorf("%s as %s: status %d, want the run's statuses", rt, p.name, got.status)
			}
		}
	}
	t.Logf("%d cells", cells)
	if cells < 400 {
		t.Fatalf("only %d cells walked", cells)
	}
}

func TestTheRoleTableInTheDocsIsTheOneTheServerApplies(t *testing.T) {
	doc, err := readDoc("teams.md")
	if err != nil {
		t.Fatal(err)
	}
	row := regexp.MustCompile("(?m)^\\| `([A-Z]+ [^`]+)` \\| ([a-z_]+) \\|")
	seen := map[string]bool{}
	for _, m := range row.FindAllStringSubmatch(doc, -1) {
		seen[m[1]] = true
		if got := teams.Routes[m[1]]; string(got) != m[2] {
			t.Errorf("docs/teams.md says %s needs %s; teams.Routes says %q", m[1], m[2], got)
		}
	}
	for rt, p := range teams.Routes {
		if !seen[rt] {
			t.Errorf("docs/teams.md has no row for %s (%s)", rt, p)
		}
	}
}

func readDoc(name string) (string, error) {
	b, err := os.ReadFile("../docs/" + name)
	return string(b), err
}

var _ = fmt.Sprint
