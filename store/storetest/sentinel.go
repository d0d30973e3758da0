package storetest

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
)

// SentinelMaster is the name the test sentinels monitor their master under.
const SentinelMaster = "mymaster"

// Sentinel timings of the test setup (ms): a master that does not answer for
// sentinelDownAfter is down; a failover that stalls is retried after twice
// sentinelFailoverTimeout.
const (
	sentinelDownAfter       = 1000
	sentinelFailoverTimeout = 3000
)

// Sentinel is a master, one replica and three sentinels (quorum 2) started for one
// test, on spare loopback ports with temporary directories, stopped by pid when the
// test ends.
type Sentinel struct {
	t         testing.TB
	data      []*proc // the master and the replica, in the order they were started
	sentinels []*proc
}

// StartSentinel starts the master, its replica and three sentinels, and returns once
// the replica is in sync and every sentinel knows the master, the replica and the two
// other sentinels (so that a failover can be voted at once). It fails the test when
// redis-server (Redis 7 or later) is missing.
func StartSentinel(t testing.TB) *Sentinel {
	t.Helper()
	needRedis7(t, false)
	ports := sparePorts(t, 5)
	s := &Sentinel{t: t}
	t.Cleanup(s.stop)
	for i := 0; i < 2; i++ {
		dir := t.TempDir()
		p := &proc{port: ports[i], dir: dir}
		p.args = []string{
			"--port", strconv.Itoa(p.port), "--bind", "127.0.0.1", "--dir", dir,
			"--logfile", p.logPath(), "--daemonize", "no", "--save", "", "--appendonly", "no",
			"--repl-diskless-sync", "yes", "--repl-diskless-sync-delay", "0",
		}
		if i == 1 {
			p.args = append(p.args, "--replicaof", "127.0.0.1", strconv.Itoa(ports[0]))
		}
		p.start(t)
		s.data = append(s.data, p)
	}
	// The sentinels learn the replicas from the master's INFO, which they read at once
	// and then only every 10 seconds: start them once the replica is in sync.
	s.waitInSync(s.data[1])
	for i := 0; i < 3; i++ {
		dir := t.TempDir()
		p := &proc{port: ports[2+i], dir: dir}
		// A sentinel rewrites its configuration file, so it must have one of its own.
		conf := filepath.Join(dir, "sentinel.conf")
		text := fmt.Sprintf(`port %d
bind 127.0.0.1
dir %s
logfile %s
sentinel monitor %s 127.0.0.1 %d 2
sentinel down-after-milliseconds %s %d
sentinel failover-timeout %s %d
sentinel parallel-syncs %s 1
`, p.port, dir, p.logPath(), SentinelMaster, ports[0], SentinelMaster, sentinelDownAfter,
			SentinelMaster, sentinelFailoverTimeout, SentinelMaster)
		if err := os.WriteFile(conf, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		p.args = []string{conf, "--sentinel"}
		p.start(t)
		s.sentinels = append(s.sentinels, p)
	}
	s.waitReady("the sentinels to see the master, its replica and each other", s.data[0].addr())
	return s
}

// Addrs are the sentinels' host:port addresses.
func (s *Sentinel) Addrs() []string {
	addrs := make([]string, len(s.sentinels))
	for i, p := range s.sentinels {
		addrs[i] = p.addr()
	}
	return addrs
}

// MasterName is the name the sentinels know the master by.
func (s *Sentinel) MasterName() string { return SentinelMaster }

// URL is the setup's address in the form Sluice takes:
// redis+sentinel://host:port,host:port,host:port/MASTERNAME
func (s *Sentinel) URL() string {
	return "redis+sentinel://" + strings.Join(s.Addrs(), ",") + "/" + SentinelMaster
}

// Client returns a go-redis failover client (it asks the sentinels for the master),
// closed when the test ends.
func (s *Sentinel) Client() *redis.Client {
	c := redis.NewFailoverClient(&redis.FailoverOptions{MasterName: SentinelMaster, SentinelAddrs: s.Addrs()})
	s.t.Cleanup(func() { c.Close() })
	return c
}

// Master is the address of the master as every sentinel reports it (the test fails if
// they disagree).
func (s *Sentinel) Master() string {
	s.t.Helper()
	addr, state := s.agreedMaster()
	if addr == "" {
		s.t.Fatalf("the sentinels do not agree on the master: %s", state)
	}
	return addr
}

// KillMaster kills the master with SIGKILL, as a crash would, and waits until every
// sentinel reports the replica as the new master and that server says it is one. It
// returns the new master's address.
func (s *Sentinel) KillMaster() string {
	s.t.Helper()
	old := s.Master()
	var dead, next *proc
	for _, p := range s.data {
		if p.addr() == old {
			dead = p
		} else if p.alive() {
			next = p
		}
	}
	if dead == nil || next == nil {
		s.t.Fatalf("no live replica to fail over to from %s", old)
	}
	dead.kill()
	waitUntil(s.t, "the sentinels to promote "+next.addr(), startTimeout, s.all(), func() (bool, string) {
		addr, state := s.agreedMaster()
		if addr != next.addr() {
			return false, state
		}
		cl := next.client()
		defer cl.Close()
		ctx, cancel := pingCtx()
		defer cancel()
		info, err := cl.Info(ctx, "replication").Result()
		if err != nil {
			return false, fmt.Sprintf("%s: INFO replication: %v", next.addr(), err)
		}
		if role := infoField(info, "role"); role != "master" {
			return false, fmt.Sprintf("the sentinels report %s as master; it says role:%s", next.addr(), role)
		}
		return true, ""
	})
	return next.addr()
}

func (s *Sentinel) all() []*proc { return append(append([]*proc{}, s.data...), s.sentinels...) }

func (s *Sentinel) stop() {
	for _, p := range s.all() {
		p.kill()
	}
}

// agreedMaster asks every sentinel for the master's address; it returns it when all
// give the same one, else "" and what they said.
func (s *Sentinel) agreedMaster() (string, string) {
	var got []string
	for _, p := range s.sentinels {
		addr, err := sentinelMasterAddr(p)
		if err != nil {
			return "", fmt.Sprintf("sentinel %s: %v", p.addr(), err)
		}
		got = append(got, addr)
	}
	for _, a := range got[1:] {
		if a != got[0] {
			return "", fmt.Sprintf("the sentinels report %v", got)
		}
	}
	return got[0], ""
}

func sentinelMasterAddr(p *proc) (string, error) {
	sc := redis.NewSentinelClient(&redis.Options{Addr: p.addr(), PoolSize: 1, MaxRetries: -1})
	defer sc.Close()
	ctx, cancel := pingCtx()
	defer cancel()
	hp, err := sc.GetMasterAddrByName(ctx, SentinelMaster).Result()
	if err != nil {
		return "", err
	}
	if len(hp) != 2 {
		return "", fmt.Errorf("GET-MASTER-ADDR-BY-NAME said %v", hp)
	}
	return net.JoinHostPort(hp[0], hp[1]), nil
}

// waitInSync waits until the replica's link to its master is up.
func (s *Sentinel) waitInSync(replica *proc) {
	s.t.Helper()
	cl := replica.client()
	defer cl.Close()
	waitUntil(s.t, "the replica "+replica.addr()+" to sync with its master", startTimeout, s.all(), func() (bool, string) {
		ctx, cancel := pingCtx()
		defer cancel()
		info, err := cl.Info(ctx, "replication").Result()
		if err != nil {
			return false, fmt.Sprintf("%s: INFO replication: %v", replica.addr(), err)
		}
		if st := infoField(info, "master_link_status"); st != "up" {
			return false, fmt.Sprintf("replica %s not in sync (master_link_status:%s)", replica.addr(), st)
		}
		return true, ""
	})
}

// waitReady waits until every sentinel reports master, sees its replica and the two
// other sentinels.
func (s *Sentinel) waitReady(what, master string) {
	s.t.Helper()
	waitUntil(s.t, what, startTimeout, s.all(), func() (bool, string) {
		ctx, cancel := pingCtx()
		defer cancel()
		for _, p := range s.sentinels {
			sc := redis.NewSentinelClient(&redis.Options{Addr: p.addr(), PoolSize: 1, MaxRetries: -1})
			m, err := sc.Master(ctx, SentinelMaster).Result()
			sc.Close()
			if err != nil {
				return false, fmt.Sprintf("sentinel %s: %v", p.addr(), err)
			}
			if addr := net.JoinHostPort(m["ip"], m["port"]); addr != master {
				return false, fmt.Sprintf("sentinel %s reports master %s", p.addr(), addr)
			}
			if m["num-slaves"] != "1" || m["num-other-sentinels"] != "2" {
				return false, fmt.Sprintf("sentinel %s sees %s replicas and %s other sentinels", p.addr(), m["num-slaves"], m["num-other-sentinels"])
			}
			if strings.Contains(m["flags"], "down") {
				return false, fmt.Sprintf("sentinel %s flags the master %s", p.addr(), m["flags"])
			}
		}
		return true, ""
	})
}
