package nodes

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/sluicehq/sluice/flows"
)

// Vectors are the vector store's collections (store.Vectors: Redis is the store of
// record, the search runs in this process over an index that follows it). A scope is
// "f:FLOW" or "s:NAME", as for Memory.
type Vectors interface {
	// Upsert adds or replaces chunks embedded by model; it returns the new version.
	Upsert(ctx context.Context, scope, collection, model string, docs []flows.VectorDoc) (int64, error)
	// Search returns the chunks most similar to the query.
	Search(ctx context.Context, scope, collection string, q flows.VectorQuery) ([]flows.VectorHit, error)
	// Select returns the ids of the chunks whose metadata matches filter.
	Select(ctx context.Context, scope, collection string, filter map[string]any) ([]string, error)
	// Delete deletes chunks by id and says how many there were.
	Delete(ctx context.Context, scope, collection string, ids []string) (int, error)
	// Drop deletes the collection.
	Drop(ctx context.Context, scope, collection string) error
}

func vectorStoreSpec(env *Env) flows.Spec {
	return flows.Spec{
		Name:     "vector_store",
		Title:    "Vector store",
		Category: "data",
		Description: "A collection of chunks with their embeddings, in Redis (any worker answers any query), searched by " +
			"similarity. upsert embeds the chunks documents makes ({text, metadata} as split_text writes them, or strings) " +
			"with the named embedding model and adds them, each under its id (given, or a hash of its source and text, so " +
			"that ingesting a document again replaces it: with replace_source, the chunks of a source that are no longer " +
			"in it go too); search embeds the query and returns the k most similar chunks {id, text, metadata, score} " +
			"(cosine similarity) that match filter and reach score_threshold, under \"as\"; delete removes chunks by ids or " +
			"filter, or all of them. A collection is the flow's own unless shared names a scope other flows of its workspace share. " +
			"Attached to an agent's tools port it is a search tool: the model gives the query (and k, filter).",
		Ports: []flows.Port{inPort, outPort, toolPort},
		Params: json.RawMessage(`{
			"type": "object", "additionalProperties": false, "required": ["collection", "model"],
			"properties": {
				"operation": {"enum": ["upsert", "search", "delete"], "default": "search", "description": "What a step does."},
				"collection": {"type": "string", "pattern": "^[a-z0-9][a-z0-9_-]{0,63}$", "description": "The collection's name."},` + sharedParam + `,` + embedParams + `,
				"documents": {"type": "string", "format": "jq", "default": ".chunks", "description": "upsert: jq making the chunks, a list of {text, metadata, id} or strings."},
				"replace_source": {"type": "boolean", "default": true, "description": "upsert: delete the chunks of the upserted chunks' sources (metadata.source) that are not among them: a document ingested again loses what it no longer says."},
				"query": {"type": "string", "format": "template", "default": "{{.question}}", "description": "search: the text to find similar chunks to, a template."},
				"k": {"type": "integer", "minimum": 1, "maximum": 100, "default": 4, "description": "search: the most chunks returned."},
				"filter": {"type": "object", "description": "search, delete: only chunks whose metadata has these values (a list: any of them), e.g. {\"source\": \"guide.md\"}."},
				"score_threshold": {"type": "number", "minimum": -1, "maximum": 1, "description": "search: leave out chunks less similar than this (cosine similarity, 1 is the same direction)."},
				"ids": {"type": "string", "format": "jq", "description": "delete: jq making the ids to delete."},
				"all": {"type": "boolean", "default": false, "description": "delete: the whole collection."},
				"as": {"type": "string", "pattern": "^[A-Za-z_][A-Za-z0-9_]*$", "default": "results", "description": "State key the result is stored under."},` + toolParams + `
			}
		}`),
		Example: json.RawMessage(`{"operation": "search", "collection": "handbook", "model": "text-embedding-3-small", "query": "{{.question}}", "k": 4, "score_threshold": 0.3}`),
		New:     func(b *flows.Build) (flows.Component, error) { return newVectorStore(env, b) },
	}
}

