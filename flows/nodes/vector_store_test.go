package nodes_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/flows"
	"github.com/sluicehq/sluice/flows/nodes"
	"github.com/sluicehq/sluice/flows/nodes/llmtest"
	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/storetest"
)

// The embed component sends batch_size texts per request to /v1/embeddings and gives the
// vectors back in order; with the node's cache set, a batch embedded before is not sent
// again.
func TestEmbedBatchesAndCaches(t *testing.T) {
	storetest.Each(t, func(t *testing.T, r *store.Redis) {
		srv := llmtest.New(t)
		env := srv.Env(0)
		env.Cache = store.NewCache(r)
		flow := storetest.FlowID(t)
		storetest.DeleteFlowKeys(t, r, flow)
		e := buildCached(t, env, "embed", `{"model": "emb", "dimensions": 16, "batch_size": 2, "texts": ".texts"}`, "1h")
		st := `{"texts": ["red apple", "green pear", "red cherry", {"text": "blue sky"}, "warm sun"]}`
		res := runStep(t, e, memoryStep(t, flow, st))
		vecs := res.Update["embeddings"].([]any)
		if len(vecs) != 5 || len(srv.EmbeddingRequests()) != 3 {
			t.Fatalf("%d vectors in %d requests, want 5 in 3", len(vecs), len(srv.EmbeddingRequests()))
		}
		if req := srv.EmbeddingRequests()[0]; req.Model != "emb" || req.Dimensions != 16 || strings.Join(req.Input, "|") != "red apple|green pear" || req.EncodingFormat != "float" {
			t.Errorf("first request %+v", req)
		}
		want := llmtest.Embed("blue sky", 16)
		got := vecs[3].([]any)
		for i := range want {
			if float32(got[i].(float64)) != want[i] {
				t.Fatalf("vector 3 is %v, want the embedding of blue sky %v", got, want)
			}
		}
		if res.Usage.InputTokens == 0 {
			t.Error("no token usage recorded")
		}
		again := runStep(t, e, memoryStep(t, flow, st))
		if len(srv.EmbeddingRequests()) != 3 || again.Usage.InputTokens != 0 {
			t.Errorf("the same texts again made %d requests (usage %+v), want none", len(srv.EmbeddingRequests())-3, again.Usage)
		}
	})
}

func TestEmbedRefusesAProviderWithoutEmbeddings(t *testing.T) {
	env := &nodes.Env{Providers: map[string]*nodes.Provider{"claude": {Name: "claude", Type: nodes.ProviderAnthropic, BaseURL: "https://api.anthropic.com"}}}
	if _, err := tryBuildIn(env, "embed", `{"provider": "claude", "model": "m"}`); err == nil || !strings.Contains(err.Error(), "no embeddings API") {
		t.Errorf("an Anthropic provider: %v", err)
	}
	srv := llmtest.New(t)
	srv.FailEmbeddings(400)
	e := buildIn(t, srv.Env(0), "embed", `{"model": "m", "texts": "[\"x\"]"}`)
	if _, err := e.Run(context.Background(), memoryStep(t, "f", `{}`)); !flows.IsPermanent(err) || !strings.Contains(err.Error(), "400") {
		t.Errorf("a 400 from the provider: %v, want a permanent error", err)
	}
}

