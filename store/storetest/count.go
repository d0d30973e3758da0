package storetest

import (
	"context"
	"net"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"
	"github.com/sluicehq/sluice/store"
)

// RoundTrips counts what a client sends to Redis: a command, or a pipeline, is one round
// trip. Give a part of Sluice a client of its own (Real opens one) to see what it costs.
type RoundTrips struct {
	mu   sync.Mutex
	n    int
	sent []string // each round trip's commands, "get key; hget key", in order
}

// CountRoundTrips counts from now on what r's client sends.
func CountRoundTrips(r *store.Redis) *RoundTrips {
	c := &RoundTrips{}
	r.Client.AddHook(c)
	return c
}

// N is how many round trips were made so far, and the commands they carried.
func (c *RoundTrips) N() (int, []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n, append([]string(nil), c.sent...)
}

func (c *RoundTrips) record(cmds ...redis.Cmder) {
	var trip []string
	for _, cmd := range cmds {
		var parts []string
		for i, a := range cmd.Args() {
			if i > 1 {
				break
			}
			if s, ok := a.(string); ok {
				parts = append(parts, s)
			}
		}
		trip = append(trip, strings.Join(parts, " "))
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n++
	c.sent = append(c.sent, strings.Join(trip, "; "))
}

// DialHook is go-redis's: dials are not counted.
func (c *RoundTrips) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) { return next(ctx, network, addr) }
}

// ProcessHook counts a command.
func (c *RoundTrips) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		c.record(cmd)
		return next(ctx, cmd)
	}
}

// ProcessPipelineHook counts a pipeline once.
func (c *RoundTrips) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		c.record(cmds...)
		return next(ctx, cmds)
	}
}
