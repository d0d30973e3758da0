package nodes_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/flows/nodes"
	"github.com/sluicehq/sluice/flows/nodes/llmtest"
	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/storetest"
)

// Nothing crosses between workspaces, caches and shared scopes included
// (docs/teams.md): the same tool call, embedding or graded rubric in two workspaces'
// flows reaches the upstream once for each workspace, never served from the other's
// result; a shared scope of the same name (memory, long-term store, vector collection)
// is each workspace's own, shared by its flows only. The default workspace's shared
// scopes keep their keys.
func TestCachesAndSharedScopesStayInTheirWorkspace(t *testing.T) {
	storetest.Each(t, func(t *testing.T, r *store.Redis) {
		ctx := context.Background()
		base := storetest.FlowID(t)
		acme, acme2, beta := "acme."+base, "acme."+base+"-2", "beta."+base
		for _, f := range []string{base, acme, acme2, beta} {
			storetest.DeleteFlowKeys(t, r, f)
		}
		shared := base // the name of the shared scope each flow's nodes give
		t.Cleanup(func() {
			for _, kind := range []string{"m", "st", "v"} {
				for _, ws := range []string{"", "acme.", "beta."} {
					r.DeleteKeys(ctx, "sluice:{"+kind+":s:"+ws+shared+"*")
				}
			}
		})
		srv := llmtest.New(t)
		env := srv.Env(0)
		env.HTTP = loopbackOK()
		env.Cache, env.Memory, env.Vectors = store.NewCache(r), store.NewMemory(r), store.NewVectors(r)

		t.Run("a tool call", func(t *testing.T) {
			up, hits := countingServer(t, func(w http.ResponseWriter, r *http.Request) {
				w.Write([]byte(`{"balance": 1200}`))
			})
			h := buildCached(t, env, "http", `{"url": "`+up.URL+`/account"}`, "1h")
			runStep(t, h, memoryStep(t, acme, `{}`))
			runStep(t, h, memoryStep(t, acme, `{}`))
			if hits.Load() != 1 {
				t.Fatalf("the same request twice in one flow reached the upstream %d times, want once (cached)", hits.Load())
			}
			runStep(t, h, memoryStep(t, beta, `{}`))
			if hits.Load() != 2 {
				t.Errorf("another workspace's same request reached the upstream %d times in all, want 2: it was served acme's result", hits.Load())
			}
		})

		t.Run("an embedding", func(t *testing.T) {
			e := buildCached(t, env, "embed", `{"model": "emb", "dimensions": 16, "texts": ".texts"}`, "1h")
			n := len(srv.EmbeddingRequests())
			runStep(t, e, memoryStep(t, acme, `{"texts": ["acme's quarterly numbers"]}`))
			res := runStep(t, e, memoryStep(t, beta, `{"texts": ["acme's quarterly numbers"]}`))
			if got := len(srv.EmbeddingRequests()) - n; got != 2 || res.Usage.InputTokens == 0 {
				t.Errorf("the same text embedded in two workspaces: %d requests (beta's usage %+v), want one each", got, res.Usage)
			}
		})

		t.Run("a graded rubric", func(t *testing.T) {
			srv.Respond(func(llmtest.Request) llmtest.Reply { return llmtest.Text(`{"pass": true, "reason": "it apologises"}`) })
			n := srv.Calls()
			req := nodes.GradeRequest{Run: "r1", Rubric: "The reply apologises.", Output: map[string]any{"reply": "We apologise."}}
			for _, f := range []string{acme, acme, beta} {
				req.Flow = f
				if _, err := env.Grade(ctx, req); err != nil {
					t.Fatal(err)
				}
			}
			if got := srv.Calls() - n; got != 2 {
				t.Errorf("one rubric and output graded in acme twice and beta once: %d model calls, want 2 (acme's second cached, beta's its own)", got)
			}
		})

		t.Run("a shared memory session", func(t *testing.T) {
			put := buildIn(t, env, "memory", `{"operation": "append", "session": "s1", "shared": "`+shared+`", "messages": "{role: \"user\", content: .say}"}`)
			get := buildIn(t, env, "memory", `{"session": "s1", "shared": "`+shared+`"}`)
			runStep(t, put, memoryStep(t, acme, `{"say": "acme's launch is on the 9th"}`))
			if got := asJSON(runStep(t, get, memoryStep(t, acme2, `{}`)).Output); !strings.Contains(got, "launch") {
				t.Errorf("another flow of acme loaded %s from the shared session, want acme's message", got)
			}
			if got := asJSON(runStep(t, get, memoryStep(t, beta, `{}`)).Output); got != "[]" {
				t.Errorf("beta loaded %s from a shared session of the same name, want nothing", got)
			}
			runStep(t, put, memoryStep(t, base, `{"say": "the default workspace's"}`))
			if n := r.Client.Exists(ctx, store.SessionKeys("s:"+shared, "s1").Messages()).Val(); n != 1 {
				t.Errorf("the default workspace's shared session is not under its keys of before workspaces (s:%s)", shared)
			}
		})

		t.Run("a shared long-term store", func(t *testing.T) {
			put := buildIn(t, env, "memory_store", `{"operation": "put", "namespace": ["customers"], "key": "c1", "value": ".v", "shared": "`+shared+`"}`)
			get := buildIn(t, env, "memory_store", `{"operation": "get", "namespace": ["customers"], "key": "c1", "shared": "`+shared+`"}`)
			search := buildIn(t, env, "memory_store", `{"namespace": ["customers"], "shared": "`+shared+`"}`)
			runStep(t, put, memoryStep(t, acme, `{"v": {"card": "acme's card on file"}}`))
			if got := asJSON(runStep(t, get, memoryStep(t, acme2, `{}`)).Output); !strings.Contains(got, "card") {
				t.Errorf("another flow of acme got %s from the shared store, want acme's item", got)
			}
			if got := runStep(t, get, memoryStep(t, beta, `{}`)).Output; got != nil {
				t.Errorf("beta got %s from a shared store of the same name, want nothing", asJSON(got))
			}
			if got := asJSON(runStep(t, search, memoryStep(t, beta, `{}`)).Output); got != "[]" {
				t.Errorf("beta's search of a shared store of the same name found %s, want nothing", got)
			}
		})

		t.Run("a shared vector collection", func(t *testing.T) {
			up := buildIn(t, env, "vector_store", `{"operation": "upsert", "collection": "kb", "model": "emb", "dimensions": 64, "shared": "`+shared+`"}`)
			search := buildIn(t, env, "vector_store", `{"collection": "kb", "model": "emb", "dimensions": 64, "k": 5, "shared": "`+shared+`"}`)
			runStep(t, up, memoryStep(t, acme, `{"chunks": [{"text": "Acme's merger closes in March.", "metadata": {"source": "board.md"}}]}`))
			if got := asJSON(runStep(t, search, memoryStep(t, acme2, `{"question": "when does the merger close?"}`)).Output); !strings.Contains(got, "merger") {
				t.Errorf("another flow of acme found %s in the shared collection, want acme's chunk", got)
			}
			if got := asJSON(runStep(t, search, memoryStep(t, beta, `{"question": "when does the merger close?"}`)).Output); got != "[]" {
				t.Errorf("beta found %s in a shared collection of the same name, want nothing", got)
			}
		})
	})
}
