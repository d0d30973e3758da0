//go:build ignore

// hopcost is the prototype behind docs/benchmarks.md "Where an unfused hop's Redis work goes":
// five stages of no-op hops committed without a script (-mode watch: WATCH the run
// hashes, read them, then one MULTI per read batch) and floors that do less than a
// Sluice hop must (-mode floor, floor2, floor2-nockpt, floor2-nockpt-noev). Run it against
// a redis-server under callgrind: go run docs/experiments/hopcost.go -addr 127.0.0.1:PORT
// -runs 300 -hops 5 -mode watch (and -hops 1; a hop is the difference over 4).
package main

import (
	"context"
	"flag"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:6379", "")
	runs := flag.Int("runs", 300, "")
	hops := flag.Int("hops", 5, "")
	mode := flag.String("mode", "watch", "watch|multi")
	flag.Parse()
	ctx := context.Background()
	c := redis.NewClient(&redis.Options{Addr: *addr, PoolSize: 32})
	p := fmt.Sprintf("p%d{f}:", time.Now().UnixNano())
	stream := func(i int) string { return fmt.Sprintf("%sin:%d", p, i) }
	for i := 0; i <= *hops; i++ {
		c.XGroupCreateMkStream(ctx, stream(i), "g", "0")
	}
	var wg sync.WaitGroup
	wctx, stop := context.WithCancel(ctx)
	for i := 0; i < *hops; i++ {
		wg.Add(1)
		go func(i int) { defer wg.Done(); stage(wctx, c, p, stream(i), stream(i+1), *mode) }(i)
	}
	for r := 0; r < *runs; r++ {
		run := "r" + strconv.Itoa(r)
		c.HSet(ctx, p+"run:"+run, "status", "running", "version", "abcdef0123456789", "steps", "1", "live", "1", "updated_at", "1796240371175")
		c.XAdd(ctx, &redis.XAddArgs{Stream: p + "ckpt:" + run, ID: "1796240371175-1", Values: []any{"n", "in", "p", "", "c", "{}", "k", "1", "s", "1", "t", "1796240371175"}})
		c.XAdd(ctx, &redis.XAddArgs{Stream: stream(0), Values: []any{"run", run, "v", "abcdef0123456789", "ckpt", "1796240371175-1", "tok", "", "d", "1"}})
	}
	last := "0"
	for n := 0; n < *runs; {
		res, err := c.XRead(ctx, &redis.XReadArgs{Streams: []string{stream(*hops), last}, Count: 1000, Block: time.Second}).Result()
		if err != nil {
			continue
		}
		for _, m := range res[0].Messages {
			last = m.ID
			n++
		}
	}
	stop()
	wg.Wait()
	keys, _ := c.Keys(ctx, p+"*").Result()
	for _, k := range keys {
		c.Del(ctx, k)
	}
	fmt.Println("done")
}

