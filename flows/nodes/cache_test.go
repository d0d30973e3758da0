package nodes

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sluicehq/sluice/flows"
)

// A cached call cancelled while the call it started is still running returns the
// context's error at once, and its span's bookkeeping does not race the single-flight
// goroutine that runs the call (go test -race flags it if it does).
func TestACancelledCachedCallDoesNotRaceItsLeader(t *testing.T) {
	e := &Env{Cache: &memoryCache{}}
	step := &flows.Step{Flow: "cache-cancel", Node: "n"}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	release, finished := make(chan struct{}), make(chan struct{})
	_, hit, err := e.cached(ctx, step, "llm:k", time.Minute, func(context.Context) ([]byte, error) {
		defer close(finished)
		<-release
		return []byte("v"), nil
	})
	if !errors.Is(err, context.Canceled) || hit {
		t.Errorf("cancelled call: hit %v, err %v; want the context's error", hit, err)
	}
	close(release)
	<-finished
}
