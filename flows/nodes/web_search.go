package nodes

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/sluice/flows"
)

// The web search providers and the base URL each has by default.
var searchProviders = map[string]string{
	"tavily":      "https://api.tavily.com",
	"brave":       "https://api.search.brave.com",
	"searchapi":   "https://www.searchapi.io",
	"serpapi":     "https://serpapi.com",
	"serper":      "https://google.serper.dev",
	"scrapegraph": "https://api.scrapegraphai.com",
	"searxng":     "",
}

func webSearchSpec(env *Env) flows.Spec {
	return flows.Spec{
		Name:     "web_search",
		Title:    "Web search",
		Category: "tools",
		Description: "Searches the web through a provider's HTTP API: Tavily (POST /search), Brave Search " +
			"(GET /res/v1/web/search), SearchApi (GET /api/v1/search, Google), SerpApi (GET /search.json, Google), Serper " +
			"(POST /search), ScrapeGraph (POST /v1/searchscraper: its answer first, then its sources) or a SearXNG instance " +
			"(GET /search?format=json). The key is a secret of the server " +
			"({\"$env\": \"NAME\"}, an allowed variable, never in the flow; its value is redacted from what the step " +
			"produces); the request goes through the http component's policy (internal addresses, such as a SearXNG on " +
			"the private network, need the server's HTTP allow-list). The results, a list of {title, url, content}, are " +
			"stored under \"as\"; attached to an agent's tools port the model passes the query. A 4xx answer fails for " +
			"good, a 5xx, 408 or 429 is retried; with the node's cache set, identical searches share one answer.",
		Ports: []flows.Port{inPort, outPort, toolPort},
		Params: json.RawMessage(`{
			"type": "object", "additionalProperties": false, "required": ["provider"],
			"properties": {
				"provider": {"enum": ["tavily", "brave", "searchapi", "serpapi", "serper", "scrapegraph", "searxng"], "description": "Which search API base_url speaks."},
				"base_url": {"type": "string", "format": "uri", "description": "The API's base URL; default the provider's own (https://api.tavily.com, https://api.search.brave.com, https://www.searchapi.io, https://serpapi.com, https://google.serper.dev, https://api.scrapegraphai.com); required for searxng (its instance)."},
				"api_key": {"x-secret": true, "description": "The key (Tavily, SearchApi: Authorization Bearer; Brave: X-Subscription-Token; SerpApi: api_key; Serper: X-API-KEY; ScrapeGraph: SGAI-APIKEY; SearXNG: sent as Bearer when given)."},
				"query": {"type": "string", "format": "template", "default": "{{.query}}", "description": "What to search for, a template over the node's input (as a step)."},
				"max_results": {"type": "integer", "minimum": 1, "maximum": 20, "default": 5, "description": "The most results returned."},
				"timeout": {"type": "string", "format": "duration", "default": "20s", "description": "Deadline of the request."},
				"as": {"type": "string", "pattern": "^[A-Za-z_][A-Za-z0-9_]*$", "default": "search_results", "description": "State key the results are stored under (as a step)."},` + toolParams + `
			}
		}`),
		Example: json.RawMessage(`{"provider": "tavily", "api_key": {"$env": "SLUICE_SECRET_TAVILY_KEY"}, "query": "{{.topic}} latest news", "max_results": 5}`),
		New:     func(b *flows.Build) (flows.Component, error) { return newWebSearch(env, b) },
	}
}

// WebSearch asks a search API.
type WebSearch struct {
	env      *Env
	flow     string // its flow: the workspace whose secrets it may read
	provider string
	base     *url.URL
	keyEnv   string
	query    *flows.Template
	max      int
	timeout  time.Duration
	as       string
	ttl      time.Duration
	def      flows.ToolDef
}

var webSearchToolArgs = json.RawMessage(`{"type": "object", "required": ["query"], "additionalProperties": false,
	"properties": {"query": {"type": "string", "description": "What to search the web for."},
	               "max_results": {"type": "integer", "minimum": 1, "maximum": 20}}}`)

