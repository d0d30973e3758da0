// Package store owns everything that talks to Redis: key names, Lua scripts, streams,
// checkpoints, runs, queue statistics, the cache and its locks, and the embedded default
// server. It also keeps the flow library on disk. Nothing outside this package builds a
// Redis key or sends a Redis command.
package store

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	lua "github.com/yuin/gopher-lua"
)

// Options says which Redis to use and how big its connection pool must be.
type Options struct {
	// URL names the Redis (see ParseURL): redis:// or rediss:// for one server,
	// redis+sentinel:// for a master that Sentinels watch, redis+cluster:// for a
	// Redis Cluster. Empty means: start the embedded server.
	URL string
	// PoolSize is the number of connections (per node of a cluster); each blocking stream
	// read holds one for its whole block time, so callers size this for their readers
	// plus headroom. Zero keeps go-redis's default (10 per CPU).
	PoolSize int
	// WaitReplicas, when above zero, makes the writes that answer a caller — a run
	// started, forked, resumed or cancelled — wait until that many replicas have them
	// (Redis WAIT, on the connection that wrote), so that a failover right after cannot
	// lose what the caller was told. The URL's query may set it too: ?wait_replicas=1.
	WaitReplicas int
	// WaitTimeout bounds that wait (default 1s; URL: wait_timeout=500ms). A write not
	// replicated in time is reported as unavailable: it is on the master, not yet safe.
	WaitTimeout time.Duration
}

// Redis is an open connection to the Redis that holds Sluice's state.
type Redis struct {
	Client    redis.UniversalClient
	dials     atomic.Uint64 // connections dialled (Dials)
	embedded  *miniredis.Miniredis
	stopClock chan struct{}
	addr      string
	url       string
	cluster   bool
	parts     partCache
	wait      int           // replicas a promise waits for
	waitFor   time.Duration // how long it waits
}

// embeddedGCPercent is the GOGC of a process that runs the embedded Redis.
const embeddedGCPercent = 400

// clockShare bounds the embedded server's time its clock takes. An advance walks and
// sorts every key under the server's one lock, so with many runs kept it stalls every
// command for tens of milliseconds: after each advance the clock waits clockShare times
// as long as the advance took (at least a second), which keeps it under 1/clockShare of
// the server's time; TTLs then lag by that wait at most (a few seconds with 20,000
// finished runs kept, a second with a few thousand keys).
const clockShare = 50

// nextAdvance is how long the clock waits after an advance that took took.
func nextAdvance(took time.Duration) time.Duration {
	return max(time.Second, clockShare*took)
}

// advanceClock moves the embedded server's TTLs forward with the wall clock, once a
// second or less often (nextAdvance), until stop is closed.
func advanceClock(m *miniredis.Miniredis, stop chan struct{}) {
	last := time.Now()
	t := time.NewTimer(time.Second)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		now := time.Now()
		m.FastForward(now.Sub(last))
		last = now
		t.Reset(nextAdvance(time.Since(now)))
	}
}

// Every EVAL on the embedded server builds a fresh Lua interpreter, and gopher-lua
// allocates each one's value stack and call stack whole, at their default sizes (5120
// values, 80 KB, and 256 frames, 20 KB): with two scripts per run that was a third of
// what the server allocated, and of the garbage collector's work. Our scripts nest a few
// calls deep; a commit passes under a hundred values to one command, limit_take.lua at
// most 500 (it deletes in chunks), so smaller stacks hold them with room to spare. A
// script that outgrows them fails with "registry overflow" on the embedded server only,
// and every script runs on it in the store and engine suites. These are gopher-lua's
// process-wide defaults; nothing else in Sluice runs gopher-lua.
const (
	embeddedLuaValues = 1024
	embeddedLuaFrames = 64
)

var luaSizes sync.Once

// sizeLua sets gopher-lua's stack sizes for the embedded server, once, before the first
// embedded server starts (so no script reads them while they change).
func sizeLua() {
	luaSizes.Do(func() {
		lua.RegistrySize = embeddedLuaValues
		lua.CallStackSize = embeddedLuaFrames
	})
}