// Chunks upserted in one run are found by a question in another; re-ingesting a source
// replaces what it no longer says; filters and thresholds narrow the search; delete
// removes by filter.
func TestVectorStoreIngestsAndRetrieves(t *testing.T) {
	storetest.Each(t, func(t *testing.T, r *store.Redis) {
		srv := llmtest.New(t)
		env := srv.Env(0)
		env.Vectors = store.NewVectors(r)
		flow := storetest.FlowID(t)
		storetest.DeleteFlowKeys(t, r, flow)
		up := buildIn(t, env, "vector_store", `{"operation": "upsert", "collection": "kb", "model": "emb", "dimensions": 256}`)
		res := runStep(t, up, memoryStep(t, flow, `{"chunks": [
			{"text": "Redis streams keep messages in order with consumer groups.", "metadata": {"source": "streams.md"}},
			{"text": "Consumer groups let several workers share one stream.", "metadata": {"source": "streams.md"}},
			{"text": "Bake bread at two hundred degrees for forty minutes.", "metadata": {"source": "bread.md"}},
			{"text": "Knead the dough until it is smooth.", "metadata": {"source": "bread.md"}}]}`))
		if out := asJSON(res.Output); !strings.Contains(out, `"upserted":4`) {
			t.Fatalf("upsert: %s", out)
		}
		search := buildIn(t, env, "vector_store", `{"collection": "kb", "model": "emb", "dimensions": 256, "k": 2}`)
		hits := runStep(t, search, memoryStep(t, flow, `{"question": "How do consumer groups share a stream?"}`)).Update["results"].([]any)
		if len(hits) != 2 {
			t.Fatalf("hits %s", asJSON(hits))
		}
		for _, h := range hits {
			if m := h.(map[string]any)["metadata"].(map[string]any); m["source"] != "streams.md" {
				t.Errorf("a question about streams found %s", asJSON(h))
			}
		}
		onlyBread := buildIn(t, env, "vector_store", `{"collection": "kb", "model": "emb", "dimensions": 256, "filter": {"source": "bread.md"}, "k": 10}`)
		if got := asJSON(runStep(t, onlyBread, memoryStep(t, flow, `{"question": "consumer groups"}`)).Output); strings.Contains(got, "streams.md") || !strings.Contains(got, "bread.md") {
			t.Errorf("filtered to bread.md: %s", got)
		}
		strict := buildIn(t, env, "vector_store", `{"collection": "kb", "model": "emb", "dimensions": 256, "score_threshold": 0.99}`)
		if got := runStep(t, strict, memoryStep(t, flow, `{"question": "unrelated words entirely"}`)).Output.([]any); len(got) != 0 {
			t.Errorf("a threshold of 0.99 kept %s", asJSON(got))
		}

		// bread.md ingested again says one thing only: its old chunks go.
		res = runStep(t, up, memoryStep(t, flow, `{"chunks": [{"text": "Bake bread at two hundred degrees for forty minutes.", "metadata": {"source": "bread.md"}}]}`))
		if out := asJSON(res.Output); !strings.Contains(out, `"replaced_stale":1`) {
			t.Errorf("re-ingest: %s, want the kneading chunk replaced", out)
		}
		if got := asJSON(runStep(t, onlyBread, memoryStep(t, flow, `{"question": "dough"}`)).Output); strings.Contains(got, "Knead") {
			t.Errorf("the stale chunk is still found: %s", got)
		}
		del := buildIn(t, env, "vector_store", `{"operation": "delete", "collection": "kb", "model": "emb", "filter": {"source": "streams.md"}}`)
		if out := asJSON(runStep(t, del, memoryStep(t, flow, `{}`)).Output); !strings.Contains(out, `"deleted":2`) {
			t.Errorf("delete by filter: %s", out)
		}

		// Another model's embeddings do not go into the collection, for good.
		other := buildIn(t, env, "vector_store", `{"operation": "upsert", "collection": "kb", "model": "emb", "dimensions": 64}`)
		_, err := other.Run(context.Background(), memoryStep(t, flow, `{"chunks": ["x"]}`))
		var fe *flows.Error
		if !errors.As(err, &fe) || fe.Code != flows.Conflict || !flows.IsPermanent(err) || fe.Path != "params.model" {
			t.Errorf("64 dimensions into a collection of 256: %v", err)
		}
	})
}

// As an agent's tool, the vector store searches with the model's query within the
// node's filter.
func TestVectorStoreAsAToolRetrievesForAnAgent(t *testing.T) {
	storetest.Each(t, func(t *testing.T, r *store.Redis) {
		srv := llmtest.New(t)
		env := srv.Env(0)
		env.Vectors = store.NewVectors(r)
		flow := storetest.FlowID(t)
		storetest.DeleteFlowKeys(t, r, flow)
		up := buildIn(t, env, "vector_store", `{"operation": "upsert", "collection": "kb", "model": "emb", "dimensions": 128}`)
		runStep(t, up, memoryStep(t, flow, `{"chunks": [{"text": "The office opens at nine.", "metadata": {"source": "hours.md", "team": "a"}}, {"text": "The office opens at ten.", "metadata": {"source": "hours-b.md", "team": "b"}}]}`))
		tool := buildIn(t, env, "vector_store", `{"collection": "kb", "model": "emb", "dimensions": 128, "tool_name": "search_docs", "filter": {"team": "a"}}`).(flows.Tool)
		srv.Reply(llmtest.Calls(llmtest.Call("c1", "search_docs", `{"query": "when does the office open", "filter": {"team": "b"}}`)), llmtest.Text("At nine [hours.md]."))
		agent := buildIn(t, env, "agent", `{"model": "m", "user": "When does the office open?"}`)
		s := memoryStep(t, flow, `{}`)
		s.Tools = map[string]flows.Tool{"search_docs": tool}
		if res := runStep(t, agent, s); res.Output != "At nine [hours.md]." {
			t.Errorf("answer %v", res.Output)
		}
		got := srv.Requests()[1].Last().Text()
		if !strings.Contains(got, "opens at nine") || strings.Contains(got, "ten") {
			t.Errorf("the tool gave the model %s, want team a's passage only (the node's filter holds)", got)
		}
	})
}
