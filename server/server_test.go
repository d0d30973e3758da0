package server_test

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/flows/engine"
	"github.com/sluicehq/sluice/flows/nodes"
	"github.com/sluicehq/sluice/server"
	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/storetest"
)

func newLibrary(t *testing.T) *store.Library {
	t.Helper()
	lib, err := store.NewLibrary(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return lib
}

// startServer runs a server on a free loopback port until the test ends and returns its
// base URL and a function that stops it and returns Run's error.
func startServer(t *testing.T, r *store.Redis, lib *store.Library) (string, func() error) {
	t.Helper()
	srv := server.New(server.Config{Addr: "127.0.0.1:0", Embedded: r.Embedded(), ShutdownTimeout: 5 * time.Second}, server.Deps{Redis: r, Library: lib, Engine: engine.New(r, nodes.NewRegistry(nil), engine.Options{})})
	ctx, cancel := context.WithCancel(context.Background())
	addrc := make(chan net.Addr, 1)
	errc := make(chan error, 1)
	go func() { errc <- srv.Run(ctx, func(a net.Addr) { addrc <- a }) }()
	var base string
	select {
	case a := <-addrc:
		base = "http://" + a.String()
	case err := <-errc:
		t.Fatalf("server did not start: %v", err)
	}
	var once sync.Once
	var runErr error
	stop := func() error {
		once.Do(func() {
			cancel()
			select {
			case runErr = <-errc:
			case <-time.After(10 * time.Second):
				t.Fatal("server did not stop within 10s of cancel")
			}
		})
		return runErr
	}
	t.Cleanup(func() { _ = stop() })
	return base, stop
}

func get(t *testing.T, url string, header ...string) (*http.Response, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res, string(b)
}

func TestServerStartsServesAndStopsCleanly(t *testing.T) {
	storetest.Each(t, func(t *testing.T, r *store.Redis) {
		lib := newLibrary(t)
		if err := os.WriteFile(filepath.Join(lib.Dir, "triage.json"), []byte(`{"sluice":1,"id":"triage","name":"Ticket triage","nodes":[{"id":"in"},{"id":"out"}]}`), 0o644); err != nil {
			t.Fatal(err)
		}
		base, stop := startServer(t, r, lib)

		res, body := get(t, base+"/", "Accept", "text/html")
		if res.StatusCode != 200 || !strings.Contains(body, "Ticket triage") {
			t.Fatalf("home page: status %d, want 200 listing the flow; body:\n%s", res.StatusCode, body)
		}
		if got := strings.Contains(body, `id="embedded-banner"`); got != r.Embedded() {
			t.Errorf("embedded banner shown = %v, want %v", got, r.Embedded())
		}
		res, body = get(t, base+"/healthz")
		if res.StatusCode != 200 || !strings.Contains(body, `"status":"ok"`) {
			t.Fatalf("healthz: %d %s", res.StatusCode, body)
		}
		res, _ = get(t, base+"/static/css/sluice.css")
		if res.StatusCode != 200 {
			t.Errorf("style sheet: status %d", res.StatusCode)
		}
		if err := stop(); err != nil {
			t.Fatalf("Run returned %v after cancel, want nil", err)
		}
		if _, err := http.Get(base + "/healthz"); err == nil {
			t.Fatal("server still answers after stop")
		}
	})
}

// proxy forwards loopback TCP connections to target until closed; closing it makes the
// Redis behind it unreachable without touching the server that other tests share.
type proxy struct {
	ln    net.Listener
	mu    sync.Mutex
	conns []net.Conn
}

func newProxy(t *testing.T, target string) *proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{ln: ln}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			u, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, c, u)
			p.mu.Unlock()
			go func() { io.Copy(u, c); u.Close() }()
			go func() { io.Copy(c, u); c.Close() }()
		}
	}()
	t.Cleanup(p.Close)
	return p
}

func (p *proxy) Close() {
	p.ln.Close()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.Close()
	}
}

func TestHealthzReports503WithReasonWhenRedisIsDown(t *testing.T) {
	storetest.Each(t, func(t *testing.T, backing *store.Redis) {
		p := newProxy(t, backing.Addr())
		r, err := store.Open(context.Background(), store.Options{URL: "redis://" + p.ln.Addr().String()})
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		base, _ := startServer(t, r, newLibrary(t))
		if res, body := get(t, base+"/healthz"); res.StatusCode != 200 {
			t.Fatalf("before the outage: %d %s", res.StatusCode, body)
		}
		p.Close()
		res, body := get(t, base+"/healthz")
		if res.StatusCode != http.StatusServiceUnavailable {
			t.Fatalf("healthz with Redis down: status %d, want 503; body %s", res.StatusCode, body)
		}
		var h server.Health
		if err := json.Unmarshal([]byte(body), &h); err != nil {
			t.Fatal(err)
		}
		if h.Status != "unavailable" || !strings.Contains(h.Redis, p.ln.Addr().String()) {
			t.Errorf("health = %+v, want status unavailable and a reason naming %s", h, p.ln.Addr())
		}
	})
}

func TestUnknownRouteAnswersTheJSONErrorShape(t *testing.T) {
	base, _ := startServer(t, storetest.Embedded(t), newLibrary(t))
	for _, path := range []string{"/api/nope", "/nope", "/api/flows/x/y/z"} {
		res, body := get(t, base+path)
		if res.StatusCode != 404 {
			t.Errorf("GET %s: status %d, want 404", path, res.StatusCode)
		}
		if ct := res.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
			t.Errorf("GET %s: content type %q, want JSON", path, ct)
		}
		var e server.ErrorBody
		if err := json.Unmarshal([]byte(body), &e); err != nil {
			t.Fatalf("GET %s: body is not the error shape: %v\n%s", path, err, body)
		}
		if e.Error.Status != 404 || e.Error.Code != "not_found" || !strings.Contains(e.Error.Message, path) {
			t.Errorf("GET %s: error = %+v", path, e.Error)
		}
	}
	// A browser gets a page, not JSON.
	res, body := get(t, base+"/nope", "Accept", "text/html")
	if res.StatusCode != 404 || !strings.Contains(body, "<html") {
		t.Errorf("browser 404: status %d, body %.200s", res.StatusCode, body)
	}
}
