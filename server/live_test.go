package server_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/redis/go-redis/v9"
	"github.com/sluicehq/sluice/flows/nodes/llmtest"
	"github.com/sluicehq/sluice/server/live"
	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/storetest"
)

// wsDial opens /ws with the token (and the given Origin, if any).
func (a *api) wsDial(query, origin string) (*websocket.Conn, *http.Response, error) {
	h := http.Header{}
	h.Set("Authorization", "Bearer "+a.token)
	if origin != "" {
		h.Set("Origin", origin)
	}
	return websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(a.base, "http")+"/ws"+query, h)
}

// readUntil reads messages until done says so; it fails after d.
func readUntil(t *testing.T, c *websocket.Conn, d time.Duration, done func(live.Envelope) bool) []live.Envelope {
	t.Helper()
	var got []live.Envelope
	c.SetReadDeadline(time.Now().Add(d))
	for {
		_, b, err := c.ReadMessage()
		if err != nil {
			t.Fatalf("websocket read after %d messages: %v", len(got), err)
		}
		var m live.Envelope
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatalf("message is not JSON: %s", b)
		}
		got = append(got, m)
		if done(m) {
			return got
		}
	}
}

func runEnded(run string) func(live.Envelope) bool {
	return func(m live.Envelope) bool {
		return m.Type == "event" && m.Event.Type == "run" && m.Event.Run == run && strings.Contains(string(m.Event.Data), "succeeded")
	}
}

func stepNodes(ms []live.Envelope, run string) []string {
	var out []string
	for _, m := range ms {
		if m.Type == "event" && m.Event.Type == "step" && m.Event.Run == run {
			out = append(out, m.Event.Node)
		}
	}
	return out
}

func TestWebsocketStreamsStepsCheckpointsAndQueueFigures(t *testing.T) {
	storetest.Each(t, func(t *testing.T, r *store.Redis) {
		a := newAPI(t, r)
		id := a.saveFlow("linear", nil)
		c, _, err := a.wsDial("?flow="+id, "")
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		first := readUntil(t, c, 10*time.Second, func(m live.Envelope) bool { return m.Type == "subscribed" })
		if first[0].Flow != id {
			t.Fatalf("subscribed = %+v", first[0])
		}
		run := a.start(id, `{"input": {"name": "Ada"}}`)
		ms := readUntil(t, c, 20*time.Second, runEnded(run))
		if got := strings.Join(stepNodes(ms, run), " "); got != "in greet shout out" {
			t.Errorf("step events = %q, want in greet shout out", got)
		}
		for _, m := range ms {
			if m.Type == "event" && m.Event.Type == "step" && (m.Event.Ckpt == "" || m.Event.Step == 0 || m.Event.ID == "") {
				t.Errorf("step event without its checkpoint, step number or id: %+v", m.Event)
			}
		}
		// Queue figures come every second while subscribed.
		q := readUntil(t, c, 10*time.Second, func(m live.Envelope) bool { return m.Type == "queues" })
		last := q[len(q)-1]
		if last.Queues == nil || last.Queues.Flow != id || len(last.Queues.Nodes) != 4 {
			t.Errorf("queues message = %+v", last)
		}

		// A second connection subscribes to the run from the event after its first step:
		// it gets what it missed, in order, and only that run's events.
		other := a.start(id, `{"input": {"name": "Bo"}}`)
		a.settle(id, other)
		var afterFirst string
		for _, m := range ms {
			if m.Type == "event" && m.Event.Type == "step" && m.Event.Node == "in" {
				afterFirst = m.Event.ID
			}
		}
		c2, _, err := a.wsDial("", "")
		if err != nil {
			t.Fatal(err)
		}
		defer c2.Close()
		c2.WriteJSON(live.Request{Type: "subscribe", Flow: id, Run: run, LastEventID: afterFirst})
		ms2 := readUntil(t, c2, 10*time.Second, runEnded(run))
		if got := strings.Join(stepNodes(ms2, run), " "); got != "greet shout out" {
			t.Errorf("resumed after the first step: %q, want greet shout out", got)
		}
		for _, m := range ms2 {
			if m.Type == "event" && m.Event.Run != run {
				t.Errorf("run subscription got another run's event: %+v", m.Event)
			}
		}
		// Bad requests get an error message, and the connection lives on.
		c2.WriteJSON(live.Request{Type: "subscribe", Flow: "Not A Flow"})
		e := readUntil(t, c2, 5*time.Second, func(m live.Envelope) bool { return m.Type == "error" })
		if e[len(e)-1].Error.Code != "invalid" {
			t.Errorf("error message = %+v", e[len(e)-1].Error)
		}
		c2.WriteMessage(websocket.TextMessage, []byte("nonsense"))
		readUntil(t, c2, 5*time.Second, func(m live.Envelope) bool { return m.Type == "error" })
	})
}

