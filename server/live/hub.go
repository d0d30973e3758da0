// Package live is the hub behind the live views (/ws and the SSE streams): for each flow
// someone watches, one reader follows the flow's events stream in Redis (XREAD BLOCK)
// and fans each event out to the subscribers; while anyone watches, the flow's queue
// figures are sent every second. Because it reads Redis, steps run by headless workers
// on other hosts show up like local ones. A subscriber that does not keep up is dropped
// rather than slowing everyone down. It never writes to Redis.
package live

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/sluicehq/sluice/flows"
	"github.com/sluicehq/sluice/store"
)

// Source is where the hub reads: the store.
type Source interface {
	LastEventID(ctx context.Context, flow string) (string, error)
	EventsAfter(ctx context.Context, flow, id string, count int64) ([]store.Event, error)
	ReadEvents(ctx context.Context, flow, id string, count int64, block time.Duration) ([]store.Event, error)
	Queues(ctx context.Context, flow string) (*store.FlowQueues, error)
}

var _ Source = (*store.Redis)(nil)

// Message is what a subscriber receives. Data is the JSON sent to the client: one of
//
//	{"type": "event", "event": {"id", "flow", "type", "run", "node", "data", "checkpoint", "step"}}
//	{"type": "queues", "flow": "...", "queues": {...}}
//	{"type": "subscribed", "flow": "...", "run": "...", "last_event_id": "..."}
//	{"type": "error", "error": {"code": "...", "message": "..."}}
type Message struct {
	Kind string // for SSE's "event:" field: the event's type, "queues", "subscribed", "error"
	ID   string // the event id (resume after it), "" for others
	Data []byte
	run  string
}

// Envelope is the JSON shape of every message.
type Envelope struct {
	Type        string            `json:"type"`
	Flow        string            `json:"flow,omitempty"`
	Run         string            `json:"run,omitempty"`
	LastEventID string            `json:"last_event_id,omitempty"`
	Event       *store.Event      `json:"event,omitempty"`
	Queues      *store.FlowQueues `json:"queues,omitempty"`
	Error       *ErrorInfo        `json:"error,omitempty"`
}

// ErrorInfo describes a refused request of a client.
type ErrorInfo struct {
	Code    flows.Code `json:"code"`
	Message string     `json:"message"`
}

func encode(env Envelope) []byte {
	b, _ := json.Marshal(env)
	return b
}

// ErrorMessage builds an error message for a client.
func ErrorMessage(code flows.Code, msg string) Message {
	return Message{Kind: "error", Data: encode(Envelope{Type: "error", Error: &ErrorInfo{Code: code, Message: msg}})}
}

func eventMessage(ev store.Event) Message {
	return Message{Kind: ev.Type, ID: ev.ID, run: ev.Run, Data: encode(Envelope{Type: "event", Event: &ev})}
}

// statusFields are what an event's data keeps for a client that sees statuses only:
// nothing a step read, wrote or said.
var statusFields = []string{"status", "kind", "duration_ms", "attempt", "attempts", "usage", "pinned"}

// statusMessage is ev as a client that sees statuses only gets it (Client.StatusOnly):
// its type, run, node, step and times, and of its data only statusFields; false for
// events that are nothing but data (streamed tokens, an agent's turns).
func statusMessage(ev store.Event) (Message, bool) {
	switch ev.Type {
	case "token", "turn":
		return Message{}, false
	}
	if len(ev.Data) > 0 {
		var d map[string]json.RawMessage
		kept := map[string]json.RawMessage{}
		if json.Unmarshal(ev.Data, &d) == nil {
			for _, k := range statusFields {
				if v, ok := d[k]; ok {
					kept[k] = v
				}
			}
		}
		ev.Data = nil
		if len(kept) > 0 {
			ev.Data, _ = json.Marshal(kept)
		}
	}
	return eventMessage(ev), true
}

// message is ev as c gets it, or false when c gets nothing of it.
func (c *Client) message(ev store.Event) (Message, bool) {
	if c.statusOnly {
		return statusMessage(ev)
	}
	return eventMessage(ev), true
}

// Options tune a hub; zero values take the defaults.
type Options struct {
	QueueEvery time.Duration // queue figures interval (1s)
	Block      time.Duration // one XREAD's block time (1s)
	Replay     int64         // events read per page when replaying on resume (1000)
}

// Hub fans the flows' events out to subscribers.
type Hub struct {
	src  Source
	log  *slog.Logger
	opts Options

	ctx    context.Context
	cancel context.CancelFunc

	mu      sync.Mutex
	feeds   map[string]*feed
	clients map[*Client]bool
}

// NewHub returns a hub reading from src. It reads nothing until someone subscribes.
func NewHub(src Source, log *slog.Logger) *Hub { return NewHubWith(src, log, Options{}) }

