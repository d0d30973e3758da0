package store

import (
	"context"
	"net"
	"sync/atomic"

	"github.com/redis/go-redis/v9"
)

// A read whose reply was lost can still have been delivered: XREADGROUP moved the
// entries to the reader's pending list, Redis went away before its reply reached the
// client, and go-redis sent the read again on a new connection and returned what that
// one got, without an error. The entries of the first read are then pending for a live
// worker that never saw them, and only a full sweep would take them back. Dials counts
// the connections the client dialled (go-redis dials on a pool goroutine, so a dial
// cannot be told apart by the call that needed it): a reader that sees the count move
// during its read treats the read as one that may have been delivered twice. A dial of
// another call at the same time, or the pool's first connections, cost it one sweep it
// did not need.
func (r *Redis) Dials() uint64 { return r.dials.Load() }

// dialCount is the client hook behind Dials.
type dialCount struct{ n *atomic.Uint64 }

func (d dialCount) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		d.n.Add(1)
		return next(ctx, network, addr)
	}
}

func (dialCount) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }

func (dialCount) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