// Open connects to the Redis named by opts.URL, or starts the embedded in-process Redis
// on a loopback port when opts.URL is empty. It fails when the server does not answer
// PING within a few seconds, and with a clear error when the URL's form does not fit the
// server: a single-server URL that reaches a cluster node, or a cluster whose slots are
// not all served.
func Open(ctx context.Context, opts Options) (*Redis, error) {
	r := &Redis{url: opts.URL}
	var uo *redis.UniversalOptions
	if opts.URL == "" {
		sizeLua()
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
		uo = &redis.UniversalOptions{Addrs: []string{m.Addr()}}
		r.url = "redis://" + m.Addr()
	} else {
		raw, err := durabilityParams(opts.URL, &opts)
		if err != nil {
			return nil, err
		}
		if uo, r.cluster, err = ParseURL(raw); err != nil {
			return nil, err
		}
	}
	if opts.PoolSize > 0 {
		uo.PoolSize = opts.PoolSize
	}
	if opts.WaitReplicas > 0 {
		if r.embedded != nil {
			return nil, fmt.Errorf("wait_replicas: the embedded Redis has no replicas")
		}
		r.wait, r.waitFor = opts.WaitReplicas, opts.WaitTimeout
		if r.waitFor <= 0 {
			r.waitFor = time.Second
		}
	}
	uo.DialTimeout = 3 * time.Second
	uo.ReadTimeout = 5 * time.Second
	uo.WriteTimeout = 5 * time.Second
	// Blocking reads set their own deadline from the BLOCK time.
	uo.ContextTimeoutEnabled = true
	r.addr = strings.Join(uo.Addrs, ",")
	switch {
	case r.cluster:
		co := uo.Cluster()
		// A master killed without a word sends no MOVED: without a periodic reload the
		// client would send its slots' commands to the dead address until the default
		// minute passes, long after a replica took over.
		co.ClusterStateReloadInterval = time.Second
		r.Client = redis.NewClusterClient(co)
	case uo.MasterName != "":
		r.Client = redis.NewFailoverClient(uo.Failover())
		r.addr = uo.MasterName + "@" + r.addr
	default:
		r.Client = redis.NewClient(uo.Simple())
	}
	if cc, ok := r.Client.(*redis.ClusterClient); ok {
		cc.OnNewNode(func(node *redis.Client) { node.AddHook(dialCount{&r.dials}) })
	} else {
		r.Client.AddHook(dialCount{&r.dials})
	}
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := r.Client.Ping(pctx).Err(); err != nil {
		_ = r.Close()
		if r.cluster && strings.Contains(err.Error(), "cluster support disabled") {
			return nil, fmt.Errorf("redis at %s is not a cluster (%v): use redis:// for one server", r.addr, err)
		}
		return nil, fmt.Errorf("redis at %s does not answer: %w", r.addr, err)
	}
	if err := r.checkTopology(pctx); err != nil {
		_ = r.Close()
		return nil, err
	}
	return r, nil
}

// durabilityParams takes wait_replicas and wait_timeout off a URL's query into opts.
func durabilityParams(raw string, opts *Options) (string, error) {
	base, query, ok := strings.Cut(raw, "?")
	if !ok {
		return raw, nil
	}
	q, err := url.ParseQuery(query)
	if err != nil {
		return "", fmt.Errorf("redis url %q: %w", redact(raw), err)
	}
	if v := q.Get("wait_replicas"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return "", fmt.Errorf("redis url: wait_replicas=%q is not a number of replicas", v)
		}
		opts.WaitReplicas = n
	}
	if v := q.Get("wait_timeout"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return "", fmt.Errorf("redis url: wait_timeout=%q is not a duration such as 500ms", v)
		}
		opts.WaitTimeout = d
	}
	q.Del("wait_replicas")
	q.Del("wait_timeout")
	if len(q) == 0 {
		return base, nil
	}
	return base + "?" + q.Encode(), nil
}

