package langflow

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/sluice/flows"
)

// Options say how to convert.
type Options struct {
	// ID is the Sluice flow id; empty derives one from the export's name.
	ID string
	// Model is the model of a model node whose export names none (Langflow 1.7 leaves
	// the choice to its Model Providers setting); empty: DefaultModel.
	Model string
	// EmbeddingModel is the embedding model of a vector store whose export names none
	// (an Astra DB collection that embeds by itself, a Langflow knowledge base); empty:
	// DefaultEmbeddingModel.
	EmbeddingModel string
}

// The models a conversion names when the export names none; the report says so.
const (
	DefaultModel          = "gpt-4o-mini"
	DefaultEmbeddingModel = "text-embedding-3-small"
)

// Gap is a Langflow node the conversion could not map.
type Gap struct {
	Node string `json:"node"` // the Langflow node id
	Type string `json:"type"` // its Langflow type
	Why  string `json:"why"`
	// Placeholder is the id of the placeholder node that stands for it in the document.
	Placeholder string `json:"placeholder,omitempty"`
}

func (g Gap) String() string { return fmt.Sprintf("%s (%s): %s", g.Node, g.Type, g.Why) }

// Note is something the conversion did that a person should know: a key not copied, a
// provider to configure, a setting Sluice does not have.
type Note struct {
	Node    string `json:"node"` // "" for a note about the export as a whole
	Type    string `json:"type"`
	Message string `json:"message"`
}

func (n Note) String() string {
	if n.Node == "" {
		return n.Message // about the export as a whole
	}
	return fmt.Sprintf("%s (%s): %s", n.Node, n.Type, n.Message)
}

// Result is a converted flow.
type Result struct {
	// Document is the Sluice flow document, indented. Every gap is in it as a
	// placeholder node of type "langflow:<Type>", which fails validation until replaced.
	Document []byte
	Gaps     []Gap
	Notes    []Note
}

// PlaceholderPrefix starts the type of a placeholder node: no component has such a type,
// so a flow with one does not validate until the node is replaced.
const PlaceholderPrefix = "langflow:"

// Timeout is how long the CLI and the server let one import take. A conversion is
// linear in the export and takes milliseconds; the deadline is what stops one anyway
// should some export still find a slow path, instead of a request that never answers.
const Timeout = 10 * time.Second

// ErrTooLarge is the error of an export whose converted flow could not be a flow
// document: more nodes than a flow may have, or text past the size of a document.
var ErrTooLarge = errors.New("too large for a Sluice flow")

// Convert converts a Langflow export. The error is for an export it cannot read, one
// too large for a flow (ErrTooLarge), or ctx's error when ctx ends first: the
// conversion checks ctx as it walks the export. Gaps are in the result.
func Convert(ctx context.Context, data []byte, o Options) (res *Result, err error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("the conversion stopped: %w", err)
	}
	ex, err := decode(data)
	if err != nil {
		return nil, err
	}
	if o.Model == "" {
		o.Model = DefaultModel
	}
	if o.EmbeddingModel == "" {
		o.EmbeddingModel = DefaultEmbeddingModel
	}
	c := &conv{ctx: ctx, ex: ex, opts: o, byID: map[string]*lfNode{}, in: map[string][]lfEdge{}, out: map[string][]lfEdge{},
		ids: map[string]string{}, used: map[string]bool{}, role: map[string]role{}, guard: map[string]guard{},
		state: map[string]flows.StateKey{}, index: map[string]int{}, depsOf: map[string][]choice{},
		noted: map[string]bool{}, gapped: map[string]bool{}, fileKeys: map[string]string{}, alsoTool: map[string]bool{}, ingestOnly: map[string]bool{}, loopEnd: map[string]string{}, inLoop: map[string]bool{}, loopKeys: map[string]string{}}
	defer func() {
		if r := recover(); r != nil {
			s, ok := r.(stopped)
			if !ok {
				panic(r)
			}
			res, err = nil, s.err
		}
	}()
	nodes := 0
	for i := range ex.Data.Nodes {
		n := &ex.Data.Nodes[i]
		c.byID[n.ID] = n
		c.index[n.ID] = i
		if !n.isNote() {
			nodes++
		}
	}
	if limit := flows.DefaultLimits.MaxNodes; nodes > limit {
		return nil, fmt.Errorf("the export has %d nodes and a Sluice flow holds at most %d: %w", nodes, limit, ErrTooLarge)
	}
	// An edge listed twice carries the same value into the same field: keeping one copy
	// keeps every walk over the edges linear, and the converted templates free of repeats.
	type edgeKey struct{ source, output, target, field string }
	seen := map[edgeKey]bool{}
	for _, e := range ex.Data.Edges {
		c.step()
		if c.byID[e.Source] == nil || c.byID[e.Target] == nil {
			c.dangling(e) // it carries nothing, and the report says so
			continue
		}
		k := edgeKey{e.Source, e.output(), e.Target, e.fieldName()}
		if seen[k] {
			continue
		}
		seen[k] = true
		c.in[e.Target] = append(c.in[e.Target], e)
		c.out[e.Source] = append(c.out[e.Source], e)
	}
	return c.convert(o)
}

// stopped ends a conversion from inside its walks; Convert recovers it and returns err.
type stopped struct{ err error }

