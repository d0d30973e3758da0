package nodes

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/sluicehq/sluice/flows"
)

// embedParams are the parameters of the components that embed text.
const embedParams = `
	"provider": {"type": "string", "default": "default", "description": "LLM provider configured on the server, OpenAI-compatible (POST /v1/embeddings: OpenAI, Ollama, vLLM, llama.cpp)."},
	"model": {"type": "string", "minLength": 1, "description": "Embedding model, e.g. text-embedding-3-small or nomic-embed-text."},
	"dimensions": {"type": "integer", "minimum": 1, "maximum": 8192, "description": "Ask for vectors this long (models that can shorten theirs, such as text-embedding-3-*); left out, the model's own."},
	"batch_size": {"type": "integer", "minimum": 1, "maximum": 2048, "default": 100, "description": "Texts sent per request."}`

// embedConfig is what an embedding component reads from embedParams.
type embedConfig struct {
	Provider   string `json:"provider"`
	Model      string `json:"model"`
	Dimensions int    `json:"dimensions"`
	BatchSize  int    `json:"batch_size"`
}

// check refuses a provider the server lacks or one that has no embeddings API.
func (c *embedConfig) check(env *Env, flow, path string) error {
	if c.Provider == "" {
		c.Provider = DefaultProvider
	}
	if c.BatchSize <= 0 {
		c.BatchSize = 100
	}
	p, err := env.providerIn(flow, c.Provider)
	if err != nil {
		return atPath(err, path+"provider")
	}
	if p.kind() == ProviderAnthropic {
		return &flows.Error{Code: flows.Invalid, Path: path + "provider",
			Message: fmt.Sprintf("provider %q is Anthropic's, which has no embeddings API: name an OpenAI-compatible one", c.Provider)}
	}
	return nil
}

func embedSpec(env *Env) flows.Spec {
	return flows.Spec{
		Name:     "embed",
		Title:    "Embeddings",
		Category: "ai",
		Description: "Turns texts into embedding vectors with an OpenAI-compatible /v1/embeddings endpoint (OpenAI, Ollama, " +
			"vLLM, llama.cpp), batch_size texts per request. The input (texts, jq) is a string, a list of strings or a list " +
			"of chunks ({text, ...}, as split_text makes); the vectors, in the same order, are stored under \"as\". A " +
			"vector of 1,536 numbers is about 30 kB of state: to index documents, give the chunks to a vector_store node, " +
			"which embeds them itself. Token usage is recorded on the step and counts towards budgets. With the node's " +
			"cache set, a batch embedded before is not sent again.",
		Ports: []flows.Port{inPort, outPort},
		Params: json.RawMessage(`{
			"type": "object", "additionalProperties": false, "required": ["model"],
			"properties": {` + embedParams + `,
				"texts": {"type": "string", "format": "jq", "default": ".chunks", "description": "jq making the texts: a string, a list of strings, or a list of {text, ...}."},
				"as": {"type": "string", "pattern": "^[A-Za-z_][A-Za-z0-9_]*$", "default": "embeddings", "description": "State key the vectors are stored under."}
			}
		}`),
		Example: json.RawMessage(`{"model": "text-embedding-3-small", "texts": "[.question]", "as": "query_vector"}`),
		New:     func(b *flows.Build) (flows.Component, error) { return newEmbed(env, b) },
	}
}

// Embed embeds texts.
type Embed struct {
	env    *Env
	cfg    embedConfig
	texts  *flows.JQ
	as     string
	ttl    time.Duration
	budget budget
}

func newEmbed(env *Env, b *flows.Build) (flows.Component, error) {
	var p struct {
		embedConfig
		Texts string `json:"texts"`
		As    string `json:"as"`
	}
	if err := b.Decode(&p); err != nil {
		return nil, err
	}
	if err := p.embedConfig.check(env, flowOf(b), "params."); err != nil {
		return nil, err
	}
	q, err := flows.CompileJQ(p.Texts)
	if err != nil {
		return nil, &flows.Error{Code: flows.Invalid, Path: "params.texts", Err: err}
	}
	return &Embed{env: env, cfg: p.embedConfig, texts: q, as: p.As, ttl: nodeCacheTTL(b), budget: newBudget(b)}, nil
}

// textsOf reads a string, a list of strings or a list of {text, ...} as texts.
func textsOf(v any) ([]string, error) {
	items, ok := v.([]any)
	if !ok {
		items = []any{v}
	}
	out := make([]string, len(items))
	for i, it := range items {
		switch x := it.(type) {
		case string:
			out[i] = x
		case map[string]any:
			t, ok := x["text"].(string)
			if !ok {
				return nil, fmt.Errorf("item %d has no text", i)
			}
			out[i] = t
		default:
			return nil, fmt.Errorf("item %d is %s; want a string or {text, ...}", i, flows.TypeName(it))
		}
		if out[i] == "" {
			return nil, fmt.Errorf("item %d is empty: there is nothing to embed", i)
		}
	}
	return out, nil
}

