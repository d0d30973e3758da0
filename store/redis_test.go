package store_test

import (
	"context"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/storetest"
)

func TestParseURLForms(t *testing.T) {
	for _, c := range []struct {
		url, err   string
		cluster    bool
		addrs      int
		master     string
		db         int
		user, pass string
	}{
		{url: "redis://h:6379/2", addrs: 1, db: 2},
		{url: "redis+cluster://a:1,b:2,c:3", cluster: true, addrs: 3},
		{url: "redis+cluster://:s%40cret@a:1,b:2", cluster: true, addrs: 2, pass: "s@cret"},
		{url: "redis+sentinel://a:1,b:2/mymaster/3", addrs: 2, master: "mymaster", db: 3},
		{url: "redis+sentinel://u:p@a:1/m", addrs: 1, master: "m", user: "u", pass: "p"},
		{url: "redis+sentinel://a:1", err: "name the master"},
		{url: "redis+cluster://a:1/1", err: "no database number"},
		{url: "redis+cluster://a", err: "not HOST:PORT"},
		{url: "memcached://a:1", err: "unknown scheme"},
		{url: "a:1", err: "want redis://"},
		{url: "redis+cluster://:pw@", err: "***@"},
	} {
		uo, cluster, err := store.ParseURL(c.url)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%s: error %v, want one saying %q", c.url, err, c.err)
			}
			if err != nil && strings.Contains(c.url, "pw") && strings.Contains(err.Error(), "pw") {
				t.Errorf("%s: the error shows the password: %v", c.url, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", c.url, err)
			continue
		}
		if cluster != c.cluster || len(uo.Addrs) != c.addrs || uo.MasterName != c.master || uo.DB != c.db || uo.Username != c.user || uo.Password != c.pass {
			t.Errorf("%s: cluster %v, %+v", c.url, cluster, uo)
		}
	}
}

func TestWaitReplicasFromTheURL(t *testing.T) {
	if _, err := store.Open(context.Background(), store.Options{URL: storetest.URL() + "?wait_replicas=x"}); err == nil || !strings.Contains(err.Error(), "wait_replicas") {
		t.Errorf("a bad wait_replicas: %v", err)
	}
	if _, err := store.Open(context.Background(), store.Options{WaitReplicas: 1}); err == nil || !strings.Contains(err.Error(), "embedded") {
		t.Errorf("wait_replicas on the embedded Redis: %v", err)
	}
	// The shared test server has no replica: a promise that waits for one is refused,
	// and says why.
	r, err := store.Open(context.Background(), store.Options{URL: storetest.URL() + "?wait_replicas=1&wait_timeout=50ms"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() }) // after the flow's keys are deleted with it
	flow := storetest.FlowID(t)
	storetest.DeleteFlowKeys(t, r, flow)
	_, err = r.StartRun(context.Background(), store.StartArgs{Flow: flow, Run: "r1", Version: "v", State: []byte(`{}`), Entries: []string{"a"}})
	if err == nil || !strings.Contains(err.Error(), "confirmed by 0 of 1 replicas") {
		t.Errorf("start with no replica to wait for: %v", err)
	}
}

// A single-server URL that reaches a cluster node, or a cluster with a slot nobody
// serves, is refused at once with an error that says what to do — not a hang.
func TestOpenRefusesAURLThatDoesNotFitTheServer(t *testing.T) {
	c := storetest.StartCluster(t)
	addr := c.Addrs()[0]
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, err := store.Open(ctx, store.Options{URL: "redis://" + addr})
	if err == nil || !strings.Contains(err.Error(), "redis+cluster://") {
		t.Errorf("a single-server URL to a cluster node: %v", err)
	}
	// The test server without its database number (a cluster has only database 0).
	server := storetest.URL()
	if u, err := url.Parse(server); err == nil {
		server = u.Scheme + "://" + u.Host
	}
	if _, err := store.Open(ctx, store.Options{URL: server}); err != nil {
		t.Fatalf("the single test server: %v", err)
	}
	_, err = store.Open(ctx, store.Options{URL: "redis+cluster://" + strings.TrimPrefix(server, "redis://")})
	if err == nil || !strings.Contains(err.Error(), "not a cluster") {
		t.Errorf("a cluster URL to a single server: %v", err)
	}

	// Take slot 0 away from its master: the cluster no longer covers every slot.
	cl := c.Client()
	master := c.MasterOf(0)
	node, err := cl.MasterForKey(ctx, "{06S}") // a key of slot 0
	if err != nil {
		t.Fatal(err)
	}
	if node.Options().Addr != master {
		t.Fatalf("slot 0 is served by %s, the client says %s", master, node.Options().Addr)
	}
	for _, a := range c.Addrs() {
		if err := c.Exec(a, "CLUSTER", "DELSLOTS", "0"); err != nil && !strings.Contains(err.Error(), "already unassigned") {
			t.Fatalf("%s: CLUSTER DELSLOTS 0: %v", a, err)
		}
	}
	t0 := time.Now()
	_, err = store.Open(ctx, store.Options{URL: c.URL()})
	if err == nil || !strings.Contains(err.Error(), "not serving") {
		t.Errorf("a cluster with an unserved slot: %v", err)
	}
	if d := time.Since(t0); d > 15*time.Second {
		t.Errorf("the refusal took %s", d)
	}
}
