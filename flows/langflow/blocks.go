package langflow

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/sluicehq/sluice/flows"
)

// The building blocks: Langflow's parsers, loaders, splitter, memory, everyday tools,
// vector stores and knowledge bases with their embeddings, and MCP tools, mapped onto
// the Sluice components that do the same (docs/import-langflow.md has the table).

// Langflow component types by the Sluice block they become.
var (
	parserTypes   = set("ParserComponent", "parser", "ParseData", "ParseDataFrame", "ParseDataComponent")
	urlTypes      = set("URLComponent", "URL", "URLComponentV2")
	fileTypes     = set("File", "FileComponent")
	splitTypes    = set("SplitText", "SplitTextComponent")
	memoryTypes   = set("Memory", "MemoryComponent", "MessageHistory", "ChatHistory")
	storeMsgTypes = set("StoreMessage", "StoreMessageComponent")
	calcTypes     = set("CalculatorComponent", "CalculatorTool", "Calculator")
	dateTypes     = set("CurrentDateComponent", "CurrentDate")
	mcpTypes      = set("MCPTools", "MCPToolsComponent", "MCPSse", "MCPStdio")
	// Web search components: Tavily, Brave and SearXNG are web_search's own providers;
	// the others search through a service web_search does not speak, and become a
	// Tavily search the report tells about.
	searchTypes = map[string]string{
		"TavilySearchComponent": "tavily", "TavilyAISearch": "tavily", "TavilySearchTool": "tavily", "TavilySearch": "tavily",
		"BraveSearch": "brave", "BraveSearchComponent": "brave", "SearXNGTool": "searxng", "SearXNGToolComponent": "searxng",
		"SearchComponent": "", "SearchAPI": "", "ScrapeGraphSearchApi": "", "SerpAPI": "", "SerpComponent": "",
		"GoogleSerperAPI": "", "GoogleSerperAPICore": "", "GoogleSearchAPI": "", "GoogleSearchAPICore": "",
		"DuckDuckGoSearchComponent": "", "BingSearchAPI": "",
	}
	vectorTypes = set("AstraDB", "AstraDBVectorStoreComponent", "AstraVectorStoreComponent", "Chroma", "ChromaVectorStoreComponent",
		"FAISS", "FaissVectorStoreComponent", "Qdrant", "QdrantVectorStoreComponent", "Pinecone", "PineconeVectorStoreComponent",
		"Redis", "RedisVectorStoreComponent", "pgvector", "PGVector", "PGVectorStoreComponent", "Milvus", "MilvusVectorStoreComponent",
		"Weaviate", "WeaviateVectorStoreComponent", "Elasticsearch", "ElasticsearchVectorStoreComponent", "OpenSearch",
		"OpenSearchVectorStoreComponent", "MongoDBAtlasVector", "MongoVectorStoreComponent", "SupabaseVectorStore",
		"SupabaseVectorStoreComponent", "Cassandra", "CassandraVectorStoreComponent", "Upstash", "UpstashVectorStoreComponent",
		"Couchbase", "CouchbaseVectorStoreComponent", "HCD", "HCDVectorStoreComponent", "Clickhouse", "ClickhouseVectorStoreComponent",
		"LocalDB", "LocalDBComponent", "Vectara", "VectaraVectorStoreComponent", "KnowledgeIngestion", "KnowledgeRetrieval")
	// Embedding components whose models answer OpenAI's /v1/embeddings, with the field
	// of their base URL.
	embedTypes = map[string]string{
		"OpenAIEmbeddings": "openai_api_base", "EmbeddingModel": "api_base", "OllamaEmbeddings": "base_url",
		"LMStudioEmbeddingsComponent": "base_url", "NVIDIAEmbeddingsComponent": "base_url",
	}
	otherEmbedTypes = map[string]string{
		"AzureOpenAIEmbeddings": "Azure OpenAI", "CohereEmbeddings": "Cohere", "GoogleGenerativeAIEmbeddings": "Google",
		"AmazonBedrockEmbeddings": "Amazon Bedrock", "VertexAIEmbeddings": "Vertex AI", "HuggingFaceInferenceAPIEmbeddings": "Hugging Face",
		"MistalAIEmbeddings": "Mistral", "WatsonxEmbeddingsComponent": "IBM watsonx.ai",
	}
)

// sharedScope is the scope of the collections of imported vector stores and knowledge
// bases: in Langflow they live in a database every flow reaches by name (an ingestion
// flow fills what a retrieval flow searches), so in Sluice they are shared the same way.
const sharedScope = "langflow"

// historyKey is the state key of the conversation the agents of a flow read.
const historyKey = "chat_history"

func set(names ...string) map[string]bool {
	m := make(map[string]bool, len(names))
	for _, n := range names {
		m[n] = true
	}
	return m
}

