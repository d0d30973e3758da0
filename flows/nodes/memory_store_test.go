package nodes_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/flows"
	"github.com/sluicehq/sluice/flows/nodes"
	"github.com/sluicehq/sluice/flows/nodes/llmtest"
	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/storetest"
)

// Steps put, get, search and delete items under a namespace made from the state;
// a search reaches the namespaces below its own, keeps what matches the filter and
// ranks by the words of the query.
func TestMemoryStorePutsGetsSearchesAndDeletes(t *testing.T) {
	storetest.Each(t, func(t *testing.T, r *store.Redis) {
		flow := storetest.FlowID(t)
		storetest.DeleteFlowKeys(t, r, flow)
		env := &nodes.Env{Memory: store.NewMemory(r)}
		put := buildIn(t, env, "memory_store", `{"operation": "put", "namespace": ["users", "{{.user}}", "{{.kind}}"], "key": "{{.key}}", "value": ".value", "ttl": "1h"}`)
		for _, st := range []string{
			`{"user": "42", "kind": "prefs", "key": "lang", "value": {"topic": "code", "text": "Prefers Go over Python"}}`,
			`{"user": "42", "kind": "prefs", "key": "food", "value": {"topic": "food", "text": "Likes green tea"}}`,
			`{"user": "42", "kind": "facts", "key": "city", "value": {"topic": "home", "text": "Lives in Lyon"}}`,
			`{"user": "7", "kind": "prefs", "key": "lang", "value": {"topic": "code", "text": "Prefers Rust"}}`,
		} {
			runStep(t, put, memoryStep(t, flow, st))
		}
		get := buildIn(t, env, "memory_store", `{"operation": "get", "namespace": ["users", "{{.user}}", "prefs"], "key": "lang", "as": "pref"}`)
		if got := asJSON(runStep(t, get, memoryStep(t, flow, `{"user": "42"}`)).Update["pref"]); got != `{"text":"Prefers Go over Python","topic":"code"}` {
			t.Errorf("get: %s", got)
		}
		if got := runStep(t, get, memoryStep(t, flow, `{"user": "99"}`)).Output; got != nil {
			t.Errorf("get of a missing item: %v, want null", got)
		}

		search := buildIn(t, env, "memory_store", `{"namespace": ["users", "{{.user}}"], "query": "{{.q}}"}`)
		got := asJSON(runStep(t, search, memoryStep(t, flow, `{"user": "42", "q": "which language, go or python?"}`)).Output)
		if !strings.Contains(got, `"key":"lang"`) || strings.Contains(got, "Rust") || strings.Contains(got, "tea") {
			t.Errorf("search for go or python under users/42 found %s, want only user 42's lang", got)
		}
		all := buildIn(t, env, "memory_store", `{"namespace": ["users", "42"]}`)
		if got := runStep(t, all, memoryStep(t, flow, `{}`)).Output.([]any); len(got) != 3 {
			t.Errorf("search without a query under users/42 found %d items, want its 3 (prefs and facts)", len(got))
		}
		filtered := buildIn(t, env, "memory_store", `{"namespace": ["users"], "filter": {"topic": ["code", "home"]}}`)
		got = asJSON(runStep(t, filtered, memoryStep(t, flow, `{}`)).Output)
		if strings.Count(got, `"key"`) != 3 || strings.Contains(got, "tea") {
			t.Errorf("filter topic code or home found %s, want lang twice and city", got)
		}

		k := store.StoreScopeKeys("f:" + flow)
		if keys, _ := r.Client.Keys(context.Background(), k.Item("*")).Result(); len(keys) != 4 {
			t.Fatalf("%d item keys, want 4", len(keys))
		}
		for _, key := range r.Client.Keys(context.Background(), k.Item("*")).Val() {
			if ttl := r.Client.PTTL(context.Background(), key).Val(); ttl <= 59*time.Minute || ttl > time.Hour {
				t.Errorf("%s expires in %s, want the put's ttl of 1h", key, ttl)
			}
		}
		del := buildIn(t, env, "memory_store", `{"operation": "delete", "namespace": ["users", "42", "prefs"], "key": "food"}`)
		if got := asJSON(runStep(t, del, memoryStep(t, flow, `{}`)).Output); !strings.Contains(got, `"deleted":true`) {
			t.Errorf("delete: %s", got)
		}
		if got := runStep(t, all, memoryStep(t, flow, `{}`)).Output.([]any); len(got) != 2 {
			t.Errorf("after the delete %d items, want 2", len(got))
		}
	})
}