// VectorStore upserts, searches or deletes chunks of a collection.
type VectorStore struct {
	env        *Env
	op         string
	collection string
	shared     string
	embed      embedConfig
	documents  *flows.JQ
	replace    bool
	query      *flows.Template
	k          int
	filter     map[string]any
	threshold  *float64
	ids        *flows.JQ
	all        bool
	as         string
	ttl        time.Duration
	budget     budget
	def        flows.ToolDef
}

var vectorToolArgs = json.RawMessage(`{"type": "object", "required": ["query"], "additionalProperties": false,
	"properties": {"query": {"type": "string", "description": "What to look for, in words."},
	               "k": {"type": "integer", "minimum": 1, "maximum": 20, "description": "How many passages (default the node's k)."},
	               "filter": {"type": "object", "description": "Metadata the passages must have, e.g. {\"source\": \"guide.md\"}."}}}`)

func newVectorStore(env *Env, b *flows.Build) (flows.Component, error) {
	var p struct {
		toolConfig
		embedConfig
		Operation      string         `json:"operation"`
		Collection     string         `json:"collection"`
		Shared         string         `json:"shared"`
		Documents      string         `json:"documents"`
		ReplaceSource  bool           `json:"replace_source"`
		Query          string         `json:"query"`
		K              int            `json:"k"`
		Filter         map[string]any `json:"filter"`
		ScoreThreshold *float64       `json:"score_threshold"`
		IDs            string         `json:"ids"`
		All            bool           `json:"all"`
		As             string         `json:"as"`
	}
	if err := b.Decode(&p); err != nil {
		return nil, err
	}
	if err := p.embedConfig.check(env, flowOf(b), "params."); err != nil {
		return nil, err
	}
	v := &VectorStore{env: env, op: p.Operation, collection: p.Collection, shared: p.Shared, embed: p.embedConfig,
		replace: p.ReplaceSource, k: p.K, filter: p.Filter, threshold: p.ScoreThreshold, all: p.All, as: p.As,
		ttl: nodeCacheTTL(b), budget: newBudget(b)}
	var err error
	if v.documents, err = flows.CompileJQ(p.Documents); err != nil {
		return nil, &flows.Error{Code: flows.Invalid, Path: "params.documents", Err: err}
	}
	if v.query, err = flows.ParseTemplate(p.Query); err != nil {
		return nil, &flows.Error{Code: flows.Invalid, Path: "params.query", Err: err}
	}
	if p.IDs != "" {
		if v.ids, err = flows.CompileJQ(p.IDs); err != nil {
			return nil, &flows.Error{Code: flows.Invalid, Path: "params.ids", Err: err}
		}
	}
	if p.Operation == "delete" && v.ids == nil && len(p.Filter) == 0 && !p.All {
		return nil, &flows.Error{Code: flows.Invalid, Path: "params.ids", Message: "delete needs ids, a filter, or all"}
	}
	p.ToolParameters = nil
	v.def = p.def(b, fmt.Sprintf("Search the %s collection for the passages most relevant to a query. Cite the source of what you use.", p.Collection), vectorToolArgs)
	return v, nil
}

// Run upserts, searches or deletes.
func (v *VectorStore) Run(ctx context.Context, s *flows.Step) (*flows.Result, error) {
	if v.env.Vectors == nil {
		return nil, noRedis(s.Node, "the vector store")
	}
	var out any
	var usage flows.Usage
	var err error
	switch v.op {
	case "upsert":
		out, usage, err = v.upsert(ctx, s)
	case "delete":
		out, err = v.delete(ctx, s)
	default:
		var q string
		if q, err = v.query.Execute(ctx, s.Input); err != nil {
			return nil, templateError(s.Node, "params.query", err)
		}
		out, usage, err = v.search(ctx, s, q, v.k, v.filter)
	}
	if err != nil {
		return nil, err
	}
	return &flows.Result{Output: out, Update: map[string]any{v.as: out}, Usage: usage}, nil
}

func (v *VectorStore) scope(s *flows.Step) string { return scopeOf(s.Flow, v.shared) }

