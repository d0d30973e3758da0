package flows_test

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/flows"
)

// testSecrets is a rule over a fixed environment.
func testSecrets(t *testing.T, env map[string]string, allow ...string) *flows.Secrets {
	t.Helper()
	s, err := flows.NewSecrets(flows.SecretsConfig{Allow: allow, Reserved: []string{"ACME_LLM_KEY"},
		Lookup: func(k string) (string, bool) { v, ok := env[k]; return v, ok },
		Environ: func() []string {
			var out []string
			for k, v := range env {
				out = append(out, k+"="+v)
			}
			return out
		}})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestFlowsReadOnlyTheSecretsTheOperatorAllows(t *testing.T) {
	s := testSecrets(t, nil, "ORDERS_TOKEN")
	for name, ok := range map[string]bool{
		"SLUICE_SECRET_ORDERS":  true,
		"ORDERS_TOKEN":          true, // listed
		"SLUICE_SECRET_":        false,
		"HOME":                  false,
		"AWS_SECRET_ACCESS_KEY": false,
		"SLUICE_TOKEN":          false,
		"SLUICE_HOOK_SECRET_X":  false,
		"SLUICE_HTTP_ALLOW":     false,
		"REDIS_URL":             false,
		"OPENAI_API_KEY":        false,
		"ACME_LLM_KEY":          false, // a provider's api_key_env
	} {
		err := s.Check(name)
		if (err == nil) != ok {
			t.Errorf("Check(%s) = %v, want allowed=%v", name, err, ok)
		}
		if err != nil && !strings.Contains(err.Error(), name) {
			t.Errorf("Check(%s) = %v: name the variable", name, err)
		}
	}
	if err := s.Check("HOME"); !strings.Contains(err.Error(), "--secrets HOME") {
		t.Errorf("refusal %q does not say how to allow it", err)
	}
	if err := s.Check("SLUICE_TOKEN"); !strings.Contains(err.Error(), "setting of Sluice") {
		t.Errorf("refusal %q does not say it is Sluice's own setting", err)
	}
	// Sluice's own settings cannot be allowed, even by name.
	for _, name := range []string{"SLUICE_TOKEN", "SLUICE_HOOK_SECRET_TRIAGE", "REDIS_URL", "OPENAI_API_KEY", "ACME_LLM_KEY", "AWS_SECRET_ACCESS_KEY", "MINIO_ROOT_PASSWORD", "not a name"} {
		if _, err := flows.NewSecrets(flows.SecretsConfig{Allow: []string{name}, Reserved: []string{"ACME_LLM_KEY"}}); err == nil {
			t.Errorf("allowing %q was accepted", name)
		}
	}
	// Lookup refuses what Check refuses, whatever the environment holds.
	s = testSecrets(t, map[string]string{"SLUICE_TOKEN": "server-token-1234567", "SLUICE_SECRET_A": "value-of-a"})
	if v, _, err := s.Lookup("SLUICE_TOKEN"); err == nil || v != "" {
		t.Errorf("Lookup(SLUICE_TOKEN) = %q, %v", v, err)
	}
	if v, ok, err := s.Lookup("SLUICE_SECRET_A"); err != nil || !ok || v != "value-of-a" {
		t.Errorf("Lookup(SLUICE_SECRET_A) = %q, %v, %v", v, ok, err)
	}
}

// The operator may give a name to some workspaces only ("acme:NAME"), a SLUICE_SECRET_*
// name too; a workspace's owner narrows what its flows read to a list, never past what
// the operator gives the workspace.
func TestAWorkspaceReadsWhatTheOperatorGivesItAndItsOwnerLists(t *testing.T) {
	env := map[string]string{"ACME_KEY": "acme-key-value", "SLUICE_SECRET_ACME_ONLY": "acme-only-value", "SLUICE_SECRET_SHARED": "shared-value"}
	s := testSecrets(t, env, "acme:ACME_KEY", "acme:SLUICE_SECRET_ACME_ONLY", "beta:SLUICE_SECRET_ACME_ONLY", "HOME")
	for _, c := range []struct {
		ws, name string
		owner    []string
		ok       bool
		says     string
	}{
		{"acme", "ACME_KEY", nil, true, ""},
		{"beta", "ACME_KEY", nil, false, "workspace \"beta\"'s flows may not read the environment variable ACME_KEY"},
		{"default", "ACME_KEY", nil, false, "flows may not read the environment variable ACME_KEY: name it SLUICE_SECRET_…"},
		{"beta", "SLUICE_SECRET_ACME_ONLY", nil, true, ""}, // given to acme and beta
		{"gamma", "SLUICE_SECRET_ACME_ONLY", nil, false, "--secrets gamma:SLUICE_SECRET_ACME_ONLY (this one)"},
		{"gamma", "SLUICE_SECRET_SHARED", nil, true, ""},
		{"gamma", "HOME", nil, true, ""},
		{"acme", "SLUICE_SECRET_SHARED", []string{"ACME_KEY"}, false, "its owner lists the secrets"},
		{"acme", "ACME_KEY", []string{"ACME_KEY"}, true, ""},
		{"beta", "ACME_KEY", []string{"ACME_KEY"}, false, "may not read"}, // an owner's list adds nothing
		{"acme", "SLUICE_TOKEN", []string{"SLUICE_TOKEN"}, false, "setting of Sluice"},
	} {
		err := s.CheckIn(c.ws, c.name, c.owner)
		if (err == nil) != c.ok || err != nil && !strings.Contains(err.Error(), c.says) {
			t.Errorf("CheckIn(%s, %s, %v) = %v, want allowed=%v saying %q", c.ws, c.name, c.owner, err, c.ok, c.says)
		}
		v, _, lerr := s.LookupIn(c.ws, c.name, c.owner)
		if (lerr == nil) != c.ok || !c.ok && v != "" {
			t.Errorf("LookupIn(%s, %s, %v) = %q, %v", c.ws, c.name, c.owner, v, lerr)
		}
	}
	// A name the operator gives another workspace is refused with the very words of a
	// name nobody may read: the answer does not tell that it exists elsewhere.
	given, nobody := s.CheckIn("beta", "ACME_KEY", nil), s.CheckIn("beta", "NOBODYS_KEY", nil)
	if given == nil || nobody == nil || strings.ReplaceAll(given.Error(), "ACME_KEY", "X") != strings.ReplaceAll(nobody.Error(), "NOBODYS_KEY", "X") {
		t.Errorf("another workspace's variable: %v; a variable nobody may read: %v — want the same answer", given, nobody)
	}
	// A scoped name's value is redacted like any other secret's.
	if got := s.Redact("key acme-key-value, only acme-only-value"); strings.Contains(got, "value") {
		t.Errorf("redacted: %q", got)
	}
	for _, bad := range [][]string{{"Acme:KEY"}, {"acme:not a name"}, {"acme:SLUICE_TOKEN"}, {"acme:KEY", "KEY"}} {
		if _, err := flows.NewSecrets(flows.SecretsConfig{Allow: bad}); err == nil {
			t.Errorf("the allow-list %q was accepted", bad)
		}
	}
}

func TestValidationRefusesSecretsFlowsMayNotRead(t *testing.T) {
	doc := `{"sluice": 1, "id": "x", "nodes": [{"id": "in", "type": "input"},
		{"id": "ask", "type": "test_secret", "params": {"api_key": {"$env": "SLUICE_TOKEN"}}},
		{"id": "also", "type": "test_secret", "params": {"api_key": {"$env": "HOME"}}},
		{"id": "fine", "type": "test_secret", "params": {"api_key": {"$env": "SLUICE_SECRET_KEY"}}}],
		"edges": [{"from": "in", "to": "ask"}, {"from": "ask", "to": "also"}, {"from": "also", "to": "fine"}]}`
	reg := testRegistry()
	ps := flows.Validate([]byte(doc), reg, flows.DefaultLimits).Errors()
	want := map[string]string{"ask": "nodes[1].params.api_key.$env", "also": "nodes[2].params.api_key.$env"}
	if len(ps) != len(want) {
		t.Fatalf("problems %v, want one for each of %v", ps, want)
	}
	for _, p := range ps {
		if p.Code != flows.CodeSecretNotAllowed || want[p.Node] != p.Path {
			t.Errorf("problem %+v, want %s at %s", p, flows.CodeSecretNotAllowed, want[p.Node])
		}
	}
	// The operator allows HOME: only Sluice's own token stays refused.
	s, err := flows.NewSecrets(flows.SecretsConfig{Allow: []string{"HOME"}})
	if err != nil {
		t.Fatal(err)
	}
	reg.SetSecrets(s)
	ps = flows.Validate([]byte(doc), reg, flows.DefaultLimits).Errors()
	if len(ps) != 1 || ps[0].Node != "ask" || !strings.Contains(ps[0].Message, "SLUICE_TOKEN") {
		t.Errorf("with HOME allowed: %v", ps)
	}
}

func TestRedactionReplacesEverySecretValue(t *testing.T) {
	s := testSecrets(t, map[string]string{
		"SLUICE_SECRET_KEY":    "sk-canary-0123456789",
		"SLUICE_SECRET_QUOTED": `pa"ss\word-42`,
		"SLUICE_SECRET_SHORT":  "abc",
		"SLUICE_TOKEN":         "the-server-token-1234",
		"ACME_LLM_KEY":         "acme-provider-key-99",
		"HOME":                 "/home/someone",
	})
	for in, want := range map[string]string{
		"Bearer sk-canary-0123456789":              "Bearer [redacted:SLUICE_SECRET_KEY]",
		`{"auth": "pa\"ss\\word-42"}`:              `{"auth": "[redacted:SLUICE_SECRET_QUOTED]"}`,
		`pa"ss\word-42`:                            "[redacted:SLUICE_SECRET_QUOTED]",
		"token the-server-token-1234 here":         "token [redacted:SLUICE_TOKEN] here",
		"key acme-provider-key-99":                 "key [redacted:ACME_LLM_KEY]",
		"abc is too short to be redacted":          "abc is too short to be redacted",
		"/home/someone is no secret":               "/home/someone is no secret",
		"sk-canary-0123456789sk-canary-0123456789": "[redacted:SLUICE_SECRET_KEY][redacted:SLUICE_SECRET_KEY]",
	} {
		if got := s.Redact(in); got != want {
			t.Errorf("Redact(%q) = %q, want %q", in, got, want)
		}
	}
	if got := s.TooShort(); !reflect.DeepEqual(got, []string{"SLUICE_SECRET_SHORT"}) {
		t.Errorf("TooShort = %v", got)
	}

	// Values: strings and keys at any depth; what holds no secret is shared, the input
	// is left as it was.
	in := map[string]any{
		"body":                 map[string]any{"headers": map[string]any{"Authorization": "Bearer sk-canary-0123456789"}, "n": 1.5},
		"list":                 []any{"ok", "x sk-canary-0123456789 y", true, nil},
		"clean":                map[string]any{"a": "b"},
		"sk-canary-0123456789": "as a key",
	}
	orig, _ := json.Marshal(in)
	out := s.RedactValue(in).(map[string]any)
	got, _ := json.Marshal(out)
	if strings.Contains(string(got), "sk-canary") || !strings.Contains(string(got), "[redacted:SLUICE_SECRET_KEY]") {
		t.Errorf("RedactValue = %s", got)
	}
	if after, _ := json.Marshal(in); string(after) != string(orig) {
		t.Errorf("RedactValue changed its input: %s", after)
	}
	if reflect.ValueOf(out["clean"]).Pointer() != reflect.ValueOf(in["clean"]).Pointer() {
		t.Error("a part without a secret was copied")
	}
	// A JSON text with the secret escaped as \u sequences is redacted once decoded.
	dec, _ := flows.DecodeJSON([]byte(`{"echo": "\u0073k-canary-0123456789"}`))
	if b, _ := json.Marshal(s.RedactValue(dec)); strings.Contains(string(b), "canary") {
		t.Errorf("escaped secret: %s", b)
	}

	// Results and errors: the code, the place and permanence stay.
	res := &flows.Result{Output: "sk-canary-0123456789", Update: map[string]any{"k": "sk-canary-0123456789"}, Items: []any{"sk-canary-0123456789"}}
	s.RedactResult(res)
	if b, _ := json.Marshal(res); strings.Contains(string(b), "canary") {
		t.Errorf("RedactResult left %s", b)
	}
	err := flows.Permanent(&flows.Error{Code: flows.Invalid, Node: "call", Path: "params.url", Message: "GET x: answered 401: you sent sk-canary-0123456789",
		Err: errors.New("cause sk-canary-0123456789")})
	red := s.RedactError(err)
	var fe *flows.Error
	if !errors.As(red, &fe) || fe.Code != flows.Invalid || fe.Node != "call" || fe.Path != "params.url" || !flows.IsPermanent(red) {
		t.Errorf("RedactError = %#v, want the code, node, path and permanence kept", red)
	}
	if strings.Contains(red.Error(), "canary") || !strings.Contains(red.Error(), "[redacted:SLUICE_SECRET_KEY]") {
		t.Errorf("RedactError = %q", red)
	}
	plain := errors.New("upstream said sk-canary-0123456789")
	if red := s.RedactError(plain); flows.IsPermanent(red) || strings.Contains(red.Error(), "canary") {
		t.Errorf("a plain error became %#v", red)
	}
	if ok := errors.New("nothing secret"); s.RedactError(ok) != ok {
		t.Error("an error without a secret was replaced")
	}

	// A value read through Lookup is redacted from then on, even one the environment
	// listing did not show.
	hidden, _ := flows.NewSecrets(flows.SecretsConfig{Lookup: func(k string) (string, bool) { return "late-secret-value", k == "SLUICE_SECRET_LATE" }})
	if got := hidden.Redact("late-secret-value"); got != "late-secret-value" {
		t.Fatalf("redacted before it was read: %q", got)
	}
	hidden.Lookup("SLUICE_SECRET_LATE")
	if got := hidden.Redact("x late-secret-value"); got != "x [redacted:SLUICE_SECRET_LATE]" {
		t.Errorf("after Lookup: %q", got)
	}
}

// What a workspace's flows produce has every secret value redacted, but a mark names
// only a variable the operator gives the workspace: the value of another workspace's
// variable, or of a setting of Sluice, is "[redacted]", so that a flow that guessed it
// does not learn whose it is. The operator's view (traces, logs) names them all.
func TestAWorkspacesRedactionNamesOnlyTheVariablesItMayRead(t *testing.T) {
	s := testSecrets(t, map[string]string{
		"ACME_KEY":             "acme-key-value-31",
		"SLUICE_SECRET_SHARED": "shared-value-31",
		"SLUICE_SECRET_BETA":   "beta-only-value-31",
		"SLUICE_TOKEN":         "the-server-token-31",
	}, "acme:ACME_KEY", "beta:SLUICE_SECRET_BETA")
	const text = "a acme-key-value-31 s shared-value-31 b beta-only-value-31 t the-server-token-31"
	for _, c := range []struct{ ws, want, acme string }{
		{"acme", "a [redacted:ACME_KEY] s [redacted:SLUICE_SECRET_SHARED] b [redacted] t [redacted]", "[redacted:ACME_KEY]"},
		{"beta", "a [redacted] s [redacted:SLUICE_SECRET_SHARED] b [redacted:SLUICE_SECRET_BETA] t [redacted]", "[redacted]"},
		{flows.DefaultWorkspace, "a [redacted] s [redacted:SLUICE_SECRET_SHARED] b [redacted] t [redacted]", "[redacted]"},
	} {
		d := s.In(c.ws)
		if got := d.Redact(text); got != c.want {
			t.Errorf("In(%s).Redact = %q, want %q", c.ws, got, c.want)
		}
		got, _ := json.Marshal(d.RedactValue(map[string]any{"acme-key-value-31": []any{"x acme-key-value-31"}}))
		if want, _ := json.Marshal(map[string]any{c.acme: []any{"x " + c.acme}}); string(got) != string(want) {
			t.Errorf("In(%s).RedactValue = %s, want %s", c.ws, got, want)
		}
		err := d.RedactError(flows.Permanent(&flows.Error{Code: flows.Invalid, Node: "call", Message: "you sent acme-key-value-31"}))
		if !strings.Contains(err.Error(), "you sent "+c.acme) || !flows.IsPermanent(err) {
			t.Errorf("In(%s).RedactError = %v, want the value replaced by %s", c.ws, err, c.acme)
		}
	}
	if got := s.Redact(text); got != "a [redacted:ACME_KEY] s [redacted:SLUICE_SECRET_SHARED] b [redacted:SLUICE_SECRET_BETA] t [redacted:SLUICE_TOKEN]" {
		t.Errorf("the operator's Redact = %q", got)
	}
	// A value read after a workspace's redaction was first made is redacted in it too
	// (the variable was set after the process started).
	set := false
	late, _ := flows.NewSecrets(flows.SecretsConfig{Allow: []string{"acme:LATE_KEY"}, Lookup: func(k string) (string, bool) { return "late-key-value-31", set && k == "LATE_KEY" }})
	if got := late.In("beta").Redact("late-key-value-31"); got != "late-key-value-31" {
		t.Fatalf("redacted before it was read: %q", got)
	}
	set = true
	if _, _, err := late.LookupIn("acme", "LATE_KEY", nil); err != nil {
		t.Fatal(err)
	}
	if got := late.In("beta").Redact("x late-key-value-31"); got != "x [redacted]" {
		t.Errorf("beta's redaction after acme read LATE_KEY: %q", got)
	}
	if got := late.In("acme").Redact("x late-key-value-31"); got != "x [redacted:LATE_KEY]" {
		t.Errorf("acme's redaction after it read LATE_KEY: %q", got)
	}

	// The engine's hooks redact a flow's result, events and turns as its workspace sees
	// them.
	flows.UseSecrets(s)
	t.Cleanup(func() { flows.UseSecrets(nil) })
	res, err := flows.RedactStep("beta.guess", &flows.Result{Output: "acme-key-value-31"}, errors.New("echo acme-key-value-31"))
	if res.Output != "[redacted]" || err.Error() != "echo [redacted]" {
		t.Errorf("RedactStep in beta: %v, %v", res.Output, err)
	}
	if res, _ := flows.RedactStep("acme.guess", &flows.Result{Output: "acme-key-value-31"}, nil); res.Output != "[redacted:ACME_KEY]" {
		t.Errorf("RedactStep in acme: %v", res.Output)
	}
	if got := string(flows.RedactEvent("beta.guess", []byte(`"acme-key-value-31"`))); got != `"[redacted]"` {
		t.Errorf("RedactEvent in beta: %s", got)
	}
	if got := flows.RedactData("beta.guess", "acme-key-value-31"); got != "[redacted]" {
		t.Errorf("RedactData in beta: %v", got)
	}
}

func TestTheEngineHooksRedactWithTheProcessRule(t *testing.T) {
	s := testSecrets(t, map[string]string{"SLUICE_SECRET_KEY": "sk-canary-0123456789"})
	flows.UseSecrets(s)
	t.Cleanup(func() { flows.UseSecrets(nil) })
	res, err := flows.RedactStep("triage", &flows.Result{Output: map[string]any{"echo": "sk-canary-0123456789"}}, errors.New("echo sk-canary-0123456789"))
	if b, _ := json.Marshal(res.Output); strings.Contains(string(b), "canary") || strings.Contains(err.Error(), "canary") {
		t.Errorf("RedactStep: %s, %v", b, err)
	}
	if got := string(flows.RedactEvent("triage", []byte(`{"token": "sk-canary-0123456789"}`))); strings.Contains(got, "canary") {
		t.Errorf("RedactEvent: %s", got)
	}
	if got, _ := json.Marshal(flows.RedactData("triage", map[string]any{"turn": []any{"sk-canary-0123456789"}})); strings.Contains(string(got), "canary") {
		t.Errorf("RedactData: %s", got)
	}
	flows.UseSecrets(nil)
	if got := string(flows.RedactEvent("triage", []byte(`"sk-canary-0123456789"`))); got != `"sk-canary-0123456789"` {
		t.Errorf("without a rule: %s", got)
	}
}

func TestRedactCredentialsLeavesTheTextAroundThem(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"use sk-proj-Abcdefghijklmnopqrst1234 here", "use [x] here"},
		{"Authorization: Bearer abcdefghijklmnop.qrs", "Authorization: [x]"},
		{"sk-ant-api03-abcdefghij,ghp_abcdefghijklmnopqrstuvwx", "[x],[x]"},
		{"AKIAABCDEFGHIJKLMNOP", "[x]"},
		{"no key: sk-short, task-abcdefghijklmnopqrstu", "no key: sk-short, task-abcdefghijklmnopqrstu"},
	} {
		got := flows.RedactCredentials(tc.in, "[x]")
		if got != tc.want || flows.LooksLikeCredential(got) {
			t.Errorf("RedactCredentials(%q) = %q, want %q", tc.in, got, tc.want)
		}
		if flows.LooksLikeCredential(tc.in) != (tc.in != tc.want) {
			t.Errorf("LooksLikeCredential(%q) = %t", tc.in, flows.LooksLikeCredential(tc.in))
		}
	}
}
