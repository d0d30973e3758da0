package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/sluicehq/sluice/flows"
)

// Result is an entry of a flow partition's results stream: a run that finished.
type Result struct {
	Flow       string
	Part       int
	ID         string // stream entry id
	Run        string
	Status     string
	Deliveries int // how often the dispatch group has delivered it (1 on first read)
}

// PartRef names one partition of a flow.
type PartRef struct {
	Flow string
	Part int
}

// Tag is the partition's hash tag: keys of one tag can go in one command on a cluster.
func (p PartRef) Tag() string { return tagOf(p.Flow, p.Part) }

func (p PartRef) keys() Keys { return PartKeys(p.Flow, p.Part) }

func resultFrom(pr PartRef, m redis.XMessage, deliveries int) Result {
	res := Result{Flow: pr.Flow, Part: pr.Part, ID: m.ID, Deliveries: deliveries}
	res.Run, _ = m.Values["run"].(string)
	res.Status, _ = m.Values["status"].(string)
	return res
}

// ResultsOptions configure a ResultsReader.
type ResultsOptions struct {
	// Consumer is the dispatch group's consumer the reads are for.
	Consumer string
	// Block is how long one read waits (default 1s). A reader whose partitions changed,
	// or that is no longer needed, ends when its read in progress returns.
	Block time.Duration
	// Count is the most entries one read takes (default 100).
	Count int
	// Room, when set, returns how many results the consumer can start now: a reader
	// waits for Poke while it is 0, and the readers share it (each read takes at most
	// its share, rounded up): results read and not yet started are at most what the
	// consumer had room for when the reads were sent, one per reader, and the batch it is
	// taking.
	Room func() int
	// Errors, when set, is told of a failed read and how long its reader then waits.
	Errors func(err error, backoff time.Duration)
}

// ResultsReader reads new entries of the results streams of a set of flow partitions for
// one consumer of the dispatch group, with blocking reads, and hands them over C. On one
// server one reader reads every stream in one XREADGROUP; on a cluster, whose XREADGROUP
// takes the streams of one slot only, one reader per slot of their hash tags does (the
// partitions of one number of every flow share a tag), each on its own connection of the
// pool for its block time, so a result is seen as soon as it is written. A read's entries are in the
// group's pending list from the moment it returns, so a reader hands over what its read
// returned even when it is no longer needed; only a reader whose context ended drops
// them, and they stay pending for a dispatcher's claim sweep.
type ResultsReader struct {
	r       *Redis
	opts    ResultsOptions
	ctx     context.Context
	cancel  context.CancelFunc
	c       chan []Result
	mu      sync.Mutex
	readers map[uint16]*resultsTail // by cluster slot; one, under 0, on one server
	wake    chan struct{}
}

// resultsTail is one reader: the partitions of one slot (on one server, all of them).
type resultsTail struct {
	parts []PartRef
	stop  chan struct{} // closed: end after the read in progress
}

// TailResults returns a reader of results streams for opts.Consumer; it reads nothing
// until Set gives it partitions. It stops when ctx ends or at Close.
func (r *Redis) TailResults(ctx context.Context, opts ResultsOptions) *ResultsReader {
	if opts.Block <= 0 {
		opts.Block = time.Second
	}
	if opts.Count <= 0 {
		opts.Count = 100
	}
	ctx, cancel := context.WithCancel(ctx)
	return &ResultsReader{r: r, opts: opts, ctx: ctx, cancel: cancel, c: make(chan []Result),
		readers: map[uint16]*resultsTail{}, wake: make(chan struct{})}
}

// C hands over the results read, in batches of one read each.
func (t *ResultsReader) C() <-chan []Result { return t.c }

