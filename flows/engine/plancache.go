package engine

import (
	"container/list"
	"context"
	"crypto/sha256"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/sluicehq/sluice/flows"
)

// versionCache is the one cache of "which version of flow X did this process compile, store
// or make current". It is bounded: compiled plans are kept by flow and version, and
// compiled documents by the hash of their bytes, in one LRU of maxPlans entries; an
// evicted plan is compiled again from Redis (or from its document) when next needed.
//
// Two operations touch Redis and are kept apart: storing a version (its JSON, node
// ids and consumer groups, so any worker can run it) and making it the flow's current
// version. Runs, forks and subflows store the version they run on; only saving or
// publishing a flow makes one current.
type versionCache struct {
	mu    sync.Mutex
	ll    *list.List
	items map[string]*list.Element
}

type versionEntry struct {
	key    string
	plan   *flows.Plan
	probs  flows.Problems
	err    error
	stored bool // its JSON is in Redis (as far as this process knows)
	// checked is when checkStored last asked Redis whether it holds the version.
	checked time.Time
}

// maxPlans bounds the entries the version cache keeps.
const maxPlans = 256

func newVersionCache() *versionCache {
	return &versionCache{ll: list.New(), items: map[string]*list.Element{}}
}

func versionKey(flow, version string) string { return "v\x00" + flow + "\x00" + version }

// docKey names a compiled document: its bytes and the generation of the workspaces'
// rules it was validated under (a workspace's secrets and providers: docs/teams.md).
func docKey(doc []byte, rules uint64) string {
	sum := sha256.Sum256(doc)
	return "d\x00" + string(sum[:]) + strconv.FormatUint(rules, 36)
}

func (v *versionCache) get(key string) *versionEntry {
	v.mu.Lock()
	defer v.mu.Unlock()
	el, ok := v.items[key]
	if !ok {
		return nil
	}
	v.ll.MoveToFront(el)
	return el.Value.(*versionEntry)
}

// version is get(versionKey(flow, version)) without building the key on the heap: it
// is looked up several times per step.
func (v *versionCache) version(flow, version string) *versionEntry {
	var buf [192]byte
	k := append(append(append(append(buf[:0], "v\x00"...), flow...), 0), version...)
	v.mu.Lock()
	defer v.mu.Unlock()
	el, ok := v.items[string(k)]
	if !ok {
		return nil
	}
	v.ll.MoveToFront(el)
	return el.Value.(*versionEntry)
}

// put keeps an entry; v.mu is not held.
func (v *versionCache) put(e *versionEntry) *versionEntry {
	v.mu.Lock()
	defer v.mu.Unlock()
	if el, ok := v.items[e.key]; ok {
		v.ll.MoveToFront(el)
		return el.Value.(*versionEntry)
	}
	v.items[e.key] = v.ll.PushFront(e)
	for v.ll.Len() > maxPlans {
		last := v.ll.Back()
		v.ll.Remove(last)
		delete(v.items, last.Value.(*versionEntry).key)
	}
	return e
}

// Compile validates and compiles a document with the engine's registry. A document
// compiled before (the same bytes, while the workspaces' rules stay the same) is not
// compiled again.
func (e *Engine) Compile(doc []byte) (*flows.Plan, flows.Problems, error) {
	key := docKey(doc, e.reg.WorkspaceRules().Generation())
	if c := e.versions.get(key); c != nil {
		return c.plan, c.probs, c.err
	}
	p, probs := flows.Compile(doc, e.reg, e.opts.Limits)
	var err error
	if p == nil {
		id := ""
		if d, derr := flows.DecodeState(doc); derr == nil {
			id, _ = d["id"].(string)
		}
		err = &flows.InvalidError{Flow: id, Problems: probs}
	}
	e.versions.put(&versionEntry{key: key, plan: p, probs: probs, err: err})
	if p != nil {
		e.versions.put(&versionEntry{key: versionKey(p.Flow, p.Version), plan: p})
	}
	return p, probs, err
}

