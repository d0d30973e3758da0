package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/flows/engine"
	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/storetest"
)

// A worker killed (SIGKILL) while its http step's POST is at the receiver: another
// worker's sweeper takes the step over and POSTs again — at least once is what a crash
// allows — with the same Idempotency-Key, so the receiver can do it once. A second step
// of the same run (another node) sends another key.
func TestAWorkerKilledMidRequestSendsItAgainWithTheSameIdempotencyKey(t *testing.T) {
	var mu sync.Mutex
	var keys []string // per POST to /charge
	first, done := make(chan struct{}), make(chan struct{})
	var once sync.Once
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		keys = append(keys, r.URL.Path+" "+r.Header.Get("Idempotency-Key"))
		n := len(keys)
		mu.Unlock()
		if n == 1 {
			once.Do(func() { close(first) })
			select { // the worker dies holding it
			case <-r.Context().Done():
			case <-done:
			}
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"ok": true}`))
	}))
	t.Cleanup(recv.Close)
	t.Cleanup(func() { close(done) })
	rdb := storetest.Real(t)
	id := storetest.FlowID(t)
	storetest.DeleteFlowKeys(t, rdb, id)
	dir := t.TempDir()
	path := filepath.Join(dir, id+".json")
	doc := `{"sluice": 1, "id": "` + id + `", "settings": {"claim_after": "1s", "max_attempts": 5},
	 "nodes": [{"id": "in", "type": "input"},
	  {"id": "charge", "type": "http", "params": {"method": "POST", "url": "` + recv.URL + `/charge", "json": "{amount: 50}", "as": "charged"}},
	  {"id": "receipt", "type": "http", "params": {"method": "POST", "url": "` + recv.URL + `/receipt", "json": "{sent: true}", "as": "receipt"}},
	  {"id": "out", "type": "output", "params": {"value": ".charged.status"}}],
	 "edges": [{"from": "in", "to": "charge"}, {"from": "charge", "to": "receipt"}, {"from": "receipt", "to": "out"}]}`
	if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	env := []string{"REDIS_URL=" + storetest.URL()}
	a := start(t, env, "worker", "--http-allow", "127.0.0.0/8", "--grace", "1s", path)
	a.waitLine(t, regexp.MustCompile(`msg="serving flow"`), 20*time.Second)

	e := engine.New(rdb, registry(nil), engine.Options{})
	ctx := context.Background()
	plan, err := e.Plan(ctx, id, "")
	if err != nil {
		plan, err = e.CurrentPlan(ctx, id)
	}
	if err != nil {
		t.Fatal(err)
	}
	run, err := e.Start(ctx, plan, []byte(`{}`), engine.StartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-first:
	case <-time.After(30 * time.Second):
		t.Fatal("the first POST never came")
	}
	a.cmd.Process.Kill() // SIGKILL with the POST in flight
	<-a.done
	b := start(t, env, "worker", "--http-allow", "127.0.0.0/8", path)
	b.waitLine(t, regexp.MustCompile(`msg="serving flow"`), 20*time.Second)
	wctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	r, err := e.Wait(wctx, id, run)
	if err != nil || r.Status != store.StatusSucceeded {
		t.Fatalf("run %v %v", r, err)
	}
	mu.Lock()
	defer mu.Unlock()
	var charge, receipt []string
	for _, k := range keys {
		p, key, _ := strings.Cut(k, " ")
		if key == "" {
			t.Errorf("a POST to %s without an Idempotency-Key", p)
		}
		if p == "/charge" {
			charge = append(charge, key)
		} else {
			receipt = append(receipt, key)
		}
	}
	if len(charge) < 2 || charge[0] != charge[1] {
		t.Errorf("the charge was POSTed %d times with keys %q: want again after the kill, with the same key", len(charge), charge)
	}
	if len(receipt) != 1 || receipt[0] == charge[0] {
		t.Errorf("the receipt's keys %q: want one POST, with a key of its own", receipt)
	}
}
