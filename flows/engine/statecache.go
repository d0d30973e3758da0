package engine

import (
	"container/list"
	"sync"
)

// stateCache keeps recently committed or loaded states, decoded, by run and checkpoint.
// Checkpoints are immutable, so an entry never goes stale; when the process that
// committed a step also runs the next one, the next step needs no read from Redis.
// Cached states are shared: nothing may modify them.
type stateCache struct {
	mu    sync.Mutex
	max   int
	size  int
	ll    *list.List
	items map[string]*list.Element
}

type cacheEntry struct {
	key   string
	state map[string]any
	size  int
}

func newStateCache(maxBytes int) *stateCache {
	return &stateCache{max: maxBytes, ll: list.New(), items: map[string]*list.Element{}}
}

func (c *stateCache) get(run, ckpt string) (map[string]any, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.items[run+"/"+ckpt]
	if !ok {
		return nil, false
	}
	c.ll.MoveToFront(el)
	return el.Value.(*cacheEntry).state, true
}

func (c *stateCache) put(run, ckpt string, state map[string]any, size int) {
	if size > c.max/4 {
		return
	}
	key := run + "/" + ckpt
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.items[key]; ok {
		return
	}
	c.items[key] = c.ll.PushFront(&cacheEntry{key: key, state: state, size: size})
	c.size += size
	for c.size > c.max {
		last := c.ll.Back()
		e := last.Value.(*cacheEntry)
		c.ll.Remove(last)
		delete(c.items, e.key)
		c.size -= e.size
	}
}