func TestWebsocketRefusesAForeignOriginAndNoToken(t *testing.T) {
	a := newAPI(t, storetest.Embedded(t))
	_, resp, err := a.wsDial("", "https://evil.example")
	if err == nil || resp == nil || resp.StatusCode != http.StatusForbidden {
		t.Fatalf("foreign origin: err %v, response %v; want 403", err, resp)
	}
	c, _, err := a.wsDial("", a.base) // the server's own page
	if err != nil {
		t.Fatalf("same origin refused: %v", err)
	}
	c.Close()
	if e := a.must(http.StatusBadRequest, "GET", "/ws", nil).errorBody(t); e.Code != "invalid" {
		t.Errorf("a plain GET of /ws: %+v", e)
	}
	h := http.Header{}
	_, resp, err = websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(a.base, "http")+"/ws", h)
	if err == nil || resp == nil || resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("no token: err %v, response %v; want 401", err, resp)
	}
}

func TestSSEStreamsARunsEventsAndResumesFromLastEventID(t *testing.T) {
	a := newAPI(t, storetest.Real(t))
	id := a.saveFlow("linear", nil)
	run := a.start(id, `{"input": {"name": "Ada"}}`)
	a.settle(id, run)

	read := func(path, lastID string) (nodes []string, ids []string) {
		req, _ := http.NewRequest("GET", a.base+path, nil)
		req.Header.Set("Authorization", "Bearer "+a.token)
		if lastID != "" {
			req.Header.Set("Last-Event-ID", lastID)
		} else {
			req.Header.Set("Last-Event-ID", "0-0")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if ct := resp.Header.Get("Content-Type"); resp.StatusCode != 200 || ct != "text/event-stream" {
			t.Fatalf("SSE: %d %s", resp.StatusCode, ct)
		}
		sc := bufio.NewScanner(resp.Body)
		var evID, kind string
		timer := time.AfterFunc(10*time.Second, func() { resp.Body.Close() })
		defer timer.Stop()
		for sc.Scan() {
			line := sc.Text()
			switch {
			case strings.HasPrefix(line, "id: "):
				evID = line[4:]
			case strings.HasPrefix(line, "event: "):
				kind = line[7:]
			case strings.HasPrefix(line, "data: "):
				var m live.Envelope
				json.Unmarshal([]byte(line[6:]), &m)
				if kind == "step" && m.Event.Run == run {
					nodes = append(nodes, m.Event.Node)
					ids = append(ids, evID)
				}
				if kind == "run" && m.Event.Run == run && strings.Contains(string(m.Event.Data), "succeeded") {
					return nodes, ids
				}
			}
		}
		t.Fatalf("the stream ended before the run's end; got %v", nodes)
		return nil, nil
	}
	runPath := fmt.Sprintf("/api/flows/%s/runs/%s/events", id, run)
	nodes, ids := read(runPath, "")
	if strings.Join(nodes, " ") != "in greet shout out" {
		t.Fatalf("SSE steps = %v", nodes)
	}
	if nodes, _ := read("/api/flows/"+id+"/events", ""); strings.Join(nodes, " ") != "in greet shout out" {
		t.Errorf("the flow's SSE steps = %v", nodes)
	}
	nodes, _ = read(runPath, ids[1])
	if strings.Join(nodes, " ") != "shout out" {
		t.Errorf("after Last-Event-ID of greet's step: %v, want shout out", nodes)
	}
	a.must(http.StatusBadRequest, "GET", "/api/flows/"+id+"/runs/"+run+"/events", nil, "Last-Event-ID", "yesterday")
}

func TestHubDropsASlowClient(t *testing.T) {
	r := storetest.Real(t)
	flow := storetest.FlowID(t)
	storetest.DeleteFlowKeys(t, r, flow)
	h := live.NewHubWith(r, nil, live.Options{QueueEvery: time.Hour, Block: 100 * time.Millisecond})
	defer h.Close()
	slow := h.NewClient(2) // never read
	fast := h.NewClient(100)
	if err := h.Subscribe(slow, flow, "", ""); err != nil {
		t.Fatal(err)
	}
	if err := h.Subscribe(fast, flow, "", ""); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 5; i++ {
		r.Client.XAdd(t.Context(), &redis.XAddArgs{Stream: store.FlowKeys(flow).Events(), Values: []any{"type", "step", "run", "r1", "node", fmt.Sprint("n", i), "data", "{}"}})
	}
	select {
	case <-slow.Dropped():
	case <-time.After(10 * time.Second):
		t.Fatal("a client that does not read was not dropped")
	}
	got := 0
	timeout := time.After(10 * time.Second)
	for got < 6 { // subscribed + 5 events
		select {
		case <-fast.Messages():
			got++
		case <-fast.Dropped():
			t.Fatal("the reading client was dropped too")
		case <-timeout:
			t.Fatalf("the reading client got %d of 6 messages", got)
		}
	}
	h.Remove(slow)
	h.Remove(fast)
	if n := h.Feeds(); n != 0 {
		t.Errorf("%d feeds still read after every client left", n)
	}
}

func TestWebsocketStreamsLLMTokensAndDeadLetters(t *testing.T) {
	llm := llmtest.New(t)
	llm.Reply(llmtest.Text("Hello there, Ada"))
	a := newAPIWith(t, storetest.Real(t), llm.Env(0))
	chat := a.saveFlow(`{"sluice": 1, "id": "x", "nodes": [{"id": "in", "type": "input"},
		{"id": "ask", "type": "llm", "params": {"model": "m", "user": "Greet {{.name}}", "stream": true}},
		{"id": "out", "type": "output", "params": {"value": "{answer}"}}],
		"edges": [{"from": "in", "to": "ask"}, {"from": "ask", "to": "out"}]}`, nil)
	poison := a.saveFlow(`{"sluice": 1, "id": "x", "nodes": [{"id": "in", "type": "input"},
		{"id": "bad", "type": "script", "params": {"always_fail": true, "permanent": true}}],
		"edges": [{"from": "in", "to": "bad"}]}`, nil)
	c, _, err := a.wsDial("", "")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, f := range []string{chat, poison} {
		c.WriteJSON(live.Request{Type: "subscribe", Flow: f})
		readUntil(t, c, 10*time.Second, func(m live.Envelope) bool { return m.Type == "subscribed" && m.Flow == f })
	}

	run := a.start(chat, `{"input": {"name": "Ada"}}`)
	// Tokens are published as they come, apart from the step's commit: they may arrive
	// after the run's end.
	var text strings.Builder
	ended := false
	readUntil(t, c, 20*time.Second, func(m live.Envelope) bool {
		if m.Type == "event" && m.Event.Type == "token" && m.Event.Run == run && m.Event.Node == "ask" {
			var d struct{ Text string }
			json.Unmarshal(m.Event.Data, &d)
			text.WriteString(d.Text)
		}
		ended = ended || runEnded(run)(m)
		return ended && text.String() == "Hello there, Ada"
	})
	if llm.Calls() != 1 || !llm.Requests()[0].Stream {
		t.Errorf("the model was not asked to stream: %+v", llm.Requests())
	}

	bad := a.start(poison, `{}`)
	ms := readUntil(t, c, 20*time.Second, func(m live.Envelope) bool {
		return m.Type == "event" && m.Event.Type == "dead" && m.Event.Run == bad
	})
	d := ms[len(ms)-1].Event
	if d.Node != "bad" || !strings.Contains(string(d.Data), "scripted failure") || !strings.Contains(string(d.Data), `"dead"`) {
		t.Errorf("dead-letter event = %+v %s", d, d.Data)
	}
}
