package langflow

// Vector stores and knowledge bases with their embeddings, as vector_store nodes.

import (
	"encoding/json"
	"strings"

	"github.com/sluicehq/sluice/flows"
)

// ingests reports whether a vector store is given documents to store.
func (c *conv) ingests(n *lfNode) bool {
	for _, e := range c.in[n.ID] {
		if f := e.fieldName(); f == "ingest_data" || f == "input_df" {
			return true
		}
	}
	return false
}

// onlyEmbeds reports whether every edge out of an embedding node enters a vector
// store's embedding field (its settings then go into the vector store's node).
func (c *conv) onlyEmbeds(n *lfNode) bool {
	for _, e := range c.out[n.ID] {
		if !vectorTypes[c.byID[e.Target].kindName()] || !embedField[e.fieldName()] {
			return false
		}
	}
	return len(c.out[n.ID]) > 0
}

var embedField = set("embedding", "embedding_model", "embeddings")

// feedsOnlyIngest reports whether what n produces reaches vector stores' ingest fields
// only (through splitters and parsers): an ingestion part of a flow, which a run
// without files skips.
func (c *conv) feedsOnlyIngest(n *lfNode, visited map[string]bool) bool {
	if visited[n.ID] {
		return true
	}
	visited[n.ID] = true
	if len(c.out[n.ID]) == 0 {
		return false
	}
	for _, e := range c.out[n.ID] {
		c.step()
		dst := c.byID[e.Target]
		if vectorTypes[dst.kindName()] && (c.usedAsValue(dst) || c.wired(dst, "search_query")) {
			return false // a store that is also searched in the run needs its documents
		}
		switch {
		case vectorTypes[dst.kindName()] && (e.fieldName() == "ingest_data" || e.fieldName() == "input_df"):
		case splitTypes[dst.kindName()] || parserTypes[dst.kindName()]:
			if !c.feedsOnlyIngest(dst, visited) {
				return false
			}
		default:
			return false
		}
	}
	return true
}

// ingestSide reports whether n fills a vector store and nothing else: a store that
// ingests without being searched, or what feeds only such stores.
func (c *conv) ingestSide(n *lfNode) bool {
	if v, ok := c.ingestOnly[n.ID]; ok {
		return v
	}
	v := false
	switch typ := n.kindName(); {
	case vectorTypes[typ]:
		v = c.ingests(n) && !c.usedAsValue(n) && !c.wired(n, "search_query")
	case fileTypes[typ], splitTypes[typ], parserTypes[typ], urlTypes[typ]:
		v = c.feedsOnlyIngest(n, map[string]bool{})
	}
	c.ingestOnly[n.ID] = v
	return v
}

// vectorChain builds a vector store's nodes: an upsert of what it is given to ingest,
// and a search when its results are used (or it is also an agent's tool: then the
// search is the tool, built with the tools).
func (c *conv) vectorChain(n *lfNode, base flows.Node) ([]flows.Node, bool) {
	id := c.ids[n.ID]
	var chain []flows.Node
	searched := c.usedAsValue(n) || c.wired(n, "search_query") || (!c.ingests(n) && !c.alsoTool[n.ID])
	if c.ingests(n) {
		p := c.vectorParams(n, "upsert")
		p["documents"] = c.dataOf(n, "ingest_data", "input_df")
		ingest := base
		if searched {
			ingest = flows.Node{ID: c.reserve(id + "_ingest"), Label: n.title() + " (ingest)", Position: base.Position}
		} else {
			p["as"] = id
		}
		ingest.Type, ingest.Params = "vector_store", params(p)
		chain = append(chain, ingest)
	}
	if searched {
		p := c.vectorParams(n, "search")
		p["query"] = c.text(n, "search_query")
		p["as"] = id
		base.Type, base.Params = "vector_store", params(p)
		if len(chain) > 0 && base.Position != nil {
			base.Position = &flows.Position{X: base.Position.X + 200, Y: base.Position.Y}
		}
		chain = append(chain, base)
	}
	return chain, true
}

