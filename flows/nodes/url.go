package nodes

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/sluicehq/sluice/flows"
)

func urlSpec(env *Env) flows.Spec {
	return flows.Spec{
		Name:     "url",
		Title:    "Fetch URL",
		Category: "tools",
		Description: "Fetches a web page and keeps its readable text: the main content of an HTML page as a reader view " +
			"shows it (Readability: no navigation, scripts or ads), or the text of a PDF, DOCX, Markdown, CSV, JSON or " +
			"text document. It connects under the http component's policy: internal addresses are refused unless the " +
			"server's HTTP allow-list admits them, redirects included. As a step the page ({url, status, title, text, " +
			"format, content_type}) is stored under \"as\"; attached to an agent's tools port it is the model's " +
			"\"fetch a web page as text\" (it passes the url). A 4xx answer fails for good, a 5xx, 408 or 429 is " +
			"retried. With the node's cache set, identical fetches share one answer.",
		Ports: []flows.Port{inPort, outPort, toolPort},
		Params: json.RawMessage(`{
			"type": "object", "additionalProperties": false,
			"properties": {
				"url": {"type": "string", "format": "template", "description": "The page's URL, a template over the node's input, e.g. {{.link}}. As a tool the model gives it."},
				"format": {"enum": ["text", "html"], "default": "text", "description": "text: the readable text; html: the page's HTML as it came."},
				"timeout": {"type": "string", "format": "duration", "default": "30s", "description": "Deadline of the fetch, redirects included."},
				"max_bytes": {"type": "integer", "minimum": 1, "maximum": 67108864, "default": 5242880, "description": "A larger answer fails the fetch."},
				"max_chars": {"type": "integer", "minimum": 1, "maximum": 16777216, "default": 100000, "description": "The text is cut to this many characters (truncated: true says so)."},
				"as": {"type": "string", "pattern": "^[A-Za-z_][A-Za-z0-9_]*$", "default": "page", "description": "State key the page is stored under (as a step)."},` + toolParams + `
			}
		}`),
		Example: json.RawMessage(`{"url": "{{.link}}", "as": "page"}`),
		New:     func(b *flows.Build) (flows.Component, error) { return newURL(env, b) },
	}
}

// URL fetches a page as text.
type URL struct {
	env      *Env
	url      *flows.Template
	format   string
	timeout  time.Duration
	maxBytes int64
	maxChars int
	as       string
	ttl      time.Duration
	def      flows.ToolDef
}

var urlToolArgs = json.RawMessage(`{"type": "object", "required": ["url"], "additionalProperties": false,
	"properties": {"url": {"type": "string", "description": "The http or https URL of the page."}}}`)

func newURL(env *Env, b *flows.Build) (flows.Component, error) {
	var p struct {
		toolConfig
		URL      string         `json:"url"`
		Format   string         `json:"format"`
		Timeout  flows.Duration `json:"timeout"`
		MaxBytes int64          `json:"max_bytes"`
		MaxChars int            `json:"max_chars"`
		As       string         `json:"as"`
	}
	if err := b.Decode(&p); err != nil {
		return nil, err
	}
	u := &URL{env: env, format: p.Format, timeout: p.Timeout.D(), maxBytes: p.MaxBytes, maxChars: p.MaxChars, as: p.As, ttl: nodeCacheTTL(b)}
	if p.URL != "" {
		t, err := flows.ParseTemplate(p.URL)
		if err != nil {
			return nil, &flows.Error{Code: flows.Invalid, Path: "params.url", Err: err}
		}
		u.url = t
	}
	p.ToolParameters = nil
	u.def = p.def(b, "Fetch a web page and read its text (the main content, without navigation).", urlToolArgs)
	return u, nil
}

// fetch gets the page at raw, through the cache when the node has one.
func (u *URL) fetch(ctx context.Context, s *flows.Step, raw string) (map[string]any, error) {
	raw = strings.TrimSpace(raw)
	b, _, err := u.env.cached(ctx, s, cacheKey("url", s.Version, map[string]any{"url": raw, "format": u.format, "max": u.maxChars}), u.ttl,
		func(ctx context.Context) ([]byte, error) {
			page, err := u.get(ctx, s.Flow, s.Node, raw)
			if err != nil {
				return nil, err
			}
			return json.Marshal(page)
		})
	if err != nil {
		return nil, err
	}
	v, err := flows.DecodeJSON(b)
	if err != nil {
		return nil, err
	}
	m, _ := v.(map[string]any)
	return m, nil
}