// step counts one step of a walk over the export, and every 256 steps stops the
// conversion if its context has ended. The walks take a bounded number of steps per
// node and edge; the context bounds the time all the same.
func (c *conv) step() {
	c.steps++
	if c.steps%256 == 0 {
		if err := c.ctx.Err(); err != nil {
			panic(stopped{fmt.Errorf("the conversion stopped: %w", err)})
		}
	}
}

// grow counts n bytes of text the conversion writes into the flow. A prompt that names
// a variable many times copies its value each time: the total is bounded by what a
// flow document may hold.
func (c *conv) grow(n *lfNode, bytes int) {
	c.written += bytes
	c.step()
	if limit := flows.DefaultLimits.MaxBytes; c.written > limit {
		panic(stopped{fmt.Errorf("node %s: the converted flow would hold more than %d bytes of text, the size limit of a flow document: %w", n.ID, limit, ErrTooLarge)})
	}
}

type role int

const (
	roleSkip   role = iota // sticky notes
	roleEntry              // the input node
	roleConst              // a text input without edges in: a state key with a default
	roleAlias              // passes another node's value on (a text input fed by an edge)
	roleStep               // a node of the control flow
	roleRouter             // If-Else
	roleOutput             // chat or text output
	roleModel              // a model only used as another node's model: no node
	roleTool               // attached to an agent's tools
	roleGap                // no equivalent: a placeholder
	roleFold               // an embedding model only used by vector stores: no node
)

type conv struct {
	ctx   context.Context
	opts  Options
	steps int // taken by the walks, see step
	// written is the bytes of text written into the flow so far, see grow.
	written int
	ex      *export
	byID    map[string]*lfNode
	index   map[string]int
	in      map[string][]lfEdge // by target
	out     map[string][]lfEdge // by source
	ids     map[string]string   // Langflow id -> Sluice id
	used    map[string]bool
	role    map[string]role
	guard   map[string]guard
	entry   string // Langflow id of the input node, "" when one is made up
	// depsOf are the control-flow nodes each node waits for (deps), computed once.
	depsOf map[string][]choice
	noted  map[string]bool // node and field of the credentials already reported
	gapped map[string]bool // nodes already reported as gaps
	// fileKeys are the state keys of the files each file node reads, by Langflow id.
	fileKeys map[string]string
	// loopEnd is the last node of each Loop's body (the source of the edge back into the
	// loop), inLoop the nodes of loop bodies, by Langflow id.
	loopEnd map[string]string
	inLoop  map[string]bool
	// loopKeys are the ids chosen for loops' items and joins.
	loopKeys map[string]string
	// ingestOnly caches ingestSide by Langflow id.
	ingestOnly map[string]bool
	// alsoTool are vector stores that ingest as a step and search as an agent's tool.
	alsoTool map[string]bool
	// storeHistory: some node reads the session's messages, so the run appends its own.
	storeHistory bool
	// usesSession: a node reads the run's session_id.
	usesSession bool
	// historySize is how many of the session's messages the flow's agents read (0:
	// none), as Langflow's agents read them.
	historySize int
	historyKey  string       // the state key of what the agents read
	extra       []flows.Node // tools the conversion adds to agents (Langflow's built-in ones)

	edges []flows.Edge
	state map[string]flows.StateKey
	gaps  []Gap
	notes []Note
}

func (c *conv) note(n *lfNode, format string, args ...any) {
	c.notes = append(c.notes, Note{Node: n.ID, Type: n.kindName(), Message: fmt.Sprintf(format, args...)})
}

// gap reports n as a node without an equivalent, once: a node can meet two reasons (no
// equivalent, and in a cycle), and the report counts nodes.
func (c *conv) gap(n *lfNode, why string) {
	c.role[n.ID] = roleGap
	if c.gapped[n.ID] {
		return
	}
	c.gapped[n.ID] = true
	c.gaps = append(c.gaps, Gap{Node: n.ID, Type: n.kindName(), Why: why})
}

// dangling reports an edge whose source or target is not in the export.
func (c *conv) dangling(e lfEdge) {
	src, dst := c.byID[e.Source], c.byID[e.Target]
	what := fmt.Sprintf("an edge from %s (output %s) into %s (field %s) was left out", orMissing(e.Source), orNone(e.output()), orMissing(e.Target), orNone(e.fieldName()))
	switch {
	case src == nil && dst == nil:
		c.notes = append(c.notes, Note{Message: what + ": neither node is in the export"})
	case src == nil:
		c.note(dst, "%s: node %s is not in the export", what, orMissing(e.Source))
	default:
		c.note(src, "%s: node %s is not in the export", what, orMissing(e.Target))
	}
}