// storeError says where a refusal of the store came from; a mismatch of embeddings is
// for good (the same request cannot fit the next time).
func (v *VectorStore) storeError(s *flows.Step, err error) error {
	if flows.ErrorCode(err) == flows.Conflict {
		return flows.Permanent(&flows.Error{Code: flows.Conflict, Node: s.Node, Path: "params.model",
			Message: fmt.Sprintf("collection %s: %v (a collection holds the embeddings of one model; use another collection, or delete this one with all)", v.collection, err)})
	}
	return err
}

// chunkID is a chunk's id when it has none: a hash of its source and text, so that the
// same chunk ingested again replaces itself.
func chunkID(source, text string) string {
	h := sha256.Sum256([]byte(source + "\x00" + text))
	return hex.EncodeToString(h[:16])
}

func (v *VectorStore) upsert(ctx context.Context, s *flows.Step) (any, flows.Usage, error) {
	bad := func(msg string) error {
		return flows.Permanent(&flows.Error{Code: flows.Invalid, Node: s.Node, Path: "params.documents", Message: msg})
	}
	val, err := v.documents.First(ctx, s.Input, s.State)
	if err != nil {
		return nil, flows.Usage{}, flows.Permanent(&flows.Error{Code: flows.Invalid, Node: s.Node, Path: "params.documents", Err: err})
	}
	items, ok := val.([]any)
	if !ok {
		items = []any{val}
	}
	docs := make([]flows.VectorDoc, 0, len(items))
	texts := make([]string, 0, len(items))
	sources := map[string]bool{}
	for i, it := range items {
		var d flows.VectorDoc
		switch x := it.(type) {
		case string:
			d.Text = x
		case map[string]any:
			d.Text, _ = x["text"].(string)
			d.ID, _ = x["id"].(string)
			if m, ok := x["metadata"].(map[string]any); ok {
				d.Metadata = m
			} else if x["metadata"] != nil {
				return nil, flows.Usage{}, bad(fmt.Sprintf("chunk %d's metadata is %s, not an object", i, flows.TypeName(x["metadata"])))
			}
		case nil:
			continue
		default:
			return nil, flows.Usage{}, bad(fmt.Sprintf("chunk %d is %s; want {text, metadata} or a string", i, flows.TypeName(it)))
		}
		if strings.TrimSpace(d.Text) == "" {
			continue // nothing to embed, nothing to find
		}
		source, _ := d.Metadata["source"].(string)
		if source != "" {
			sources[source] = true
		}
		if d.ID == "" {
			d.ID = chunkID(source, d.Text)
		}
		docs = append(docs, d)
		texts = append(texts, d.Text)
	}
	vecs, usage, err := v.env.embed(ctx, s, v.embed, texts, v.ttl, v.budget)
	if err != nil {
		return nil, flows.Usage{}, err
	}
	for i := range docs {
		docs[i].Vector = vecs[i]
	}
	scope := v.scope(s)
	version, err := v.env.Vectors.Upsert(ctx, scope, v.collection, v.embed.Model, docs)
	if err != nil {
		return nil, flows.Usage{}, v.storeError(s, err)
	}
	stale := 0
	if v.replace && len(sources) > 0 {
		list := make([]any, 0, len(sources))
		for src := range sources {
			list = append(list, src)
		}
		sort.Slice(list, func(i, j int) bool { return list[i].(string) < list[j].(string) })
		had, err := v.env.Vectors.Select(ctx, scope, v.collection, map[string]any{"source": list})
		if err != nil {
			return nil, flows.Usage{}, err
		}
		keep := make(map[string]bool, len(docs))
		for _, d := range docs {
			keep[d.ID] = true
		}
		var gone []string
		for _, id := range had {
			if !keep[id] {
				gone = append(gone, id)
			}
		}
		if stale, err = v.env.Vectors.Delete(ctx, scope, v.collection, gone); err != nil {
			return nil, flows.Usage{}, err
		}
	}
	return map[string]any{"collection": v.collection, "upserted": len(docs), "replaced_stale": stale, "version": version}, usage, nil
}

