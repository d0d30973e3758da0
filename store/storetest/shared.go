package storetest

import (
	"os"
	"sync"
	"testing"
)

// shared is the cluster SharedCluster starts once per test binary.
var shared struct {
	mu   sync.Mutex
	c    *Cluster
	dirs []string
}

// SharedCluster returns a Redis Cluster (3 masters, 3 replicas) started the first time
// a test of this binary asks for one and shared by every later test, since starting one
// takes seconds: for suites that only run flows on it. Tests sharing it work under
// their own flow ids (FlowID) and never flush it; none may kill its nodes (KillMaster
// fails the test: use StartCluster for that). Call StopShared from TestMain after
// m.Run to stop it and remove its directories; without that its processes still die
// with the test binary.
func SharedCluster(t testing.TB) *Cluster {
	t.Helper()
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if shared.c == nil {
		c := &Cluster{t: t, shared: true}
		started := false
		defer func() {
			if !started { // the test failed while starting it: stop what runs
				c.stop()
			}
		}()
		c.start(func() string {
			dir, err := os.MkdirTemp("", "sluice-cluster-")
			if err != nil {
				t.Fatal(err)
			}
			shared.dirs = append(shared.dirs, dir)
			return dir
		})
		shared.c, started = c, true
	}
	// The same servers, answering to the calling test.
	c := *shared.c
	c.t = t
	return &c
}

// StopShared stops the shared cluster, if one was started, and removes its directories.
func StopShared() {
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if shared.c != nil {
		shared.c.stop()
		shared.c = nil
	}
	for _, d := range shared.dirs {
		os.RemoveAll(d)
	}
	shared.dirs = nil
}
