package main

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sluicehq/sluice/store/storetest"
)

// binary is the sluice binary built once for the tests that run it as a process.
var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "sluice-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "sluice")
	out, err := exec.Command("go", "build", "-o", binary, ".").CombinedOutput()
	if err != nil {
		fmt.Fprintf(os.Stderr, "build sluice: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// process is a running sluice command whose stderr is scanned for log lines.
type process struct {
	cmd   *exec.Cmd
	lines chan string
	done  chan error
	mu    sync.Mutex
	all   []string // every line, for tests that check the whole log
}

// allLines returns every stderr line so far.
func (p *process) allLines() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.all...)
}

func start(t *testing.T, env []string, args ...string) *process {
	t.Helper()
	cmd := exec.Command(binary, args...)
	cmd.Env = append(os.Environ(), env...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &process{cmd: cmd, lines: make(chan string, 1000), done: make(chan error, 1)}
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			p.mu.Lock()
			p.all = append(p.all, sc.Text())
			p.mu.Unlock()
			select {
			case p.lines <- sc.Text():
			default:
			}
		}
		p.done <- cmd.Wait()
	}()
	t.Cleanup(func() { cmd.Process.Kill() })
	return p
}

// waitLine returns the first stderr line that matches re, or fails after d.
func (p *process) waitLine(t *testing.T, re *regexp.Regexp, d time.Duration) []string {
	t.Helper()
	deadline := time.After(d)
	for {
		select {
		case l := <-p.lines:
			if m := re.FindStringSubmatch(l); m != nil {
				return m
			}
		case err := <-p.done:
			t.Fatalf("process exited (%v) before printing a line matching %s", err, re)
		case <-deadline:
			t.Fatalf("no line matching %s within %s", re, d)
		}
	}
}

var servingLine = regexp.MustCompile(`msg="sluice is serving" url=(http://\S+)`)

func TestServeRunsOnBothRedisKindsAndStopsOnSIGTERM(t *testing.T) {
	for _, tc := range []struct {
		name     string
		env      []string
		embedded bool
	}{
		{"embedded", []string{"REDIS_URL="}, true},
		{"real", []string{"REDIS_URL=" + storetest.URL()}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := start(t, tc.env, "serve", "--addr", "127.0.0.1:0", "--flows", t.TempDir())
			url := p.waitLine(t, servingLine, 20*time.Second)[1]
			res, err := http.Get(url + "/healthz")
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(res.Body)
			res.Body.Close()
			if res.StatusCode != 200 {
				t.Fatalf("healthz: %d %s", res.StatusCode, body)
			}
			if want := fmt.Sprintf(`"embedded_redis":%v`, tc.embedded); !strings.Contains(string(body), want) {
				t.Errorf("healthz body %s does not say %s", body, want)
			}
			if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			select {
			case err := <-p.done:
				if err != nil {
					t.Fatalf("serve exited with %v after SIGTERM, want exit 0", err)
				}
			case <-time.After(15 * time.Second):
				t.Fatal("serve did not exit within 15s of SIGTERM")
			}
		})
	}
}

func TestUsageAndVersion(t *testing.T) {
	out, err := exec.Command(binary, "--help").CombinedOutput()
	if err != nil {
		t.Fatalf("--help: %v", err)
	}
	for _, c := range []string{"serve", "worker", "run", "validate", "bench", "version"} {
		if !strings.Contains(string(out), "  "+c+" ") {
			t.Errorf("--help does not list %q:\n%s", c, out)
		}
	}
	out, err = exec.Command(binary, "version").CombinedOutput()
	if err != nil || !strings.HasPrefix(string(out), "sluice ") {
		t.Errorf("version: %v %q", err, out)
	}
	out, err = exec.Command(binary, "frobnicate").CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 || !strings.Contains(string(out), `unknown command "frobnicate"`) {
		t.Errorf("unknown command: %v %q", err, out)
	}
}