// classifyBlock gives a building block its role; false for types it does not know.
func (c *conv) classifyBlock(n *lfNode, asTool bool) bool {
	typ := n.kindName()
	_, search := searchTypes[typ]
	_, embedding := embedTypes[typ]
	switch {
	case parserTypes[typ], splitTypes[typ]:
		c.role[n.ID] = roleStep
	case storeMsgTypes[typ]:
		c.role[n.ID] = roleStep
		c.sessionDefault(n)
	case fileTypes[typ]:
		if asTool {
			c.gap(n, "a file as an agent's tool has no Sluice equivalent: read the file with a file node and pass its text")
			return true
		}
		c.role[n.ID] = roleStep
		c.fileKeys[n.ID] = c.reserve("files")
	case memoryTypes[typ]:
		c.sessionDefault(n)
		switch {
		case asTool:
			c.role[n.ID] = roleTool
		case strings.EqualFold(n.str("mode"), "store"):
			c.role[n.ID] = roleStep
		default:
			c.role[n.ID] = roleStep
			c.storeHistory, c.usesSession = true, true // the run appends to the session it reads
		}
	case search && searchTypes[typ] == "searxng" && !validURL(n.str("url")):
		c.gap(n, "the SearXNG instance's URL is not in the export: a web_search node needs it as base_url")
	case urlTypes[typ], calcTypes[typ], dateTypes[typ], search:
		if asTool {
			c.role[n.ID] = roleTool
		} else {
			c.role[n.ID] = roleStep
		}
	case vectorTypes[typ]:
		switch {
		case c.ingests(n):
			c.role[n.ID] = roleStep
			if asTool {
				c.alsoTool[n.ID] = true // ingests as a step, searches as the agent's tool
			}
		case asTool:
			c.role[n.ID] = roleTool
		default:
			c.role[n.ID] = roleStep
		}
	case embedding:
		if c.onlyEmbeds(n) {
			c.role[n.ID] = roleFold
		} else {
			c.gap(n, "embeddings as a value: Sluice's vector_store embeds what it stores and searches; an embed node makes vectors")
		}
	case otherEmbedTypes[typ] != "":
		c.gap(n, otherEmbedTypes[typ]+" embeddings have no Sluice provider: vector_store and embed call OpenAI-compatible /v1/embeddings")
	case mcpTypes[typ]:
		if asTool {
			c.role[n.ID] = roleTool
		} else {
			c.gap(n, "an MCP server's tools serve agents in Sluice: attach an mcp node to an agent's tools")
		}
	case typ == "LoopComponent":
		c.loop(n)
	case typ == "BatchRunComponent":
		if why := c.modelProblem(n); why != "" {
			c.gap(n, why)
		} else {
			c.role[n.ID] = roleStep
		}
	case typ == "TypeConverterComponent":
		c.role[n.ID] = roleAlias
		c.note(n, "the value passes on as it is: Sluice nodes read text, records and lists alike")
	case typ == "SaveToFile":
		c.role[n.ID] = roleOutput
	default:
		return false
	}
	return true
}

func validURL(s string) bool {
	return strings.HasPrefix(s, "http://") || strings.HasPrefix(s, "https://")
}

// reserve is an id no node has yet, base or base_2, base_3 …, now taken.
func (c *conv) reserve(base string) string {
	id := base
	for k := 2; c.used[id] || reserved[id]; k++ {
		id = base + "_" + strconv.Itoa(k)
	}
	c.used[id] = true
	return id
}

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

// passField is the field whose value an output, alias or sink passes on.
func passField(n *lfNode) string {
	switch n.kindName() {
	case "SaveToFile":
		return "input"
	case "TypeConverterComponent":
		return "input_data"
	}
	return "input_value"
}

// sessionDefault records that n keeps the run's session unless it names its own.
func (c *conv) sessionDefault(n *lfNode) {
	if s := n.str("session_id"); (s == "" || flows.LooksLikeCredential(s)) && !c.wired(n, "session_id") {
		c.usesSession = true
	}
}

// historyUsedBy records that an agent reads the session's messages, as Langflow's do
// (n_messages of them).
func (c *conv) historyUsedBy(n *lfNode, field string, def int) {
	k := def
	if f, ok := n.field(field); ok && len(f.Value) > 0 {
		v, ok := n.number(field)
		if !ok || v < 1 {
			return // the agent reads no history
		}
		k = int(v)
	}
	c.historySize = max(c.historySize, min(k, 1000))
	c.storeHistory = true
	c.usesSession = true
}

// agentHistory is the jq of the messages agent n is given, "" for none.
func (c *conv) agentHistory(n *lfNode) string {
	if c.historySize == 0 {
		return ""
	}
	k := 100
	if f, ok := n.field("n_messages"); ok && len(f.Value) > 0 {
		v, ok := n.number("n_messages")
		if !ok || v < 1 {
			return ""
		}
		k = int(v)
	}
	if k >= c.historySize {
		return "." + c.historyKey
	}
	return fmt.Sprintf(".%s[-%d:]", c.historyKey, k)
}

// blockValue is the value an output of a building block carries.
func (c *conv) blockValue(n *lfNode, output string) (ref, bool) {
	id, typ := c.ids[n.ID], n.kindName()
	switch {
	case parserTypes[typ]:
		return ref{key: id}, true
	case urlTypes[typ]:
		urls := c.urls(n)
		if output == "raw_results" || output == "text" || output == "message" {
			if len(urls) > 1 {
				return ref{key: id, kind: kJoined, sep: "\n\n"}, true
			}
			return ref{key: id + ".text"}, true
		}
		if len(urls) > 1 {
			return ref{key: id, kind: kRows}, true
		}
		return ref{key: id, kind: kRecord}, true
	case fileTypes[typ]:
		if output == "message" || output == "text" || output == "raw_content" {
			sep := n.str("separator")
			if sep == "" {
				sep = "\n\n"
			}
			return ref{key: id, kind: kJoined, sep: unescape(sep)}, true
		}
		return ref{key: id, kind: kRows}, true
	case splitTypes[typ]:
		return ref{key: id, kind: kRows, meta: true}, true
	case memoryTypes[typ]:
		pattern := n.str("template")
		if pattern == "" {
			pattern = "{sender_name}: {text}"
		}
		return ref{key: id, kind: kHistory, pattern: pattern}, true
	case storeMsgTypes[typ]:
		for _, e := range c.in[n.ID] {
			if e.fieldName() == "message" {
				return c.valueOf(e)
			}
		}
		return ref{literal: c.literal(n, "message"), kind: kLit}, true
	case calcTypes[typ]:
		return ref{key: id}, true
	case dateTypes[typ]:
		return ref{key: id + ".iso"}, true
	case vectorTypes[typ]:
		return ref{key: id, kind: kRows, meta: true}, true
	case typ == "BatchRunComponent":
		return ref{key: id, kind: kRows}, true
	case typ == "LoopComponent":
		if output == "done" {
			return ref{key: id, kind: kRows}, true
		}
		return ref{key: c.loopItem(n), kind: kRecord}, true
	}
	if _, ok := searchTypes[typ]; ok {
		return ref{key: id, kind: kRows}, true
	}
	return ref{}, false
}