// get sends the request with the guarded client and reads the answer as a document,
// redacted as flow's workspace sees secrets.
func (u *URL) get(ctx context.Context, flow, node, raw string) (map[string]any, error) {
	pu, err := url.Parse(raw)
	if err != nil || pu.Host == "" {
		return nil, flows.Permanent(&flows.Error{Code: flows.Invalid, Node: node, Path: "params.url", Message: fmt.Sprintf("%q is not a URL", raw)})
	}
	ctx, cancel := context.WithTimeout(ctx, u.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, pu.String(), nil)
	if err != nil {
		return nil, flows.Permanent(&flows.Error{Code: flows.Invalid, Node: node, Path: "params.url", Err: err})
	}
	req.Header.Set("User-Agent", "sluice")
	req.Header.Set("Accept", "text/html,application/xhtml+xml,text/plain;q=0.9,*/*;q=0.8")
	res, where, err := u.env.send(ctx, node, "params.url", req, u.timeout)
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	data, err := io.ReadAll(io.LimitReader(res.Body, u.maxBytes+1))
	if err != nil {
		return nil, &flows.Error{Code: flows.Unavailable, Node: node, Message: where + ": reading the answer", Err: err}
	}
	if int64(len(data)) > u.maxBytes {
		return nil, flows.Permanent(&flows.Error{Code: flows.TooLarge, Node: node, Path: "params.max_bytes",
			Message: fmt.Sprintf("%s: the answer is larger than max_bytes (%d bytes)", where, u.maxBytes)})
	}
	if res.StatusCode >= 400 {
		fe := &flows.Error{Code: flows.Unavailable, Node: node, Message: fmt.Sprintf("%s: answered %d %s", where, res.StatusCode, http.StatusText(res.StatusCode))}
		if res.StatusCode < 500 && res.StatusCode != http.StatusRequestTimeout && res.StatusCode != http.StatusTooManyRequests {
			fe.Code = flows.Invalid
			return nil, flows.Permanent(fe)
		}
		return nil, fe
	}
	final := res.Request.URL
	ctype := res.Header.Get("Content-Type")
	page := map[string]any{"url": redact(final), "status": res.StatusCode, "content_type": ctype}
	doc, err := extract(final.Path, ctype, data, final)
	if err != nil {
		return nil, flows.Permanent(&flows.Error{Code: flows.Invalid, Node: node, Message: fmt.Sprintf("%s: %v", where, err)})
	}
	text := doc.Text
	page["format"] = doc.Format
	if u.format == "html" && doc.Format == formatHTML {
		text = string(data)
		page["format"] = "html"
	}
	if r := []rune(text); len(r) > u.maxChars {
		text = string(r[:u.maxChars])
		page["truncated"] = true
	}
	page["text"] = u.env.Secrets.In(flows.WorkspaceOf(flow)).Redact(text)
	if doc.Title != "" {
		page["title"] = doc.Title
	}
	return page, nil
}

// Run fetches the URL the template renders over the node's input.
func (u *URL) Run(ctx context.Context, s *flows.Step) (*flows.Result, error) {
	if u.url == nil {
		return nil, flows.Permanent(&flows.Error{Code: flows.Invalid, Node: s.Node, Path: "params.url",
			Message: "a url step needs a url; without one the node only works as an agent's tool"})
	}
	raw, err := u.url.Execute(ctx, s.Input)
	if err != nil {
		return nil, templateError(s.Node, "params.url", err)
	}
	page, err := u.fetch(ctx, s, raw)
	if err != nil {
		return nil, err
	}
	return &flows.Result{Output: page, Update: map[string]any{u.as: page}}, nil
}

// ToolDef offers the fetch to a model.
func (u *URL) ToolDef() flows.ToolDef { return u.def }

// Call fetches the URL the model gives.
func (u *URL) Call(ctx context.Context, s *flows.Step, args json.RawMessage) (any, error) {
	var a struct {
		URL string `json:"url"`
	}
	if err := json.Unmarshal(args, &a); err != nil || a.URL == "" {
		return nil, fmt.Errorf(`call it with {"url": "https://…"}`)
	}
	return u.fetch(ctx, s, a.URL)
}

var (
	_ flows.Component = (*URL)(nil)
	_ flows.Tool      = (*URL)(nil)
)
