package main

import (
	"net/http"
	"testing"
	"time"

	"github.com/sluicehq/sluice/store/storetest"
)

func TestFaultServeHealthShowsRedisDownThenRecovers(t *testing.T) {
	srv := storetest.StartServer(t, false)
	p := start(t, nil, "serve", "--addr", "127.0.0.1:0", "--flows", t.TempDir(), "--redis", srv.URL())
	url := p.waitLine(t, servingLine, 20*time.Second)[1]
	status := func() int {
		res, err := http.Get(url + "/healthz")
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res.StatusCode
	}
	if s := status(); s != 200 {
		t.Fatalf("healthz %d before the outage", s)
	}
	srv.Kill()
	if s := status(); s != http.StatusServiceUnavailable {
		t.Errorf("healthz %d with Redis down, want 503", s)
	}
	srv.Restart()
	deadline := time.Now().Add(20 * time.Second)
	for status() != 200 {
		if time.Now().After(deadline) {
			t.Fatal("healthz did not recover after Redis came back")
		}
		time.Sleep(100 * time.Millisecond)
	}
}
