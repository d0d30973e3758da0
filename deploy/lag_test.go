package deploy

import (
	"context"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/store/storetest"
)

// TestGroupLagIsUnknownAfterAnOutOfOrderCommit pins the Redis behaviour docs/deploy.md
// builds the ScaledObjects on. A step's commit acknowledges and deletes its entry, and
// steps finish in any order: when the entry delivered last is deleted while an earlier
// one is still pending, XINFO GROUPS cannot tell the lag (nil; go-redis, and so KEDA,
// reads -1) until the group's next read. The stream's length stays exact: waiting plus
// pending entries. Should a Redis release change this, the docs' advice changes too.
func TestGroupLagIsUnknownAfterAnOutOfOrderCommit(t *testing.T) {
	ctx := context.Background()
	opt, err := redis.ParseURL(storetest.URL())
	if err != nil {
		t.Fatal(err)
	}
	c := redis.NewClient(opt)
	t.Cleanup(func() { c.Close() }) // after the key is deleted with it
	key := "sluicetest:{" + storetest.FlowID(t) + "}:in:node"
	t.Cleanup(func() { c.Del(context.Background(), key) })
	if err := c.XGroupCreateMkStream(ctx, key, "g", "0").Err(); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 5; i++ {
		if err := c.XAdd(ctx, &redis.XAddArgs{Stream: key, Values: []string{"i", "x"}}).Err(); err != nil {
			t.Fatal(err)
		}
	}
	lag := func() int64 {
		t.Helper()
		gs, err := c.XInfoGroups(ctx, key).Result()
		if err != nil || len(gs) != 1 {
			t.Fatalf("XINFO GROUPS: %v %v", gs, err)
		}
		return gs[0].Lag
	}
	read := func(n int64) []string {
		t.Helper()
		res, err := c.XReadGroup(ctx, &redis.XReadGroupArgs{Group: "g", Consumer: "c", Streams: []string{key, ">"}, Count: n}).Result()
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, m := range res[0].Messages {
			ids = append(ids, m.ID)
		}
		return ids
	}
	commit := func(id string) {
		t.Helper()
		if err := c.XAck(ctx, key, "g", id).Err(); err != nil {
			t.Fatal(err)
		}
		if err := c.XDel(ctx, key, id).Err(); err != nil {
			t.Fatal(err)
		}
	}

	ids := read(2)
	commit(ids[1]) // the later step commits first
	if got := lag(); got != -1 {
		t.Fatalf("lag after an out-of-order commit = %d; Redis now knows it (was unknown, -1): revisit docs/deploy.md", got)
	}
	if n := c.XLen(ctx, key).Val(); n != 4 { // 3 waiting + 1 pending
		t.Fatalf("XLEN = %d, want 4 (3 waiting, 1 pending)", n)
	}
	read(1)
	if got := lag(); got != 2 {
		t.Fatalf("lag after the next read = %d, want 2", got)
	}
}
