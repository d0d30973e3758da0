package store_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/flows"
	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/storetest"
)

// worker opens a second connection and its own Vectors: another process's index.
func worker(t *testing.T, r *store.Redis) *store.Vectors {
	t.Helper()
	url := storetest.URL()
	if r.Embedded() {
		url = r.URL()
	}
	c, err := store.Open(context.Background(), store.Options{URL: url})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return store.NewVectors(c)
}

func vec(xs ...float32) []float32 { return xs }

func ids(hits []flows.VectorHit) string {
	var out []string
	for _, h := range hits {
		out = append(out, h.ID)
	}
	return strings.Join(out, ",")
}

// What one worker writes, another finds: upserts, replacements and deletes reach its
// index by the changes since its version; a search ranks by cosine similarity, keeps k,
// filters by metadata and drops what is below the minimum score.
func TestVectorCollectionsAreSharedByWorkers(t *testing.T) {
	storetest.Each(t, func(t *testing.T, r *store.Redis) {
		ctx := context.Background()
		flow := storetest.FlowID(t)
		storetest.DeleteFlowKeys(t, r, flow)
		scope, coll := "f:"+flow, "docs"
		a, b := store.NewVectors(r), worker(t, r)
		if hits, err := b.Search(ctx, scope, coll, flows.VectorQuery{Vector: vec(1, 0, 0), K: 3}); err != nil || len(hits) != 0 {
			t.Fatalf("a search of a collection that does not exist: %v, %v", hits, err)
		}
		docs := []flows.VectorDoc{
			{ID: "x", Text: "about x", Metadata: map[string]any{"lang": "en", "page": 1}, Vector: vec(1, 0, 0)},
			{ID: "xy", Text: "x and y", Metadata: map[string]any{"lang": "fr"}, Vector: vec(1, 1, 0)},
			{ID: "y", Text: "about y", Metadata: map[string]any{"lang": "en", "page": 2}, Vector: vec(0, 2, 0)},
			{ID: "z", Text: "about z", Vector: vec(0, 0, 3)},
		}
		if _, err := a.Upsert(ctx, scope, coll, "m", docs); err != nil {
			t.Fatal(err)
		}
		hits, err := b.Search(ctx, scope, coll, flows.VectorQuery{Vector: vec(2, 0.2, 0), K: 2})
		if err != nil || ids(hits) != "x,xy" || hits[0].Text != "about x" || hits[0].Score < 0.99 {
			t.Fatalf("search near x: %+v, %v", hits, err)
		}
		if got := ids(must(b.Search(ctx, scope, coll, flows.VectorQuery{Vector: vec(1, 0.9, 0), K: 4, Filter: map[string]any{"lang": "en"}}))); got != "x,y" {
			t.Errorf("filtered by lang en: %s", got)
		}
		if got := ids(must(b.Search(ctx, scope, coll, flows.VectorQuery{Vector: vec(1, 1, 0), K: 4, Filter: map[string]any{"page": []any{2, 3}}}))); got != "y" {
			t.Errorf("filtered by page 2 or 3: %s", got)
		}
		if got := ids(must(b.Search(ctx, scope, coll, flows.VectorQuery{Vector: vec(1, 0, 0), K: 4, MinScore: 0.5, HasMinScore: true}))); got != "x,xy" {
			t.Errorf("with a minimum score of 0.5: %s", got)
		}
		// A replacement and a delete by one worker reach the other's index.
		if _, err := a.Upsert(ctx, scope, coll, "m", []flows.VectorDoc{{ID: "z", Text: "z moved", Vector: vec(1, 0, 0.1)}}); err != nil {
			t.Fatal(err)
		}
		if n, err := a.Delete(ctx, scope, coll, []string{"x", "missing"}); err != nil || n != 1 {
			t.Fatalf("delete: %d, %v", n, err)
		}
		hits = must(b.Search(ctx, scope, coll, flows.VectorQuery{Vector: vec(1, 0, 0), K: 2}))
		if ids(hits) != "z,xy" || hits[0].Text != "z moved" {
			t.Errorf("after the replace and delete: %+v", hits)
		}
		st, _ := b.Stats(ctx, scope, coll)
		if st.Chunks != 3 || st.Dimensions != 3 {
			t.Errorf("stats %+v", st)
		}
		// Embeddings of another length or model are refused, the query's too.
		if _, err := a.Upsert(ctx, scope, coll, "m", []flows.VectorDoc{{ID: "w", Text: "w", Vector: vec(1, 2)}}); !errors.Is(err, store.ErrVectorMismatch) {
			t.Errorf("2 dimensions into a collection of 3: %v", err)
		}
		if _, err := a.Upsert(ctx, scope, coll, "other-model", []flows.VectorDoc{{ID: "w", Text: "w", Vector: vec(1, 2, 3)}}); !errors.Is(err, store.ErrVectorMismatch) || !strings.Contains(err.Error(), "model m") {
			t.Errorf("another model: %v", err)
		}
		if _, err := b.Search(ctx, scope, coll, flows.VectorQuery{Vector: vec(1, 2), K: 1}); !errors.Is(err, store.ErrVectorMismatch) {
			t.Errorf("a query of 2 dimensions: %v", err)
		}
		// A dropped and recreated collection is a new one to every index.
		if err := a.Drop(ctx, scope, coll); err != nil {
			t.Fatal(err)
		}
		if _, err := a.Upsert(ctx, scope, coll, "m2", []flows.VectorDoc{{ID: "n", Text: "new", Vector: vec(0, 1)}}); err != nil {
			t.Fatal(err)
		}
		if got := ids(must(b.Search(ctx, scope, coll, flows.VectorQuery{Vector: vec(0, 1), K: 5}))); got != "n" {
			t.Errorf("after drop and recreate: %s", got)
		}
		if got := ids(must(b.Search(ctx, "f:"+storetest.FlowID(t), coll, flows.VectorQuery{Vector: vec(0, 1), K: 5}))); got != "" {
			t.Errorf("another flow's collection of the same name: %s", got)
		}
	})
}

