package engine

import (
	"container/list"
	"encoding/json"
	"sync"
)

// stateCache keeps recently committed or loaded states, decoded, by flow, run and
// checkpoint, with their JSON when it is at hand: a run id is unique within its flow
// only (a caller may choose it: two workspaces' flows may both have a run "order-42"),
// and a checkpoint id is a time within its run's stream, so two runs' checkpoints may
// have the same one. Checkpoints are immutable, so an entry never goes stale; when the
// process that committed a step (or started the run) also runs the next one, the next
// step needs no read from Redis, and a step that changes nothing needs no encoding of
// the state it keeps. Cached states are shared: nothing may modify them.
//
// It is bounded by an estimate of the heap its decoded states take (heapSize), not by
// their JSON size: a decoded state costs about ten times its JSON.
type stateCache struct {
	mu    sync.Mutex
	max   int
	size  int
	ll    *list.List
	items map[stateKey]*list.Element
}

type cacheEntry struct {
	key   stateKey
	state map[string]any
	raw   []byte // state's JSON, or nil
	size  int
}

func newStateCache(maxBytes int) *stateCache {
	return &stateCache{max: maxBytes, ll: list.New(), items: map[stateKey]*list.Element{}}
}

// stateKey names a state in the cache (a struct: a lookup builds no string).
type stateKey struct{ flow, run, ckpt string }

// get returns a cached state and its JSON (nil when not kept).
func (c *stateCache) get(flow, run, ckpt string) (map[string]any, []byte, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.items[stateKey{flow, run, ckpt}]
	if !ok {
		return nil, nil, false
	}
	c.ll.MoveToFront(el)
	e := el.Value.(*cacheEntry)
	return e.state, e.raw, true
}

// put keeps a state.
func (c *stateCache) put(flow, run, ckpt string, state map[string]any) {
	c.putJSON(flow, run, ckpt, state, nil)
}

// putJSON keeps a state and, when not nil, its JSON (which must decode to state).
func (c *stateCache) putJSON(flow, run, ckpt string, state map[string]any, raw []byte) {
	key := stateKey{flow, run, ckpt}
	c.mu.Lock()
	_, ok := c.items[key]
	c.mu.Unlock()
	if ok {
		return
	}
	size := heapSize(state) + roundAlloc(len(raw)) + len(flow) + len(run) + len(ckpt) + 64
	if size > c.max/4 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.items[key]; ok {
		return
	}
	c.items[key] = c.ll.PushFront(&cacheEntry{key: key, state: state, raw: raw, size: size})
	c.size += size
	for c.size > c.max {
		last := c.ll.Back()
		e := last.Value.(*cacheEntry)
		c.ll.Remove(last)
		delete(c.items, e.key)
		c.size -= e.size
	}
}

// stats returns the number of cached states and their estimated heap bytes.
func (c *stateCache) stats() (entries, bytes int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.items), c.size
}

// heapSize estimates the heap a decoded JSON value takes, as Go lays it out: an
// interface holding a string or number points to a boxed header; maps cost a slot of
// key and value per entry plus their groups' control bytes and slack; slices a header
// and 16 bytes per element. Values shared between states count once per state, so the
// estimate errs on the high side.
func heapSize(v any) int {
	const iface, strHdr, sliceHdr, mapHdr, mapSlot = 16, 16, 24, 48, 40
	switch x := v.(type) {
	case map[string]any:
		n := mapHdr + 8*33 // the first group: 8 slots of key and value, and their control bytes
		if len(x) > 8 {
			n += (len(x) - 8) * mapSlot
		}
		for k, e := range x {
			n += roundAlloc(len(k)) + heapSize(e)
		}
		return n
	case []any:
		n := sliceHdr + cap(x)*iface
		for _, e := range x {
			n += heapSize(e)
		}
		return n
	case string:
		return strHdr + roundAlloc(len(x))
	case json.Number:
		return strHdr + roundAlloc(len(x))
	case float64, int64, int:
		return 8
	default: // bool, nil: no allocation
		return 0
	}
}

// roundAlloc rounds a small allocation up to Go's size classes (8, 16, 24, 32, 48, 64,
// ...), roughly.
func roundAlloc(n int) int {
	switch {
	case n == 0:
		return 0
	case n <= 16:
		return (n + 7) &^ 7
	case n <= 128:
		return (n + 15) &^ 15
	default:
		return (n + 63) &^ 63
	}
}