// Set makes the reader read the results streams of parts (and no others). Slots whose
// partitions changed get a new reader; the one it replaces ends with its read in
// progress, handing over what that returns (the two read the same group, so no entry
// goes to both).
func (t *ResultsReader) Set(parts []PartRef) {
	groups := map[uint16][]PartRef{}
	for _, pr := range parts {
		var slot uint16
		if t.r.cluster {
			slot = slotOf(pr.Tag())
		}
		groups[slot] = append(groups[slot], pr)
	}
	for _, ps := range groups { // in one order, so an unchanged set keeps its reader
		slices.SortFunc(ps, func(a, b PartRef) int {
			if c := strings.Compare(a.Flow, b.Flow); c != 0 {
				return c
			}
			return a.Part - b.Part
		})
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.ctx.Err() != nil {
		return
	}
	for slot, old := range t.readers {
		if ps, ok := groups[slot]; !ok || !slices.Equal(ps, old.parts) {
			close(old.stop)
			delete(t.readers, slot)
		}
	}
	for slot, ps := range groups {
		if t.readers[slot] == nil {
			tail := &resultsTail{parts: ps, stop: make(chan struct{})}
			t.readers[slot] = tail
			go t.run(tail)
		}
	}
}

// Poke wakes the readers waiting for room (ResultsOptions.Room): the consumer calls it
// when it finished with a result.
func (t *ResultsReader) Poke() {
	t.mu.Lock()
	close(t.wake)
	t.wake = make(chan struct{})
	t.mu.Unlock()
}

// Close stops the readers. It does not wait for their reads in progress, which a
// blocking read does not end early: what those return stays pending for a
// dispatcher's claim sweep.
func (t *ResultsReader) Close() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.cancel()
	for slot, tail := range t.readers {
		close(tail.stop)
		delete(t.readers, slot)
	}
}

// share is the most entries the next read may take, 0 when the consumer has no room,
// and the channel the next Poke closes.
func (t *ResultsReader) share() (int, <-chan struct{}) {
	t.mu.Lock()
	wake, n := t.wake, max(len(t.readers), 1)
	t.mu.Unlock()
	if t.opts.Room == nil {
		return t.opts.Count, wake
	}
	room := t.opts.Room()
	if room <= 0 {
		return 0, wake
	}
	return min(t.opts.Count, (room+n-1)/n), wake
}

// run reads tail's partitions until it is stopped, handing over each read's entries.
func (t *ResultsReader) run(tail *resultsTail) {
	backoff := 50 * time.Millisecond
	for {
		select {
		case <-tail.stop:
			return
		case <-t.ctx.Done():
			return
		default:
		}
		count, wake := t.share()
		if count == 0 {
			select {
			case <-wake:
			case <-tail.stop:
				return
			case <-t.ctx.Done():
				return
			}
			continue
		}
		res, err := t.r.readResults(t.ctx, tail.parts, t.opts.Consumer, count, t.opts.Block)
		if err != nil {
			if t.ctx.Err() != nil {
				return
			}
			if t.opts.Errors != nil {
				t.opts.Errors(err, backoff)
			}
			select {
			case <-time.After(backoff):
			case <-tail.stop:
				return
			case <-t.ctx.Done():
				return
			}
			backoff = min(2*backoff, 5*time.Second)
			continue
		}
		backoff = 50 * time.Millisecond
		if len(res) == 0 {
			continue
		}
		select {
		case t.c <- res:
		case <-t.ctx.Done():
			return
		}
	}
}

// readResults reads new entries of the results streams of parts (of one slot on a
// cluster) for consumer of the dispatch group, in one XREADGROUP that waits at most block.
// A missing group is created and the read returns nothing.
func (r *Redis) readResults(ctx context.Context, parts []PartRef, consumer string, count int, block time.Duration) ([]Result, error) {
	if len(parts) == 0 {
		return nil, nil
	}
	streams := make([]string, 0, 2*len(parts))
	byKey := make(map[string]PartRef, len(parts))
	for _, pr := range parts {
		key := pr.keys().Results()
		streams = append(streams, key)
		byKey[key] = pr
	}
	for range parts {
		streams = append(streams, ">")
	}
	if block <= 0 {
		block = -1 // go-redis: no BLOCK argument
	}
	res, err := r.Client.XReadGroup(ctx, &redis.XReadGroupArgs{Group: DispatchGroup, Consumer: consumer, Streams: streams, Count: int64(count), Block: block}).Result()
	if errors.Is(err, redis.Nil) {
		return nil, nil
	}
	if err != nil {
		if isNoGroup(err) {
			for _, pr := range parts {
				if err := r.EnsureGroups(ctx, pr.Flow, nil); err != nil {
					return nil, err
				}
			}
			return nil, nil
		}
		return nil, err
	}
	var out []Result
	for _, s := range res {
		for _, m := range s.Messages {
			out = append(out, resultFrom(byKey[s.Stream], m, 1))
		}
	}
	return out, nil
}