func orMissing(id string) string {
	if id == "" {
		return `""`
	}
	if flows.LooksLikeCredential(id) {
		return "[credential not copied]"
	}
	return id
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

// Model components Sluice has a provider for (OpenAI-compatible ones, and Anthropic),
// with the field holding their base URL.
var modelBaseField = map[string]string{
	"OpenAIModel": "openai_api_base", "LanguageModelComponent": "", "OllamaModel": "base_url",
	"GroqModel": "base_url", "LMStudioModel": "base_url", "DeepSeekModelComponent": "api_base",
	"OpenRouterComponent": "", "XAIModel": "base_url", "xAIModel": "base_url", "NVIDIAModelComponent": "base_url",
	"AnthropicModel": "base_url",
}

// Model components Sluice has no provider for.
var otherModels = map[string]string{
	"GoogleGenerativeAIModel": "Google", "AmazonBedrockModel": "Amazon Bedrock",
	"AzureOpenAIModel": "Azure OpenAI", "CohereModel": "Cohere", "MistralModel": "Mistral", "VertexAiModel": "Vertex AI",
	"HuggingFaceModel": "Hugging Face", "ChatLiteLLMModel": "LiteLLM", "PerplexityModel": "Perplexity",
	"IBMwatsonxModel": "IBM watsonx.ai",
}

func isModel(typ string) bool {
	_, a := modelBaseField[typ]
	_, b := otherModels[typ]
	return a || b
}

// Langflow's names of model providers (a Language Model's or an Agent's provider, 1.7's
// model field) that Sluice calls, and the Sluice provider each becomes. Those speaking
// the OpenAI protocol at another base URL become the default provider with a note.
var lfProviders = map[string]string{
	"": nodesDefault, "OpenAI": nodesDefault, "Anthropic": anthropicProvider, "Ollama": nodesDefault,
	"Groq": nodesDefault, "DeepSeek": nodesDefault, "OpenRouter": nodesDefault, "xAI": nodesDefault,
	"NVIDIA": nodesDefault, "LM Studio": nodesDefault, "Custom": nodesDefault,
}

const (
	nodesDefault = "default"
	// anthropicProvider is the provider name an Anthropic model gets: the server needs a
	// provider of that name, of type anthropic (docs/llm-providers.md).
	anthropicProvider = "anthropic"
)

// modelChoice is the model a node names and its Langflow provider: Langflow 1.7's model
// field (a list of {name, provider}), else the older provider, agent_llm, model_name and
// model fields.
func (c *conv) modelChoice(m *lfNode) (name, provider string) {
	var list []struct {
		Name     string `json:"name"`
		Provider string `json:"provider"`
	}
	if raw := m.value("model"); len(raw) > 0 && raw[0] == '[' {
		if json.Unmarshal(raw, &list) == nil && len(list) > 0 {
			name, provider = list[0].Name, list[0].Provider
			if flows.LooksLikeCredential(name) {
				c.dropped(m, "field model")
				name = ""
			}
			if flows.LooksLikeCredential(provider) {
				provider = ""
			}
			return name, provider
		}
		return "", ""
	}
	provider = m.str("provider")
	if m.kindName() == "Agent" {
		provider = m.str("agent_llm")
	}
	if m.kindName() == "AnthropicModel" {
		provider = "Anthropic"
	}
	if name = c.literal(m, "model_name"); name == "" {
		name = c.literal(m, "model")
	}
	return name, provider
}

// modelProblem says why a model node cannot be a Sluice model, or "".
func (c *conv) modelProblem(n *lfNode) string {
	typ := n.kindName()
	if p, ok := otherModels[typ]; ok {
		return p + " models have no Sluice provider; Sluice calls OpenAI-compatible endpoints and Anthropic (point a provider at an OpenAI-compatible gateway for it)"
	}
	if typ == "LanguageModelComponent" || typ == "StructuredOutput" || typ == "StructuredOutputComponent" {
		if _, p := c.modelChoice(n); p != "" {
			if _, ok := lfProviders[p]; !ok {
				return p + " models have no Sluice provider; Sluice calls OpenAI-compatible endpoints and Anthropic"
			}
		}
	}
	return ""
}

// hostedServices are components that only wrap a hosted service with no self-hostable
// API, and what it is.
var hostedServices = map[string]string{
	"AssemblyAITranscriptionJobCreator": "AssemblyAI's transcription", "AssemblyAITranscriptionJobPoller": "AssemblyAI's transcription",
	"AssemblyAIGetSubtitles": "AssemblyAI's transcription", "AssemblyAILeMUR": "AssemblyAI's LeMUR", "AssemblyAIListTranscripts": "AssemblyAI's transcription",
	"ApifyActors": "Apify's actors", "AgentQL": "AgentQL's web extraction", "needle": "Needle's retrieval", "Needle": "Needle's retrieval",
	"YouTubeTranscripts": "YouTube's transcripts", "YouTubeCommentsComponent": "YouTube's Data API", "YouTubeSearchComponent": "YouTube's Data API",
	"YouTubeChannelComponent": "YouTube's Data API", "YouTubeVideoDetailsComponent": "YouTube's Data API", "YouTubePlaylistComponent": "YouTube's Data API",
	"YouTubeTrendingComponent": "YouTube's Data API", "YfinanceComponent": "Yahoo! Finance (through the unofficial yfinance scraper)",
	"Composio":    "Composio's tools",
	"ComposioAPI": "Composio's tools", "FirecrawlScrapeApi": "Firecrawl", "FirecrawlCrawlApi": "Firecrawl", "FirecrawlMapApi": "Firecrawl",
	"NotionPageCreator": "Notion's API", "GmailLoaderComponent": "Gmail", "GoogleDriveComponent": "Google Drive", "JigsawStackAIScraper": "JigsawStack",
	"WolframAlphaAPI": "Wolfram|Alpha", "GleanSearchAPI": "Glean", "ExaSearch": "Exa",
}

// why an unmapped component has no equivalent.
func (c *conv) unmappedWhy(n *lfNode, asTool bool) string {
	typ, title := n.kindName(), n.title()
	l := strings.ToLower(typ + " " + title)
	switch {
	case n.Data.Node.Edited:
		return "its code was edited in Langflow: custom Python code does not run in Sluice"
	case typ == "ArXivComponent":
		return "arXiv's API answers Atom XML, which no Sluice component reads into records: fetch it with an http node and let a model read it"
	case hostedServices[typ] != "":
		return "it wraps " + hostedServices[typ] + ", a hosted service with no self-hostable API: call its HTTP API with an http node (a key as an {\"$env\"} header)"
	case isModel(typ):
		return c.modelProblem(n)
	case strings.Contains(l, "custom") || strings.Contains(l, "python") || strings.Contains(l, "code"):
		return "custom Python code does not run in Sluice: write it as a transform (jq), or as a service an http node calls"
	case asTool:
		return "no Sluice tool does what " + title + " does (Sluice tools: http, data, subflow, mcp, calculator, web_search, url, datetime, memory, memory_store, vector_store)"
	}
	return "no Sluice component does what " + title + " does"
}

// outputsTo reports whether any edge leaves n into a field named field.
func (c *conv) outputsTo(n *lfNode, field string) bool {
	for _, e := range c.out[n.ID] {
		if e.fieldName() == field {
			return true
		}
	}
	return false
}

// usedAsValue reports whether some edge takes a value (not the model) out of n.
func (c *conv) usedAsValue(n *lfNode) bool {
	for _, e := range c.out[n.ID] {
		if e.output() != "model_output" {
			return true
		}
	}
	return false
}

// classify gives every node its role.
func (c *conv) classify() {
	for i := range c.ex.Data.Nodes {
		n := &c.ex.Data.Nodes[i]
		if n.isNote() {
			c.role[n.ID] = roleSkip
			continue
		}
		if flows.LooksLikeCredential(n.Data.Node.DisplayName) {
			c.note(n, "its name looks like a credential; it was not copied (the node is named after its type)")
		}
		if c.entry == "" && n.kindName() == "ChatInput" && !n.Data.Node.Edited {
			c.entry = n.ID
		}
	}
	if c.entry == "" {
		for i := range c.ex.Data.Nodes {
			n := &c.ex.Data.Nodes[i]
			if n.kindName() == "TextInput" && len(c.in[n.ID]) == 0 && !n.Data.Node.Edited {
				c.entry = n.ID
				break
			}
		}
	}
	for i := range c.ex.Data.Nodes {
		n := &c.ex.Data.Nodes[i]
		if _, done := c.role[n.ID]; done {
			continue
		}
		typ := n.kindName()
		asTool := c.outputsTo(n, "tools")
		switch {
		case n.Data.Node.Edited:
			c.gap(n, c.unmappedWhy(n, asTool))
		case n.ID == c.entry:
			c.role[n.ID] = roleEntry
		case typ == "ChatInput" || typ == "TextInput":
			if len(c.in[n.ID]) > 0 {
				c.role[n.ID] = roleAlias
			} else {
				c.role[n.ID] = roleConst
			}
		case typ == "ChatOutput" || typ == "TextOutput":
			c.role[n.ID] = roleOutput
		case typ == "Prompt" || typ == "PromptTemplate":
			c.role[n.ID] = roleStep
		case isModel(typ):
			if why := c.modelProblem(n); why != "" {
				c.gap(n, why)
			} else if c.usedAsValue(n) || len(c.out[n.ID]) == 0 {
				c.role[n.ID] = roleStep
			} else {
				c.role[n.ID] = roleModel
			}
		case typ == "Agent":
			if _, p := c.modelChoice(n); p != "" && lfProviders[p] == "" && c.connectedModel(n) == nil {
				c.gap(n, "the agent uses "+p+" models; Sluice agents call OpenAI-compatible and Anthropic providers only")
			} else {
				c.role[n.ID] = roleStep
				c.historyUsedBy(n, "n_messages", 100)
			}
		case typ == "StructuredOutput" || typ == "StructuredOutputComponent":
			_, own := n.Data.Node.Template["model"]
			if why := c.modelProblem(n); why != "" && c.connectedModel(n) == nil {
				c.gap(n, why)
			} else if c.connectedModel(n) == nil && !own {
				c.gap(n, "structured output needs a model connected to its Language Model field")
			} else {
				c.role[n.ID] = roleStep
			}
		case typ == "APIRequest":
			switch {
			case strings.EqualFold(n.str("mode"), "curl") || (n.str("url_input") == "" && n.str("urls") == "" && n.str("curl") != "" && len(c.in[n.ID]) == 0):
				c.gap(n, "the request is written as a cURL command: write its method, URL and headers in an http node")
			case asTool:
				c.role[n.ID] = roleTool
			default:
				c.role[n.ID] = roleStep
			}
		case typ == "ConditionalRouter":
			c.role[n.ID] = roleRouter
		case c.classifyBlock(n, asTool):
		default:
			c.gap(n, c.unmappedWhy(n, asTool))
		}
	}
}

// connectedModel is the model node feeding n's model field, or nil.
func (c *conv) connectedModel(n *lfNode) *lfNode {
	for _, e := range c.in[n.ID] {
		src := c.byID[e.Source]
		if e.output() == "model_output" || e.fieldName() == "llm" || (e.fieldName() == "agent_llm" && isModel(src.kindName())) {
			if isModel(src.kindName()) && c.modelProblem(src) == "" {
				return src
			}
		}
	}
	return nil
}

var idChars = regexp.MustCompile(`[^a-z0-9]+`)

// assignIDs names the nodes that become Sluice nodes after their Langflow titles.
func (c *conv) assignIDs() {
	for i := range c.ex.Data.Nodes {
		n := &c.ex.Data.Nodes[i]
		switch c.role[n.ID] {
		case roleSkip, roleModel, roleAlias:
			continue
		}
		base := strings.Trim(idChars.ReplaceAllString(strings.ToLower(n.title()), "_"), "_")
		if base == "" || (base[0] >= '0' && base[0] <= '9') {
			base = "node_" + base
		}
		if len(base) > 48 {
			base = strings.TrimRight(base[:48], "_")
		}
		id := base
		for k := 2; c.used[id] || reserved[id]; k++ {
			id = base + "_" + strconv.Itoa(k)
		}
		c.used[id] = true
		c.ids[n.ID] = id
	}
}

// reserved are state keys a run uses itself (a non-object input is stored under "input").
var reserved = map[string]bool{"input": true}

// ref is where a value lives and what shape it has: a state key holding text, a JSON
// value, an http response whose body is the value, a list of documents, records or
// messages — or a literal.
type ref struct {
	key     string // a state key, or a path of keys ("page.text")
	kind    refKind
	literal string
	sep     string // kJoined: between the texts
	meta    bool   // kRows: fields other than text, id and score are in the record's metadata
	pattern string // kHistory: Langflow's message template, such as "{sender_name}: {text}"
}

type refKind int

const (
	kText    refKind = iota // a string
	kObject                 // a JSON value, written as JSON into text
	kBody                   // an http response; the value is its body
	kLit                    // the literal
	kJoined                 // a list of {text, ...}; as text, the texts joined by sep
	kRows                   // a list of records (Langflow's DataFrame)
	kRecord                 // one record (Langflow's Data, or a DataFrame of one row)
	kHistory                // a list of {role, content}; as text, each written with pattern
)

func (r ref) template() string {
	switch r.kind {
	case kLit:
		return escapeTemplate(r.literal)
	case kBody:
		return "{{json ." + r.key + ".body}}"
	case kObject, kRows, kRecord:
		return "{{json ." + r.key + "}}"
	case kJoined:
		return "{{range $i, $d := ." + r.key + "}}{{if $i}}" + escapeTemplate(r.sep) + "{{end}}{{$d.text}}{{end}}"
	case kHistory:
		return "{{range $i, $m := ." + r.key + "}}{{if $i}}\n{{end}}" + historyLine(r.pattern, "$m") + "{{end}}"
	}
	return "{{." + r.key + "}}"
}

func (r ref) jq() string {
	switch r.kind {
	case kLit:
		b, _ := json.Marshal(r.literal)
		return string(b)
	case kBody:
		return "." + r.key + ".body"
	case kJoined:
		sep, _ := json.Marshal(r.sep)
		return "([." + r.key + "[]?.text] | join(" + string(sep) + "))"
	case kHistory:
		return "([." + r.key + "[]? | " + historyJQ(r.pattern) + "] | join(\"\\n\"))"
	}
	return "." + r.key
}

// text is the value as text in jq: a string as it is, anything else as JSON.
func (r ref) jqText() string {
	return "(" + r.jq() + " | if type == \"string\" then . else tojson end)"
}

// escapeTemplate makes s print as itself in a Go template, whatever it holds: every run
// of two or more "{" becomes an action that prints the run ({{"{{"}}), and so does a
// "{" at the end, which would otherwise open an action with the first "{" of whatever
// the converted template puts next. Braces closing ("}}") are text to text/template
// outside an action, and there is none in escaped text.
func escapeTemplate(s string) string {
	if !strings.Contains(s, "{") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		if s[i] != '{' {
			j := strings.IndexByte(s[i:], '{')
			if j < 0 {
				j = len(s) - i
			}
			b.WriteString(s[i : i+j])
			i += j
			continue
		}
		j := i
		for j < len(s) && s[j] == '{' {
			j++
		}
		if j-i >= 2 || j == len(s) {
			b.WriteString(`{{"` + s[i:j] + `"}}`)
		} else {
			b.WriteByte('{')
		}
		i = j
	}
	return b.String()
}