func newWebSearch(env *Env, b *flows.Build) (flows.Component, error) {
	var p struct {
		toolConfig
		Provider   string          `json:"provider"`
		BaseURL    string          `json:"base_url"`
		APIKey     json.RawMessage `json:"api_key"`
		Query      string          `json:"query"`
		MaxResults int             `json:"max_results"`
		Timeout    flows.Duration  `json:"timeout"`
		As         string          `json:"as"`
	}
	if err := b.Decode(&p); err != nil {
		return nil, err
	}
	w := &WebSearch{env: env, flow: flowOf(b), provider: p.Provider, max: p.MaxResults, timeout: p.Timeout.D(), as: p.As, ttl: nodeCacheTTL(b)}
	raw := p.BaseURL
	if raw == "" {
		raw = searchProviders[p.Provider]
	}
	if raw == "" {
		return nil, &flows.Error{Code: flows.Invalid, Path: "params.base_url", Message: "searxng needs base_url: the instance's URL, e.g. http://searxng.internal:8080"}
	}
	u, err := url.Parse(strings.TrimSuffix(raw, "/"))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil {
		return nil, &flows.Error{Code: flows.Invalid, Path: "params.base_url", Message: fmt.Sprintf("%q: want an http(s) URL without credentials", raw)}
	}
	w.base = u
	if len(p.APIKey) > 0 && string(p.APIKey) != "null" {
		var ref struct {
			Env string `json:"$env"`
		}
		if json.Unmarshal(p.APIKey, &ref) != nil || ref.Env == "" {
			return nil, &flows.Error{Code: flows.Invalid, Path: "params.api_key", Message: `the key is {"$env": "NAME"}`}
		}
		w.keyEnv = ref.Env
	} else if p.Provider != "searxng" {
		return nil, &flows.Error{Code: flows.Invalid, Path: "params.api_key", Message: p.Provider + ` needs an api_key: {"$env": "SLUICE_SECRET_…"}`}
	}
	if w.query, err = flows.ParseTemplate(p.Query); err != nil {
		return nil, &flows.Error{Code: flows.Invalid, Path: "params.query", Err: err}
	}
	p.ToolParameters = nil
	w.def = p.def(b, "Search the web; returns titles, URLs and snippets. Fetch a page for its full text.", webSearchToolArgs)
	return w, nil
}

// searchRequest is what makes two searches the same (the cache key's argument): the
// key by the name of its variable, never its value.
type searchRequest struct {
	Provider string `json:"provider"`
	Base     string `json:"base"`
	Key      string `json:"key,omitempty"`
	Query    string `json:"query"`
	Max      int    `json:"max"`
}

func (w *WebSearch) search(ctx context.Context, s *flows.Step, query string, max int) (any, error) {
	query = strings.TrimSpace(query)
	if query == "" {
		return nil, flows.Permanent(&flows.Error{Code: flows.Invalid, Node: s.Node, Path: "params.query", Message: "the query is empty"})
	}
	r := searchRequest{Provider: w.provider, Base: w.base.String(), Key: w.keyEnv, Query: query, Max: max}
	b, _, err := w.env.cached(ctx, s, cacheKey("web_search", s.Version, r), w.ttl, func(ctx context.Context) ([]byte, error) {
		res, err := w.do(ctx, s.Node, r)
		if err != nil {
			return nil, err
		}
		return json.Marshal(res)
	})
	if err != nil {
		return nil, err
	}
	return flows.DecodeJSON(b)
}

// searchResult is one result, whatever the provider.
type searchResult struct {
	Title   string `json:"title"`
	URL     string `json:"url"`
	Content string `json:"content"`
}