// ClaimResults hands results entries of flow that have been pending longer than minIdle
// (their dispatcher crashed) to consumer, at most limit of them, with their delivery
// counts.
func (r *Redis) ClaimResults(ctx context.Context, pr PartRef, consumer string, minIdle time.Duration, limit int) ([]Result, error) {
	key := pr.keys().Results()
	res, err := r.Client.Do(ctx, "XAUTOCLAIM", key, DispatchGroup, consumer, minIdle.Milliseconds(), "0-0", "COUNT", limit).Slice()
	if err != nil {
		if isNoGroup(err) || errors.Is(err, redis.Nil) {
			return nil, nil
		}
		return nil, err
	}
	if len(res) < 2 {
		return nil, nil
	}
	msgs := parseXMessages(res[1])
	if len(msgs) == 0 {
		return nil, nil
	}
	counts := map[string]int{}
	if pend, err := r.Client.XPendingExt(ctx, &redis.XPendingExtArgs{Stream: key, Group: DispatchGroup, Start: msgs[0].ID, End: msgs[len(msgs)-1].ID, Count: int64(len(msgs)) + 100, Consumer: consumer}).Result(); err == nil {
		for _, p := range pend {
			counts[p.ID] = int(p.RetryCount)
		}
	}
	out := make([]Result, 0, len(msgs))
	for _, m := range msgs {
		if m.Values == nil {
			continue
		}
		out = append(out, resultFrom(pr, m, max(1, counts[m.ID])))
	}
	return out, nil
}

// TouchResult resets the idle time of a result entry consumer is still delivering, so
// another dispatcher does not claim it. It reports false when the entry is no longer
// consumer's.
func (r *Redis) TouchResult(ctx context.Context, res Result, consumer string) (bool, error) {
	n, err := heartbeatScript.Run(ctx, r.Client, []string{PartKeys(res.Flow, res.Part).Results()}, DispatchGroup, consumer, res.ID).Int()
	return n > 0, err
}

// AckResult acknowledges a delivered (or dead-lettered) result entry and trims the
// results stream below what the dispatch group has acknowledged (see AckResults).
func (r *Redis) AckResult(ctx context.Context, res Result) error {
	return r.AckResults(ctx, []Result{res})
}

// AckResults acknowledges result entries and trims each results stream below its
// group's oldest pending entry, or, when none is pending, below the entry after the
// group's last delivered one: every entry before that was delivered and acknowledged.
// (The newest entry acknowledged in this call is no bound: dispatchers acknowledge
// concurrently, so the last to acknowledge may hold an older entry than another's.) The
// group is read before its pending list: an entry delivered in between is after the
// bound. The results stream so only ever loses entries the dispatch group has
// acknowledged. One XTRIM per stream and call costs Redis less than an XDEL per entry,
// each of which walks its listpack node from the start; the trim is exact, so a stream
// whose results are all delivered is empty. Two round trips.
func (r *Redis) AckResults(ctx context.Context, res []Result) error {
	type acks struct {
		key    string
		ids    []string
		newest string
	}
	by := map[PartRef]*acks{}
	var order []*acks
	for _, x := range res {
		pr := PartRef{Flow: x.Flow, Part: x.Part}
		a := by[pr]
		if a == nil {
			a = &acks{key: pr.keys().Results()}
			by[pr] = a
			order = append(order, a)
		}
		a.ids = append(a.ids, x.ID)
		if a.newest == "" || CompareStreamIDs(x.ID, a.newest) > 0 {
			a.newest = x.ID
		}
	}
	if len(order) == 0 {
		return nil
	}
	pipe := r.Client.Pipeline()
	oldest := make([]*redis.XPendingExtCmd, len(order))
	groups := make([]*redis.XInfoGroupsCmd, len(order))
	for i, a := range order {
		pipe.XAck(ctx, a.key, DispatchGroup, a.ids...)
		groups[i] = pipe.XInfoGroups(ctx, a.key)
		oldest[i] = pipe.XPendingExt(ctx, &redis.XPendingExtArgs{Stream: a.key, Group: DispatchGroup, Start: "-", End: "+", Count: 1})
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return err
	}
	pipe = r.Client.Pipeline()
	for i, a := range order {
		min := nextStreamID(a.newest)
		for _, g := range groups[i].Val() {
			if g.Name == DispatchGroup && CompareStreamIDs(nextStreamID(g.LastDeliveredID), min) > 0 {
				min = nextStreamID(g.LastDeliveredID)
			}
		}
		if p := oldest[i].Val(); len(p) > 0 {
			min = p[0].ID
		}
		pipe.XTrimMinID(ctx, a.key, min)
	}
	_, err := pipe.Exec(ctx)
	return err
}

// ResultsLength is the number of entries in a flow's results stream.
func (r *Redis) ResultsLength(ctx context.Context, flow string) (int64, error) {
	parts, err := r.Parts(ctx, flow)
	if err != nil {
		return 0, err
	}
	var n int64
	for _, pr := range parts {
		l, err := r.Client.XLen(ctx, pr.keys().Results()).Result()
		if err != nil {
			return 0, err
		}
		n += l
	}
	return n, nil
}