// textOf is the first of fields wired into n as a template, else the first with a
// literal value.
func (c *conv) textOf(n *lfNode, fields ...string) string {
	for _, f := range fields {
		if c.wired(n, f) {
			return c.text(n, f)
		}
	}
	for _, f := range fields {
		if c.literal(n, f) != "" {
			return c.text(n, f)
		}
	}
	return ""
}

var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// dataJQ is the jq of a value as data: the list itself for documents and messages
// (jq() joins their texts).
func (r ref) dataJQ() string {
	switch r.kind {
	case kJoined, kHistory:
		return "." + r.key
	}
	return r.jq()
}

// dataOf is field's value as data (jq): what is wired into it, else its literal.
func (c *conv) dataOf(n *lfNode, fields ...string) string {
	for _, f := range fields {
		for _, e := range c.in[n.ID] {
			if e.fieldName() == f {
				if r, ok := c.valueOf(e); ok {
					return r.dataJQ()
				}
			}
		}
	}
	b, _ := json.Marshal(c.literal(n, fields[0]))
	return string(b)
}

// wiredRef is the value wired into one of fields, if any.
func (c *conv) wiredRef(n *lfNode, fields ...string) (ref, bool) {
	for _, f := range fields {
		for _, e := range c.in[n.ID] {
			if e.fieldName() == f {
				if r, ok := c.valueOf(e); ok {
					return r, true
				}
			}
		}
	}
	return ref{}, false
}

func params(p map[string]any) json.RawMessage {
	b, _ := json.Marshal(p)
	return b
}

// blockChain builds the Sluice nodes of a building block in the control flow, the node
// holding its value (id) last but for URLs: several URLs are fetched by one node each
// and gathered under id.
func (c *conv) blockChain(n *lfNode, base flows.Node) ([]flows.Node, bool) {
	id, typ := c.ids[n.ID], n.kindName()
	one := func(typ string, p map[string]any) ([]flows.Node, bool) {
		base.Type, base.Params = typ, params(p)
		return []flows.Node{base}, true
	}
	switch {
	case parserTypes[typ]:
		return one("template", map[string]any{"template": c.parserTemplate(n), "as": id})
	case urlTypes[typ]:
		return c.urlChain(n, base)
	case fileTypes[typ]:
		key := c.fileKeys[n.ID]
		expr := "." + key
		if c.feedsOnlyIngest(n, map[string]bool{}) {
			expr = "(." + key + " // [])"
			c.note(n, "a run without files (under %q) ingests nothing and goes on", key)
		}
		c.note(n, "the files are the run's input: upload them (Attach files in the editor, or POST /api/flows/FLOW/files) and pass their references under %q; the export's file paths were not copied", key)
		c.state[key] = flows.StateKey{Default: json.RawMessage("[]"), Description: "The files Langflow's " + n.title() + " read: references to uploaded files ({\"$file\": ID})."}
		return one("file", map[string]any{"file": expr, "as": id})
	case splitTypes[typ]:
		p := map[string]any{"text": c.dataOf(n, "data_inputs", "data_input", "input_data"), "as": id}
		if v, ok := n.number("chunk_size"); ok && v >= 1 && v <= 100000 {
			p["chunk_size"] = int64(v)
		}
		if v, ok := n.number("chunk_overlap"); ok && v >= 0 {
			p["chunk_overlap"] = int64(v)
		}
		if sep := unescape(n.str("separator")); sep != "" {
			p["separators"] = []string{sep}
		}
		if s, ok := p["chunk_size"].(int64); ok {
			if o, ok := p["chunk_overlap"].(int64); ok && o >= s {
				p["chunk_overlap"] = s - 1
			}
		}
		return one("split_text", p)
	case storeMsgTypes[typ] || (memoryTypes[typ] && strings.EqualFold(n.str("mode"), "store")):
		msg := "(" + c.jqOf(n, "message") + " | if type == \"string\" then . else tojson end)"
		role := "assistant"
		if s := n.str("sender"); s == "User" || n.str("sender_type") == "User" {
			role = "user"
		}
		return one("memory", map[string]any{"operation": "append", "session": c.session(n),
			"messages": fmt.Sprintf("{role: %q, content: %s}", role, msg)})
	case memoryTypes[typ]:
		p := map[string]any{"operation": "load", "session": c.session(n), "as": id}
		if v, ok := n.number("n_messages"); ok && v >= 1 {
			p["max_messages"] = int64(min(v, 1000))
		}
		if strings.EqualFold(n.str("order"), "descending") {
			c.note(n, "Sluice returns the messages oldest first; Langflow's order was descending")
		}
		if s := n.str("sender_type"); s == "Machine" || s == "User" {
			c.note(n, "Sluice returns the messages of both sides; Langflow kept those of %s only", s)
		}
		if c.wired(n, "memory") {
			c.note(n, "its external memory was replaced by Sluice's conversation memory in Redis")
		}
		return one("memory", p)
	case calcTypes[typ]:
		return one("calculator", map[string]any{"expression": c.text(n, "expression"), "as": id})
	case dateTypes[typ]:
		p := map[string]any{"as": id}
		if tz := n.str("timezone"); tz != "" {
			p["timezone"] = tz
		}
		return one("datetime", p)
	case vectorTypes[typ]:
		return c.vectorChain(n, base)
	case typ == "BatchRunComponent":
		return c.batchChain(n, base), true
	case typ == "LoopComponent":
		base.Type, base.Params = "fanout", params(map[string]any{"items": c.dataOf(n, "data"), "as": c.loopItem(n)})
		base.Description = "Langflow's Loop: one branch per item; the branches meet at " + c.loopJoin(n) + "."
		return []flows.Node{base}, true
	}
	if _, ok := searchTypes[typ]; ok {
		p := c.searchParams(n)
		p["query"] = c.textOf(n, "query", "input_value", "user_prompt", "search_query")
		p["as"] = id
		return one("web_search", p)
	}
	return nil, false
}

