package engine_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/storetest"
)

// A node runs as many steps at once as its concurrency, also when they arrive one at a
// time: with a limit of 4 and 3 steps in flight, the fourth activation is read and run.
// (A node was read only once half its limit was free, so the fourth waited until two
// steps had finished: long model calls with concurrency 4 ran three at a time.)
func TestANodeRunsUpToItsConcurrencyWhenStepsArriveOneByOne(t *testing.T) {
	storetest.Each(t, func(t *testing.T, r *store.Redis) {
		v := newEnv(t, r)
		h := &hold{release: make(chan struct{})}
		v.reg.Register(h.spec())
		p := v.compile(strings.Replace(holdFlow, "N", "4", 1))
		v.work(p)
		var runs []string
		for i := 1; i <= 4; i++ {
			runs = append(runs, v.start(p, fmt.Sprintf(`{"n": %d}`, i)))
			waitFor(t, fmt.Sprintf("%d steps of hold at once (concurrency 4)", i), 30*time.Second, func() bool { return h.inflight.Load() >= int32(i) })
		}
		close(h.release)
		for _, id := range runs {
			mustStatus(t, v.wait(p, id), store.StatusSucceeded)
		}
	})
}
