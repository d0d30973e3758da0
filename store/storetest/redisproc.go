package storetest

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Server is a redis-server process of one test, on a spare loopback port with its own
// data directory. Fault tests kill, pause and restart it; the Redis that other tests
// share is never touched.
type Server struct {
	t    testing.TB
	Port int
	Dir  string
	AOF  bool
	cmd  *exec.Cmd
}

// StartServer starts a redis-server for the test; with aof it persists with
// appendfsync everysec. It fails the test when redis-server is not installed.
func StartServer(t testing.TB, aof bool) *Server {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Fatalf("fault tests need the redis-server binary (apt-get install redis-server): %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	s := &Server{t: t, Port: port, Dir: t.TempDir(), AOF: aof}
	s.start()
	t.Cleanup(func() { s.Kill() })
	return s
}

// URL is the server's redis:// URL.
func (s *Server) URL() string { return fmt.Sprintf("redis://127.0.0.1:%d/0", s.Port) }

// Addr is host:port.
func (s *Server) Addr() string { return fmt.Sprintf("127.0.0.1:%d", s.Port) }

func (s *Server) start() {
	s.t.Helper()
	args := []string{"--port", strconv.Itoa(s.Port), "--bind", "127.0.0.1", "--dir", s.Dir, "--save", "", "--daemonize", "no", "--logfile", filepath.Join(s.Dir, "redis.log")}
	if s.AOF {
		args = append(args, "--appendonly", "yes", "--appendfsync", "everysec")
	} else {
		args = append(args, "--appendonly", "no")
	}
	s.cmd = exec.Command("redis-server", args...)
	if err := s.cmd.Start(); err != nil {
		s.t.Fatal(err)
	}
	c := redis.NewClient(&redis.Options{Addr: s.Addr()})
	defer c.Close()
	deadline := time.Now().Add(10 * time.Second)
	for c.Ping(context.Background()).Err() != nil {
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(filepath.Join(s.Dir, "redis.log"))
			s.t.Fatalf("redis-server on port %d did not start:\n%s", s.Port, log)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Kill stops the server with SIGKILL, as a crash would.
func (s *Server) Kill() {
	if s.cmd != nil && s.cmd.Process != nil {
		s.cmd.Process.Signal(syscall.SIGCONT)
		s.cmd.Process.Kill()
		s.cmd.Wait()
		s.cmd = nil
	}
}

// Restart kills the server and starts it again on the same port and directory: with
// AOF it comes back with what it had persisted, without it empty.
func (s *Server) Restart() {
	s.t.Helper()
	s.Kill()
	s.start()
}