// An item that expired is gone from searches too, and its path leaves the index.
func TestMemoryStoreForgetsExpiredItems(t *testing.T) {
	storetest.Each(t, func(t *testing.T, r *store.Redis) {
		flow := storetest.FlowID(t)
		storetest.DeleteFlowKeys(t, r, flow)
		m := store.NewMemory(r)
		ctx := context.Background()
		scope := "f:" + flow
		if err := m.PutItem(ctx, scope, flows.StoreItem{Namespace: []string{"a"}, Key: "k", Value: "v"}, time.Hour); err != nil {
			t.Fatal(err)
		}
		// Expiry as Redis does it, without waiting an hour.
		k := store.StoreScopeKeys(scope)
		r.Client.Del(ctx, r.Client.Keys(ctx, k.Item("*")).Val()...)
		items, err := m.ListItems(ctx, scope, []string{"a"}, 0, 0)
		if err != nil || len(items) != 0 {
			t.Fatalf("list after expiry: %v, %v", items, err)
		}
		if n := r.Client.ZCard(ctx, k.Index()).Val(); n != 0 {
			t.Errorf("the index still holds %d paths of expired items", n)
		}
	})
}

// As an agent's tools, the store offers put, get, search and delete in the node's
// namespace: the model stores a fact in one turn and finds it in the next.
func TestMemoryStoreToolsLetAnAgentRememberAndRecall(t *testing.T) {
	storetest.Each(t, func(t *testing.T, r *store.Redis) {
		flow := storetest.FlowID(t)
		storetest.DeleteFlowKeys(t, r, flow)
		srv := llmtest.New(t)
		env := srv.Env(0)
		env.Memory = store.NewMemory(r)
		mem := buildIn(t, env, "memory_store", `{"namespace": ["users", "{{.user}}"], "tool_name": "prefs", "tools": ["put", "search"]}`).(flows.Tool)
		srv.Reply(
			llmtest.Calls(llmtest.Call("c1", "prefs_put", `{"key": "editor", "value": {"text": "uses vim"}}`)),
			llmtest.Calls(llmtest.Call("c2", "prefs_search", `{"query": "vim"}`)),
			llmtest.Text("You use vim."),
		)
		agent := buildIn(t, env, "agent", `{"model": "m", "user": "What editor do I use?"}`)
		s := memoryStep(t, flow, `{"user": "u1"}`)
		s.Tools = map[string]flows.Tool{"prefs": mem}
		res := runStep(t, agent, s)
		if res.Output != "You use vim." {
			t.Errorf("answer %v", res.Output)
		}
		reqs := srv.Requests()
		if names := strings.Join(reqs[0].ToolNames(), ","); names != "prefs_put,prefs_search" {
			t.Errorf("tools offered %s, want prefs_put and prefs_search only", names)
		}
		if d := reqs[0].Tools[0].Function.Description; !strings.Contains(d, "users/u1") {
			t.Errorf("tool description %q does not say its namespace", d)
		}
		if found := reqs[2].Last().Text(); !strings.Contains(found, "uses vim") || !strings.Contains(found, `"namespace":["users","u1"]`) {
			t.Errorf("the search gave the model %s, want the stored item", found)
		}
		it, err := env.Memory.GetItem(context.Background(), "f:"+flow, []string{"users", "u1"}, "editor", 0)
		if err != nil || it == nil || asJSON(it.Value) != `{"text":"uses vim"}` {
			t.Errorf("stored item %+v, %v", it, err)
		}
	})
}
