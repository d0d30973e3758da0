package live

import (
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"github.com/gorilla/websocket"
	"github.com/sluicehq/sluice/flows"
)

// Connection timing, as in gorilla's chat example: the reader expects a pong within
// PongWait; the writer pings every PingPeriod and gives each write WriteWait.
var (
	WriteWait  = 10 * time.Second
	PongWait   = 60 * time.Second
	PingPeriod = PongWait * 9 / 10
)

const (
	// clientBuffer is how many messages a connection may fall behind before it is
	// dropped as too slow.
	clientBuffer = 256
	// maxRequest caps one message from the client.
	maxRequest = 4096
	// maxSubscriptions caps the subscriptions of one connection.
	maxSubscriptions = 64
)

// Request is a message from the client:
//
//	{"type": "subscribe", "flow": "triage", "run": "r...", "last_event_id": "1700000000000-0"}
//	{"type": "unsubscribe", "flow": "triage", "run": "r..."}
type Request struct {
	Type        string `json:"type"`
	Flow        string `json:"flow"`
	Run         string `json:"run"`
	LastEventID string `json:"last_event_id"`
}

// Upgrader upgrades after the server has checked authentication and the Origin; it
// accepts any origin because that check is done before.
var upgrader = websocket.Upgrader{
	ReadBufferSize:  4096,
	WriteBufferSize: 16384,
	CheckOrigin:     func(*http.Request) bool { return true },
}

// ServeWS upgrades the request and serves one live connection until either side closes
// it. first, when its Flow is set, is subscribed at once (from the URL's query).
func (h *Hub) ServeWS(w http.ResponseWriter, r *http.Request, first Request) error {
	return h.ServeWSIn(w, r, first, nil, false)
}

// ServeWSIn is ServeWS for a connection that may watch only the flows name accepts:
// name turns the flow a request names into the flow id to watch, or refuses it (a flow
// of another workspace is no flow to this connection). With statusOnly, the connection
// gets events without their data (Client.StatusOnly).
func (h *Hub) ServeWSIn(w http.ResponseWriter, r *http.Request, first Request, name func(string) (string, bool), statusOnly bool) error {
	conn, err := upgrader.Upgrade(w, r, nil)
	if err != nil {
		return err // the upgrader has answered
	}
	c := h.NewClient(clientBuffer)
	c.name = name
	c.statusOnly = statusOnly
	done := make(chan struct{})
	go h.writer(conn, c, done)
	if first.Flow != "" {
		h.handle(c, Request{Type: "subscribe", Flow: first.Flow, Run: first.Run, LastEventID: first.LastEventID}, new(int))
	}
	h.reader(conn, c)
	h.Remove(c)
	<-done
	return nil
}

// reader reads the client's requests until the connection fails or the client goes.
func (h *Hub) reader(conn *websocket.Conn, c *Client) {
	conn.SetReadLimit(maxRequest)
	_ = conn.SetReadDeadline(time.Now().Add(PongWait))
	conn.SetPongHandler(func(string) error { return conn.SetReadDeadline(time.Now().Add(PongWait)) })
	subs := 0
	for {
		_, data, err := conn.ReadMessage()
		if err != nil {
			return
		}
		var req Request
		if err := json.Unmarshal(data, &req); err != nil {
			c.Send(ErrorMessage(flows.Invalid, "a request is a JSON object such as {\"type\": \"subscribe\", \"flow\": \"triage\"}"))
			continue
		}
		h.handle(c, req, &subs)
		select {
		case <-c.Dropped():
			return
		default:
		}
	}
}

func (h *Hub) handle(c *Client, req Request, subs *int) {
	if c.name != nil && req.Flow != "" {
		id, ok := c.name(req.Flow)
		if !ok {
			c.Send(ErrorMessage(flows.NotFound, "no such flow"))
			return
		}
		req.Flow = id
	}
	switch req.Type {
	case "subscribe":
		if *subs >= maxSubscriptions {
			c.Send(ErrorMessage(flows.TooLarge, "too many subscriptions on one connection"))
			return
		}
		if err := h.Subscribe(c, req.Flow, req.Run, req.LastEventID); err != nil {
			var fe *flows.Error
			if errors.As(err, &fe) {
				c.Send(ErrorMessage(fe.Code, fe.Message))
			} else {
				h.log.Warn("live: subscribe failed", "flow", req.Flow, "error", err)
				c.Send(ErrorMessage(flows.Unavailable, "cannot read the flow's events now; try again"))
			}
			return
		}
		*subs++
	case "unsubscribe":
		h.Unsubscribe(c, req.Flow, req.Run)
		*subs = max(*subs-1, 0)
	default:
		c.Send(ErrorMessage(flows.Invalid, "unknown request type; use subscribe or unsubscribe"))
	}
}

// writer is the connection's only writer: messages, pings, and the close.
func (h *Hub) writer(conn *websocket.Conn, c *Client, done chan struct{}) {
	defer close(done)
	ping := time.NewTicker(PingPeriod)
	defer func() {
		ping.Stop()
		conn.Close()
	}()
	for {
		select {
		case m := <-c.Messages():
			_ = conn.SetWriteDeadline(time.Now().Add(WriteWait))
			if err := conn.WriteMessage(websocket.TextMessage, m.Data); err != nil {
				c.drop()
				return
			}
		case <-ping.C:
			_ = conn.SetWriteDeadline(time.Now().Add(WriteWait))
			if err := conn.WriteMessage(websocket.PingMessage, nil); err != nil {
				c.drop()
				return
			}
		case <-c.Dropped():
			_ = conn.SetWriteDeadline(time.Now().Add(WriteWait))
			_ = conn.WriteMessage(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.ClosePolicyViolation, "dropped: too slow or server stopping"))
			return
		}
	}
}
