package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/flows"
	"github.com/sluicehq/sluice/flows/engine"
	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/storetest"
)

// sluiceCmd runs the binary with env and returns its combined output and exit code.
func sluiceCmd(t *testing.T, env []string, args ...string) (string, int) {
	t.Helper()
	cmd := exec.Command(binary, args...)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return string(out), code
}

// sluice promote on Redis directly: the gate runs the flow's cases (FLOW.cases.json in
// --flows) with in-process workers; a version whose case fails is refused (exit 1,
// naming the case) and prod stays; the older version passes and is promoted. Rolling
// back dev is promoting an older version there, and rewrites the file.
func TestSluicePromoteOnRedisRunsTheGate(t *testing.T) {
	r := storetest.Real(t)
	dir := t.TempDir()
	id, path := writeExampleFlow(t, dir, "linear", nil)
	storetest.DeleteFlowKeys(t, r, id)
	os.WriteFile(filepath.Join(dir, id+".cases.json"), []byte(`{"sluice_cases": 1, "cases": [
	  {"id": "ada-shouted", "input": {"name": "Ada"}, "expect": [{"path": ".greeting", "equals": "HELLO, ADA!"}]}]}`), 0o644)
	e := engine.New(r, registry(nil), engine.Options{})
	ctx := context.Background()
	publish := func() *flows.Plan {
		b, _ := os.ReadFile(path)
		p, _, err := e.Compile(b)
		if err != nil {
			t.Fatal(err)
		}
		if err := e.Publish(ctx, p); err != nil {
			t.Fatal(err)
		}
		return p
	}
	v1 := publish()
	b, _ := os.ReadFile(path)
	os.WriteFile(path, bytes.Replace(b, []byte(`ascii_upcase`), []byte(`ascii_downcase`), 1), 0o644)
	v2 := publish()
	env := []string{"REDIS_URL=" + storetest.URL(), "SLUICE_URL="}

	out, code := sluiceCmd(t, env, "promote", "--flows", dir, id, "--to", "prod")
	if code != 1 || !strings.Contains(out, "1 of 1 test cases fail: ada-shouted") || !strings.Contains(out, v2.Version[:12]) {
		t.Fatalf("promoting dev's v2 (its case fails): exit %d\n%s", code, out)
	}
	if _, err := e.EnvVersion(ctx, id, "prod"); flows.ErrorCode(err) != flows.NotFound {
		t.Errorf("prod after the refused promotion: %v, want no version", err)
	}
	out, code = sluiceCmd(t, env, "promote", "--flows", dir, id, v1.Version[:9], "--to", "prod", "--message", "release 1")
	if code != 0 || !strings.Contains(out, "prod now runs version "+v1.Version[:12]) || !strings.Contains(out, "gate: 1 of 1 test cases passed") {
		t.Fatalf("promoting v1: exit %d\n%s", code, out)
	}
	if got, _ := e.EnvVersion(ctx, id, "prod"); got != v1.Version {
		t.Errorf("prod is %.12s, want v1 %.12s", got, v1.Version)
	}
	ps, _ := e.Promotions(ctx, id, "prod", 10)
	if len(ps) != 1 || ps[0].Message != "release 1" || !strings.HasPrefix(ps[0].By, "cli") || ps[0].Test == nil || ps[0].Test.Passed != 1 {
		t.Errorf("the promotion recorded %+v", ps)
	}
	// Rollback is promoting an older version: v1 into dev rewrites the file.
	if out, code = sluiceCmd(t, env, "promote", "--flows", dir, id, v1.Version, "--to", "dev"); code != 0 || !strings.Contains(out, "wrote it to the flow's file") {
		t.Fatalf("promoting v1 into dev: exit %d\n%s", code, out)
	}
	if b, _ := os.ReadFile(path); !bytes.Contains(b, []byte("ascii_upcase")) {
		t.Errorf("the file is not v1's after promoting v1 into dev: %s", b)
	}
	if got, _ := r.CurrentVersion(ctx, id); got != v1.Version {
		t.Errorf("current is %.12s, want v1", got)
	}
	if out, code = sluiceCmd(t, env, "promote", id, "--to", "staging"); code != 1 || !strings.Contains(out, `no environment "staging"`) {
		t.Errorf("an environment the workspace lacks: exit %d\n%s", code, out)
	}
	if out, code = sluiceCmd(t, env, "promote", id); code != 2 {
		t.Errorf("without --to: exit %d\n%s", code, out)
	}
}