// blockTool builds the Sluice tool node of a building block attached to an agent.
func (c *conv) blockTool(n *lfNode, base flows.Node) (flows.Node, bool) {
	typ := n.kindName()
	set := func(t string, p map[string]any) (flows.Node, bool) {
		base.Type = t
		if len(p) > 0 {
			base.Params = params(p)
		}
		return base, true
	}
	switch {
	case urlTypes[typ]:
		if d, _ := n.number("max_depth"); d > 1 {
			c.note(n, "as a tool it fetches the page the model names; Langflow also followed its links (depth %g)", d)
		}
		return set("url", nil)
	case calcTypes[typ]:
		return set("calculator", nil)
	case dateTypes[typ]:
		return set("datetime", nil)
	case memoryTypes[typ]:
		return set("memory", map[string]any{"session": c.session(n)})
	case vectorTypes[typ]:
		return set("vector_store", c.vectorParams(n, "search"))
	case mcpTypes[typ]:
		return set("mcp", c.mcpParams(n))
	}
	if _, ok := searchTypes[typ]; ok {
		return set("web_search", c.searchParams(n))
	}
	return base, false
}

// session is the conversation a memory node keeps: its session id when the export
// gives one, else the run's session_id (Langflow's default session is the flow).
func (c *conv) session(n *lfNode) string {
	if c.wired(n, "session_id") {
		return c.text(n, "session_id")
	}
	if s := c.literal(n, "session_id"); s != "" {
		return escapeTemplate(s)
	}
	return "{{.session_id}}"
}

// urls are the URLs a URL component fetches, as written in the export.
func (c *conv) urls(n *lfNode) []string {
	var list []string
	if raw := n.value("urls"); len(raw) > 0 && json.Unmarshal(raw, &list) == nil {
		var out []string
		for _, u := range list {
			if u = strings.TrimSpace(u); u != "" {
				out = append(out, u)
			}
		}
		return out
	}
	if u := n.str("urls"); u != "" {
		return []string{u}
	}
	return nil
}

func (c *conv) urlChain(n *lfNode, base flows.Node) ([]flows.Node, bool) {
	id := c.ids[n.ID]
	p := map[string]any{}
	if t, ok := n.number("timeout"); ok && t > 0 {
		p["timeout"] = strconv.FormatFloat(t, 'f', -1, 64) + "s"
	}
	if strings.EqualFold(n.str("format"), "html") {
		p["format"] = "html"
	}
	if d, _ := n.number("max_depth"); d > 1 {
		c.note(n, "Sluice fetches each URL itself; Langflow also followed its links (depth %g)", d)
	}
	with := func(u string, as string) map[string]any {
		q := map[string]any{"url": u, "as": as}
		for k, v := range p {
			q[k] = v
		}
		return q
	}
	if c.wired(n, "urls") {
		base.Type, base.Params = "url", params(with(c.text(n, "urls"), id))
		return []flows.Node{base}, true
	}
	var urls []string
	for _, u := range c.urls(n) {
		if flows.LooksLikeCredential(u) {
			c.dropped(n, "field urls")
			continue
		}
		urls = append(urls, u)
	}
	if len(urls) <= 1 {
		u := ""
		if len(urls) == 1 {
			u = escapeTemplate(urls[0])
		}
		base.Type, base.Params = "url", params(with(u, id))
		return []flows.Node{base}, true
	}
	var chain []flows.Node
	var keys []string
	for i, u := range urls {
		k := c.reserve(fmt.Sprintf("%s_%d", id, i+1))
		node := flows.Node{ID: k, Type: "url", Label: fmt.Sprintf("%s (%d of %d)", n.title(), i+1, len(urls)), Params: params(with(escapeTemplate(u), k))}
		if base.Position != nil {
			node.Position = &flows.Position{X: base.Position.X, Y: base.Position.Y + float64(120*i)}
		}
		chain = append(chain, node)
		keys = append(keys, "."+k)
	}
	base.Type, base.Params = "transform", params(map[string]any{"expr": fmt.Sprintf("{%s: [%s]}", id, strings.Join(keys, ", "))})
	base.Description = "The pages of Langflow's " + n.title() + ", in the order of its URLs."
	if base.Position != nil {
		base.Position = &flows.Position{X: base.Position.X + 200, Y: base.Position.Y}
	}
	return append(chain, base), true
}

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

// searchParams are a web search component's settings as web_search's.
func (c *conv) searchParams(n *lfNode) map[string]any {
	typ := n.kindName()
	provider := searchTypes[typ]
	p := map[string]any{}
	switch provider {
	case "":
		provider = "tavily"
		c.note(n, "%s searches with a service Sluice's web_search does not speak; the node searches with Tavily: give it a Tavily key, or set provider to brave or searxng", n.title())
	case "searxng":
		p["base_url"] = c.literal(n, "url")
	case "tavily":
		c.note(n, "Tavily's search depth, topic, answer and image options have no web_search equivalent; the node sends the query and the number of results")
	}
	p["provider"] = provider
	if v, ok := n.number("max_results"); ok && v >= 1 {
		p["max_results"] = int64(min(v, 20))
	}
	if key := c.secretRef(n, "api_key", "API_KEY"); key != nil {
		p["api_key"] = key
	}
	return p
}

