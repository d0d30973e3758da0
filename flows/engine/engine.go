// Package engine runs compiled plans on Redis Streams. Every node is a consumer group;
// a worker reads activations, runs the node's component under a deadline, and commits
// the step — checkpoint, next activations, acknowledgement, run status and event — in
// one Lua script. Failed steps are retried and end in the dead letters; a sweeper in
// every worker hands steps that crashed workers left pending to live ones.
//
// The engine owns runs: start, get, wait, cancel, resume, fork, checkpoints. It talks to
// Redis only through the store package.
package engine

import (
	"context"
	"crypto/rand"
	"encoding/base32"
	"encoding/binary"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/flows"
	"github.com/sluicehq/sluice/store"
)

// Options configure an engine.
type Options struct {
	Logger *slog.Logger
	// StateCacheBytes bounds the heap the in-process cache of decoded states takes, as
	// estimated from their shape (default 64 MiB).
	StateCacheBytes int
	// ConsumerPrefix names this process's consumers ("host-pid" by default); each
	// worker appends "-n".
	ConsumerPrefix string
	// Limits bound documents compiled from Redis (default flows.DefaultLimits).
	Limits flows.Limits
	// Observer, when set, is told about every step (for metrics).
	Observer Observer
	// Partitions is how many partitions the runs of a flow whose settings do not say are
	// spread over (default 1 on one Redis; on a Redis Cluster, at least
	// ClusterPartitions, as many as spread evenly over its masters: see
	// store.Redis.ClusterPartitions).
	Partitions int
	// NoFuse turns off fusing: every step then goes through its node's stream (for the
	// benchmark's comparison).
	NoFuse bool
}

// ClusterPartitions is the partitions a flow's runs are spread over on a Redis Cluster
// unless its settings or the server say otherwise: enough to spread one flow evenly over
// a few masters (see store.partTag), few enough that a worker's readers stay few.
const ClusterPartitions = 16

// Observer receives the outcome of steps, for metrics and the benchmark.
type Observer interface {
	StepDone(flow, node string, t StepTiming, usage flows.Usage)
	StepFailed(flow, node string, dead bool)
}

// StepTiming says where a committed step's time went.
type StepTiming struct {
	Run    time.Duration // the component
	Commit time.Duration // the commit's round trip, batching included
	Total  time.Duration // from the worker receiving the activation to the commit's reply

	// Component is the step's node's component type (its Spec name).
	Component string
}

// Engine runs plans. One engine serves any number of flows and workers.
type Engine struct {
	rdb      *store.Redis
	reg      *flows.Registry
	log      *slog.Logger
	opts     Options
	cache    *stateCache
	versions *versionCache
	prefix   string
	seq      atomic.Int64

	commits *committer
	// startCommits sends the commits that start their runs (startInline): pipelines
	// beside the workers' commits (startPipelines), as the starter's was.
	startCommits *committer
	starts       *starter
	chains       boundedChains
	events       *eventBatcher
	watch        *runWatcher
	// cancelled are runs this process saw cancelled: the gate drops their pure steps.
	cancelled *cancelledRuns

	mu      sync.Mutex
	workers map[*Worker]bool // running workers, told when a run is cancelled here
}

// New returns an engine that keeps its state in rdb and builds components from reg.
func New(rdb *store.Redis, reg *flows.Registry, opts Options) *Engine {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.StateCacheBytes == 0 {
		opts.StateCacheBytes = 64 << 20
	}
	if opts.Limits == (flows.Limits{}) {
		opts.Limits = flows.DefaultLimits
	}
	if opts.Partitions == 0 && rdb.Cluster() {
		// As many partitions as spread evenly over the cluster's masters (at least
		// ClusterPartitions); ClusterPartitions when the cluster cannot say.
		opts.Partitions = ClusterPartitions
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		if n, err := rdb.ClusterPartitions(ctx, ClusterPartitions); err == nil && n > 0 {
			opts.Partitions = n
		}
		cancel()
	}
	if opts.ConsumerPrefix == "" {
		host, _ := os.Hostname()
		host = strings.NewReplacer(" ", "_", ":", "_").Replace(host)
		opts.ConsumerPrefix = fmt.Sprintf("%s-%d", host, os.Getpid())
	}
	e := &Engine{rdb: rdb, reg: reg, log: opts.Logger, opts: opts, cache: newStateCache(opts.StateCacheBytes),
		versions: newVersionCache(), prefix: opts.ConsumerPrefix, workers: map[*Worker]bool{}, cancelled: newCancelledRuns()}
	e.commits = newCommitter(rdb, e.log)
	e.startCommits = newCommitter(rdb, e.log)
	e.starts = &starter{rdb: rdb}
	e.events = newEventBatcher(rdb, e.log)
	e.watch = newRunWatcher(rdb, e.log)
	return e
}

// StateCacheStats returns how many decoded states this process keeps and an estimate of
// the heap they take.
func (e *Engine) StateCacheStats() (entries, bytes int) { return e.cache.stats() }

// Redis is the store the engine uses.
func (e *Engine) Redis() *store.Redis { return e.rdb }

// Registry is the component registry the engine compiles with.
func (e *Engine) Registry() *flows.Registry { return e.reg }

func (e *Engine) consumerName() string {
	return fmt.Sprintf("%s-%d", e.prefix, e.seq.Add(1))
}

var idEncoding = base32.NewEncoding("0123456789abcdefghjkmnpqrstvwxyz").WithPadding(base32.NoPadding)

// NewRunID returns a new run id: sortable by time, unique, and a valid id.
func NewRunID() string {
	var b [13]byte
	binary.BigEndian.PutUint64(b[:8], uint64(time.Now().UnixMilli())<<16)
	_, _ = rand.Read(b[6:])
	return "r" + idEncoding.EncodeToString(b[:])
}