// valueOf is the value an edge carries: ok is false for a model or a tool. A value passed
// on by outputs, aliases and routers is followed back along one edge at a time, each
// node at most once (a cycle of them carries nothing).
func (c *conv) valueOf(e lfEdge) (ref, bool) {
	return c.valueVia(e, map[string]bool{})
}

func (c *conv) valueVia(e lfEdge, visited map[string]bool) (ref, bool) {
	c.step()
	src := c.byID[e.Source]
	if visited[src.ID] {
		return ref{}, false
	}
	visited[src.ID] = true
	switch c.role[src.ID] {
	case roleEntry, roleConst:
		return ref{key: c.ids[src.ID]}, true
	case roleStep, roleGap:
		if e.output() == "model_output" {
			return ref{}, false
		}
		if c.role[src.ID] == roleStep {
			if r, ok := c.blockValue(src, e.output()); ok {
				return r, true
			}
		}
		switch src.kindName() {
		case "APIRequest":
			return ref{key: c.ids[src.ID], kind: kBody}, true
		case "StructuredOutput", "StructuredOutputComponent":
			return ref{key: c.ids[src.ID], kind: kRecord}, true
		case "Agent":
			if e.output() == "structured_response" {
				return ref{key: c.ids[src.ID], kind: kObject}, true
			}
		}
		return ref{key: c.ids[src.ID]}, true
	case roleRouter:
		// The If-Else passes its message on (the input text when no message is wired).
		for _, field := range []string{"message", "input_text"} {
			for _, in := range c.in[src.ID] {
				if in.fieldName() == field {
					return c.valueVia(in, visited)
				}
			}
		}
		return ref{literal: c.literal(src, "input_text"), kind: kLit}, true
	case roleOutput, roleAlias:
		field := passField(src)
		for _, in := range c.in[src.ID] {
			if in.fieldName() == field {
				return c.valueVia(in, visited)
			}
		}
		return ref{literal: c.literal(src, field), kind: kLit}, true
	}
	return ref{}, false
}