// NewHubWith is NewHub with options.
func NewHubWith(src Source, log *slog.Logger, o Options) *Hub {
	if log == nil {
		log = slog.Default()
	}
	if o.QueueEvery <= 0 {
		o.QueueEvery = time.Second
	}
	if o.Block <= 0 {
		o.Block = time.Second
	}
	if o.Replay <= 0 {
		o.Replay = 1000
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Hub{src: src, log: log, opts: o, ctx: ctx, cancel: cancel, feeds: map[string]*feed{}, clients: map[*Client]bool{}}
}

// Run blocks until ctx ends, then closes the hub.
func (h *Hub) Run(ctx context.Context) error {
	select {
	case <-ctx.Done():
	case <-h.ctx.Done():
	}
	h.Close()
	return nil
}

// Close stops every reader and drops every client.
func (h *Hub) Close() {
	h.cancel()
	h.mu.Lock()
	clients := make([]*Client, 0, len(h.clients))
	for c := range h.clients {
		clients = append(clients, c)
	}
	h.mu.Unlock()
	for _, c := range clients {
		c.drop()
	}
}

// Client is one connection's end of the hub: every subscription of the connection
// sends into its one buffered channel, which the connection's single writer drains.
type Client struct {
	out     chan Message
	dropped chan struct{}
	once    sync.Once
	// name, when set, turns a requested flow into the flow id watched (ServeWSIn).
	name func(string) (string, bool)
	// statusOnly: the client sees runs' statuses, not their data (StatusOnly).
	statusOnly bool
}

// StatusOnly makes the client get events without their data (statusMessage): for who
// may see runs' statuses but not their state (docs/teams.md). Call it before
// subscribing.
func (c *Client) StatusOnly() { c.statusOnly = true }

// NewClient registers a client whose buffer holds n messages; a client whose buffer is
// full when a message comes is dropped.
func (h *Hub) NewClient(n int) *Client {
	c := &Client{out: make(chan Message, n), dropped: make(chan struct{})}
	h.mu.Lock()
	h.clients[c] = true
	h.mu.Unlock()
	if h.ctx.Err() != nil {
		c.drop()
	}
	return c
}

// Messages are the client's messages, in order.
func (c *Client) Messages() <-chan Message { return c.out }

// Dropped is closed when the hub gives up on the client (too slow, or shutting down).
func (c *Client) Dropped() <-chan struct{} { return c.dropped }

func (c *Client) drop() { c.once.Do(func() { close(c.dropped) }) }

// send queues m without blocking; a full buffer drops the client.
func (c *Client) send(m Message) {
	select {
	case <-c.dropped:
	case c.out <- m:
	default:
		c.drop()
	}
}

// Send queues a message of the connection itself (an answer to its request).
func (c *Client) Send(m Message) { c.send(m) }

// feed is the reader of one flow's events stream and its subscribers.
type feed struct {
	flow   string
	cancel context.CancelFunc

	mu   sync.Mutex
	subs map[*sub]bool
}

type sub struct {
	c    *Client
	run  string // "" for every run
	last string // events up to this id were sent already (replay)
}

// ErrClosed is returned by Subscribe after the hub closed.
var ErrClosed = errors.New("the live hub is closed")

// Subscribe sends c the events of flow (of one run, if run is set) from now on; with
// lastID, first those after it that the stream still has.
func (h *Hub) Subscribe(c *Client, flow, run, lastID string) error {
	if !flows.ValidFlowID(flow) {
		return &flows.Error{Code: flows.Invalid, Path: "flow", Message: fmt.Sprintf("%q is not a flow id", flow)}
	}
	if run != "" && !flows.ValidID(run) {
		return &flows.Error{Code: flows.Invalid, Path: "run", Message: fmt.Sprintf("%q is not a run id", run)}
	}
	if lastID != "" && !store.ValidStreamID(lastID) {
		return &flows.Error{Code: flows.Invalid, Path: "last_event_id", Message: fmt.Sprintf("%q is not an event id such as 1700000000000-0", lastID)}
	}
	h.mu.Lock()
	f := h.feeds[flow]
	h.mu.Unlock()
	start := ""
	if f == nil {
		// Where a new reader starts, read without holding the hub.
		ctx, cancel := context.WithTimeout(h.ctx, 5*time.Second)
		var err error
		start, err = h.src.LastEventID(ctx, flow)
		cancel()
		if err != nil {
			if h.ctx.Err() != nil {
				return ErrClosed
			}
			return fmt.Errorf("live: read the events of flow %q: %w", flow, err)
		}
	}
	h.mu.Lock()
	if h.ctx.Err() != nil {
		h.mu.Unlock()
		return ErrClosed
	}
	f = h.feeds[flow]
	if f == nil {
		if start == "" {
			// The feed this call saw went away meanwhile: start from now.
			h.mu.Unlock()
			return h.Subscribe(c, flow, run, lastID)
		}
		fctx, fcancel := context.WithCancel(h.ctx)
		f = &feed{flow: flow, cancel: fcancel, subs: map[*sub]bool{}}
		h.feeds[flow] = f
		go h.read(fctx, f, start)
		go h.queues(fctx, f)
	}
	s := &sub{c: c, run: run}
	// The feed's fan-out waits while the backlog is replayed, so nothing is sent out of
	// order; what the reader already has is skipped by id.
	f.mu.Lock()
	f.subs[s] = true
	h.mu.Unlock()
	defer f.mu.Unlock()
	c.send(Message{Kind: "subscribed", Data: encode(Envelope{Type: "subscribed", Flow: flow, Run: run, LastEventID: lastID})})
	if lastID == "" {
		return nil
	}
	// Page through everything the stream still has after lastID (it is capped, so
	// this ends); a client that cannot take it within the time is dropped.
	ctx, cancel := context.WithTimeout(h.ctx, 30*time.Second)
	defer cancel()
	after := lastID
	for {
		evs, err := h.src.EventsAfter(ctx, flow, after, h.opts.Replay)
		if err != nil {
			return fmt.Errorf("live: replay the events of flow %q: %w", flow, err)
		}
		for _, ev := range evs {
			s.last, after = ev.ID, ev.ID
			if run != "" && ev.Run != run {
				continue
			}
			m, ok := c.message(ev)
			if !ok {
				continue
			}
			// The connection's writer is draining meanwhile: wait for room rather than drop.
			select {
			case c.out <- m:
			case <-c.dropped:
				return nil
			case <-ctx.Done():
				c.drop()
				return nil
			}
		}
		if int64(len(evs)) < h.opts.Replay {
			return nil
		}
	}
}

// Unsubscribe ends c's subscriptions to flow's run ("" ends the flow-wide one).
func (h *Hub) Unsubscribe(c *Client, flow, run string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	f := h.feeds[flow]
	if f == nil {
		return
	}
	f.mu.Lock()
	for s := range f.subs {
		if s.c == c && s.run == run {
			delete(f.subs, s)
		}
	}
	empty := len(f.subs) == 0
	f.mu.Unlock()
	if empty {
		f.cancel()
		delete(h.feeds, flow)
	}
}

// Remove ends every subscription of c; call it when the connection ends.
func (h *Hub) Remove(c *Client) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.clients, c)
	for flow, f := range h.feeds {
		f.mu.Lock()
		for s := range f.subs {
			if s.c == c {
				delete(f.subs, s)
			}
		}
		empty := len(f.subs) == 0
		f.mu.Unlock()
		if empty {
			f.cancel()
			delete(h.feeds, flow)
		}
	}
	c.drop()
}