func stage(ctx context.Context, c *redis.Client, p, in, next, mode string) {
	for ctx.Err() == nil {
		res, err := c.XReadGroup(ctx, &redis.XReadGroupArgs{Group: "g", Consumer: "w1", Streams: []string{in, ">"}, Count: 64, Block: 200 * time.Millisecond}).Result()
		if err != nil || len(res) == 0 || len(res[0].Messages) == 0 {
			continue
		}
		msgs := res[0].Messages
		runKeys := make([]string, len(msgs))
		for k, m := range msgs {
			runKeys[k] = p + "run:" + m.Values["run"].(string)
		}
		if mode != "watch" {
			floor(ctx, c, p, in, next, mode, msgs)
			continue
		}
		err = c.Watch(ctx, func(tx *redis.Tx) error {
			rp := tx.Pipeline()
			pend := rp.XPendingExt(ctx, &redis.XPendingExtArgs{Stream: in, Group: "g", Start: msgs[0].ID, End: msgs[len(msgs)-1].ID, Count: int64(2*len(msgs) + 16)})
			hm := make([]*redis.SliceCmd, len(msgs))
			tops := make([]*redis.XMessageSliceCmd, len(msgs))
			for k, m := range msgs {
				run := m.Values["run"].(string)
				hm[k] = rp.HMGet(ctx, runKeys[k], "status", "version", "steps", "live", "parked", "dead", "tp", "forks", "openf")
				tops[k] = rp.XRevRangeN(ctx, p+"ckpt:"+run, "+", "-", 1)
			}
			if _, err := rp.Exec(ctx); err != nil {
				return err
			}
			_ = pend.Val()
			now := time.Now().UnixMilli()
			nows := strconv.FormatInt(now, 10)
			_, err := tx.TxPipelined(ctx, func(pp redis.Pipeliner) error {
				ids := make([]string, len(msgs))
				var ev strings.Builder
				for k, m := range msgs {
					run := m.Values["run"].(string)
					top := tops[k].Val()[0].ID
					ms, seq, _ := strings.Cut(top, "-")
					tm, _ := strconv.ParseInt(ms, 10, 64)
					id := nows + "-0"
					if tm >= now {
						s, _ := strconv.Atoi(seq)
						id = ms + "-" + strconv.Itoa(s+1)
					}
					steps, _ := strconv.Atoi(hm[k].Val()[2].(string))
					pp.XAdd(ctx, &redis.XAddArgs{Stream: p + "ckpt:" + run, ID: id, Values: []any{"n", "a", "p", m.Values["ckpt"], "c", `{"u":{}}`, "k", "1", "s", strconv.Itoa(steps + 1), "t", nows}})
					pp.HSet(ctx, p+"state:"+run, id, `{"x":1}`)
					pp.XAdd(ctx, &redis.XAddArgs{Stream: next, Values: []any{"run", run, "v", m.Values["v"], "ckpt", id, "tok", "", "d", "2"}})
					pp.HSet(ctx, runKeys[k], "updated_at", nows, "steps", strconv.Itoa(steps+1), "last_ckpt", id)
					ids[k] = m.ID
					ev.WriteString(`{"r":"` + run + `","st":"","c":"` + id + `","s":2,"e":[{"n":"a","ms":0}]},`)
				}
				pp.XAdd(ctx, &redis.XAddArgs{Stream: p + "events", MaxLen: 10000, Approx: true, Values: []any{"type", "batch", "run", "", "node", "", "data", "[" + ev.String() + "]", "ckpt", "", "step", ""}})
				pp.XAck(ctx, in, "g", ids...)
				pp.XTrimMinIDApprox(ctx, in, ids[len(ids)-1], 0)
				return nil
			})
			return err
		}, runKeys...)
		if err != nil {
			fmt.Println("err", err)
		}
	}
}

func floor(ctx context.Context, c *redis.Client, p, in, next, mode string, msgs []redis.XMessage) {
	now := time.Now().UnixMilli()
	nows := strconv.FormatInt(now, 10)
	c.TxPipelined(ctx, func(pp redis.Pipeliner) error {
		ids := make([]string, len(msgs))
		var ev strings.Builder
		for k, m := range msgs {
			run := m.Values["run"].(string)
			if !strings.Contains(mode, "nockpt") {
				pp.XAdd(ctx, &redis.XAddArgs{Stream: p + "ckpt:" + run, Values: []any{"n", "a", "p", m.Values["ckpt"], "c", `{"u":{}}`, "k", "1", "s", "2", "t", nows, "st", `{"x":1}`}})
			}
			pp.XAdd(ctx, &redis.XAddArgs{Stream: next, Values: []any{"run", run, "v", m.Values["v"], "ckpt", m.Values["ckpt"], "tok", "", "d", "2"}})
			if mode == "floor" {
				pp.HSet(ctx, p+"run:"+run, "updated_at", nows, "steps", "2", "last_ckpt", m.ID)
			}
			ids[k] = m.ID
			ev.WriteString(`{"r":"` + run + `","st":"","c":"` + m.ID + `","s":2,"e":[{"n":"a","ms":0}]},`)
		}
		if !strings.Contains(mode, "noev") {
			pp.XAdd(ctx, &redis.XAddArgs{Stream: p + "events", MaxLen: 10000, Approx: true, Values: []any{"type", "batch", "run", "", "node", "", "data", "[" + ev.String() + "]", "ckpt", "", "step", ""}})
		}
		pp.XAck(ctx, in, "g", ids...)
		pp.XTrimMinIDApprox(ctx, in, ids[len(ids)-1], 0)
		return nil
	})
}