// text is a field of n as a template: the values wired into it, else its literal value.
func (c *conv) text(n *lfNode, field string) string {
	var parts []string
	for _, e := range c.in[n.ID] {
		c.step()
		if e.fieldName() != field {
			continue
		}
		if r, ok := c.valueOf(e); ok {
			t := r.template()
			c.grow(n, len(t))
			parts = append(parts, t)
		}
	}
	if len(parts) > 0 {
		return strings.Join(parts, "\n")
	}
	t := escapeTemplate(c.literal(n, field))
	c.grow(n, len(t))
	return t
}

// jqOf is a field of n as jq: the value wired into it, else its literal value.
func (c *conv) jqOf(n *lfNode, field string) string {
	for _, e := range c.in[n.ID] {
		if e.fieldName() == field {
			if r, ok := c.valueOf(e); ok {
				return r.jq()
			}
		}
	}
	b, _ := json.Marshal(c.literal(n, field))
	return string(b)
}

// choice is a node a node waits for, and the router port it needs ("" for a node that
// is not a router).
type choice struct {
	router string // Langflow id
	port   string // "true", "default" or ""
}

// guard is the router choices a node needs to run, by router.
type guard map[string]string

func (g guard) key(order map[string]int) string {
	rs := make([]string, 0, len(g))
	for r := range g {
		rs = append(rs, r)
	}
	sort.Slice(rs, func(i, j int) bool { return order[rs[i]] < order[rs[j]] })
	var b strings.Builder
	for _, r := range rs {
		b.WriteString(r + "=" + g[r] + ";")
	}
	return b.String()
}