// secretRef is an {"$env"} reference for a key field of n: a Langflow global variable
// NAME becomes SLUICE_SECRET_NAME, a typed-in or absent key SLUICE_SECRET_<node>_<suffix>.
// The key itself is never copied.
func (c *conv) secretRef(n *lfNode, field, suffix string) map[string]any {
	f, ok := n.field(field)
	env := ""
	if v := n.str(field); ok && f.LoadFromDB && v != "" && !flows.LooksLikeCredential(v) && envName.MatchString(v) {
		env = flows.SecretPrefix + strings.TrimPrefix(strings.ToUpper(v), flows.SecretPrefix)
		c.note(n, "the key comes from Langflow's global variable %s: the worker reads it from the environment variable %s; it was not copied", v, env)
	} else {
		env = flows.SecretPrefix + strings.ToUpper(strings.Trim(idChars.ReplaceAllString(strings.ToLower(c.ids[n.ID]+"_"+suffix), "_"), "_"))
		if v := n.str(field); v != "" {
			c.note(n, "the key was not copied: the worker reads it from the environment variable %s", env)
		} else {
			c.note(n, "the worker reads the key from the environment variable %s", env)
		}
	}
	return map[string]any{"$env": env}
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

// noteOnce adds a note unless the same one is there.
func (c *conv) noteOnce(n *lfNode, format string, args ...any) {
	k := n.ID + "\x00" + format
	if c.noted[k] {
		return
	}
	c.noted[k] = true
	c.note(n, format, args...)
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

// mcpParams are an MCP Tools component's server and tools as the mcp component's.
func (c *conv) mcpParams(n *lfNode) map[string]any {
	var server struct {
		Name   string         `json:"name"`
		Config map[string]any `json:"config"`
	}
	_ = json.Unmarshal(n.value("mcp_server"), &server)
	p := map[string]any{}
	cfg := server.Config
	url, _ := cfg["url"].(string)
	command, _ := cfg["command"].(string)
	name := server.Name
	if flows.LooksLikeCredential(name) {
		name = ""
	}
	switch {
	case url != "" && !flows.LooksLikeCredential(url) && validURL(url):
		p["url"] = url
		if hs, ok := cfg["headers"].(map[string]any); ok && len(hs) > 0 {
			headers := map[string]any{}
			// No value is copied: any header of an MCP server may carry its key.
			for k := range hs {
				if flows.LooksLikeCredential(k) {
					continue
				}
				env := flows.SecretPrefix + strings.ToUpper(strings.Trim(idChars.ReplaceAllString(strings.ToLower(c.ids[n.ID]+"_"+k), "_"), "_"))
				headers[k] = map[string]any{"$env": env}
				c.note(n, "header %s became a reference to the environment variable %s; its value was not copied", k, env)
			}
			p["headers"] = headers
		}
	case command != "" && !flows.LooksLikeCredential(command):
		p["command"] = command
		var args []string
		if list, ok := cfg["args"].([]any); ok {
			for _, a := range list {
				if s, ok := a.(string); ok && !flows.LooksLikeCredential(s) {
					args = append(args, s)
				}
			}
		}
		if len(args) > 0 {
			p["args"] = args
		}
		c.note(n, "the MCP server runs as %s: the worker must allow that command line (--mcp-commands); its environment was not copied", command)
	default:
		env := flows.SecretPrefix + strings.ToUpper(strings.Trim(idChars.ReplaceAllString(strings.ToLower(c.ids[n.ID]+"_url"), "_"), "_"))
		p["url"] = map[string]any{"$env": env}
		if name != "" {
			c.note(n, "the MCP server %q is configured in Langflow, not in the export: the worker reads its Streamable HTTP URL from the environment variable %s", name, env)
		} else {
			c.note(n, "the export does not say which MCP server: the worker reads its Streamable HTTP URL from the environment variable %s", env)
		}
	}
	var meta []struct {
		Name   string `json:"name"`
		Status *bool  `json:"status"`
	}
	var tools []string
	if json.Unmarshal(n.value("tools_metadata"), &meta) == nil {
		all := true
		for _, m := range meta {
			if m.Status != nil && !*m.Status {
				all = false
				continue
			}
			if m.Name != "" && !flows.LooksLikeCredential(m.Name) {
				tools = append(tools, m.Name)
			}
		}
		if all {
			tools = nil // every tool the server has
		}
	}
	if len(tools) > 0 {
		p["tools"] = tools
	}
	return p
}

// parserTemplate writes Langflow's Parser as a template: its pattern (Python's format
// syntax over each record's fields; {{ and }} are literal braces) for every record of
// the value wired into it, joined by its separator; in Stringify mode the value itself.
func (c *conv) parserTemplate(n *lfNode) string {
	r, ok := c.wiredRef(n, "input_data", "data", "df")
	if !ok {
		r = ref{literal: "", kind: kLit}
	}
	if strings.EqualFold(n.str("mode"), "stringify") {
		switch r.kind {
		case kRows, kRecord, kObject, kBody:
			c.note(n, "Stringify writes the value as JSON (Langflow writes a table as Markdown)")
		}
		t := r.template()
		c.grow(n, len(t))
		return t
	}
	pattern := n.str("pattern")
	if _, ok := n.Data.Node.Template["pattern"]; !ok {
		pattern = n.str("template")
	}
	if flows.LooksLikeCredential(pattern) {
		c.dropped(n, "field pattern")
		pattern = ""
	}
	sep := unescape(n.str("sep"))
	if _, ok := n.Data.Node.Template["sep"]; !ok {
		sep = "\n"
	}
	var v, over string // the record's variable, and what the template ranges over
	switch r.kind {
	case kRows, kJoined, kHistory:
		v, over = "$r", "."+r.key
	case kBody:
		v = "$r"
		over = "." + r.key + ".body"
	case kLit:
		body := c.formatPattern(n, pattern, func(name string) string {
			if name == "text" {
				return escapeTemplate(r.literal)
			}
			return ""
		})
		return body
	default:
		v, over = "$r", "."+r.key
	}
	field := func(name string) string {
		switch r.kind {
		case kText:
			if name == "text" {
				return "{{" + v + "}}"
			}
			return ""
		case kHistory:
			switch name {
			case "text":
				return "{{" + v + ".content}}"
			case "sender_name":
				return "{{if eq " + v + ".role \"user\"}}User{{else}}AI{{end}}"
			case "sender":
				return "{{if eq " + v + ".role \"user\"}}User{{else}}Machine{{end}}"
			}
			return ""
		}
		lookup := "{{index " + v + " " + strconv.Quote(name) + "}}"
		if r.meta && name != "text" && name != "id" && name != "score" {
			return "{{with " + v + ".metadata}}{{index . " + strconv.Quote(name) + "}}{{end}}"
		}
		return "{{with " + v + "}}" + strings.Replace(lookup, v, ".", 1) + "{{end}}"
	}
	body := c.formatPattern(n, pattern, field)
	switch r.kind {
	case kRows, kJoined, kHistory:
		return "{{range $i, " + v + " := " + over + "}}{{if $i}}" + escapeTemplate(sep) + "{{end}}" + body + "{{end}}"
	}
	return "{{with " + v + " := " + over + "}}" + body + "{{end}}"
}

// formatPattern converts a Python format pattern: each {name} (a format spec after ":"
// or "!" is dropped) becomes field(name), {{ and }} literal braces, the rest text.
func (c *conv) formatPattern(n *lfNode, pattern string, field func(string) string) string {
	var b, text strings.Builder
	flush := func() {
		t := escapeTemplate(text.String())
		text.Reset()
		c.grow(n, len(t))
		b.WriteString(t)
	}
	for i := 0; i < len(pattern); {
		c.step()
		switch {
		case strings.HasPrefix(pattern[i:], "{{"):
			text.WriteString("{")
			i += 2
		case strings.HasPrefix(pattern[i:], "}}"):
			text.WriteString("}")
			i += 2
		case pattern[i] == '{':
			end := strings.IndexByte(pattern[i:], '}')
			if end < 0 {
				text.WriteString(pattern[i:])
				i = len(pattern)
				continue
			}
			name := pattern[i+1 : i+end]
			if k := strings.IndexAny(name, ":!"); k >= 0 {
				name = name[:k]
			}
			flush()
			f := field(strings.TrimSpace(name))
			c.grow(n, len(f))
			b.WriteString(f)
			i += end + 1
		default:
			j := i + 1
			for j < len(pattern) && pattern[j] != '{' && pattern[j] != '}' {
				j++
			}
			text.WriteString(pattern[i:j])
			i = j
		}
	}
	flush()
	return b.String()
}

// historyLine writes a message (variable v, {role, content}) with Langflow's message
// template: {text}, {sender_name} (User or AI) and {sender} (User or Machine).
func historyLine(pattern, v string) string {
	var b strings.Builder
	for i := 0; i < len(pattern); {
		switch {
		case strings.HasPrefix(pattern[i:], "{{"):
			b.WriteString(escapeTemplate("{"))
			i += 2
		case pattern[i] == '{':
			end := strings.IndexByte(pattern[i:], '}')
			if end < 0 {
				b.WriteString(escapeTemplate(pattern[i:]))
				i = len(pattern)
				continue
			}
			switch strings.TrimSpace(pattern[i+1 : i+end]) {
			case "text":
				b.WriteString("{{" + v + ".content}}")
			case "sender_name":
				b.WriteString("{{if eq " + v + ".role \"user\"}}User{{else}}AI{{end}}")
			case "sender":
				b.WriteString("{{if eq " + v + ".role \"user\"}}User{{else}}Machine{{end}}")
			}
			i += end + 1
		default:
			j := i + 1
			for j < len(pattern) && pattern[j] != '{' {
				j++
			}
			b.WriteString(escapeTemplate(strings.ReplaceAll(pattern[i:j], "}}", "}")))
			i = j
		}
	}
	return b.String()
}

// historyJQ is historyLine in jq, over one message.
func historyJQ(pattern string) string {
	var parts []string
	lit := func(s string) {
		if s != "" {
			b, _ := json.Marshal(s)
			parts = append(parts, string(b))
		}
	}
	for i := 0; i < len(pattern); {
		if pattern[i] == '{' && !strings.HasPrefix(pattern[i:], "{{") {
			end := strings.IndexByte(pattern[i:], '}')
			if end < 0 {
				lit(pattern[i:])
				break
			}
			switch strings.TrimSpace(pattern[i+1 : i+end]) {
			case "text":
				parts = append(parts, "(.content | tostring)")
			case "sender_name":
				parts = append(parts, `(if .role == "user" then "User" else "AI" end)`)
			case "sender":
				parts = append(parts, `(if .role == "user" then "User" else "Machine" end)`)
			}
			i += end + 1
			continue
		}
		j := i + 1
		for j < len(pattern) && (pattern[j] != '{' || strings.HasPrefix(pattern[j:], "{{")) {
			if strings.HasPrefix(pattern[j:], "{{") {
				j += 2
				continue
			}
			j++
		}
		lit(strings.NewReplacer("{{", "{", "}}", "}").Replace(pattern[i:j]))
		i = j
	}
	if len(parts) == 0 {
		return `""`
	}
	return "(" + strings.Join(parts, " + ") + ")"
}

// unescape reads the escapes Langflow's separators are often typed with ("\n", "\t").
func unescape(s string) string {
	return strings.NewReplacer(`\n`, "\n", `\t`, "\t", `\r`, "\r").Replace(s)
}

// chain is the Sluice nodes of a control-flow node, in the order they run.
func (c *conv) chain(n *lfNode) []flows.Node {
	ch := []flows.Node{c.node(n)}
	if c.role[n.ID] == roleStep {
		if b, ok := c.blockChain(n, c.base(n)); ok && len(b) > 0 {
			ch = b
		}
	}
	return append(ch, c.loopClose(n)...)
}

// batchChain runs Langflow's Batch Run: the model once for each row of the table wired
// into it, in parallel branches (a fan-out), each row gaining the answer as a column;
// the rows, in order, are gathered under the node's id (append reducer) at a join.
func (c *conv) batchChain(n *lfNode, base flows.Node) []flows.Node {
	id := c.ids[n.ID]
	item, answer := c.reserve(id+"_row"), c.reserve(id+"_answer")
	column := n.str("output_column_name")
	if column == "" {
		column = "model_response"
	}
	user := "{{json ." + item + "}}"
	if col := n.str("column_name"); col != "" && !flows.LooksLikeCredential(col) {
		user = "{{with ." + item + "}}{{index . " + strconv.Quote(col) + "}}{{end}}"
	}
	p := c.modelParams(n, n)
	p["user"] = user
	if sys := c.text(n, "system_message"); sys != "" {
		p["system"] = sys
	}
	p["as"] = answer
	at := func(dx float64) *flows.Position {
		if base.Position == nil {
			return nil
		}
		return &flows.Position{X: base.Position.X + dx, Y: base.Position.Y}
	}
	fan := flows.Node{ID: c.reserve(id + "_rows"), Type: "fanout", Label: n.title() + ": each row", Position: base.Position,
		Params: params(map[string]any{"items": c.dataOf(n, "df"), "as": item})}
	base.Type, base.Params, base.Position = "llm", params(p), at(200)
	col, _ := json.Marshal(column)
	gather := flows.Node{ID: c.reserve(id + "_gather"), Type: "transform", Label: "Gather " + n.title(), Position: at(400),
		Params: params(map[string]any{"expr": fmt.Sprintf("{%s: [((.%s | if type == \"object\" then . else {text: .} end) + {%s: .%s})]}", id, item, col, answer)})}
	join := flows.Node{ID: c.reserve(id + "_done"), Type: "join", Label: n.title() + " done", Position: at(600)}
	c.state[id] = flows.StateKey{Reducer: flows.Append, Default: json.RawMessage("[]"),
		Description: "The rows Langflow's " + n.title() + " was given, each with the model's answer as " + column + "."}
	return []flows.Node{fan, base, gather, join}
}

// loop records a Langflow Loop: its body ends at the node whose edge comes back into
// the loop; the body is what runs between the loop's item and that node.
func (c *conv) loop(n *lfNode) {
	end := ""
	for _, e := range c.in[n.ID] {
		if c.loopBack(e) {
			end = e.Source
		}
	}
	if end == "" {
		c.gap(n, "nothing comes back into the loop: Sluice runs a loop's body as a fan-out over the items, which needs the body's last node")
		return
	}
	c.role[n.ID] = roleStep
	c.loopEnd[n.ID] = end
	// The body: reached from the item output, and reaching the end.
	fwd := map[string]bool{}
	var walk func(id string)
	walk = func(id string) {
		for _, e := range c.out[id] {
			c.step()
			if c.loopBack(e) || fwd[e.Target] || e.Target == n.ID {
				continue
			}
			fwd[e.Target] = true
			walk(e.Target)
		}
	}
	for _, e := range c.out[n.ID] {
		if e.output() != "done" && !fwd[e.Target] {
			fwd[e.Target] = true
			walk(e.Target)
		}
	}
	back := map[string]bool{end: true}
	var up func(id string)
	up = func(id string) {
		for _, e := range c.in[id] {
			c.step()
			if c.loopBack(e) || back[e.Source] || e.Source == n.ID {
				continue
			}
			back[e.Source] = true
			up(e.Source)
		}
	}
	up(end)
	for id := range fwd {
		if back[id] {
			c.inLoop[id] = true
		}
	}
}

// loopBack reports whether e is the edge that closes a Loop: into the loop, not into
// its data.
func (c *conv) loopBack(e lfEdge) bool {
	return c.byID[e.Target].kindName() == "LoopComponent" && e.fieldName() != "data"
}

// loopItem is the state key each branch of a loop finds its item under.
func (c *conv) loopItem(n *lfNode) string {
	if k, ok := c.loopKeys[n.ID]; ok {
		return k
	}
	k := c.reserve(c.ids[n.ID] + "_item")
	c.loopKeys[n.ID] = k
	return k
}

// loopJoin is the id of the join where a loop's branches meet.
func (c *conv) loopJoin(n *lfNode) string {
	if k, ok := c.loopKeys[n.ID+"\x00join"]; ok {
		return k
	}
	k := c.reserve(c.ids[n.ID] + "_done")
	c.loopKeys[n.ID+"\x00join"] = k
	return k
}

// loopClose is what follows the last node of a loop's body: each branch adds its
// result to the loop's list (a state key with the append reducer), and the join where
// the branches meet. Langflow's done output is that list.
func (c *conv) loopClose(n *lfNode) []flows.Node {
	var out []flows.Node
	for lid, end := range c.loopEnd {
		if end != n.ID {
			continue
		}
		l := c.byID[lid]
		key := c.ids[lid]
		result := "null"
		for _, e := range c.in[lid] {
			if c.loopBack(e) {
				if r, ok := c.valueOf(e); ok {
					result = r.jq()
					if r.kind == kText || r.kind == kLit || r.kind == kJoined || r.kind == kHistory {
						result = "{text: " + r.jqText() + "}" // a Message becomes a record, as in Langflow's DataFrame
					}
				}
			}
		}
		c.state[key] = flows.StateKey{Reducer: flows.Append, Default: json.RawMessage("[]"),
			Description: "What each pass of Langflow's " + l.title() + " gave, in the order of its items."}
		gather := flows.Node{ID: c.reserve(key + "_gather"), Type: "transform", Label: "Gather " + l.title(),
			Params: params(map[string]any{"expr": "{" + key + ": [" + result + "]}"})}
		join := flows.Node{ID: c.loopJoin(l), Type: "join", Label: l.title() + " done"}
		if n.Position != nil {
			gather.Position = &flows.Position{X: n.Position.X + 200, Y: n.Position.Y}
			join.Position = &flows.Position{X: n.Position.X + 400, Y: n.Position.Y}
		}
		out = append(out, gather, join)
	}
	return out
}

// toolNode is the Sluice node of a node attached to an agent's tools.
func (c *conv) toolNode(n *lfNode) flows.Node {
	if c.alsoTool[n.ID] {
		b := c.base(n)
		b.ID = c.reserve(c.ids[n.ID] + "_search")
		b.Label = n.title() + " (search)"
		if b.Position != nil {
			b.Position = &flows.Position{X: b.Position.X, Y: b.Position.Y + 160}
		}
		t, _ := c.blockTool(n, b)
		return t
	}
	if c.role[n.ID] == roleTool {
		if t, ok := c.blockTool(n, c.base(n)); ok {
			return t
		}
	}
	return c.node(n)
}

// base is the Sluice node of n without its type and params: id, label, position.
func (c *conv) base(n *lfNode) flows.Node {
	id := c.ids[n.ID]
	out := flows.Node{ID: id}
	if n.Position != nil {
		out.Position = &flows.Position{X: n.Position.X, Y: n.Position.Y}
	}
	if t := n.title(); strings.Trim(idChars.ReplaceAllString(strings.ToLower(t), "_"), "_") != id {
		out.Label = t
	}
	return out
}

// prelude is what runs right after the input: the load of the conversation the agents
// read, as Langflow's agents read the session's messages before they answer.
func (c *conv) prelude(l *lane, at *flows.Position) []flows.Node {
	if c.historySize == 0 {
		return nil
	}
	n := flows.Node{ID: c.historyKey, Type: "memory", Label: "Chat history",
		Description: "Added on import: Langflow's agents read the session's last messages; Sluice's are given them as history.",
		Params:      params(map[string]any{"operation": "load", "session": "{{.session_id}}", "max_messages": c.historySize, "as": c.historyKey})}
	if at != nil {
		n.Position = &flows.Position{X: at.X + 120, Y: at.Y + 220}
	}
	c.edges = append(c.edges, flows.Edge{From: l.tail, To: n.ID})
	l.tail = n.ID
	return []flows.Node{n}
}

// remember appends the run's exchange to the conversation before the outputs, as
// Langflow's chat input and output store their messages, so that the next run's memory
// nodes and agents read it. One append per lane the outputs end.
func (c *conv) remember(lanes map[string]*lane, order map[string]int, outputs []*lfNode) []flows.Node {
	if !c.storeHistory {
		return nil
	}
	user := ""
	if c.entry != "" {
		if e := c.byID[c.entry]; e.kindName() == "ChatInput" && e.str("should_store_message") != "false" {
			user = fmt.Sprintf("{role: \"user\", content: (.%s | tostring)}", c.ids[c.entry])
		}
	}
	type group struct {
		g    guard
		msgs []string
		at   *flows.Position
	}
	var groups []*group
	byKey := map[string]*group{}
	for _, n := range outputs {
		if n.kindName() != "ChatOutput" || n.str("should_store_message") == "false" {
			continue
		}
		g := c.guard[n.ID]
		k := g.key(order)
		gr := byKey[k]
		if gr == nil {
			gr = &group{g: g}
			byKey[k] = gr
			groups = append(groups, gr)
			if user != "" {
				gr.msgs = append(gr.msgs, user)
			}
		}
		if gr.at == nil && n.Position != nil {
			gr.at = &flows.Position{X: n.Position.X - 200, Y: n.Position.Y + 200}
		}
		for _, e := range c.in[n.ID] {
			if e.fieldName() == "input_value" {
				if r, ok := c.valueOf(e); ok {
					gr.msgs = append(gr.msgs, "{role: \"assistant\", content: "+r.jqText()+"}")
				}
			}
		}
	}
	var nodes []flows.Node
	for _, gr := range groups {
		if len(gr.msgs) == 0 {
			continue
		}
		id := c.reserve("store_messages")
		nodes = append(nodes, flows.Node{ID: id, Type: "memory", Label: "Store messages", Position: gr.at,
			Description: "Added on import: Langflow's chat input and output store their messages in the session, which its memory and agents read.",
			Params:      params(map[string]any{"operation": "append", "session": "{{.session_id}}", "messages": "[" + strings.Join(gr.msgs, ", ") + "]"})})
		c.attach(lanes, order, gr.g, id)
		l := lanes[gr.g.key(order)]
		l.tail, l.split = id, ""
	}
	return nodes
}
