package store

import (
	"container/heap"
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/sluicehq/sluice/flows"
	"github.com/viterin/vek/vek32"
)

// The scripts of the vector collections; each file's header documents its KEYS and ARGV.
var (
	vectorUpsertScript = blockScript("vector_upsert")
	vectorDeleteScript = blockScript("vector_delete")
)

// Vectors are the vector store's collections. Redis is their store of record — every
// chunk's text, metadata and embedding, and a version that every change moves — so any
// worker answers any query. The search itself runs in the worker, exactly (every chunk is
// scored: cosine similarity), over an index held in memory that follows its collection:
// before each search the worker reads the collection's version (one round trip) and, if
// it moved, reads only the chunks changed since (Changes, scored by version), or the
// whole collection when it is new to the worker, was recreated (epoch) or pruned past it
// (floor). Indexes no search used for a while are dropped when their memory is needed
// (MaxIndexBytes). See docs/blocks.md for why not Redis's own vector search.
type Vectors struct {
	r *Redis
	// MaxIndexBytes bounds the memory of the indexes this process keeps (default 2 GiB):
	// the least recently searched are dropped first. One collection larger than it is
	// still loaded, alone.
	MaxIndexBytes int64

	mu      sync.Mutex
	indexes map[string]*vectorIndex
}

// NewVectors returns the collections on r.
func NewVectors(r *Redis) *Vectors { return &Vectors{r: r, indexes: map[string]*vectorIndex{}} }

// upsertBatch is how many chunks one script call writes.
const upsertBatch = 500

// ErrVectorMismatch is the error of chunks or a query whose embeddings do not fit the
// collection (other dimensions, another model).
var ErrVectorMismatch error = &flows.Error{Code: flows.Conflict, Message: "the embeddings do not fit the collection"}

func encodeVector(v []float32) string {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return string(b)
}

func decodeVector(s string, into []float32) bool {
	if len(s) != 4*len(into) {
		return false
	}
	for i := range into {
		into[i] = math.Float32frombits(binary.LittleEndian.Uint32([]byte(s[4*i : 4*i+4])))
	}
	return true
}

// storedChunk is a chunk's text and metadata as Docs holds them.
type storedChunk struct {
	Text     string         `json:"text"`
	Metadata map[string]any `json:"metadata,omitempty"`
}

// Upsert adds or replaces chunks (by id), all embedded by model with vectors of one
// length, and returns the collection's new version.
func (v *Vectors) Upsert(ctx context.Context, scope, collection, model string, docs []flows.VectorDoc) (int64, error) {
	if err := checkScope(scope); err != nil {
		return 0, err
	}
	if len(docs) == 0 {
		return 0, nil
	}
	dims := len(docs[0].Vector)
	k := CollectionKeys(scope, collection)
	var b [8]byte
	_, _ = rand.Read(b[:])
	epoch := hex.EncodeToString(b[:])
	var version int64
	for start := 0; start < len(docs); start += upsertBatch {
		args := []any{dims, model, epoch}
		for _, d := range docs[start:min(start+upsertBatch, len(docs))] {
			if len(d.Vector) != dims || dims == 0 {
				return 0, fmt.Errorf("%w: chunk %s has %d dimensions, the others %d", ErrVectorMismatch, d.ID, len(d.Vector), dims)
			}
			body, err := json.Marshal(storedChunk{Text: d.Text, Metadata: d.Metadata})
			if err != nil {
				return 0, fmt.Errorf("vectors: chunk %s: %v", d.ID, err)
			}
			args = append(args, d.ID, body, encodeVector(d.Vector))
		}
		n, err := vectorUpsertScript.Run(ctx, v.r.Client, []string{k.Docs(), k.Vectors(), k.Changes(), k.Meta()}, args...).Int64()
		if err != nil {
			if msg := err.Error(); strings.HasPrefix(msg, "DIMS ") || strings.HasPrefix(msg, "MODEL ") {
				_, why, _ := strings.Cut(msg, " ")
				return 0, fmt.Errorf("%w: %s", ErrVectorMismatch, why)
			}
			return 0, fmt.Errorf("vectors: upsert: %w", err)
		}
		version = n
	}
	return version, nil
}

// Delete deletes chunks by id and reports how many there were.
func (v *Vectors) Delete(ctx context.Context, scope, collection string, ids []string) (int, error) {
	if err := checkScope(scope); err != nil {
		return 0, err
	}
	if len(ids) == 0 {
		return 0, nil
	}
	k := CollectionKeys(scope, collection)
	args := make([]any, len(ids))
	for i, id := range ids {
		args[i] = id
	}
	res, err := vectorDeleteScript.Run(ctx, v.r.Client, []string{k.Docs(), k.Vectors(), k.Changes(), k.Meta()}, args...).Int64Slice()
	if err != nil {
		return 0, fmt.Errorf("vectors: delete: %w", err)
	}
	return int(res[1]), nil
}

// Drop deletes the collection.
func (v *Vectors) Drop(ctx context.Context, scope, collection string) error {
	if err := checkScope(scope); err != nil {
		return err
	}
	k := CollectionKeys(scope, collection)
	if err := v.r.Client.Del(ctx, k.Docs(), k.Vectors(), k.Changes(), k.Meta()).Err(); err != nil {
		return fmt.Errorf("vectors: drop: %w", err)
	}
	return nil
}

// Search returns the q.K chunks most similar to q.Vector (cosine similarity) that match
// its filter and reach its minimum score, best first.
func (v *Vectors) Search(ctx context.Context, scope, collection string, q flows.VectorQuery) ([]flows.VectorHit, error) {
	idx, err := v.synced(ctx, scope, collection)
	if err != nil {
		return nil, err
	}
	return idx.search(ctx, q)
}

// Select returns the ids of the chunks whose metadata matches filter.
func (v *Vectors) Select(ctx context.Context, scope, collection string, filter map[string]any) ([]string, error) {
	idx, err := v.synced(ctx, scope, collection)
	if err != nil {
		return nil, err
	}
	idx.mu.RLock()
	defer idx.mu.RUnlock()
	var out []string
	for i, d := range idx.docs {
		if flows.MatchFilter(d.Metadata, filter) {
			out = append(out, idx.ids[i])
		}
	}
	return out, nil
}

// VectorStats describes a collection as this process's index holds it.
type VectorStats struct {
	Chunks     int   `json:"chunks"`
	Dimensions int   `json:"dimensions"`
	Version    int64 `json:"version"`
	// IndexBytes is the memory of the index in this process.
	IndexBytes int64 `json:"index_bytes"`
}

// Stats syncs the collection's index and describes it.
func (v *Vectors) Stats(ctx context.Context, scope, collection string) (VectorStats, error) {
	idx, err := v.synced(ctx, scope, collection)
	if err != nil {
		return VectorStats{}, err
	}
	idx.mu.RLock()
	defer idx.mu.RUnlock()
	return VectorStats{Chunks: len(idx.ids), Dimensions: idx.dims, Version: idx.version, IndexBytes: idx.bytes()}, nil
}

// synced returns the collection's index, caught up with Redis.
func (v *Vectors) synced(ctx context.Context, scope, collection string) (*vectorIndex, error) {
	if err := checkScope(scope); err != nil {
		return nil, err
	}
	k := CollectionKeys(scope, collection)
	v.mu.Lock()
	idx, ok := v.indexes[k.prefix]
	if !ok {
		idx = &vectorIndex{keys: k, pos: map[string]int{}}
		v.indexes[k.prefix] = idx
	}
	idx.used = time.Now()
	v.mu.Unlock()
	if err := idx.sync(ctx, v.r.Client); err != nil {
		return nil, err
	}
	v.evict(idx)
	return idx, nil
}

func (v *Vectors) maxBytes() int64 {
	if v.MaxIndexBytes > 0 {
		return v.MaxIndexBytes
	}
	return 2 << 30
}

// evict drops the least recently searched indexes but keep until the rest fit.
func (v *Vectors) evict(keep *vectorIndex) {
	v.mu.Lock()
	defer v.mu.Unlock()
	for {
		var total int64
		var oldest *vectorIndex
		var oldestKey string
		for key, idx := range v.indexes {
			idx.mu.RLock()
			total += idx.bytes()
			idx.mu.RUnlock()
			if idx != keep && (oldest == nil || idx.used.Before(oldest.used)) {
				oldest, oldestKey = idx, key
			}
		}
		if total <= v.maxBytes() || oldest == nil {
			return
		}
		delete(v.indexes, oldestKey)
	}
}

// vectorIndex is one collection in a worker's memory: embeddings normalised to length 1
// in one flat slice (dot products are then cosine similarities), in the order of ids.
type vectorIndex struct {
	keys VectorKeys
	used time.Time

	syncMu  sync.Mutex // one catch-up at a time
	mu      sync.RWMutex
	epoch   string
	version int64
	dims    int
	model   string
	ids     []string
	pos     map[string]int
	vecs    []float32
	docs    []storedChunk
}

func (x *vectorIndex) bytes() int64 {
	n := int64(4*len(x.vecs)) + int64(len(x.ids))*96
	for i := range x.docs {
		n += int64(len(x.docs[i].Text)) + int64(len(x.ids[i]))
	}
	return n
}

// collectionMeta is what the meta hash says.
type collectionMeta struct {
	exists         bool
	epoch, model   string
	version, floor int64
	dims           int
}

func readMeta(ctx context.Context, c redis.UniversalClient, k VectorKeys) (collectionMeta, error) {
	vals, err := c.HMGet(ctx, k.Meta(), "epoch", "version", "floor", "dims", "model").Result()
	if err != nil {
		return collectionMeta{}, fmt.Errorf("vectors: %w", err)
	}
	s := func(i int) string { x, _ := vals[i].(string); return x }
	m := collectionMeta{epoch: s(0), model: s(4)}
	m.exists = m.epoch != ""
	m.version, _ = strconv.ParseInt(s(1), 10, 64)
	m.floor, _ = strconv.ParseInt(s(2), 10, 64)
	m.dims, _ = strconv.Atoi(s(3))
	return m, nil
}

// sync catches the index up with the collection in Redis.
func (x *vectorIndex) sync(ctx context.Context, c redis.UniversalClient) error {
	x.syncMu.Lock()
	defer x.syncMu.Unlock()
	m, err := readMeta(ctx, c, x.keys)
	if err != nil {
		return err
	}
	x.mu.RLock()
	epoch, version := x.epoch, x.version
	x.mu.RUnlock()
	switch {
	case !m.exists:
		x.reset(collectionMeta{})
		return nil
	case m.epoch == epoch && m.version == version:
		return nil
	case m.epoch != epoch || version < m.floor:
		x.reset(m)
		return x.catchUp(ctx, c, 0, m.version, true)
	}
	return x.catchUp(ctx, c, version, m.version, false)
}

// reset empties the index for the collection m describes.
func (x *vectorIndex) reset(m collectionMeta) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.epoch, x.version, x.dims, x.model = m.epoch, 0, m.dims, m.model
	x.ids, x.vecs, x.docs, x.pos = nil, nil, nil, map[string]int{}
}

// syncPage is how many chunks one round trip reads.
const syncPage = 1000

// catchUp applies the chunks changed after version from up to to (all of them, scanning
// Docs, when full), then marks the index at to.
func (x *vectorIndex) catchUp(ctx context.Context, c redis.UniversalClient, from, to int64, full bool) error {
	// apply reads the chunks ids name (their docs too, unless given) and puts them in
	// the index, or removes those that are gone.
	apply := func(ids []string, given []string) error {
		if len(ids) == 0 {
			return nil
		}
		pipe := c.Pipeline()
		var docs *redis.SliceCmd
		if given == nil {
			docs = pipe.HMGet(ctx, x.keys.Docs(), ids...)
		}
		vecs := pipe.HMGet(ctx, x.keys.Vectors(), ids...)
		if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
			return fmt.Errorf("vectors: %w", err)
		}
		x.mu.Lock()
		defer x.mu.Unlock()
		vec := make([]float32, x.dims) // put copies it
		for i, id := range ids {
			var d string
			ok1 := true
			if given != nil {
				d = given[i]
			} else {
				d, ok1 = docs.Val()[i].(string)
			}
			raw, ok2 := vecs.Val()[i].(string)
			if !ok1 || !ok2 {
				x.remove(id)
				continue
			}
			ch, ok := decodeChunk(d)
			if !ok {
				continue
			}
			if !decodeVector(raw, vec) {
				continue
			}
			normalize(vec)
			x.put(id, ch, vec)
		}
		return nil
	}
	if full {
		// Room for the whole collection at once: growing a slice of hundreds of MB by
		// doubling copies it over and over.
		if n, err := c.HLen(ctx, x.keys.Docs()).Result(); err == nil && n > 0 {
			x.mu.Lock()
			x.vecs = make([]float32, 0, int(n)*x.dims)
			x.ids, x.docs = make([]string, 0, n), make([]storedChunk, 0, n)
			x.pos = make(map[string]int, n)
			x.mu.Unlock()
		}
		var cursor uint64
		for {
			keys, next, err := c.HScan(ctx, x.keys.Docs(), cursor, "", syncPage).Result()
			if err != nil {
				return fmt.Errorf("vectors: %w", err)
			}
			ids := make([]string, 0, len(keys)/2)
			docs := make([]string, 0, len(keys)/2)
			for i := 0; i+1 < len(keys); i += 2 {
				ids, docs = append(ids, keys[i]), append(docs, keys[i+1])
			}
			if err := apply(ids, docs); err != nil {
				return err
			}
			if cursor = next; cursor == 0 {
				break
			}
			if err := ctx.Err(); err != nil {
				return err
			}
		}
	} else {
		offset := int64(0)
		for {
			ids, err := c.ZRangeByScore(ctx, x.keys.Changes(), &redis.ZRangeBy{Min: "(" + strconv.FormatInt(from, 10),
				Max: strconv.FormatInt(to, 10), Offset: offset, Count: syncPage}).Result()
			if err != nil {
				return fmt.Errorf("vectors: %w", err)
			}
			if err := apply(ids, nil); err != nil {
				return err
			}
			if len(ids) < syncPage {
				break
			}
			offset += int64(len(ids))
		}
	}
	x.mu.Lock()
	x.version = to
	x.mu.Unlock()
	return nil
}

// decodeChunk reads a chunk's JSON, its metadata's numbers as the state has them
// (json.Number), for the filters.
func decodeChunk(s string) (storedChunk, bool) {
	v, err := flows.DecodeJSON([]byte(s))
	o, ok := v.(map[string]any)
	if err != nil || !ok {
		return storedChunk{}, false
	}
	ch := storedChunk{}
	ch.Text, _ = o["text"].(string)
	ch.Metadata, _ = o["metadata"].(map[string]any)
	return ch, true
}

// put adds or replaces a chunk; the caller holds mu.
func (x *vectorIndex) put(id string, ch storedChunk, vec []float32) {
	if i, ok := x.pos[id]; ok {
		copy(x.vecs[i*x.dims:], vec)
		x.docs[i] = ch
		return
	}
	x.pos[id] = len(x.ids)
	x.ids = append(x.ids, id)
	x.vecs = append(x.vecs, vec...)
	x.docs = append(x.docs, ch)
}

// remove deletes a chunk by moving the last one into its place; the caller holds mu.
func (x *vectorIndex) remove(id string) {
	i, ok := x.pos[id]
	if !ok {
		return
	}
	last := len(x.ids) - 1
	if i != last {
		x.ids[i], x.docs[i] = x.ids[last], x.docs[last]
		copy(x.vecs[i*x.dims:(i+1)*x.dims], x.vecs[last*x.dims:])
		x.pos[x.ids[i]] = i
	}
	x.ids, x.docs, x.vecs = x.ids[:last], x.docs[:last], x.vecs[:last*x.dims]
	delete(x.pos, id)
}

func normalize(v []float32) {
	var n float64
	for _, x := range v {
		n += float64(x) * float64(x)
	}
	if n == 0 {
		return
	}
	inv := float32(1 / math.Sqrt(n))
	for i := range v {
		v[i] *= inv
	}
}

// dot is the dot product of two vectors of equal length: github.com/viterin/vek's, in
// AVX2 and FMA assembly where the CPU has them (as coder/hnsw uses it), a plain loop
// elsewhere. For 1,536 dimensions it took 92 ns here against 880 ns for a Go loop
// unrolled by eight: the search's whole cost.
func dot(a, b []float32) float32 { return vek32.Dot(a, b) }

// hit is a candidate of a search: a chunk's place and score.
type hit struct {
	i     int
	score float32
}

// topK keeps the k best hits: a min-heap whose root is the worst kept.
type topK []hit

func (h topK) Len() int           { return len(h) }
func (h topK) Less(i, j int) bool { return h[i].score < h[j].score }
func (h topK) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *topK) Push(x any)        { *h = append(*h, x.(hit)) }
func (h *topK) Pop() any          { old := *h; x := old[len(old)-1]; *h = old[:len(old)-1]; return x }

func (h *topK) offer(k int, c hit) {
	if h.Len() < k {
		heap.Push(h, c)
	} else if c.score > (*h)[0].score {
		(*h)[0] = c
		heap.Fix(h, 0)
	}
}

// parallelFrom is the size (chunks × dimensions) from which a search is split over the
// CPUs: below it, starting goroutines costs more than it saves.
const parallelFrom = 1 << 20

// search scores every chunk that matches the filter.
func (x *vectorIndex) search(ctx context.Context, q flows.VectorQuery) ([]flows.VectorHit, error) {
	x.mu.RLock()
	defer x.mu.RUnlock()
	if len(x.ids) == 0 {
		return []flows.VectorHit{}, nil
	}
	if q.Model != "" && x.model != "" && q.Model != x.model {
		return nil, fmt.Errorf("%w: the collection holds embeddings of model %s, the query's are of %s", ErrVectorMismatch, x.model, q.Model)
	}
	if len(q.Vector) != x.dims {
		return nil, fmt.Errorf("%w: the query has %d dimensions, the collection %d", ErrVectorMismatch, len(q.Vector), x.dims)
	}
	k := q.K
	if k <= 0 {
		k = 4
	}
	qv := append([]float32(nil), q.Vector...)
	normalize(qv)
	minScore := float32(math.Inf(-1))
	if q.HasMinScore {
		minScore = float32(q.MinScore)
	}
	n := len(x.ids)
	parts := 1
	if n*x.dims >= parallelFrom {
		parts = min(runtime.GOMAXPROCS(0), n/1000+1)
	}
	heaps := make([]topK, parts)
	var wg sync.WaitGroup
	for p := 0; p < parts; p++ {
		lo, hi := p*n/parts, (p+1)*n/parts
		wg.Add(1)
		go func(h *topK) {
			defer wg.Done()
			for i := lo; i < hi; i++ {
				if len(q.Filter) > 0 && !flows.MatchFilter(x.docs[i].Metadata, q.Filter) {
					continue
				}
				s := dot(x.vecs[i*x.dims:(i+1)*x.dims], qv)
				if s >= minScore {
					h.offer(k, hit{i, s})
				}
			}
		}(&heaps[p])
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var all topK
	for _, h := range heaps {
		for _, c := range h {
			all.offer(k, c)
		}
	}
	out := make([]flows.VectorHit, len(all))
	for j := len(all) - 1; j >= 0; j-- {
		c := heap.Pop(&all).(hit)
		d := x.docs[c.i]
		out[j] = flows.VectorHit{ID: x.ids[c.i], Text: d.Text, Metadata: d.Metadata, Score: math.Round(float64(c.score)*1e6) / 1e6}
	}
	return out, nil
}