// ParseURL reads the three forms of a Redis URL:
//
//	redis://[:PASSWORD@]HOST:PORT[/DB]                 one server (rediss:// with TLS)
//	redis+sentinel://[:PASSWORD@]HOST:PORT,HOST:PORT/MASTER[/DB]
//	                                                   the master Sentinels watch
//	redis+cluster://[:PASSWORD@]HOST:PORT,HOST:PORT    a Redis Cluster, by seed nodes
//	                                                   (rediss+cluster:// with TLS)
//
// It reports whether the URL names a cluster.
func ParseURL(raw string) (*redis.UniversalOptions, bool, error) {
	scheme, rest, ok := strings.Cut(raw, "://")
	if !ok {
		return nil, false, fmt.Errorf("redis url %q: want redis://HOST:PORT, redis+sentinel://HOSTS/MASTER or redis+cluster://HOSTS", redact(raw))
	}
	switch scheme {
	case "redis", "rediss":
		o, err := redis.ParseURL(raw)
		if err != nil {
			return nil, false, fmt.Errorf("redis url: %w", err)
		}
		return &redis.UniversalOptions{Addrs: []string{o.Addr}, Username: o.Username, Password: o.Password, DB: o.DB,
			TLSConfig: o.TLSConfig, Protocol: o.Protocol}, false, nil
	case "redis+cluster", "rediss+cluster", "redis+sentinel":
	default:
		return nil, false, fmt.Errorf("redis url %q: unknown scheme %q (redis, rediss, redis+sentinel, redis+cluster, rediss+cluster)", redact(raw), scheme)
	}
	// The standard URL parser takes one host; these forms list several.
	user, pass := "", ""
	if at := strings.LastIndex(rest, "@"); at >= 0 {
		user, pass, _ = strings.Cut(rest[:at], ":")
		rest = rest[at+1:]
		if u, err := url.PathUnescape(user); err == nil {
			user = u
		}
		if p, err := url.PathUnescape(pass); err == nil {
			pass = p
		}
	}
	hosts, path, _ := strings.Cut(rest, "/")
	var addrs []string
	for _, h := range strings.Split(hosts, ",") {
		if h = strings.TrimSpace(h); h != "" {
			if _, _, err := net.SplitHostPort(h); err != nil {
				return nil, false, fmt.Errorf("redis url: %q is not HOST:PORT", h)
			}
			addrs = append(addrs, h)
		}
	}
	if len(addrs) == 0 {
		return nil, false, fmt.Errorf("redis url %q: no HOST:PORT", redact(raw))
	}
	uo := &redis.UniversalOptions{Addrs: addrs, Username: user, Password: pass}
	if scheme == "rediss+cluster" {
		uo.TLSConfig = &tls.Config{MinVersion: tls.VersionTLS12}
	}
	if scheme != "redis+sentinel" {
		if path != "" {
			return nil, false, fmt.Errorf("redis url %q: a cluster has no database number", redact(raw))
		}
		return uo, true, nil
	}
	master, db, _ := strings.Cut(path, "/")
	if master == "" {
		return nil, false, fmt.Errorf("redis url %q: name the master: redis+sentinel://HOST:PORT,.../MASTER[/DB]", redact(raw))
	}
	uo.MasterName = master
	// The password is the master's; the sentinels are reached without one.
	if db != "" {
		n, err := strconv.Atoi(db)
		if err != nil || n < 0 {
			return nil, false, fmt.Errorf("redis url %q: %q is not a database number", redact(raw), db)
		}
		uo.DB = n
	}
	return uo, false, nil
}

// redact hides a URL's password in an error.
func redact(raw string) string {
	scheme, rest, ok := strings.Cut(raw, "://")
	if !ok {
		return raw
	}
	if at := strings.LastIndex(rest, "@"); at >= 0 {
		return scheme + "://***@" + rest[at+1:]
	}
	return raw
}

// checkTopology refuses a form that does not fit the server: a single-server URL that
// reaches a node of a cluster (most commands would fail with MOVED), or a cluster whose
// slots are not all served (a run placed on an unserved slot would hang).
func (r *Redis) checkTopology(ctx context.Context) error {
	if r.embedded != nil {
		return nil
	}
	if r.cluster {
		info, err := r.Client.ClusterInfo(ctx).Result()
		if err != nil {
			return fmt.Errorf("redis at %s is not a cluster (%v): use redis:// for one server", r.addr, err)
		}
		if v := infoField(info, "cluster_state"); v != "ok" {
			return fmt.Errorf("redis cluster at %s is not serving: cluster_state is %q, %s of 16384 slots assigned and %s ok; fix the cluster (redis-cli --cluster check)",
				r.addr, v, infoField(info, "cluster_slots_assigned"), infoField(info, "cluster_slots_ok"))
		}
		return nil
	}
	info, err := r.Client.Info(ctx, "cluster").Result()
	if err == nil && infoField(info, "cluster_enabled") == "1" {
		return fmt.Errorf("redis at %s is a node of a Redis Cluster: use redis+cluster://%s (with the other nodes too)", r.addr, r.addr)
	}
	return nil
}

// infoField reads "name:value" from an INFO or CLUSTER INFO answer.
func infoField(info, name string) string {
	for _, line := range strings.Split(info, "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), ":"); ok && k == name {
			return v
		}
	}
	return ""
}

// Cluster reports whether this is a Redis Cluster: keys of different hash tags may be on
// different shards, so a multi-key command takes keys of one tag only.
func (r *Redis) Cluster() bool { return r.cluster }

// Embedded reports whether this is the in-process server whose data vanishes on exit.
func (r *Redis) Embedded() bool { return r.embedded != nil }

// Addr is the host:port the client talks to (several, comma-separated, for a cluster;
// MASTER@sentinels for Sentinel).
func (r *Redis) Addr() string { return r.addr }

// URL is a URL that reaches the same Redis, for child processes.
func (r *Redis) URL() string { return r.url }

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

// IsClosed reports whether err says the client was closed: nothing will work again.
func IsClosed(err error) bool { return errors.Is(err, redis.ErrClosed) }

// Close closes the client and stops the embedded server, if any.
func (r *Redis) Close() error {
	err := r.Client.Close()
	if r.embedded != nil {
		close(r.stopClock)
		r.embedded.Close()
	}
	return err
}
