package main

import (
	"bufio"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/store/storetest"
)

// dockerfile reads the final stage's ENV, HEALTHCHECK and CMD of the repository's
// Dockerfile (the image is not built here: there is no Docker engine).
func dockerfile(t *testing.T) (env map[string]string, health, cmd []string) {
	t.Helper()
	f, err := os.Open(filepath.Join("..", "..", "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	env = map[string]string{}
	exec := regexp.MustCompile(`(\[.*\])\s*$`)
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case strings.HasPrefix(line, "FROM "):
			env, health, cmd = map[string]string{}, nil, nil // a new stage
		case strings.HasPrefix(line, "ENV "):
			k, v, _ := strings.Cut(strings.TrimPrefix(line, "ENV "), "=")
			env[k] = v
		case strings.HasPrefix(line, "HEALTHCHECK "), strings.HasPrefix(line, "CMD "):
			m := exec.FindStringSubmatch(line)
			if m == nil {
				t.Fatalf("%q is not in exec form", line)
			}
			var argv []string
			if err := json.Unmarshal([]byte(m[1]), &argv); err != nil {
				t.Fatalf("%q: %v", line, err)
			}
			if strings.HasPrefix(line, "CMD ") {
				cmd = argv
			} else {
				health = argv
			}
		}
	}
	return env, health, cmd
}

// The image's default command serves without SLUICE_TOKEN (it makes a token into the
// token file, which `sluice token` prints and a restart reads again), and its
// HEALTHCHECK passes against it.
func TestTheImagesCommandServesWithoutATokenAndItsHealthcheckPasses(t *testing.T) {
	env, health, cmd := dockerfile(t)
	if len(cmd) < 1 || cmd[0] != "serve" || len(health) < 2 || health[1] != "health" || env["SLUICE_TOKEN_FILE"] == "" {
		t.Fatalf("CMD %q, HEALTHCHECK %q, ENV %v: want serve, sluice health and a token file", cmd, health, env)
	}
	tokenFile := filepath.Join(t.TempDir(), ".sluice", "token") // the image's path, under a test folder
	args := append([]string(nil), cmd...)
	for i := range args {
		if args[i] == ":8080" {
			args[i] = ":0" // every interface, as in the image, on a free port
		}
	}
	args = append(args, "--flows", t.TempDir())
	serveEnv := []string{"SLUICE_TOKEN=", "SLUICE_TOKEN_FILE=" + tokenFile, "REDIS_URL=" + storetest.URL()}
	p := start(t, serveEnv, args...)
	addr := p.waitLine(t, servingLine, 30*time.Second)[1]
	addr = strings.TrimPrefix(addr, "http://")
	if !strings.Contains(strings.Join(p.allLines(), "\n"), "sluice token") {
		t.Errorf("serve does not say where its token is: %q", p.allLines())
	}
	out, err := exec.Command(binary, "token", "--token-file", tokenFile).Output()
	if err != nil {
		t.Fatalf("sluice token: %v", err)
	}
	token := strings.TrimSpace(string(out))
	if len(token) < 32 || strings.Contains(strings.Join(p.allLines(), "\n"), token) {
		t.Fatalf("token %q: want a long one, never in the log", token)
	}
	req, _ := http.NewRequest("GET", "http://"+addr+"/api/flows", nil)
	if r, err := http.DefaultClient.Do(req); err != nil || r.StatusCode != http.StatusUnauthorized {
		t.Errorf("without the token: %v %v, want 401", r, err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	if r, err := http.DefaultClient.Do(req); err != nil || r.StatusCode != http.StatusOK {
		t.Errorf("with the made token: %v %v, want 200", r, err)
	}
	hc := exec.Command(binary, append(health[1:], "--addr", addr)...)
	if out, err := hc.CombinedOutput(); err != nil {
		t.Errorf("the HEALTHCHECK command %q: %v %s", health, err, out)
	}
	if err := exec.Command(binary, "health", "--addr", "127.0.0.1:1").Run(); err == nil {
		t.Error("sluice health of an address nothing serves exits 0")
	}
	if b, _ := os.ReadFile(tokenFile); strings.TrimSpace(string(b)) != token {
		t.Errorf("the token file holds %q", b)
	}
	if fi, err := os.Stat(tokenFile); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("the token file: %v %v, want mode 0600", fi, err)
	}
}