// sluice promote --server asks a serve: the promotion is recorded as the key's and in
// the audit log; a wrong token is refused.
func TestSluicePromoteThroughAServe(t *testing.T) {
	r := storetest.Real(t)
	dir := t.TempDir()
	id, _ := writeExampleFlow(t, dir, "linear", nil)
	storetest.DeleteFlowKeys(t, r, id)
	const token = "promote-test-token-8c1"
	p := start(t, []string{"REDIS_URL=" + storetest.URL(), "SLUICE_TOKEN=" + token}, "serve", "--addr", "127.0.0.1:0", "--flows", dir)
	base := p.waitLine(t, servingLine, 30*time.Second)[1]
	env := []string{"REDIS_URL=", "SLUICE_URL=" + base, "SLUICE_TOKEN=" + token}

	out, code := sluiceCmd(t, env, "promote", id, "--to", "prod", "--json")
	var res promoteResult
	if code != 0 || json.Unmarshal([]byte(out), &res) != nil || res.Promotion.Environment != "prod" || res.Promotion.By != "SLUICE_TOKEN" || res.Promotion.From != "dev" {
		t.Fatalf("promote --server: exit %d\n%s", code, out)
	}
	req, _ := http.NewRequest("GET", base+"/api/flows/"+id+"/environments", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var envs struct {
		Environments []engine.EnvState `json:"environments"`
	}
	json.NewDecoder(resp.Body).Decode(&envs)
	resp.Body.Close()
	if len(envs.Environments) != 2 || envs.Environments[1].Version != res.Promotion.Version || envs.Environments[0].Version != res.Promotion.Version {
		t.Errorf("environments after the promotion: %+v", envs.Environments)
	}
	if out, code := sluiceCmd(t, []string{"REDIS_URL=", "SLUICE_URL=" + base, "SLUICE_TOKEN=wrong"}, "promote", id, "--to", "prod"); code == 0 || !strings.Contains(out, "401") {
		t.Errorf("a wrong token: exit %d\n%s", code, out)
	}
}

// A serve publishes its folder's flows before it says it serves: every flow of a
// folder of many has a version in dev as soon as the serving line is out, so a run
// or a promotion sent at once finds it (it published them in the background, and a
// promotion right after start-up was refused: "no version in environment dev yet").
func TestServePublishesItsFlowsBeforeItServes(t *testing.T) {
	r := storetest.Real(t)
	dir := t.TempDir()
	var ids []string
	for range 400 {
		id, _ := writeExampleFlow(t, dir, "linear", nil)
		storetest.DeleteFlowKeys(t, r, id)
		ids = append(ids, id)
	}
	p := start(t, []string{"REDIS_URL=" + storetest.URL()}, "serve", "--addr", "127.0.0.1:0", "--flows", dir)
	base := p.waitLine(t, servingLine, 60*time.Second)[1]
	for i := len(ids) - 1; i >= 0; i-- { // the last written first: the likeliest to be late
		resp, err := http.Get(base + "/api/flows/" + ids[i] + "/environments")
		if err != nil {
			t.Fatal(err)
		}
		var envs struct {
			Environments []engine.EnvState `json:"environments"`
		}
		json.NewDecoder(resp.Body).Decode(&envs)
		resp.Body.Close()
		if len(envs.Environments) == 0 || envs.Environments[0].Version == "" {
			t.Fatalf("flow %d of %d has no version in dev right after the serving line: %+v", i+1, len(ids), envs.Environments)
		}
	}
}

// "current" in the CLI is the version of --env's environment (or SLUICE_ENV's), as a
// request's environment is in the API: `sluice test --version current --env prod`
// tests prod's version, `sluice versions F V current --env prod` compares with it and
// `sluice replay … --version current --env prod --yes` replays on it, each replay
// recording prod. Without an environment "current" is dev's version, as before.
func TestTheCLIResolvesCurrentThroughAnEnvironment(t *testing.T) {
	r := storetest.Real(t)
	dir := t.TempDir()
	id, path := writeExampleFlow(t, dir, "linear", nil)
	storetest.DeleteFlowKeys(t, r, id)
	os.WriteFile(filepath.Join(dir, id+".cases.json"), []byte(`{"sluice_cases": 1, "cases": [
	  {"id": "ada-shouted", "input": {"name": "Ada"}, "expect": [{"path": ".greeting", "equals": "HELLO, ADA!"}]}]}`), 0o644)
	e := engine.New(r, registry(nil), engine.Options{})
	ctx := context.Background()
	publish := func() *flows.Plan {
		b, _ := os.ReadFile(path)
		p, _, err := e.Compile(b)
		if err != nil {
			t.Fatal(err)
		}
		if err := e.Publish(ctx, p); err != nil {
			t.Fatal(err)
		}
		return p
	}
	v1 := publish()
	if _, err := e.Promote(ctx, id, "prod", engine.PromoteOptions{Test: &store.PromotionTest{Gate: "passed", Cases: 1, Passed: 1}}); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(path)
	os.WriteFile(path, bytes.Replace(b, []byte("Hello, "), []byte("Hi, "), 1), 0o644)
	v2 := publish() // dev's: its case fails
	env := []string{"REDIS_URL=" + storetest.URL(), "SLUICE_ENV="}

	if out, code := sluiceCmd(t, env, "test", path, "--version", "current"); code != 1 || !strings.Contains(out, "version "+v2.Version[:12]+")") {
		t.Errorf("test --version current: exit %d, want 1 (dev's version fails)\n%s", code, out)
	}
	if out, code := sluiceCmd(t, env, "test", path, "--version", "current", "--env", "prod"); code != 0 || !strings.Contains(out, "version "+v1.Version[:12]+" in prod)") {
		t.Errorf("test --version current --env prod: exit %d, want 0 on prod's version\n%s", code, out)
	}
	if out, code := sluiceCmd(t, append(env, "SLUICE_ENV=prod"), "test", path, "--version", "current"); code != 0 || !strings.Contains(out, v1.Version[:12]) {
		t.Errorf("test --version current with SLUICE_ENV=prod: exit %d, want 0 on prod's version\n%s", code, out)
	}
	if out, code := sluiceCmd(t, env, "test", path, "--version", v1.Version[:9], "--compare", "current", "--env", "prod"); code != 0 || !strings.Contains(out, "against "+v1.Version[:12]) {
		t.Errorf("test --compare current --env prod: exit %d, want prod's version as B\n%s", code, out)
	}
	if out, code := sluiceCmd(t, env, "test", path, "--version", "current", "--env", "staging"); code != 2 || !strings.Contains(out, `no environment "staging"`) {
		t.Errorf("test --env staging (the workspace has none): exit %d, want 2 naming it\n%s", code, out)
	}
	if out, code := sluiceCmd(t, env, "test", path, "--version", "current", "--env", "Prod!"); code != 2 || !strings.Contains(out, `"Prod!" is not an environment name`) {
		t.Errorf("test --env Prod!: exit %d, want 2\n%s", code, out)
	}

	if out, code := sluiceCmd(t, env, "versions", id, v2.Version[:9], "current", "--env", "prod"); code != 0 || !strings.Contains(out, "from "+v2.Version[:12]+" to "+v1.Version[:12]) {
		t.Errorf("versions V current --env prod: exit %d, want a diff to prod's version\n%s", code, out)
	}
	if out, code := sluiceCmd(t, env, "versions", id, v1.Version[:9], "current"); code != 0 || !strings.Contains(out, "to "+v2.Version[:12]) {
		t.Errorf("versions V current: exit %d, want a diff to dev's version\n%s", code, out)
	}

	// A run to replay, on dev's version; a worker runs it and the replays.
	w := start(t, env, "worker", "--grace", "1s", "--dispatch=false", "--schedule=false", path)
	w.waitLine(t, regexp.MustCompile(`msg="serving flow"`), 20*time.Second)
	orig, err := e.Start(ctx, v2, []byte(`{"name": "Ada"}`), engine.StartOptions{Trigger: "api"}) // not the cases' runs
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	if _, err := e.Wait(wctx, id, orig); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		what    string
		env     []string
		args    []string
		version string
		inEnv   string
	}{
		{"--env prod", env, []string{"--env", "prod"}, v1.Version, "prod"},
		{"SLUICE_ENV=prod", append(env, "SLUICE_ENV=prod"), nil, v1.Version, "prod"},
		{"no environment", env, nil, v2.Version, ""},
	} {
		args := append([]string{"replay", id, "--trigger", "api", "--version", "current", "--rate", "100", "--yes"}, c.args...)
		cmd := exec.Command(binary, args...)
		cmd.Env = append(os.Environ(), c.env...)
		var stdout, stderr strings.Builder
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			t.Fatalf("replay %s: %v\n%s%s", c.what, err, stdout.String(), stderr.String())
		}
		fields := strings.Fields(stdout.String())
		if len(fields) < 3 || fields[0] != orig || fields[2] != "done" {
			t.Fatalf("replay %s: the report is %q, want the run replayed", c.what, stdout.String())
		}
		got, err := e.Get(ctx, id, fields[1])
		if err != nil {
			t.Fatal(err)
		}
		if got.Version != c.version || got.Environment != c.inEnv {
			t.Errorf("replay %s: the replay ran version %.12s in %q, want %.12s in %q\n%s", c.what, got.Version, got.Environment, c.version, c.inEnv, stderr.String())
		}
	}
}