func (v *VectorStore) delete(ctx context.Context, s *flows.Step) (any, error) {
	scope := v.scope(s)
	if v.all {
		if err := v.env.Vectors.Drop(ctx, scope, v.collection); err != nil {
			return nil, err
		}
		return map[string]any{"collection": v.collection, "dropped": true}, nil
	}
	var ids []string
	if v.ids != nil {
		val, err := v.ids.First(ctx, s.Input, s.State)
		if err != nil {
			return nil, flows.Permanent(&flows.Error{Code: flows.Invalid, Node: s.Node, Path: "params.ids", Err: err})
		}
		list, ok := val.([]any)
		if !ok {
			list = []any{val}
		}
		for i, x := range list {
			id, ok := x.(string)
			if !ok {
				return nil, flows.Permanent(&flows.Error{Code: flows.Invalid, Node: s.Node, Path: "params.ids", Message: fmt.Sprintf("id %d is %s, not a string", i, flows.TypeName(x))})
			}
			ids = append(ids, id)
		}
	}
	if len(v.filter) > 0 {
		found, err := v.env.Vectors.Select(ctx, scope, v.collection, v.filter)
		if err != nil {
			return nil, err
		}
		ids = append(ids, found...)
	}
	n, err := v.env.Vectors.Delete(ctx, scope, v.collection, ids)
	if err != nil {
		return nil, err
	}
	return map[string]any{"collection": v.collection, "deleted": n}, nil
}

// search embeds the query and asks the collection.
func (v *VectorStore) search(ctx context.Context, s *flows.Step, query string, k int, filter map[string]any) ([]any, flows.Usage, error) {
	query = strings.TrimSpace(query)
	if query == "" {
		return nil, flows.Usage{}, flows.Permanent(&flows.Error{Code: flows.Invalid, Node: s.Node, Path: "params.query", Message: "the query is empty (does the input carry it?)"})
	}
	vecs, usage, err := v.env.embed(ctx, s, v.embed, []string{query}, v.ttl, v.budget)
	if err != nil {
		return nil, flows.Usage{}, err
	}
	q := flows.VectorQuery{Vector: vecs[0], Model: v.embed.Model, K: k, Filter: filter}
	if v.threshold != nil {
		q.MinScore, q.HasMinScore = *v.threshold, true
	}
	hits, err := v.env.Vectors.Search(ctx, v.scope(s), v.collection, q)
	if err != nil {
		return nil, flows.Usage{}, v.storeError(s, err)
	}
	out := make([]any, len(hits))
	for i, h := range hits {
		o := map[string]any{"id": h.ID, "text": h.Text, "score": h.Score}
		if h.Metadata != nil {
			o["metadata"] = h.Metadata
		}
		out[i] = o
	}
	return out, usage, nil
}

// ToolDef offers the search to a model.
func (v *VectorStore) ToolDef() flows.ToolDef { return v.def }

// Call searches with the model's query.
func (v *VectorStore) Call(ctx context.Context, s *flows.Step, args json.RawMessage) (any, error) {
	if v.env.Vectors == nil {
		return nil, failStep(noRedis(s.Node, "the vector store"))
	}
	var a struct {
		Query  string         `json:"query"`
		K      int            `json:"k"`
		Filter map[string]any `json:"filter"`
	}
	dec := json.NewDecoder(strings.NewReader(string(args)))
	dec.UseNumber()
	if err := dec.Decode(&a); err != nil || strings.TrimSpace(a.Query) == "" {
		return nil, fmt.Errorf(`call it with {"query": "what to look for"}`)
	}
	k := v.k
	if a.K > 0 && a.K <= 100 {
		k = a.K
	}
	filter := v.filter
	if len(a.Filter) > 0 {
		// The node's filter still holds: the model narrows, never widens, the search.
		filter = map[string]any{}
		for key, val := range a.Filter {
			filter[key] = val
		}
		for key, val := range v.filter {
			filter[key] = val
		}
	}
	found, _, err := v.search(ctx, s, a.Query, k, filter)
	if err != nil {
		if flows.IsPermanent(err) {
			return nil, err
		}
		return nil, failStep(err)
	}
	return found, nil
}

var (
	_ flows.Component = (*VectorStore)(nil)
	_ flows.Tool      = (*VectorStore)(nil)
)