// More deletions than chunks prune the deleted ids; an index that was behind them
// reloads the whole collection instead of missing a delete.
func TestVectorIndexBehindAPruneReloads(t *testing.T) {
	storetest.Each(t, func(t *testing.T, r *store.Redis) {
		ctx := context.Background()
		flow := storetest.FlowID(t)
		storetest.DeleteFlowKeys(t, r, flow)
		scope, coll := "f:"+flow, "c"
		a, b := store.NewVectors(r), worker(t, r)
		var docs []flows.VectorDoc
		for i := 0; i < 1200; i++ {
			docs = append(docs, flows.VectorDoc{ID: fmt.Sprint(i), Text: fmt.Sprint(i), Vector: vec(rand.Float32(), rand.Float32(), 1)})
		}
		docs = append(docs, flows.VectorDoc{ID: "keep", Text: "keep", Vector: vec(-1, -1, 0)})
		must(a.Upsert(ctx, scope, coll, "m", docs))
		must(b.Search(ctx, scope, coll, flows.VectorQuery{Vector: vec(1, 1, 1), K: 1}))
		var gone []string
		for i := 0; i < 1200; i++ {
			gone = append(gone, fmt.Sprint(i))
		}
		if n := must(a.Delete(ctx, scope, coll, gone)); n != 1200 {
			t.Fatalf("deleted %d", n)
		}
		k := store.CollectionKeys(scope, coll)
		if n := r.Client.ZCard(ctx, k.Changes()).Val(); n != 1 {
			t.Errorf("changes hold %d ids after the prune, want only the live one", n)
		}
		if got := ids(must(b.Search(ctx, scope, coll, flows.VectorQuery{Vector: vec(1, 1, 1), K: 5}))); got != "keep" {
			t.Errorf("the index behind the prune found %s, want only keep", got)
		}
	})
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
