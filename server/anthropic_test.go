package server_test

import (
	"net/http"
	"testing"

	"github.com/sluicehq/sluice/flows"
	"github.com/sluicehq/sluice/flows/nodes"
	"github.com/sluicehq/sluice/flows/nodes/llmtest"
	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/storetest"
)

// The prompt cache's tokens of an Anthropic step reach its checkpoint: the run's history
// and one checkpoint, read back through the API, carry cache_read_tokens and
// cache_write_tokens as the provider reported them.
func TestAnthropicStepsCheckpointsCarryTheCachesTokens(t *testing.T) {
	r := storetest.Real(t)
	claude := llmtest.NewAnthropic(t)
	claude.Reply(
		llmtest.Reply{Content: "first", PromptTokens: 12, CompletionTokens: 3, CacheWriteTokens: 1500},
		llmtest.Reply{Content: "second", PromptTokens: 14, CompletionTokens: 4, CacheReadTokens: 1500},
	)
	env := &nodes.Env{Providers: map[string]*nodes.Provider{"claude": claude.Provider("claude", 0)}}
	a := newAPIWith(t, r, env)
	flow := a.saveFlow(`{"sluice": 1, "id": "anthropic-cache-ckpt", "nodes": [
		{"id": "in", "type": "input"},
		{"id": "write", "type": "llm", "params": {"provider": "claude", "model": "claude-sonnet", "system": "A long system prompt.", "user": "one", "as": "a"}},
		{"id": "read", "type": "llm", "params": {"provider": "claude", "model": "claude-sonnet", "system": "A long system prompt.", "user": "two", "as": "b"}},
		{"id": "out", "type": "output"}],
		"edges": [{"from": "in", "to": "write"}, {"from": "write", "to": "read"}, {"from": "read", "to": "out"}]}`, nil)
	run := a.settle(flow, a.start(flow, map[string]any{"input": map[string]any{}}))
	if run.Status != store.StatusSucceeded {
		t.Fatalf("run %+v", run)
	}
	var list struct {
		Checkpoints []struct {
			ID    string      `json:"id"`
			Node  string      `json:"node"`
			Usage flows.Usage `json:"usage"`
		} `json:"checkpoints"`
	}
	a.must(http.StatusOK, "GET", "/api/flows/"+flow+"/runs/"+run.ID+"/checkpoints", nil).into(t, &list)
	want := map[string]flows.Usage{
		"write": {InputTokens: 1512, OutputTokens: 3, CacheWriteTokens: 1500},
		"read":  {InputTokens: 1514, OutputTokens: 4, CacheReadTokens: 1500},
	}
	ids := map[string]string{}
	for _, c := range list.Checkpoints {
		if w, ok := want[c.Node]; ok {
			ids[c.Node] = c.ID
			if c.Usage != w {
				t.Errorf("checkpoint of %s in the history: usage %+v, want %+v", c.Node, c.Usage, w)
			}
		}
	}
	if len(ids) != 2 {
		t.Fatalf("the history has no checkpoint of write or read: %+v", list.Checkpoints)
	}
	for node, id := range ids {
		var one struct {
			Usage map[string]int64 `json:"usage"`
		}
		a.must(http.StatusOK, "GET", "/api/flows/"+flow+"/runs/"+run.ID+"/checkpoints/"+id, nil).into(t, &one)
		w := want[node]
		if one.Usage["cache_read_tokens"] != w.CacheReadTokens || one.Usage["cache_write_tokens"] != w.CacheWriteTokens {
			t.Errorf("checkpoint %s of %s: usage %v, want cache_read_tokens %d and cache_write_tokens %d",
				id, node, one.Usage, w.CacheReadTokens, w.CacheWriteTokens)
		}
	}
}