// defaultPort is the router's port taken when no route matches: the If-Else's false.
const defaultPort = "default"

// routerPort is the Sluice port of an If-Else output.
func routerPort(output string) string {
	if output == "false_result" {
		return defaultPort
	}
	return "true"
}

// deps are the control-flow nodes n waits for, with the router port for routers. The
// walk passes through outputs and aliases, each at most once, so it is linear in the
// edges however many paths lead through them; it is done once per node.
func (c *conv) deps(n *lfNode) []choice {
	if d, ok := c.depsOf[n.ID]; ok {
		return d
	}
	seen := map[choice]bool{}
	visited := map[string]bool{}
	var out []choice
	var add func(e lfEdge)
	add = func(e lfEdge) {
		c.step()
		if e.fieldName() == "tools" {
			return
		}
		src := c.byID[e.Source]
		var ch choice
		switch c.role[src.ID] {
		case roleEntry, roleStep, roleGap:
			if e.output() == "model_output" {
				return
			}
			ch = choice{router: src.ID}
			if end := c.loopEnd[src.ID]; end != "" && e.output() == "done" {
				ch = choice{router: end} // what the loop gathered is there once its body ran
			}
		case roleRouter:
			ch = choice{router: src.ID, port: routerPort(e.output())}
		case roleAlias, roleOutput:
			if visited[src.ID] {
				return
			}
			visited[src.ID] = true
			for _, in := range c.in[src.ID] {
				add(in)
			}
			return
		default:
			return
		}
		if !seen[ch] {
			seen[ch] = true
			out = append(out, ch)
		}
	}
	for _, e := range c.in[n.ID] {
		if !c.loopBack(e) {
			add(e)
		}
	}
	c.depsOf[n.ID] = out
	return out
}

// lane is where the control flow of one guard has got to.
type lane struct {
	tail  string // Sluice id
	split string // Langflow id of the router that ends the lane, or ""
}

type port struct{ node, port string }

