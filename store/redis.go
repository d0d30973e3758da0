// Package store owns everything that talks to Redis: key names, Lua scripts, streams,
// checkpoints, runs, queue statistics, the cache and its locks, and the embedded default
// server. It also keeps the flow library on disk. Nothing outside this package builds a
// Redis key or sends a Redis command.
package store

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"runtime/debug"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
)

// Options says which Redis to use and how big its connection pool must be.
type Options struct {
	// URL is a redis:// or rediss:// URL. Empty means: start the embedded server.
	URL string
	// PoolSize is the number of connections; each blocking stream read holds one for
	// its whole block time, so callers size this for their readers plus headroom.
	// Zero keeps go-redis's default (10 per CPU).
	PoolSize int
}

// Redis is an open connection to the Redis that holds Sluice's state.
type Redis struct {
	Client    redis.UniversalClient
	embedded  *miniredis.Miniredis
	stopClock chan struct{}
	addr      string
}

// embeddedGCPercent is the GOGC of a process that runs the embedded Redis.
const embeddedGCPercent = 400

// advanceClock moves the embedded server's TTLs forward with the wall clock, once a
// second, until stop is closed.
func advanceClock(m *miniredis.Miniredis, stop chan struct{}) {
	last := time.Now()
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case now := <-t.C:
			m.FastForward(now.Sub(last))
			last = now
		}
	}
}

// Open connects to the Redis named by opts.URL, or starts the embedded in-process Redis
// on a loopback port when opts.URL is empty. It fails when the server does not answer
// PING within a few seconds.
func Open(ctx context.Context, opts Options) (*Redis, error) {
	r := &Redis{}
	var ro *redis.Options
	if opts.URL == "" {
		m := miniredis.NewMiniRedis()
		// Keys with a TTL expire with wall-clock time, as on a real server: the clock is
		// advanced once a second (ClockTTL would advance it on every command, and each
		// advance looks at every key: with many runs kept that made every command slow).
		r.stopClock = make(chan struct{})
		go advanceClock(m, r.stopClock)
		// The embedded server keeps every run in this process's heap, which the garbage
		// collector then scans over and over: with thousands of runs kept it spent most
		// of the time. Collect less often, unless the operator set GOGC.
		if os.Getenv("GOGC") == "" {
			debug.SetGCPercent(embeddedGCPercent)
		}
		// The embedded server is reached over its loopback TCP listener: its in-memory
		// dialer breaks go-redis pipelines.
		if err := m.StartAddr("127.0.0.1:0"); err != nil {
			return nil, fmt.Errorf("start embedded redis: %w", err)
		}
		r.embedded = m
		ro = &redis.Options{Addr: m.Addr()}
	} else {
		var err error
		ro, err = redis.ParseURL(opts.URL)
		if err != nil {
			return nil, fmt.Errorf("redis url: %w", err)
		}
	}
	if opts.PoolSize > 0 {
		ro.PoolSize = opts.PoolSize
	}
	ro.DialTimeout = 3 * time.Second
	ro.ReadTimeout = 5 * time.Second
	ro.WriteTimeout = 5 * time.Second
	// Blocking reads set their own deadline from the BLOCK time.
	ro.ContextTimeoutEnabled = true
	r.Client = redis.NewClient(ro)
	r.addr = ro.Addr

	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := r.Client.Ping(pctx).Err(); err != nil {
		_ = r.Close()
		return nil, fmt.Errorf("redis at %s does not answer: %w", ro.Addr, err)
	}
	return r, nil
}

// Embedded reports whether this is the in-process server whose data vanishes on exit.
func (r *Redis) Embedded() bool { return r.embedded != nil }

// Addr is the host:port the client talks to.
func (r *Redis) Addr() string { return r.addr }

// URL is a redis:// URL that reaches the same server, for child processes.
func (r *Redis) URL() string { return "redis://" + r.addr }

// Ping checks that Redis answers within d.
func (r *Redis) Ping(ctx context.Context, d time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	err := r.Client.Ping(ctx).Err()
	var ne net.Error
	switch {
	case err == nil:
		return nil
	case errors.Is(err, redis.ErrClosed):
		return errors.New("redis connection is closed")
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		return fmt.Errorf("redis at %s did not answer within %s", r.addr, d)
	default:
		return fmt.Errorf("redis at %s: %v", r.addr, err)
	}
}

// Close closes the client and stops the embedded server, if any.
func (r *Redis) Close() error {
	err := r.Client.Close()
	if r.embedded != nil {
		close(r.stopClock)
		r.embedded.Close()
	}
	return err
}
