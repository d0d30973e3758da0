package engine_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/sluicehq/sluice/flows/engine"
	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/storetest"
)

func TestOutputNodesWebhookReceivesTheRunsResult(t *testing.T) {
	storetest.Each(t, func(t *testing.T, r *store.Redis) {
		got := make(chan engine.ResultPayload, 4)
		hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			b, _ := io.ReadAll(req.Body)
			var p engine.ResultPayload
			json.Unmarshal(b, &p)
			got <- p
		}))
		defer hook.Close()
		v := newEnv(t, r)
		p := v.compile(`{"sluice": 1, "id": "FLOW", "nodes": [{"id": "in", "type": "input"},
		  {"id": "out", "type": "output", "params": {"value": "{n}", "webhook": "` + hook.URL + `/done"}}],
		 "edges": [{"from": "in", "to": "out"}]}`)
		v.work(p)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() {
			done <- v.e.NewDispatcher(engine.DispatchOptions{Flows: func(context.Context) ([]string, error) { return []string{p.Flow}, nil },
				Block: 100 * time.Millisecond}).Run(ctx)
		}()
		defer func() { cancel(); <-done }()
		run := v.run(p, `{"n": 7}`)
		mustStatus(t, run, store.StatusSucceeded)
		select {
		case res := <-got:
			if res.Run != run.ID || res.Status != store.StatusSucceeded || string(res.Output) != `{"n":7}` {
				t.Errorf("webhook got %+v", res)
			}
		case <-time.After(20 * time.Second):
			t.Fatal("the output node's webhook was never called")
		}
	})
}
