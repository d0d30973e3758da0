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
	// Web search components: Tavily, Brave, SearchApi, SerpApi, Serper, ScrapeGraph and
	// SearXNG are web_search's own providers; the others (Google's Custom Search, Bing,
	// DuckDuckGo) search through a service web_search does not speak, and become a
	// Tavily search the report tells about.
	searchTypes = map[string]string{
		"TavilySearchComponent": "tavily", "TavilyAISearch": "tavily", "TavilySearchTool": "tavily", "TavilySearch": "tavily",
		"BraveSearch": "brave", "BraveSearchComponent": "brave", "SearXNGTool": "searxng", "SearXNGToolComponent": "searxng",
		"SearchComponent": "searchapi", "SearchAPI": "searchapi", "ScrapeGraphSearchApi": "scrapegraph",
		"SerpAPI": "serpapi", "SerpComponent": "serpapi", "GoogleSerperAPI": "serper", "GoogleSerperAPICore": "serper",
		"GoogleSearchAPI": "", "GoogleSearchAPICore": "", "DuckDuckGoSearchComponent": "", "BingSearchAPI": "",
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

// searchParams are a web search component's settings as web_search's.
func (c *conv) searchParams(n *lfNode) map[string]any {
	typ := n.kindName()
	provider := searchTypes[typ]
	p := map[string]any{}
	switch provider {
	case "":
		provider = "tavily"
		c.note(n, "%s searches with a service Sluice's web_search does not speak; the node searches with Tavily: give it a Tavily key, or set another provider (brave, searchapi, serpapi, serper, scrapegraph, searxng)", n.title())
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

// noteOnce adds a note unless the same one is there.
func (c *conv) noteOnce(n *lfNode, format string, args ...any) {
	k := n.ID + "\x00" + format
	if c.noted[k] {
		return
	}
	c.noted[k] = true
	c.note(n, format, args...)
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