func (c *conv) convert(o Options) (*Result, error) {
	c.classify()
	if c.usesSession {
		c.used["session_id"] = true // the state key of the session, no node's
	}
	c.assignIDs()
	if c.historySize > 0 {
		c.historyKey = c.reserve(historyKey)
	}
	c.constants()
	if flows.LooksLikeCredential(c.ex.Name) {
		c.notes = append(c.notes, Note{Message: "the export's name looks like a credential; it was not copied"})
		c.ex.Name = ""
	}
	id := o.ID
	if id == "" {
		id = strings.Trim(idChars.ReplaceAllString(strings.ToLower(c.ex.Name), "-"), "-")
		if len(id) > 56 {
			id = strings.TrimRight(id[:56], "-")
		}
		if id == "" {
			id = "imported-flow"
		}
	}
	if !flows.ValidID(id) {
		return nil, fmt.Errorf("flow id %q: use lower-case letters, digits, '-' and '_'", id)
	}
	name := c.ex.Name
	if name == "" {
		name = "Imported flow"
	}
	doc := flows.Document{Sluice: flows.FormatVersion, ID: id, Name: name, Description: c.ex.Description}

	// The control-flow nodes, ordered so that dependencies come first, branches of a
	// router before what follows both, and routers after the other ready nodes.
	var steps []*lfNode
	for i := range c.ex.Data.Nodes {
		n := &c.ex.Data.Nodes[i]
		switch c.role[n.ID] {
		case roleEntry, roleStep, roleRouter, roleOutput, roleGap:
			if c.role[n.ID] == roleGap && c.outputsTo(n, "tools") {
				continue // a tool's placeholder hangs on the agent, not in the control flow
			}
			steps = append(steps, n)
		}
	}
	deps := map[string][]choice{}
	waiting := map[string]int{}
	users := map[string][]string{}
	for _, n := range steps {
		deps[n.ID] = c.deps(n)
		waiting[n.ID] = len(deps[n.ID])
		for _, d := range deps[n.ID] {
			users[d.router] = append(users[d.router], n.ID)
		}
	}
	order := map[string]int{}
	var sorted []*lfNode
	ready := map[string]bool{}
	for _, n := range steps {
		if waiting[n.ID] == 0 {
			ready[n.ID] = true
		}
	}
	less := func(a, b *lfNode) bool {
		ka, kb := c.rank(a), c.rank(b)
		for i := range ka {
			if ka[i] != kb[i] {
				return ka[i] < kb[i]
			}
		}
		return c.index[a.ID] < c.index[b.ID]
	}
	for len(sorted) < len(steps) {
		var next *lfNode
		for _, n := range steps {
			c.step()
			if ready[n.ID] && (next == nil || less(n, next)) {
				next = n
			}
		}
		if next == nil {
			// A cycle of data edges: Langflow runs loops with its Loop component only.
			// What is left is the cycles and what waits for them; peeling off the nodes
			// nothing left waits for leaves the cycles (and what lies between two).
			left := map[string]bool{}
			for _, n := range steps {
				if _, done := order[n.ID]; !done {
					left[n.ID] = true
				}
			}
			inCycle := map[string]bool{}
			for id := range left {
				inCycle[id] = true
			}
			for changed := true; changed; {
				changed = false
				for id := range inCycle {
					waited := false
					for _, u := range users[id] {
						c.step()
						waited = waited || inCycle[u]
					}
					if !waited {
						delete(inCycle, id)
						changed = true
					}
				}
			}
			for _, n := range steps {
				if !left[n.ID] {
					continue
				}
				if inCycle[n.ID] {
					c.gap(n, "it is part of a cycle of edges; Sluice loops need a router or a conditional edge (Langflow's Loop component maps to a fan-out)")
				} else {
					c.gap(n, "it waits for a cycle of edges, which Sluice cannot run")
				}
				order[n.ID] = len(order)
				sorted = append(sorted, n)
			}
			break
		}
		delete(ready, next.ID)
		order[next.ID] = len(order)
		sorted = append(sorted, next)
		g := guard{}
		for _, d := range deps[next.ID] {
			for r, p := range c.guard[d.router] {
				if q, ok := g[r]; ok && q != p {
					g[r] = "*" // both branches: the node follows the router's branches
				} else {
					g[r] = p
				}
			}
			if d.port != "" {
				if q, ok := g[d.router]; ok && q != d.port {
					g[d.router] = "*"
				} else {
					g[d.router] = d.port
				}
			}
		}
		for r, p := range g {
			if p == "*" {
				delete(g, r)
			}
		}
		c.guard[next.ID] = g
		for _, u := range users[next.ID] {
			waiting[u]--
			if waiting[u] == 0 {
				ready[u] = true
			}
		}
	}

	// The entry: the Langflow input, or one made up when the flow has none.
	entryID := ""
	if c.entry != "" {
		entryID = c.ids[c.entry]
	} else {
		entryID = "start"
		for k := 2; c.used[entryID]; k++ {
			entryID = "start_" + strconv.Itoa(k)
		}
		c.used[entryID] = true
		x, y := 0.0, 0.0
		for i, n := range c.ex.Data.Nodes {
			if n.Position != nil && (i == 0 || n.Position.X < x) {
				x, y = n.Position.X, n.Position.Y
			}
		}
		entry := flows.Node{ID: entryID, Type: flows.EntryType, Position: &flows.Position{X: x - 300, Y: y},
			Description: "Made up on import: the Langflow flow has no chat or text input."}
		if schema := c.inputSchema("", ""); len(schema["properties"].(map[string]any)) > 0 {
			entry.Params = params(map[string]any{"schema": schema})
		}
		doc.Nodes = append(doc.Nodes, entry)
	}
	if c.usesSession {
		def, _ := json.Marshal(id)
		c.state["session_id"] = flows.StateKey{Default: def,
			Description: "The conversation the run continues (Langflow's session): the Chat tab and /v1/chat/completions send one; a run without one continues the flow's own."}
	}
	lanes := map[string]*lane{"": {tail: entryID}}
	if c.entry == "" {
		doc.Nodes = append(doc.Nodes, c.prelude(lanes[""], doc.Nodes[0].Position)...)
	}
	var outputs []*lfNode
	for _, n := range sorted {
		switch c.role[n.ID] {
		case roleEntry:
			entry := c.node(n)
			doc.Nodes = append(doc.Nodes, entry)
			doc.Nodes = append(doc.Nodes, c.prelude(lanes[""], entry.Position)...)
			continue
		case roleOutput:
			outputs = append(outputs, n)
			continue
		}
		chain := c.chain(n)
		doc.Nodes = append(doc.Nodes, chain...)
		c.attach(lanes, order, c.guard[n.ID], chain[0].ID)
		for i := 1; i < len(chain); i++ {
			c.edges = append(c.edges, flows.Edge{From: chain[i-1].ID, To: chain[i].ID})
		}
		l := lanes[c.guard[n.ID].key(order)]
		l.tail, l.split = chain[len(chain)-1].ID, ""
		if c.role[n.ID] == roleRouter {
			l.split = n.ID
		}
	}
	doc.Nodes = append(doc.Nodes, c.remember(lanes, order, outputs)...)
	for _, n := range outputs {
		doc.Nodes = append(doc.Nodes, c.node(n))
		c.attach(lanes, order, c.guard[n.ID], c.ids[n.ID])
	}
	// Tools hang on their agents.
	for i := range c.ex.Data.Nodes {
		n := &c.ex.Data.Nodes[i]
		isTool := c.role[n.ID] == roleTool || (c.role[n.ID] == roleGap && c.outputsTo(n, "tools")) || c.alsoTool[n.ID]
		if !isTool {
			continue
		}
		t := c.toolNode(n)
		doc.Nodes = append(doc.Nodes, t)
		for _, e := range c.out[n.ID] {
			if e.fieldName() == "tools" && c.ids[e.Target] != "" {
				c.edges = append(c.edges, flows.Edge{From: t.ID, Port: "tool", To: c.ids[e.Target], ToPort: "tools"})
			}
		}
	}
	doc.Nodes = append(doc.Nodes, c.extra...)
	doc.Edges = c.edges
	if doc.Edges == nil {
		doc.Edges = []flows.Edge{}
	}
	if len(c.state) > 0 {
		doc.State = c.state
	}
	// Placeholders say what they stand for.
	for i := range c.gaps {
		c.gaps[i].Placeholder = c.ids[c.gaps[i].Node]
	}
	c.scrub(&doc)
	b, err := doc.Marshal()
	if err != nil {
		return nil, err
	}
	return &Result{Document: b, Gaps: c.gaps, Notes: c.notes}, nil
}