// StoreVersion stores the plan's version in Redis, so that any worker can load it, and
// creates its consumer groups. It does not make the version current. It is idempotent.
func (e *Engine) StoreVersion(ctx context.Context, p *flows.Plan) error {
	c := e.versions.version(p.Flow, p.Version)
	if c == nil {
		c = e.versions.put(&versionEntry{key: versionKey(p.Flow, p.Version), plan: p})
	}
	e.versions.mu.Lock()
	stored := c.stored
	e.versions.mu.Unlock()
	if stored {
		return nil
	}
	if err := e.rdb.StoreVersion(ctx, p.Flow, p.Version, p.Source, p.NodeIDs()); err != nil {
		return err
	}
	e.versions.mu.Lock()
	c.stored = true
	e.versions.mu.Unlock()
	e.tellWorkers(p.Flow, -1)
	return nil
}

// Publish stores the plan's version and makes it the flow's current version: new runs
// start on it and workers take their limits from it. Only saving or publishing a flow
// calls this, and it does so every time (a rollback moves current back).
func (e *Engine) Publish(ctx context.Context, p *flows.Plan) error {
	return e.PublishWithMessage(ctx, p, "")
}

// checkStored asks Redis, at most once a second per version and without waiting for
// the answer, whether it still holds p's version, and stores it again when Redis lost
// it (it restarted empty), as Start does when a start says so. Runs whose start is
// their first commit (startInline) are started without that check.
func (e *Engine) checkStored(p *flows.Plan) {
	now := time.Now()
	e.versions.mu.Lock()
	el, ok := e.versions.items[versionKey(p.Flow, p.Version)]
	if !ok {
		e.versions.mu.Unlock()
		return
	}
	c := el.Value.(*versionEntry)
	if now.Sub(c.checked) < time.Second {
		e.versions.mu.Unlock()
		return
	}
	c.checked = now
	e.versions.mu.Unlock()
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if has, err := e.rdb.HasVersion(ctx, p.Flow, p.Version); err == nil && !has {
			e.forgetStored(p)
			if err := e.StoreVersion(ctx, p); err != nil {
				e.log.Warn("cannot store a version Redis lost", "flow", p.Flow, "version", p.Version, "error", err)
			}
		}
	}()
}

// forgetStored makes the next StoreVersion of plan write to Redis again (Redis lost
// it: it restarted empty).
func (e *Engine) forgetStored(p *flows.Plan) {
	e.versions.mu.Lock()
	defer e.versions.mu.Unlock()
	if el, ok := e.versions.items[versionKey(p.Flow, p.Version)]; ok {
		el.Value.(*versionEntry).stored = false
	}
}

// Plan returns the plan of a flow version, compiling the JSON stored in Redis the first
// time. Runs continue on the version they started with.
func (e *Engine) Plan(ctx context.Context, flow, version string) (*flows.Plan, error) {
	if c := e.versions.version(flow, version); c != nil {
		return c.plan, nil
	}
	doc, err := e.rdb.VersionDoc(ctx, flow, version)
	if err != nil {
		return nil, err
	}
	p, _, err := e.Compile(doc)
	if err != nil {
		return nil, flows.Permanent(fmt.Errorf("version %.12s of flow %q no longer compiles: %w", version, flow, err))
	}
	c := e.versions.put(&versionEntry{key: versionKey(flow, version), plan: p})
	e.versions.mu.Lock()
	c.stored = true
	e.versions.mu.Unlock()
	return p, nil
}

// cachedPlan returns a plan already compiled in this process, or nil.
func (e *Engine) cachedPlan(flow, version string) *flows.Plan {
	if c := e.versions.version(flow, version); c != nil {
		return c.plan
	}
	return nil
}

// CurrentPlan returns the plan of the flow's current version in Redis.
func (e *Engine) CurrentPlan(ctx context.Context, flow string) (*flows.Plan, error) {
	v, err := e.rdb.CurrentVersion(ctx, flow)
	if err != nil {
		return nil, err
	}
	return e.Plan(ctx, flow, v)
}
