package storetest

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// ClusterSlots is how many hash slots a Redis Cluster has.
const ClusterSlots = 16384

// clusterNodeTimeout is the cluster-node-timeout of the test clusters (ms): how long a
// master may be unreachable before its replica takes over. Short so that a failover
// test is quick, long enough that a busy machine does not cause failovers of its own.
const clusterNodeTimeout = 2000

// Cluster is a Redis Cluster of 3 masters and 3 replicas (or as StartClusterOf says)
// started for one test: six redis-server processes on spare loopback ports, each with its own temporary directory,
// made a cluster by `redis-cli --cluster create`. Every process is stopped by pid when
// the test ends. The shared Redis of the other tests is never touched.
type Cluster struct {
	t      testing.TB
	nodes  []*proc
	shared bool // SharedCluster's: no node may be killed
	// masters and replicas (per master) it was made with: 3 and 1 unless
	// StartClusterOf says otherwise.
	masters, replicas int
}

// StartCluster starts a cluster of 3 masters and 3 replicas and returns once every node
// says cluster_state:ok, all 16384 slots are served, every node agrees who serves them
// and every replica is in sync with its master. It fails the test when redis-server or
// redis-cli (Redis 7 or later) is missing.
func StartCluster(t testing.TB) *Cluster {
	t.Helper()
	return StartClusterOf(t, 3, 1)
}

// StartClusterOf is StartCluster with masters masters, each with replicas replicas:
// `redis-cli --cluster create` gives the masters equal ranges of slots. For tests of
// what depends on the number of masters (the default partition count).
func StartClusterOf(t testing.TB, masters, replicas int) *Cluster {
	t.Helper()
	c := &Cluster{t: t, masters: masters, replicas: replicas}
	t.Cleanup(c.stop)
	c.start(func() string { return t.TempDir() })
	return c
}

// start starts the nodes, each in a directory from mkdir, and makes them a cluster.
func (c *Cluster) start(mkdir func() string) {
	t := c.t
	t.Helper()
	needRedis7(t, true)
	if c.masters == 0 {
		c.masters, c.replicas = 3, 1
	}
	n := c.masters * (1 + c.replicas)
	ports := sparePorts(t, 2*n) // a data port and a cluster bus port each
	for i := 0; i < n; i++ {
		dir := mkdir()
		p := &proc{port: ports[i], dir: dir}
		p.args = []string{
			"--port", strconv.Itoa(p.port), "--bind", "127.0.0.1", "--dir", dir,
			"--logfile", p.logPath(), "--daemonize", "no",
			"--cluster-enabled", "yes", "--cluster-config-file", filepath.Join(dir, "nodes.conf"),
			"--cluster-port", strconv.Itoa(ports[n+i]),
			"--cluster-node-timeout", strconv.Itoa(clusterNodeTimeout),
			"--save", "", "--appendonly", "no",
			// Replicas sync at once instead of waiting for more replicas to join.
			"--repl-diskless-sync", "yes", "--repl-diskless-sync-delay", "0",
			"--repl-ping-replica-period", "1",
		}
		p.start(t)
		c.nodes = append(c.nodes, p)
	}
	for _, p := range c.nodes {
		c.waitPing(p)
	}
	args := []string{"--cluster", "create"}
	args = append(args, c.Addrs()...)
	args = append(args, "--cluster-replicas", strconv.Itoa(c.replicas), "--cluster-yes")
	cmd := exec.Command("redis-cli", args...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("redis-cli --cluster create: %v\n%s", err, out)
	}
	c.waitHealthy("the cluster to come up")
}

// Addrs are the host:port addresses of all six nodes, live or not: the seeds a client
// is given.
func (c *Cluster) Addrs() []string {
	addrs := make([]string, len(c.nodes))
	for i, p := range c.nodes {
		addrs[i] = p.addr()
	}
	return addrs
}

// URL is the cluster's address in the form Sluice takes:
// redis+cluster://host:port,host:port,...
func (c *Cluster) URL() string { return "redis+cluster://" + strings.Join(c.Addrs(), ",") }

// Client returns a go-redis cluster client of the cluster, closed when the test ends.
//
// It reloads the slot table once a second while in use. go-redis (v9.23) reloads it
// only on a MOVED reply or every ClusterStateReloadInterval (default a minute): a
// master that was killed answers nothing, so until then every command of its slots
// goes to the dead address and fails with "connection refused", even after a replica
// has taken over.
func (c *Cluster) Client() *redis.ClusterClient {
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs(), ClusterStateReloadInterval: time.Second})
	c.t.Cleanup(func() { cc.Close() })
	return cc
}