// do sends the provider's request with the guarded client and reads its results.
func (w *WebSearch) do(ctx context.Context, node string, r searchRequest) ([]searchResult, error) {
	var key string
	if w.keyEnv != "" {
		v, ok, err := w.env.lookupSecret(w.flow, w.keyEnv)
		if err != nil {
			return nil, secretError(err, node, "params.api_key")
		}
		if !ok || v == "" {
			return nil, flows.Permanent(&flows.Error{Code: flows.Invalid, Node: node, Path: "params.api_key",
				Message: fmt.Sprintf("environment variable %s is not set on the server", w.keyEnv)})
		}
		key = v
	}
	ctx, cancel := context.WithTimeout(ctx, w.timeout)
	defer cancel()
	var req *http.Request
	var err error
	switch w.provider {
	case "tavily":
		body, _ := json.Marshal(map[string]any{"query": r.Query, "max_results": r.Max, "search_depth": "basic"})
		req, err = http.NewRequestWithContext(ctx, http.MethodPost, w.base.String()+"/search", bytes.NewReader(body))
		if err == nil {
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Authorization", "Bearer "+key)
		}
	case "brave":
		q := url.Values{"q": {r.Query}, "count": {strconv.Itoa(r.Max)}}
		req, err = http.NewRequestWithContext(ctx, http.MethodGet, w.base.String()+"/res/v1/web/search?"+q.Encode(), nil)
		if err == nil {
			req.Header.Set("X-Subscription-Token", key)
		}
	case "searchapi":
		q := url.Values{"engine": {"google"}, "q": {r.Query}, "num": {strconv.Itoa(r.Max)}}
		req, err = http.NewRequestWithContext(ctx, http.MethodGet, w.base.String()+"/api/v1/search?"+q.Encode(), nil)
		if err == nil {
			req.Header.Set("Authorization", "Bearer "+key)
		}
	case "serpapi":
		// SerpApi takes its key in the query only: the URL is never logged whole (where
		// keeps scheme, host and path) and the key is redacted from every answer.
		q := url.Values{"engine": {"google"}, "q": {r.Query}, "num": {strconv.Itoa(r.Max)}, "api_key": {key}}
		req, err = http.NewRequestWithContext(ctx, http.MethodGet, w.base.String()+"/search.json?"+q.Encode(), nil)
	case "serper":
		body, _ := json.Marshal(map[string]any{"q": r.Query, "num": r.Max})
		req, err = http.NewRequestWithContext(ctx, http.MethodPost, w.base.String()+"/search", bytes.NewReader(body))
		if err == nil {
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("X-API-KEY", key)
		}
	case "scrapegraph":
		body, _ := json.Marshal(map[string]any{"user_prompt": r.Query, "num_results": r.Max})
		req, err = http.NewRequestWithContext(ctx, http.MethodPost, w.base.String()+"/v1/searchscraper", bytes.NewReader(body))
		if err == nil {
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("SGAI-APIKEY", key)
		}
	default:
		q := url.Values{"q": {r.Query}, "format": {"json"}}
		req, err = http.NewRequestWithContext(ctx, http.MethodGet, w.base.String()+"/search?"+q.Encode(), nil)
		if err == nil && key != "" {
			req.Header.Set("Authorization", "Bearer "+key)
		}
	}
	if err != nil {
		return nil, flows.Permanent(&flows.Error{Code: flows.Invalid, Node: node, Path: "params.base_url", Err: err})
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", "sluice")
	res, where, err := w.env.send(ctx, node, "params.base_url", req, w.timeout)
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(res.Body, 8<<20))
	if err != nil {
		return nil, &flows.Error{Code: flows.Unavailable, Node: node, Message: where + ": reading the answer", Err: err}
	}
	// A provider may echo the key it was sent: nothing leaves unredacted.
	raw = w.env.Secrets.In(flows.WorkspaceOf(w.flow)).RedactBytes(raw)
	if res.StatusCode >= 400 {
		msg := fmt.Sprintf("%s: %s answered %d %s: %s", where, w.provider, res.StatusCode, http.StatusText(res.StatusCode), truncateText(strings.TrimSpace(string(raw)), 200))
		fe := &flows.Error{Code: flows.Unavailable, Node: node, Message: msg}
		if res.StatusCode < 500 && res.StatusCode != http.StatusRequestTimeout && res.StatusCode != http.StatusTooManyRequests {
			fe.Code = flows.Invalid
			return nil, flows.Permanent(fe)
		}
		return nil, fe
	}
	var out []searchResult
	switch w.provider {
	case "brave":
		var b struct {
			Web struct {
				Results []struct {
					Title       string `json:"title"`
					URL         string `json:"url"`
					Description string `json:"description"`
				} `json:"results"`
			} `json:"web"`
		}
		err = json.Unmarshal(raw, &b)
		for _, x := range b.Web.Results {
			out = append(out, searchResult{Title: x.Title, URL: x.URL, Content: x.Description})
		}
	case "searchapi", "serpapi", "serper": // Google's results: {organic_results | organic: [{title, link, snippet}]}
		type organic struct {
			Title   string `json:"title"`
			Link    string `json:"link"`
			Snippet string `json:"snippet"`
		}
		var g struct {
			OrganicResults []organic `json:"organic_results"`
			Organic        []organic `json:"organic"`
		}
		err = json.Unmarshal(raw, &g)
		for _, x := range append(g.OrganicResults, g.Organic...) {
			out = append(out, searchResult{Title: x.Title, URL: x.Link, Content: x.Snippet})
		}
	case "scrapegraph": // {result: the answer it wrote, reference_urls: [its sources]}
		var sg struct {
			Result        any      `json:"result"`
			ReferenceURLs []string `json:"reference_urls"`
		}
		err = json.Unmarshal(raw, &sg)
		if err == nil && sg.Result != nil {
			text, ok := sg.Result.(string)
			if !ok {
				b, _ := json.Marshal(sg.Result)
				text = string(b)
			}
			first := ""
			if len(sg.ReferenceURLs) > 0 {
				first = sg.ReferenceURLs[0]
			}
			out = append(out, searchResult{Title: "ScrapeGraph's answer", URL: first, Content: text})
			for _, u := range sg.ReferenceURLs {
				out = append(out, searchResult{Title: u, URL: u})
			}
		}
	default: // tavily and searxng answer {"results": [{title, url, content}]}
		var t struct {
			Results []searchResult `json:"results"`
		}
		err = json.Unmarshal(raw, &t)
		out = t.Results
	}
	if err != nil {
		return nil, &flows.Error{Code: flows.Unavailable, Node: node, Message: fmt.Sprintf("%s: the answer is not %s's JSON: %v", where, w.provider, err)}
	}
	if len(out) > r.Max {
		out = out[:r.Max]
	}
	if out == nil {
		out = []searchResult{}
	}
	for i := range out {
		out[i].Content = tidyText(stripTags(out[i].Content))
	}
	return out, nil
}

