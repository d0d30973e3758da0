package storetest

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// This file holds what the Cluster and Sentinel harnesses share: spare loopback ports,
// redis-server processes stopped by pid, and polling for a condition with a deadline
// instead of sleeping.

// startTimeout bounds how long a harness waits for its servers to come up or fail over.
// It is generous because the test machines are shared; the harnesses never wait this
// long unless something is wrong, they poll and go on as soon as the condition holds.
const startTimeout = 60 * time.Second

// pollEvery is how often a condition is checked again.
const pollEvery = 25 * time.Millisecond

// sparePorts returns n distinct free loopback ports. All are held open until all are
// found, so none is handed out twice.
func sparePorts(t testing.TB, n int) []int {
	t.Helper()
	lns := make([]net.Listener, 0, n)
	defer func() {
		for _, ln := range lns {
			ln.Close()
		}
	}()
	ports := make([]int, 0, n)
	for len(ports) < n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatalf("find a spare port: %v", err)
		}
		lns = append(lns, ln)
		ports = append(ports, ln.Addr().(*net.TCPAddr).Port)
	}
	return ports
}

// needRedis7 fails the test unless redis-server (and redis-cli when cli is set) are
// installed and the server is at least Redis 7 (cluster-port, lag in XINFO GROUPS).
func needRedis7(t testing.TB, cli bool) {
	t.Helper()
	bins := []string{"redis-server"}
	if cli {
		bins = append(bins, "redis-cli")
	}
	for _, b := range bins {
		if _, err := exec.LookPath(b); err != nil {
			t.Fatalf("this test starts its own Redis servers and needs %s (Debian: apt-get install redis-server redis-tools): %v", b, err)
		}
	}
	out, err := exec.Command("redis-server", "--version").Output()
	if err != nil {
		t.Fatalf("redis-server --version: %v", err)
	}
	m := regexp.MustCompile(`v=(\d+)\.`).FindSubmatch(out)
	if m == nil {
		t.Fatalf("cannot read the version of redis-server from %q", out)
	}
	if major, _ := strconv.Atoi(string(m[1])); major < 7 {
		t.Fatalf("this test needs Redis 7 or later; redis-server says %q", bytes.TrimSpace(out))
	}
}

// proc is one redis-server process (a data node or a sentinel) of a harness.
type proc struct {
	port int
	dir  string
	args []string
	cmd  *exec.Cmd
}

func (p *proc) addr() string { return "127.0.0.1:" + strconv.Itoa(p.port) }

func (p *proc) logPath() string { return filepath.Join(p.dir, "redis.log") }

// start runs the process and returns at once; ready waits for it to answer.
func (p *proc) start(t testing.TB) {
	t.Helper()
	p.cmd = exec.Command("redis-server", p.args...)
	p.cmd.Dir = p.dir
	// Should the test binary die before its cleanups run (a panic, a timeout), its
	// servers die with it instead of holding their ports.
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start redis-server on port %d: %v", p.port, err)
	}
}

// alive says whether the process was started and not killed.
func (p *proc) alive() bool { return p.cmd != nil }

// kill stops the process with SIGKILL (waking it first if it was stopped) and reaps it.
func (p *proc) kill() {
	if p.cmd == nil || p.cmd.Process == nil {
		return
	}
	p.cmd.Process.Signal(syscall.SIGCONT)
	p.cmd.Process.Kill()
	p.cmd.Wait()
	p.cmd = nil
}

// logTail is the end of the process's log, for failure messages.
func (p *proc) logTail() string {
	b, err := os.ReadFile(p.logPath())
	if err != nil {
		return fmt.Sprintf("(no log: %v)", err)
	}
	const max = 2000
	if len(b) > max {
		b = b[len(b)-max:]
	}
	return string(b)
}

// client is a plain client of one process with short timeouts, for polling.
func (p *proc) client() *redis.Client {
	return redis.NewClient(&redis.Options{Addr: p.addr(), DialTimeout: time.Second,
		ReadTimeout: time.Second, WriteTimeout: time.Second, PoolSize: 2, MaxRetries: -1})
}

// waitUntil polls cond until it holds or the deadline passes; then the test fails with
// what cond last said and the logs of procs.
func waitUntil(t testing.TB, what string, timeout time.Duration, procs []*proc, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var last string
	for {
		ok, state := cond()
		if ok {
			return
		}
		last = state
		if time.Now().After(deadline) {
			var logs strings.Builder
			for _, p := range procs {
				fmt.Fprintf(&logs, "\n--- redis-server on port %d:\n%s", p.port, p.logTail())
			}
			t.Fatalf("%s: not done after %s; last seen: %s%s", what, timeout, last, logs.String())
		}
		time.Sleep(pollEvery)
	}
}

// infoField reads one field of an INFO or CLUSTER INFO reply.
func infoField(info, field string) string {
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), field+":"); ok {
			return v
		}
	}
	return ""
}

// pingCtx is the context of one poll's commands.
func pingCtx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), 2*time.Second)
}