// Feeds is the number of flows being read, for tests and metrics.
func (h *Hub) Feeds() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.feeds)
}

// read follows the flow's events stream from id on and fans each event out.
func (h *Hub) read(ctx context.Context, f *feed, id string) {
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		evs, err := h.src.ReadEvents(ctx, f.flow, id, 500, h.opts.Block)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			h.log.Warn("live: reading events failed; retrying", "flow", f.flow, "error", err, "backoff", backoff)
			select {
			case <-ctx.Done():
				return
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, 5*time.Second)
			continue
		}
		backoff = 100 * time.Millisecond
		if len(evs) == 0 {
			continue
		}
		id = evs[len(evs)-1].ID
		f.mu.Lock()
		for _, ev := range evs {
			m := eventMessage(ev)
			var sm *Message // the status-only message, made for the first who needs it
			for s := range f.subs {
				if s.run != "" && s.run != ev.Run {
					continue
				}
				if s.last != "" && store.CompareStreamIDs(ev.ID, s.last) <= 0 {
					continue
				}
				if !s.c.statusOnly {
					s.c.send(m)
					continue
				}
				if sm == nil {
					x, ok := statusMessage(ev)
					if !ok {
						x.Kind = "" // sent to no one
					}
					sm = &x
				}
				if sm.Kind != "" {
					s.c.send(*sm)
				}
			}
		}
		f.mu.Unlock()
	}
}

// queues sends the flow's queue figures to its subscribers every QueueEvery.
func (h *Hub) queues(ctx context.Context, f *feed) {
	t := time.NewTicker(h.opts.QueueEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		qctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		q, err := h.src.Queues(qctx, f.flow)
		cancel()
		if err != nil {
			continue
		}
		m := Message{Kind: "queues", Data: encode(Envelope{Type: "queues", Flow: f.flow, Queues: q})}
		f.mu.Lock()
		for s := range f.subs {
			s.c.send(m)
		}
		f.mu.Unlock()
	}
}
