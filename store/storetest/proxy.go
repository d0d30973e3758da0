package storetest

import (
	"bytes"
	"net"
	"sync"
	"testing"
	"time"
)

// Proxy forwards loopback TCP connections to a target, and can add latency, reset its
// connections, and refuse (black-hole) new ones, to play a bad network.
type Proxy struct {
	ln     net.Listener
	target string

	mu      sync.Mutex
	conns   map[net.Conn]bool
	latency time.Duration
	down    bool
	cut     []byte // CutAfter's command
}

// StartProxy listens on a spare loopback port until the test ends.
func StartProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxy{ln: ln, target: target, conns: map[net.Conn]bool{}}
	go p.accept()
	t.Cleanup(p.Close)
	return p
}

// Addr is the proxy's host:port.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// URL is a redis:// URL through the proxy.
func (p *Proxy) URL() string { return "redis://" + p.Addr() + "/0" }

// SetLatency delays every chunk forwarded in either direction.
func (p *Proxy) SetLatency(d time.Duration) {
	p.mu.Lock()
	p.latency = d
	p.mu.Unlock()
}

// Reset closes every open connection.
func (p *Proxy) Reset() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		c.Close()
	}
	p.conns = map[net.Conn]bool{}
}

// SetDown drops every connection and accepts new ones only to close them, until
// SetDown(false).
func (p *Proxy) SetDown(down bool) {
	p.mu.Lock()
	p.down = down
	p.mu.Unlock()
	if down {
		p.Reset()
	}
}

// CutAfter makes the proxy forward the next request that holds command (its name as
// sent, e.g. "XAUTOCLAIM") to Redis, then close the client's side of that connection: Redis
// runs the command and its reply is lost, as when a connection breaks at the wrong moment.
func (p *Proxy) CutAfter(command string) {
	p.mu.Lock()
	p.cut = []byte(command)
	p.mu.Unlock()
}

// Close stops the proxy.
func (p *Proxy) Close() {
	p.ln.Close()
	p.Reset()
}

func (p *Proxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		down := p.down
		p.mu.Unlock()
		if down {
			c.Close()
			continue
		}
		u, err := net.DialTimeout("tcp", p.target, 2*time.Second)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		p.conns[c], p.conns[u] = true, true
		p.mu.Unlock()
		go p.pipe(u, c, true)
		go p.pipe(c, u, false)
	}
}

// pipe copies src to dst; toServer says src is the client's side.
func (p *Proxy) pipe(dst, src net.Conn, toServer bool) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.mu.Lock()
			d := p.latency
			cut := toServer && len(p.cut) > 0 && bytes.Contains(buf[:n], p.cut)
			if cut {
				p.cut = nil
			}
			p.mu.Unlock()
			if d > 0 {
				time.Sleep(d)
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				dst.Close()
				src.Close()
				return
			}
			if cut {
				// Only the client's side: Redis reads the request and runs it, and the
				// reply, copied to a closed connection, ends the other pipe.
				src.Close()
				return
			}
		}
		if err != nil {
			dst.Close()
			src.Close()
			return
		}
	}
}
