package storetest_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/store/storetest"
)

// The harnesses are tested on what the runtime's tests rely on: every slot served, keys
// routed to all three masters, a killed master replaced by its replica with the data it
// had replicated, and a failover client that follows Sentinel to the new master.

func TestMain(m *testing.M) {
	code := m.Run()
	storetest.StopShared()
	os.Exit(code)
}

func TestSharedClusterIsStartedOnceAndServesEveryTest(t *testing.T) {
	var addrs []string
	for i := 0; i < 2; i++ {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			c := storetest.SharedCluster(t)
			if addrs == nil {
				addrs = c.Addrs()
			} else if strings.Join(c.Addrs(), ",") != strings.Join(addrs, ",") {
				t.Fatalf("a second cluster was started: %v, then %v", addrs, c.Addrs())
			}
			ctx := context.Background()
			key := "harness:{" + storetest.FlowID(t) + "}"
			cc := c.Client()
			if err := cc.Set(ctx, key, i, 0).Err(); err != nil {
				t.Fatal(err)
			}
			if v, err := cc.Get(ctx, key).Int(); err != nil || v != i {
				t.Fatalf("GET %s: %v, %v", key, v, err)
			}
			if len(c.Masters()) != 3 {
				t.Fatalf("masters %v", c.Masters())
			}
		})
	}
}

func TestClusterServesEverySlotOnThreeMastersAndFailsOver(t *testing.T) {
	c := storetest.StartCluster(t)
	ctx := context.Background()
	cc := c.Client()

	// Every slot is served, by three masters with one replica each.
	//lint:ignore SA1019 CLUSTER SLOTS (deprecated in Redis 7) is what cluster clients read to route keys
	slots, err := cc.ClusterSlots(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	covered := 0
	masters := map[string]bool{}
	for _, s := range slots {
		covered += s.End - s.Start + 1
		masters[s.Nodes[0].Addr] = true
		if len(s.Nodes) != 2 {
			t.Errorf("slots %d-%d have %d nodes, want a master and a replica", s.Start, s.End, len(s.Nodes))
		}
	}
	if covered != storetest.ClusterSlots || len(masters) != 3 {
		t.Fatalf("%d slots served by %d masters, want %d by 3", covered, len(masters), storetest.ClusterSlots)
	}
	if got := c.Masters(); len(got) != 3 {
		t.Fatalf("Masters() = %v, want 3", got)
	}

	// Keys written through a cluster client land on every master, each on the one
	// that serves its slot.
	onMaster := map[string]string{}
	for i := 0; len(onMaster) < 3 && i < 100; i++ {
		key := fmt.Sprintf("harness:{k%d}", i)
		if err := cc.Set(ctx, key, i, 0).Err(); err != nil {
			t.Fatalf("SET %s through the cluster client: %v", key, err)
		}
		m := c.MasterOfKey(key)
		if !masters[m] {
			t.Fatalf("MasterOfKey(%s) = %s, not a master", key, m)
		}
		direct := redis.NewClient(&redis.Options{Addr: m})
		v, err := direct.Get(ctx, key).Int()
		direct.Close()
		if err != nil || v != i {
			t.Fatalf("GET %s on its master %s: %v, %v", key, m, v, err)
		}
		onMaster[m] = key
	}
	if len(onMaster) != 3 {
		t.Fatalf("100 keys landed on %d masters, want all 3", len(onMaster))
	}

	// Kill one master: its replica takes over its slots with the data it had.
	var victim, key string
	for m, k := range onMaster {
		victim, key = m, k
		break
	}
	direct := redis.NewClient(&redis.Options{Addr: victim})
	acked, err := direct.Wait(ctx, 1, 5*time.Second).Result()
	direct.Close()
	if err != nil || acked != 1 {
		t.Fatalf("WAIT for the replica of %s: %d, %v", victim, acked, err)
	}
	promoted := c.KillMaster(victim)
	if promoted == victim {
		t.Fatalf("KillMaster(%s) says the dead node still serves the slots", victim)
	}
	if got := c.MasterOfKey(key); got != promoted {
		t.Fatalf("after the failover %s is served by %s, want %s", key, got, promoted)
	}
	if got := c.Masters(); len(got) != 3 || strings.Contains(strings.Join(got, " "), victim) {
		t.Fatalf("after the failover the masters are %v; want 3 without %s", got, victim)
	}
	// The client's pooled connections and slot table still point at the dead master:
	// it reloads them after an error, within its retries or on a later call.
	deadline := time.Now().Add(30 * time.Second)
	for {
		v, err := cc.Get(ctx, key).Result()
		if err == nil {
			if want := strings.TrimSuffix(strings.TrimPrefix(key, "harness:{k"), "}"); v != want {
				t.Fatalf("after the failover %s holds %q, want %q", key, v, want)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("GET %s through the cluster client after the failover: %v", key, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := cc.Set(ctx, key, "after", 0).Err(); err != nil {
		t.Fatalf("SET %s through the cluster client after the failover: %v", key, err)
	}

	// The killed node comes back as a replica.
	c.Restart(victim)
	back := redis.NewClient(&redis.Options{Addr: victim})
	defer back.Close()
	info, err := back.Info(ctx, "replication").Result()
	if err != nil || !strings.Contains(info, "role:slave") {
		t.Fatalf("the restarted %s is not a replica: %v\n%s", victim, err, info)
	}
}

func TestSentinelFailoverClientFollowsTheNewMaster(t *testing.T) {
	s := storetest.StartSentinel(t)
	ctx := context.Background()
	if !strings.HasPrefix(s.URL(), "redis+sentinel://") || !strings.HasSuffix(s.URL(), "/"+s.MasterName()) {
		t.Fatalf("URL() = %s", s.URL())
	}
	c := s.Client()
	if err := c.Set(ctx, "harness:sentinel", "before", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if acked, err := c.Wait(ctx, 1, 5*time.Second).Result(); err != nil || acked != 1 {
		t.Fatalf("WAIT for the replica: %d, %v", acked, err)
	}
	old := s.Master()
	promoted := s.KillMaster()
	if promoted == old {
		t.Fatalf("the sentinels still report %s, which was killed", old)
	}
	if got := s.Master(); got != promoted {
		t.Fatalf("Master() = %s after KillMaster returned %s", got, promoted)
	}
	// The client's pooled connections went to the dead master: it finds the new one
	// through the sentinels within its retries, or on a later call.
	deadline := time.Now().Add(30 * time.Second)
	for {
		v, err := c.Get(ctx, "harness:sentinel").Result()
		if err == nil {
			if v != "before" {
				t.Fatalf("after the failover the key holds %q, want %q", v, "before")
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the failover client does not reach the new master %s: %v", promoted, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := c.Set(ctx, "harness:sentinel", "after", 0).Err(); err != nil {
		t.Fatalf("SET on the new master: %v", err)
	}
	direct := redis.NewClient(&redis.Options{Addr: promoted})
	defer direct.Close()
	if v, err := direct.Get(ctx, "harness:sentinel").Result(); err != nil || v != "after" {
		t.Fatalf("the write did not go to %s: %q, %v", promoted, v, err)
	}
}