// stripTags drops the <strong> and similar markup some providers put in snippets.
func stripTags(s string) string {
	if !strings.Contains(s, "<") {
		return s
	}
	var b strings.Builder
	in := false
	for _, r := range s {
		switch {
		case r == '<':
			in = true
		case r == '>' && in:
			in = false
		case !in:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// Run searches with the query template over the node's input.
func (w *WebSearch) Run(ctx context.Context, s *flows.Step) (*flows.Result, error) {
	q, err := w.query.Execute(ctx, s.Input)
	if err != nil {
		return nil, templateError(s.Node, "params.query", err)
	}
	out, err := w.search(ctx, s, q, w.max)
	if err != nil {
		return nil, err
	}
	return &flows.Result{Output: out, Update: map[string]any{w.as: out}}, nil
}

// ToolDef offers the search to a model.
func (w *WebSearch) ToolDef() flows.ToolDef { return w.def }

// Call searches for the model's query.
func (w *WebSearch) Call(ctx context.Context, s *flows.Step, args json.RawMessage) (any, error) {
	var a struct {
		Query      string `json:"query"`
		MaxResults int    `json:"max_results"`
	}
	if err := json.Unmarshal(args, &a); err != nil || strings.TrimSpace(a.Query) == "" {
		return nil, fmt.Errorf(`call it with {"query": "what to search for"}`)
	}
	max := w.max
	if a.MaxResults > 0 && a.MaxResults <= 20 {
		max = a.MaxResults
	}
	return w.search(ctx, s, a.Query, max)
}

var (
	_ flows.Component = (*WebSearch)(nil)
	_ flows.Tool      = (*WebSearch)(nil)
)
