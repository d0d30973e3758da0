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
	// StateCacheBytes bounds the in-process cache of decoded states (default 64 MiB).
	StateCacheBytes int
	// ConsumerPrefix names this process's consumers ("host-pid" by default); each
	// worker appends "-n".
	ConsumerPrefix string
	// Limits bound documents compiled from Redis (default flows.DefaultLimits).
	Limits flows.Limits
	// Observer, when set, is told about every step (for metrics).
	Observer Observer
	// NoFuse turns off fusing: every step then goes through its node's stream (for the
	// benchmark's comparison).
	NoFuse bool
}

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
}

// Engine runs plans. One engine serves any number of flows and workers.
type Engine struct {
	rdb    *store.Redis
	reg    *flows.Registry
	log    *slog.Logger
	opts   Options
	cache  *stateCache
	prefix string
	seq    atomic.Int64

	mu        sync.Mutex
	plans     map[string]*flows.Plan // flow \x00 version -> plan
	published map[string]bool        // flow \x00 version

	commits *committer
	events  *eventBatcher
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
	if opts.ConsumerPrefix == "" {
		host, _ := os.Hostname()
		host = strings.NewReplacer(" ", "_", ":", "_").Replace(host)
		opts.ConsumerPrefix = fmt.Sprintf("%s-%d", host, os.Getpid())
	}
	e := &Engine{rdb: rdb, reg: reg, log: opts.Logger, opts: opts, cache: newStateCache(opts.StateCacheBytes),
		prefix: opts.ConsumerPrefix, plans: map[string]*flows.Plan{}, published: map[string]bool{}}
	e.commits = newCommitter(rdb, e.log)
	e.events = newEventBatcher(rdb, e.log)
	return e
}

// Redis is the store the engine uses.
func (e *Engine) Redis() *store.Redis { return e.rdb }

// Registry is the component registry the engine compiles with.
func (e *Engine) Registry() *flows.Registry { return e.reg }

// Compile validates and compiles a document with the engine's registry.
func (e *Engine) Compile(doc []byte) (*flows.Plan, flows.Problems, error) {
	p, probs := flows.Compile(doc, e.reg, e.opts.Limits)
	if p == nil {
		id := ""
		if d, err := flows.DecodeState(doc); err == nil {
			id, _ = d["id"].(string)
		}
		return nil, probs, &flows.InvalidError{Flow: id, Problems: probs}
	}
	return p, probs, nil
}

// Publish stores the plan's version and makes it the flow's current version: what
// saving a flow does. Starting or forking a run only stores the version it runs on.
func (e *Engine) Publish(ctx context.Context, p *flows.Plan) error {
	if err := e.storeVersion(ctx, p); err != nil {
		return err
	}
	return e.makeCurrent(ctx, p, "")
}

// storeVersion stores the plan's version in Redis (so any worker can load it) and
// creates its consumer groups, once per process.
func (e *Engine) storeVersion(ctx context.Context, p *flows.Plan) error {
	key := p.Flow + "\x00" + p.Version
	e.mu.Lock()
	done := e.published[key]
	e.mu.Unlock()
	if done {
		return nil
	}
	if err := e.rdb.StoreVersion(ctx, p.Flow, p.Version, p.Source, p.NodeIDs()); err != nil {
		return err
	}
	e.mu.Lock()
	e.published[key] = true
	e.remember(key, p)
	e.mu.Unlock()
	return nil
}

// maxPlans bounds the compiled plans an engine keeps; one evicted is compiled again from
// Redis when a run of its version next needs it.
const maxPlans = 256

// remember keeps a compiled plan; e.mu is held.
func (e *Engine) remember(key string, p *flows.Plan) {
	if _, ok := e.plans[key]; !ok && len(e.plans) >= maxPlans {
		for k := range e.plans { // an arbitrary one: map order is random
			delete(e.plans, k)
			break
		}
	}
	e.plans[key] = p
}

// forgetPublished makes the next storeVersion of plan write it to Redis again.
func (e *Engine) forgetPublished(p *flows.Plan) {
	e.mu.Lock()
	delete(e.published, p.Flow+"\x00"+p.Version)
	e.mu.Unlock()
}

// Plan returns the plan of a flow version, compiling the JSON stored in Redis the first
// time. Runs continue on the version they started with.
func (e *Engine) Plan(ctx context.Context, flow, version string) (*flows.Plan, error) {
	key := flow + "\x00" + version
	e.mu.Lock()
	p := e.plans[key]
	e.mu.Unlock()
	if p != nil {
		return p, nil
	}
	doc, err := e.rdb.VersionDoc(ctx, flow, version)
	if err != nil {
		return nil, err
	}
	p, _, err = e.Compile(doc)
	if err != nil {
		return nil, flows.Permanent(fmt.Errorf("version %.12s of flow %q no longer compiles: %w", version, flow, err))
	}
	e.mu.Lock()
	e.remember(key, p)
	e.mu.Unlock()
	return p, nil
}

// cachedPlan returns a plan already compiled in this process, or nil.
func (e *Engine) cachedPlan(flow, version string) *flows.Plan {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.plans[flow+"\x00"+version]
}

// CurrentPlan returns the plan of the flow's current version in Redis.
func (e *Engine) CurrentPlan(ctx context.Context, flow string) (*flows.Plan, error) {
	v, err := e.rdb.CurrentVersion(ctx, flow)
	if err != nil {
		return nil, err
	}
	return e.Plan(ctx, flow, v)
}

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

func discardLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }
