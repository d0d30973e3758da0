package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/sluicehq/sluice/flows"
)

// The scripts of the memory component; each file's header documents its KEYS and ARGV.
var (
	memoryAppendScript    = blockScript("memory_append")
	memorySummarizeScript = blockScript("memory_summarize")
)

// MaxHistory is the most messages a session keeps after its summary: older ones are
// dropped when more are appended (a memory node that summarises keeps far fewer).
const MaxHistory = 10000

// MaxStoreScan is the most items of the long-term store one search reads: a search
// under a namespace with more items sees the first MaxStoreScan of them by path.
const MaxStoreScan = 2000

// Memory keeps what the memory components remember, in Redis: conversations by session
// (memory) and the long-term store's items by namespace and key (memory_store). A scope
// is "f:FLOW" (one flow's) or "s:NAME" (shared by the flows that name it; "s:WS.NAME"
// in workspace WS).
type Memory struct{ r *Redis }

// NewMemory returns the memory on r.
func NewMemory(r *Redis) *Memory { return &Memory{r: r} }

func checkScope(scope string) error {
	if !strings.HasPrefix(scope, "f:") && !strings.HasPrefix(scope, "s:") || strings.ContainsAny(scope, "{}") {
		return fmt.Errorf("memory: scope %q is not f:FLOW or s:NAME", scope)
	}
	return nil
}

// AppendHistory appends messages to a session's history and keeps it for ttl (0: for
// ever) from now.
func (m *Memory) AppendHistory(ctx context.Context, scope, session string, msgs []flows.HistoryMessage, ttl time.Duration) error {
	if err := checkScope(scope); err != nil {
		return err
	}
	if len(msgs) == 0 {
		return nil
	}
	k := SessionKeys(scope, session)
	args := []any{ttl.Milliseconds(), MaxHistory}
	now := time.Now().UnixMilli()
	for _, msg := range msgs {
		msg.Seq = 0
		if msg.At == 0 {
			msg.At = now
		}
		b, err := json.Marshal(msg)
		if err != nil {
			return err
		}
		args = append(args, b)
	}
	if err := memoryAppendScript.Run(ctx, m.r.Client, []string{k.Messages(), k.Meta()}, args...).Err(); err != nil {
		return fmt.Errorf("memory: append: %w", err)
	}
	return nil
}

// LoadHistory returns a session's summary and its messages (the newest last ones, or
// all with last 0), and keeps them for ttl (0: as they are) from now: a conversation
// people come back to stays.
func (m *Memory) LoadHistory(ctx context.Context, scope, session string, last int, ttl time.Duration) (*flows.History, error) {
	if err := checkScope(scope); err != nil {
		return nil, err
	}
	k := SessionKeys(scope, session)
	pipe := m.r.Client.Pipeline()
	start := int64(0)
	if last > 0 {
		start = -int64(last)
	}
	list := pipe.LRange(ctx, k.Messages(), start, -1)
	total := pipe.LLen(ctx, k.Messages())
	meta := pipe.HMGet(ctx, k.Meta(), "summary", "through")
	if ttl > 0 {
		pipe.PExpire(ctx, k.Messages(), ttl)
		pipe.PExpire(ctx, k.Meta(), ttl)
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("memory: load: %w", err)
	}
	h := &flows.History{Messages: make([]flows.HistoryMessage, 0, len(list.Val())), Total: total.Val()}
	if v := meta.Val(); len(v) == 2 {
		h.Summary, _ = v[0].(string)
		if s, ok := v[1].(string); ok {
			h.Through, _ = strconv.ParseInt(s, 10, 64)
		}
	}
	for _, e := range list.Val() {
		seq, body, ok := strings.Cut(e, "\t")
		if !ok {
			continue
		}
		var msg flows.HistoryMessage
		if json.Unmarshal([]byte(body), &msg) != nil {
			continue
		}
		msg.Seq, _ = strconv.ParseInt(seq, 10, 64)
		h.Messages = append(h.Messages, msg)
	}
	return h, nil
}

// Summarize replaces the session's messages up to through by summary. It reports false,
// changing nothing, when the stored summary already covers through (another run of the
// session summarised meanwhile).
func (m *Memory) Summarize(ctx context.Context, scope, session, summary string, through int64, ttl time.Duration) (bool, error) {
	if err := checkScope(scope); err != nil {
		return false, err
	}
	k := SessionKeys(scope, session)
	n, err := memorySummarizeScript.Run(ctx, m.r.Client, []string{k.Messages(), k.Meta()}, through, summary, ttl.Milliseconds()).Int()
	if err != nil {
		return false, fmt.Errorf("memory: summarize: %w", err)
	}
	return n == 1, nil
}

// ClearHistory forgets a session.
func (m *Memory) ClearHistory(ctx context.Context, scope, session string) error {
	if err := checkScope(scope); err != nil {
		return err
	}
	k := SessionKeys(scope, session)
	if err := m.r.Client.Del(ctx, k.Messages(), k.Meta()).Err(); err != nil {
		return fmt.Errorf("memory: clear: %w", err)
	}
	return nil
}

// itemPath is an item's place in its scope: each namespace label escaped and followed by
// "/", then "|" and the escaped key. A namespace prefix ["users", "42"] is then the
// string prefix "users/42/", which ZRANGEBYLEX finds, and no label can hold a separator.
func itemPath(ns []string, key string) string {
	return nsPath(ns) + "|" + url.PathEscape(key)
}

func nsPath(ns []string) string {
	var b strings.Builder
	for _, l := range ns {
		b.WriteString(url.PathEscape(l))
		b.WriteByte('/')
	}
	return b.String()
}

// storedItem is an item as Redis keeps it.
type storedItem struct {
	Namespace []string        `json:"ns"`
	Key       string          `json:"key"`
	Value     json.RawMessage `json:"value"`
	Created   int64           `json:"created"`
	Updated   int64           `json:"updated"`
}

func (s storedItem) item() (flows.StoreItem, error) {
	v, err := flows.DecodeJSON(s.Value)
	if err != nil {
		return flows.StoreItem{}, err
	}
	return flows.StoreItem{Namespace: s.Namespace, Key: s.Key, Value: v,
		CreatedAt: time.UnixMilli(s.Created).UTC(), UpdatedAt: time.UnixMilli(s.Updated).UTC()}, nil
}

// PutItem stores an item (replacing the one under the same namespace and key, whose
// creation time it keeps), for ttl (0: for ever).
func (m *Memory) PutItem(ctx context.Context, scope string, it flows.StoreItem, ttl time.Duration) error {
	if err := checkScope(scope); err != nil {
		return err
	}
	v, err := json.Marshal(flows.JSONValue(it.Value))
	if err != nil {
		return fmt.Errorf("memory: the value is not JSON: %v", err)
	}
	k := StoreScopeKeys(scope)
	path := itemPath(it.Namespace, it.Key)
	now := time.Now().UnixMilli()
	created := now
	if old, err := m.r.Client.Get(ctx, k.Item(path)).Bytes(); err == nil {
		var s storedItem
		if json.Unmarshal(old, &s) == nil && s.Created > 0 {
			created = s.Created
		}
	}
	b, _ := json.Marshal(storedItem{Namespace: it.Namespace, Key: it.Key, Value: v, Created: created, Updated: now})
	pipe := m.r.Client.TxPipeline()
	pipe.Set(ctx, k.Item(path), b, ttl)
	pipe.ZAdd(ctx, k.Index(), redis.Z{Member: path})
	if _, err := pipe.Exec(ctx); err != nil {
		return fmt.Errorf("memory: put: %w", err)
	}
	return nil
}

// GetItem returns an item, or nil when there is none. With refresh > 0 its time to
// live starts again (an item that is used stays).
func (m *Memory) GetItem(ctx context.Context, scope string, ns []string, key string, refresh time.Duration) (*flows.StoreItem, error) {
	if err := checkScope(scope); err != nil {
		return nil, err
	}
	k := StoreScopeKeys(scope)
	path := itemPath(ns, key)
	b, err := m.r.Client.Get(ctx, k.Item(path)).Bytes()
	if errors.Is(err, redis.Nil) {
		m.r.Client.ZRem(ctx, k.Index(), path)
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("memory: get: %w", err)
	}
	if refresh > 0 {
		m.r.Client.PExpire(ctx, k.Item(path), refresh)
	}
	var s storedItem
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("memory: item %s is not an item: %v", path, err)
	}
	it, err := s.item()
	if err != nil {
		return nil, err
	}
	return &it, nil
}

// ListItems returns the items whose namespace starts with prefix, at most max (and
// never more than MaxStoreScan), in the order of their paths. With refresh > 0 their
// times to live start again.
func (m *Memory) ListItems(ctx context.Context, scope string, prefix []string, max int, refresh time.Duration) ([]flows.StoreItem, error) {
	if err := checkScope(scope); err != nil {
		return nil, err
	}
	if max <= 0 || max > MaxStoreScan {
		max = MaxStoreScan
	}
	k := StoreScopeKeys(scope)
	p := nsPath(prefix)
	paths, err := m.r.Client.ZRangeByLex(ctx, k.Index(), &redis.ZRangeBy{Min: "[" + p, Max: "[" + p + "\xff", Count: int64(max)}).Result()
	if err != nil {
		return nil, fmt.Errorf("memory: search: %w", err)
	}
	if len(paths) == 0 {
		return nil, nil
	}
	keys := make([]string, len(paths))
	for i, path := range paths {
		keys[i] = k.Item(path)
	}
	vals, err := m.r.Client.MGet(ctx, keys...).Result()
	if err != nil {
		return nil, fmt.Errorf("memory: search: %w", err)
	}
	var out []flows.StoreItem
	var gone []any
	pipe := m.r.Client.Pipeline()
	for i, v := range vals {
		s, ok := v.(string)
		if !ok {
			gone = append(gone, paths[i])
			continue
		}
		var st storedItem
		if json.Unmarshal([]byte(s), &st) != nil {
			continue
		}
		it, err := st.item()
		if err != nil {
			continue
		}
		out = append(out, it)
		if refresh > 0 {
			pipe.PExpire(ctx, keys[i], refresh)
		}
	}
	if len(gone) > 0 {
		pipe.ZRem(ctx, k.Index(), gone...)
	}
	if pipe.Len() > 0 {
		_, _ = pipe.Exec(ctx) // housekeeping: the items read are the answer either way
	}
	return out, nil
}

// DeleteItem deletes an item and reports whether there was one.
func (m *Memory) DeleteItem(ctx context.Context, scope string, ns []string, key string) (bool, error) {
	if err := checkScope(scope); err != nil {
		return false, err
	}
	k := StoreScopeKeys(scope)
	path := itemPath(ns, key)
	pipe := m.r.Client.TxPipeline()
	del := pipe.Del(ctx, k.Item(path))
	pipe.ZRem(ctx, k.Index(), path)
	if _, err := pipe.Exec(ctx); err != nil {
		return false, fmt.Errorf("memory: delete: %w", err)
	}
	return del.Val() == 1, nil
}