// Masters are the addresses of the live masters that serve slots, sorted.
func (c *Cluster) Masters() []string {
	c.t.Helper()
	slots, err := c.slots()
	if err != nil {
		c.t.Fatalf("read the cluster's slots: %v", err)
	}
	seen := map[string]bool{}
	for _, s := range slots {
		seen[s.master] = true
	}
	var out []string
	for a := range seen {
		out = append(out, a)
	}
	sort.Strings(out)
	return out
}

// MasterOf returns the address of the master that serves slot.
func (c *Cluster) MasterOf(slot int) string {
	c.t.Helper()
	slots, err := c.slots()
	if err != nil {
		c.t.Fatalf("read the cluster's slots: %v", err)
	}
	for _, s := range slots {
		if s.start <= slot && slot <= s.end {
			return s.master
		}
	}
	c.t.Fatalf("no master serves slot %d", slot)
	return ""
}

// KeySlot returns the hash slot of key (CLUSTER KEYSLOT on a live node).
func (c *Cluster) KeySlot(key string) int {
	c.t.Helper()
	p := c.live()[0]
	cl := p.client()
	defer cl.Close()
	ctx, cancel := pingCtx()
	defer cancel()
	n, err := cl.ClusterKeySlot(ctx, key).Result()
	if err != nil {
		c.t.Fatalf("CLUSTER KEYSLOT %q: %v", key, err)
	}
	return int(n)
}

// MasterOfKey returns the address of the master that serves key.
func (c *Cluster) MasterOfKey(key string) string {
	c.t.Helper()
	return c.MasterOf(c.KeySlot(key))
}

// KillMaster kills the master at addr with SIGKILL, as a crash would, and waits until
// its replica has been promoted: every live node says cluster_state:ok and agrees that
// live masters serve all slots again. It returns the address of the promoted master.
func (c *Cluster) KillMaster(addr string) string {
	c.t.Helper()
	if c.shared {
		c.t.Fatalf("KillMaster on the shared cluster: other tests use it; use StartCluster")
	}
	p := c.node(addr)
	slots, err := c.slots()
	if err != nil {
		c.t.Fatalf("read the cluster's slots: %v", err)
	}
	var mine []slotRange
	for _, s := range slots {
		if s.master == addr {
			mine = append(mine, s)
		}
	}
	if len(mine) == 0 {
		c.t.Fatalf("%s is not a master that serves slots", addr)
	}
	p.kill()
	c.waitHealthy("a replica of " + addr + " to be promoted")
	return c.MasterOf(mine[0].start)
}

// Restart starts a killed node again on its port and directory. Its nodes.conf makes
// it rejoin: a killed master comes back as a replica of the node that replaced it.
// Restart returns once the cluster is healthy with the node in it.
func (c *Cluster) Restart(addr string) {
	c.t.Helper()
	p := c.node(addr)
	if p.alive() {
		c.t.Fatalf("%s is running", addr)
	}
	p.start(c.t)
	c.waitPing(p)
	c.waitHealthy(addr + " to rejoin the cluster")
}

func (c *Cluster) node(addr string) *proc {
	c.t.Helper()
	for _, p := range c.nodes {
		if p.addr() == addr {
			return p
		}
	}
	c.t.Fatalf("%s is not a node of this cluster (%v)", addr, c.Addrs())
	return nil
}

func (c *Cluster) live() []*proc {
	var out []*proc
	for _, p := range c.nodes {
		if p.alive() {
			out = append(out, p)
		}
	}
	return out
}

func (c *Cluster) stop() {
	for _, p := range c.nodes {
		p.kill()
	}
}

func (c *Cluster) waitPing(p *proc) {
	c.t.Helper()
	cl := p.client()
	defer cl.Close()
	waitUntil(c.t, fmt.Sprintf("redis-server on port %d to start", p.port), startTimeout, []*proc{p}, func() (bool, string) {
		ctx, cancel := pingCtx()
		defer cancel()
		if err := cl.Ping(ctx).Err(); err != nil {
			return false, err.Error()
		}
		return true, ""
	})
}

// slotRange is a range of slots and the master that serves it.
type slotRange struct {
	start, end int
	master     string
}

// slots reads who serves which slots from the first live node that answers.
func (c *Cluster) slots() ([]slotRange, error) {
	var lastErr error
	for _, p := range c.live() {
		s, err := nodeSlots(p)
		if err == nil {
			return s, nil
		}
		lastErr = err
	}
	if lastErr == nil {
		lastErr = fmt.Errorf("no node of the cluster is running")
	}
	return nil, lastErr
}

// nodeSlots is CLUSTER SLOTS as one node sees it, sorted by slot.
func nodeSlots(p *proc) ([]slotRange, error) {
	cl := p.client()
	defer cl.Close()
	ctx, cancel := pingCtx()
	defer cancel()
	//lint:ignore SA1019 CLUSTER SLOTS (deprecated in Redis 7) is what cluster clients read: the harness waits until every node's answer agrees on it
	cs, err := cl.ClusterSlots(ctx).Result()
	if err != nil {
		return nil, err
	}
	out := make([]slotRange, 0, len(cs))
	for _, s := range cs {
		if len(s.Nodes) == 0 {
			continue
		}
		out = append(out, slotRange{start: s.Start, end: s.End, master: s.Nodes[0].Addr})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].start < out[j].start })
	return out, nil
}