// Run embeds the texts.
func (e *Embed) Run(ctx context.Context, s *flows.Step) (*flows.Result, error) {
	v, err := e.texts.First(ctx, s.Input, s.State)
	if err != nil {
		return nil, flows.Permanent(&flows.Error{Code: flows.Invalid, Node: s.Node, Path: "params.texts", Err: err})
	}
	texts, err := textsOf(v)
	if err != nil {
		return nil, flows.Permanent(&flows.Error{Code: flows.Invalid, Node: s.Node, Path: "params.texts", Message: err.Error()})
	}
	vecs, usage, err := e.env.embed(ctx, s, e.cfg, texts, e.ttl, e.budget)
	if err != nil {
		return nil, err
	}
	out := make([]any, len(vecs))
	for i, v := range vecs {
		row := make([]any, len(v))
		for j, x := range v {
			row[j] = float64(x)
		}
		out[i] = row
	}
	return &flows.Result{Output: out, Update: map[string]any{e.as: out}, Usage: usage}, nil
}

// embeddingsService is the embeddings client of an OpenAI-compatible provider, built
// from its own settings only, as the chat client is.
func (e *Env) embeddingsService(p *Provider) *openai.EmbeddingService {
	key := "embeddings:" + p.Name
	if s, ok := e.chats.Load(key); ok {
		return s.(*openai.EmbeddingService)
	}
	s := openai.NewEmbeddingService(e.providerOptions(p)...)
	actual, _ := e.chats.LoadOrStore(key, &s)
	return actual.(*openai.EmbeddingService)
}

// embedBatch is what makes two embedding requests the same: the cache key's argument.
// It holds no flow version: an embedding depends on the model and the text only.
type embedBatch struct {
	Provider   string   `json:"provider"`
	Model      string   `json:"model"`
	Dimensions int      `json:"dimensions,omitempty"`
	Texts      []string `json:"texts"`
}

type embedReply struct {
	Vectors [][]float32 `json:"vectors"`
	Usage   flows.Usage `json:"usage"`
}

// embed embeds texts in batches of cfg.BatchSize, each through the cache when ttl > 0,
// under the provider's rate limit, counting usage towards the budget.
func (e *Env) embed(ctx context.Context, s *flows.Step, cfg embedConfig, texts []string, ttl time.Duration, b budget) ([][]float32, flows.Usage, error) {
	p, err := e.runProvider(s, cfg.Provider)
	if err != nil {
		return nil, flows.Usage{}, err
	}
	if err := e.checkBudget(ctx, s, b); err != nil {
		return nil, flows.Usage{}, err
	}
	var out [][]float32
	var usage flows.Usage
	for start := 0; start < len(texts); start += cfg.BatchSize {
		batch := embedBatch{Provider: cfg.Provider, Model: cfg.Model, Dimensions: cfg.Dimensions, Texts: texts[start:min(start+cfg.BatchSize, len(texts))]}
		raw, hit, err := e.cached(ctx, s, cacheKey("embed", "", batch), ttl, func(ctx context.Context) ([]byte, error) {
			r, err := e.embedCall(ctx, s, p, batch)
			if err != nil {
				return nil, err
			}
			return json.Marshal(r)
		})
		if err != nil {
			return nil, flows.Usage{}, err
		}
		var r embedReply
		if err := json.Unmarshal(raw, &r); err != nil {
			return nil, flows.Usage{}, fmt.Errorf("cached embeddings: %v", err)
		}
		if !hit {
			usage = usage.Add(r.Usage)
			if err := e.spend(ctx, s, b, p, cfg.Model, r.Usage); err != nil {
				return nil, flows.Usage{}, err
			}
		}
		out = append(out, r.Vectors...)
	}
	return out, usage, nil
}

// embedCall sends one batch.
func (e *Env) embedCall(ctx context.Context, s *flows.Step, p *Provider, batch embedBatch) (*embedReply, error) {
	params := openai.EmbeddingNewParams{Model: openai.EmbeddingModel(batch.Model),
		Input:          openai.EmbeddingNewParamsInputUnion{OfArrayOfStrings: batch.Texts},
		EncodingFormat: openai.EmbeddingNewParamsEncodingFormatFloat}
	if batch.Dimensions > 0 {
		params.Dimensions = openai.Int(int64(batch.Dimensions))
	}
	ctx, lc := e.limited(ctx, s, p)
	res, err := e.embeddingsService(p).New(ctx, params)
	if err != nil {
		return nil, providerError(s, p, err)
	}
	if len(res.Data) != len(batch.Texts) {
		return nil, &flows.Error{Code: flows.Unavailable, Node: s.Node,
			Message: fmt.Sprintf("LLM provider %q answered %d embeddings for %d texts", p.Name, len(res.Data), len(batch.Texts))}
	}
	sort.Slice(res.Data, func(i, j int) bool { return res.Data[i].Index < res.Data[j].Index })
	r := &embedReply{Usage: flows.Usage{InputTokens: res.Usage.PromptTokens}}
	dims := -1
	for _, d := range res.Data {
		if dims >= 0 && len(d.Embedding) != dims || len(d.Embedding) == 0 {
			return nil, &flows.Error{Code: flows.Unavailable, Node: s.Node,
				Message: fmt.Sprintf("LLM provider %q answered embeddings of different lengths", p.Name)}
		}
		dims = len(d.Embedding)
		v := make([]float32, dims)
		for i, x := range d.Embedding {
			v[i] = float32(x)
		}
		r.Vectors = append(r.Vectors, v)
	}
	r.Usage.CostUSD, _ = p.cost(batch.Model, r.Usage)
	e.settle(ctx, p, lc, r.Usage)
	return r, nil
}

var _ flows.Component = (*Embed)(nil)