// rank orders ready nodes: branches of routers first (deeper guards), what fills a
// vector store before what searches one (a flow that ingests and answers does both in
// one run, documents first), other nodes before routers, then left to right and top to
// bottom on the canvas.
func (c *conv) rank(n *lfNode) [6]float64 {
	depth := 0.0
	for _, d := range c.deps(n) {
		if d.port != "" || len(c.guard[d.router]) > 0 {
			depth = max(depth, float64(len(c.guard[d.router])+1))
		}
	}
	isRouter := 0.0
	if c.role[n.ID] == roleRouter {
		isRouter = 1
	}
	entry := 1.0
	if c.role[n.ID] == roleEntry {
		entry = 0
	}
	x := 0.0
	if n.Position != nil {
		x = n.Position.X
	}
	ingest := 1.0
	if c.ingestSide(n) {
		ingest = 0
	}
	body := 1.0
	if c.inLoop[n.ID] {
		body = 0 // a loop's body runs in the loop's branches, before anything else
	}
	return [6]float64{entry, -depth, body, ingest, isRouter, x}
}

// attach connects node id after the control flow of guard g: after the lane's tail, or
// after every branch of the router that ended the lane, or from its router's port when
// the branch has no lane yet.
func (c *conv) attach(lanes map[string]*lane, order map[string]int, g guard, id string) {
	key := g.key(order)
	if _, ok := lanes[key]; !ok {
		// A new branch: it starts at the port of the innermost router it needs.
		inner := ""
		for r := range g {
			if inner == "" || order[r] > order[inner] {
				inner = r
			}
		}
		parent := guard{}
		for r, p := range g {
			if r != inner {
				parent[r] = p
			}
		}
		c.edges = append(c.edges, flows.Edge{From: c.ids[inner], Port: g[inner], To: id})
		lanes[key] = &lane{tail: id}
		return
	}
	for _, t := range c.tails(lanes, order, g) {
		e := flows.Edge{From: t.node, To: id}
		if t.port != flows.PortOut {
			e.Port = t.port
		}
		c.edges = append(c.edges, e)
	}
}

// tails are the open ends of a lane: its tail, or the ends of the branches of the
// router that ends it.
func (c *conv) tails(lanes map[string]*lane, order map[string]int, g guard) []port {
	l := lanes[g.key(order)]
	if l.split == "" {
		return []port{{l.tail, flows.PortOut}}
	}
	var out []port
	for _, p := range []string{"true", defaultPort} {
		child := guard{l.split: p}
		for r, q := range g {
			child[r] = q
		}
		if _, ok := lanes[child.key(order)]; ok {
			out = append(out, c.tails(lanes, order, child)...)
		} else {
			out = append(out, port{c.ids[l.split], p})
		}
	}
	return out
}