// waitHealthy waits until every live node says cluster_state:ok with all slots
// assigned, every live node sees the same live masters serving every slot, and every
// live replica's link to its master is up.
func (c *Cluster) waitHealthy(what string) {
	c.t.Helper()
	waitUntil(c.t, what, startTimeout, c.nodes, c.healthy)
}

func (c *Cluster) healthy() (bool, string) {
	live := c.live()
	alive := map[string]bool{}
	for _, p := range live {
		alive[p.addr()] = true
	}
	var first []slotRange
	for i, p := range live {
		cl := p.client()
		ok, state := func() (bool, string) {
			defer cl.Close()
			ctx, cancel := pingCtx()
			defer cancel()
			info, err := cl.ClusterInfo(ctx).Result()
			if err != nil {
				return false, fmt.Sprintf("%s: CLUSTER INFO: %v", p.addr(), err)
			}
			if st := infoField(info, "cluster_state"); st != "ok" {
				return false, fmt.Sprintf("%s: cluster_state:%s", p.addr(), st)
			}
			if n := infoField(info, "cluster_slots_assigned"); n != strconv.Itoa(ClusterSlots) {
				return false, fmt.Sprintf("%s: cluster_slots_assigned:%s", p.addr(), n)
			}
			repl, err := cl.Info(ctx, "replication").Result()
			if err != nil {
				return false, fmt.Sprintf("%s: INFO replication: %v", p.addr(), err)
			}
			if infoField(repl, "role") == "slave" && infoField(repl, "master_link_status") != "up" {
				return false, fmt.Sprintf("%s: replica not in sync with its master (master_link_status:%s)", p.addr(), infoField(repl, "master_link_status"))
			}
			return true, ""
		}()
		if !ok {
			return false, state
		}
		slots, err := nodeSlots(p)
		if err != nil {
			return false, fmt.Sprintf("%s: CLUSTER SLOTS: %v", p.addr(), err)
		}
		covered := 0
		for _, s := range slots {
			if !alive[s.master] {
				return false, fmt.Sprintf("%s: slots %d-%d still served by %s, which is down", p.addr(), s.start, s.end, s.master)
			}
			covered += s.end - s.start + 1
		}
		if covered != ClusterSlots {
			return false, fmt.Sprintf("%s: CLUSTER SLOTS covers %d slots", p.addr(), covered)
		}
		if i == 0 {
			first = slots
		} else if !sameSlots(first, slots) {
			return false, fmt.Sprintf("%s and %s disagree on who serves which slots", live[0].addr(), p.addr())
		}
	}
	// The cluster's masters serve the slots (a failover promotes one and leaves the
	// dead one out), and every live node is one of them or a replica that CLUSTER
	// SLOTS lists (as every node sees it): a node that redis-cli made a replica is not
	// one until its master has it in sync.
	masters := map[string]bool{}
	for _, s := range first {
		masters[s.master] = true
	}
	if len(masters) != c.masters {
		return false, fmt.Sprintf("%d masters serve slots, want %d", len(masters), c.masters)
	}
	for _, p := range live {
		listed, err := slotNodes(p)
		if err != nil {
			return false, fmt.Sprintf("%s: CLUSTER SLOTS: %v", p.addr(), err)
		}
		for _, q := range live {
			if !listed[q.addr()] {
				return false, fmt.Sprintf("%s does not list %s as a master or replica yet", p.addr(), q.addr())
			}
		}
	}
	return true, ""
}

// slotNodes is the set of nodes, masters and replicas, that CLUSTER SLOTS lists on p.
func slotNodes(p *proc) (map[string]bool, error) {
	cl := p.client()
	defer cl.Close()
	ctx, cancel := pingCtx()
	defer cancel()
	//lint:ignore SA1019 CLUSTER SLOTS (deprecated in Redis 7) is what cluster clients read: the harness waits until every node's answer agrees on it
	cs, err := cl.ClusterSlots(ctx).Result()
	if err != nil {
		return nil, err
	}
	out := map[string]bool{}
	for _, s := range cs {
		for _, n := range s.Nodes {
			out[n.Addr] = true
		}
	}
	return out, nil
}

func sameSlots(a, b []slotRange) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// Exec runs a command on one node (CLUSTER DELSLOTS, say) and returns its error.
func (c *Cluster) Exec(addr string, args ...any) error {
	c.t.Helper()
	cl := c.node(addr).client()
	defer cl.Close()
	ctx, cancel := pingCtx()
	defer cancel()
	return cl.Do(ctx, args...).Err()
}