// vectorParams are a vector store's collection, embedding model and search settings.
func (c *conv) vectorParams(n *lfNode, op string) map[string]any {
	p := map[string]any{"operation": op, "shared": sharedScope, "collection": c.collection(n)}
	emb := c.embeddingOf(n)
	if emb != nil {
		name := c.literal(emb, "model")
		var list []struct {
			Name string `json:"name"`
		}
		if raw := emb.value("model"); len(raw) > 0 && raw[0] == '[' && json.Unmarshal(raw, &list) == nil && len(list) > 0 {
			name = list[0].Name
		}
		if name == "" || flows.LooksLikeCredential(name) {
			name = c.opts.EmbeddingModel
			c.noteOnce(emb, "no embedding model named: the vector store embeds with %s", name)
		}
		p["model"] = name
		if d, ok := emb.number("dimensions"); ok && d >= 1 && d <= 8192 {
			p["dimensions"] = int64(d)
		}
		if base := c.literal(emb, embedTypes[emb.kindName()]); base != "" && !strings.HasPrefix(base, "https://api.openai.com") {
			c.noteOnce(emb, "the embedding model is served at %s: configure a provider with that base_url (docs/llm-providers.md) and name it in node %q", base, c.ids[n.ID])
		}
		if f, ok := emb.field("api_key"); ok && len(f.Value) > 2 {
			c.noteOnce(emb, "the API key was not copied: Sluice takes the embedding model's key from the server's provider (OPENAI_API_KEY, or a provider from --providers)")
		} else if f, ok := emb.field("openai_api_key"); ok && len(f.Value) > 2 {
			c.noteOnce(emb, "the API key was not copied: Sluice takes the embedding model's key from the server's provider (OPENAI_API_KEY, or a provider from --providers)")
		}
	} else {
		p["model"] = c.opts.EmbeddingModel
		c.noteOnce(n, "the export names no embedding model (the collection embeds by itself, or keeps its model in Langflow): the node embeds with %s; a collection keeps the model it was filled with", c.opts.EmbeddingModel)
	}
	if op == "search" {
		for _, f := range []string{"number_of_results", "top_k", "k"} {
			if v, ok := n.number(f); ok && v >= 1 {
				p["k"] = int64(min(v, 100))
				break
			}
		}
		if v, ok := n.number("search_score_threshold"); ok && v > 0 && v <= 1 {
			p["score_threshold"] = v
		}
		if m := n.str("search_method"); strings.Contains(strings.ToLower(m), "hybrid") || c.wired(n, "lexical_terms") {
			c.noteOnce(n, "Sluice searches by similarity only: the hybrid search's lexical terms and reranker are not used")
		}
		if t := n.str("search_type"); t != "" && !strings.EqualFold(t, "similarity") {
			c.noteOnce(n, "search type %s is searched as similarity", t)
		}
	}
	for _, f := range []string{"token", "api_key", "pinecone_api_key", "qdrant_api_key", "password", "redis_server_url", "connection_string"} {
		if fl, ok := n.field(f); ok && len(fl.Value) > 2 && string(fl.Value) != "null" {
			c.noteOnce(n, "its database credentials (%s) were not copied: Sluice keeps the collection in its own Redis", f)
			break
		}
	}
	return p
}

// collection is a vector store's collection name, as Sluice spells names.
func (c *conv) collection(n *lfNode) string {
	for _, f := range []string{"collection_name", "index_name", "knowledge_base", "collection", "table_name"} {
		s := c.literal(n, f)
		if s == "" {
			continue
		}
		s = strings.Trim(idChars.ReplaceAllString(strings.ToLower(s), "_"), "_-")
		if len(s) > 64 {
			s = strings.TrimRight(s[:64], "_-")
		}
		if s != "" {
			return s
		}
	}
	c.noteOnce(n, "the export names no collection: the node uses the collection %q (shared by every imported flow, as the database was in Langflow)", "langflow")
	return "langflow"
}

// embeddingOf is the embedding node wired into a vector store, or nil.
func (c *conv) embeddingOf(n *lfNode) *lfNode {
	for _, e := range c.in[n.ID] {
		if embedField[e.fieldName()] {
			if src := c.byID[e.Source]; c.role[src.ID] == roleFold {
				return src
			}
		}
	}
	return nil
}
