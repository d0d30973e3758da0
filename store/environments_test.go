package store_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/storetest"
)

// Two promotions of one environment at the same instant: each records, as the version
// it replaced, the version the other one left — never both the one from before. The
// first of them is held, by its client, right after its first command reached Redis
// (with the previous version read apart from the move, that was the read) until the
// second finished; then a burst of promotions into each environment at once.
func TestPromotionsAtTheSameInstantRecordTheVersionEachReplaced(t *testing.T) {
	storetest.Each(t, func(t *testing.T, r *store.Redis) {
		ctx := context.Background()
		flow := storetest.FlowID(t)
		storetest.DeleteFlowKeys(t, r, flow)
		envs := store.DefaultEnvironments
		version := func(s string) string { return strings.Repeat(s, 64)[:64] }

		held, release := make(chan struct{}), make(chan struct{})
		r.Client.AddHook(holdFirst{held: held, release: release, once: new(sync.Once)})
		errs := make(chan error, 4)
		for _, idx := range []int{0, 1} {
			errs <- r.Promote(ctx, flow, envs, idx, &store.Promotion{Version: version("0"), By: "start"})
		}
		go func() {
			errs <- r.Promote(context.WithValue(ctx, holdKey{}, true), flow, envs, 1, &store.Promotion{Version: version("a"), By: "a"})
		}()
		<-held
		errs <- r.Promote(ctx, flow, envs, 1, &store.Promotion{Version: version("b"), By: "b"})
		close(release)
		for range 4 {
			if err := <-errs; err != nil {
				t.Fatal(err)
			}
		}

		// A burst into both environments at once: dev (the current key) and prod.
		var wg sync.WaitGroup
		start := make(chan struct{})
		burst := make(chan error, 32)
		for i := range 16 {
			for _, idx := range []int{0, 1} {
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-start
					burst <- r.Promote(ctx, flow, envs, idx, &store.Promotion{Version: version(fmt.Sprintf("%x", i)), By: fmt.Sprint("burst ", i)})
				}()
			}
		}
		close(start)
		wg.Wait()
		close(burst)
		for err := range burst {
			if err != nil {
				t.Fatal(err)
			}
		}

		ps, err := r.Promotions(ctx, flow, "", store.PromotionsMaxLen)
		if err != nil {
			t.Fatal(err)
		}
		if len(ps) != 36 {
			t.Fatalf("%d promotions recorded, want 36", len(ps))
		}
		last := map[string]string{}         // environment -> the version its newest promotion set
		for i := len(ps) - 1; i >= 0; i-- { // oldest first
			p := ps[i]
			if p.Previous != last[p.Environment] {
				t.Errorf("promotion %s of %s to %.8s by %q records %.8s as the version it replaced; it replaced %.8s",
					p.ID, p.Environment, p.Version, p.By, p.Previous, last[p.Environment])
			}
			last[p.Environment] = p.Version
		}
		if ps[len(ps)-3].By != "a" || ps[len(ps)-4].By != "b" {
			t.Errorf("recorded %q then %q; want the held promotion a first (it was held after its move), then b", ps[len(ps)-3].By, ps[len(ps)-4].By)
		}
		got, err := r.EnvironmentVersions(ctx, flow, envs)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range envs {
			if got[e.Name] != last[e.Name] {
				t.Errorf("%s points at %.8s; its newest promotion says %.8s", e.Name, got[e.Name], last[e.Name])
			}
		}
	})
}

type holdKey struct{}

// holdFirst holds the first command sent with holdKey in its context, once Redis has
// answered it, until release is closed (held says it is held).
type holdFirst struct {
	held, release chan struct{}
	once          *sync.Once
}

func (holdFirst) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h holdFirst) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func (h holdFirst) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		if ctx.Value(holdKey{}) != nil {
			h.hold()
		}
		return err
	}
}

func (h holdFirst) hold() {
	first := false
	h.once.Do(func() { first = true })
	if first {
		close(h.held)
		<-h.release
	}
}