// FailedDelivery is a result webhook that was given up on.
type FailedDelivery struct {
	ID       string    `json:"id"`
	Flow     string    `json:"flow"`
	Run      string    `json:"run"`
	Status   string    `json:"status"`
	Target   string    `json:"target"` // scheme and host of the webhook, never its path or query
	Error    string    `json:"error"`
	Attempts int       `json:"attempts"`
	Time     time.Time `json:"time"`
}

// DeadDelivery records a result webhook given up on in the flow's delivery dead letters.
// The result entry is acknowledged by the dispatcher once every webhook of the run was
// delivered or recorded so (the two are in different slots on a cluster: a crash between
// them leaves the entry pending, and its failures are recorded again — at least once).
func (r *Redis) DeadDelivery(ctx context.Context, res Result, target, errMsg string, attempts int) (string, error) {
	id, err := r.Client.XAdd(ctx, &redis.XAddArgs{Stream: FlowKeys(res.Flow).DeliveryDead(), MaxLen: EventsMaxLen, Approx: true,
		Values: []any{"run", res.Run, "status", res.Status, "target", target, "error", errMsg, "attempts", strconv.Itoa(attempts),
			"ts", strconv.FormatInt(nowMS(), 10), "part", strconv.Itoa(res.Part)}}).Result()
	return id, err
}

// FailedDeliveries lists a flow's undeliverable result webhooks, oldest first.
func (r *Redis) FailedDeliveries(ctx context.Context, flow string, count int64) ([]FailedDelivery, error) {
	msgs, err := r.Client.XRangeN(ctx, FlowKeys(flow).DeliveryDead(), "-", "+", count).Result()
	if err != nil {
		return nil, err
	}
	out := make([]FailedDelivery, len(msgs))
	for i, m := range msgs {
		s := func(k string) string { v, _ := m.Values[k].(string); return v }
		n, _ := strconv.Atoi(s("attempts"))
		out[i] = FailedDelivery{ID: m.ID, Flow: flow, Run: s("run"), Status: s("status"), Target: s("target"), Error: s("error"), Attempts: n, Time: msTime(s("ts"))}
	}
	return out, nil
}

// RetryDelivery puts a failed delivery back on the results stream, so the dispatcher
// tries it again from its first attempt.
func (r *Redis) RetryDelivery(ctx context.Context, flow, id string) (string, error) {
	k := FlowKeys(flow)
	msgs, err := r.Client.XRange(ctx, k.DeliveryDead(), id, id).Result()
	if err != nil {
		if strings.Contains(err.Error(), "Invalid stream ID") {
			return "", &flows.Error{Code: flows.NotFound, Flow: flow, Message: fmt.Sprintf("no failed delivery %q", id)}
		}
		return "", err
	}
	if len(msgs) == 0 {
		return "", &flows.Error{Code: flows.NotFound, Flow: flow, Message: fmt.Sprintf("no failed delivery %q", id)}
	}
	run, _ := msgs[0].Values["run"].(string)
	status, _ := msgs[0].Values["status"].(string)
	ps, _ := msgs[0].Values["part"].(string)
	part, _ := strconv.Atoi(ps)
	// The results stream of the run's partition, then the failed delivery goes (two
	// slots on a cluster: a crash between them leaves both, and a retry again is harmless).
	add, err := r.Client.XAdd(ctx, &redis.XAddArgs{Stream: PartKeys(flow, part).Results(), Values: []any{"run", run, "status", status, "retried", id}}).Result()
	if err != nil {
		return "", err
	}
	if err := r.Client.XDel(ctx, k.DeliveryDead(), id).Err(); err != nil {
		return "", err
	}
	return add, nil
}

// DiscardDelivery deletes a failed delivery.
func (r *Redis) DiscardDelivery(ctx context.Context, flow, id string) error {
	n, err := r.Client.XDel(ctx, FlowKeys(flow).DeliveryDead(), id).Result()
	if err != nil {
		if strings.Contains(err.Error(), "Invalid stream ID") {
			return &flows.Error{Code: flows.NotFound, Flow: flow, Message: fmt.Sprintf("no failed delivery %q", id)}
		}
		return err
	}
	if n == 0 {
		return &flows.Error{Code: flows.NotFound, Flow: flow, Message: fmt.Sprintf("no failed delivery %q", id)}
	}
	return nil
}
