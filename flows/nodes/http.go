package nodes

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/sluicehq/sluice/flows"
)

func httpSpec(env *Env) flows.Spec {
	return flows.Spec{
		Name:     "http",
		Title:    "HTTP request",
		Category: "tools",
		Description: "Sends an HTTP request: method, a URL template, headers, a body, a timeout and a cap on the " +
			"response size. Header values that are secrets come from environment variables of the server ({\"$env\": \"NAME\"}, " +
			"with an optional prefix such as \"Bearer \"), never from the flow: SLUICE_SECRET_* and the names the server allows " +
			"with --secrets, never a setting of Sluice itself; their values are redacted from the response. The server refuses to connect to " +
			"loopback, private, link-local, CGNAT and other internal addresses (checked when each connection is " +
			"dialled, redirects included) unless its HTTP allow-list admits them. As a step its templates see the " +
			"node's input and the response ({status, content_type, body}; a JSON body parsed) is stored under " +
			"\"as\"; attached to an agent's tools port the model calls it with the arguments tool_parameters " +
			"describes, which the templates then see. A 4xx answer fails for good, a 5xx, 408 or 429 is retried. " +
			"With the node's cache set, identical requests share one response, across processes.",
		Ports: []flows.Port{inPort, outPort, toolPort},
		Params: json.RawMessage(`{
			"type": "object", "additionalProperties": false, "required": ["url"],
			"properties": {
				"method": {"type": "string", "enum": ["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD"], "default": "GET", "description": "HTTP method."},
				"url": {"type": "string", "format": "template", "description": "URL template, e.g. https://api.example.com/items/{{urlquery .id}}"},
				"headers": {"type": "object", "description": "Header name to a template, or to {\"$env\": \"NAME\", \"prefix\": \"Bearer \"} for a secret.",
					"additionalProperties": {"anyOf": [
						{"type": "string", "format": "template"},
						{"type": "object", "required": ["$env"], "additionalProperties": false,
						 "properties": {"$env": {"type": "string", "pattern": "^[A-Za-z_][A-Za-z0-9_]*$"}, "prefix": {"type": "string"}}}
					]}},
				"body": {"type": "string", "format": "template", "description": "Request body template."},
				"json": {"type": "string", "format": "jq", "description": "jq producing a JSON request body (instead of body)."},
				"timeout": {"type": "string", "format": "duration", "default": "30s", "description": "Deadline of the request, redirects and body included."},
				"max_bytes": {"type": "integer", "minimum": 1, "maximum": 67108864, "default": 1048576, "description": "A larger response body fails the request."},
				"as": {"type": "string", "pattern": "^[A-Za-z_][A-Za-z0-9_]*$", "default": "response", "description": "State key the response is stored under (as a step)."},
				"idempotency_header": {"type": "string", "default": "Idempotency-Key", "pattern": "^([!#$%&'*+.^_|~0-9A-Za-z-]+)?$", "description": "The header that carries the request's idempotency key: the same for every attempt of the step (a retry, a worker that died, a dead letter retried), new for another step or run; empty sends none. See docs/replay.md."},` + toolParams + `,` + toolArgsParam + `
			}
		}`),
		Example: json.RawMessage(`{"method": "GET", "url": "https://api.example.com/orders/{{urlquery .order_id}}", "headers": {"Accept": "application/json", "Authorization": {"$env": "SLUICE_SECRET_EXAMPLE_TOKEN", "prefix": "Bearer "}}, "timeout": "10s", "tool_parameters": {"type": "object", "required": ["order_id"], "properties": {"order_id": {"type": "string"}}}}`),
		New:     func(b *flows.Build) (flows.Component, error) { return newHTTP(env, b) },
	}
}

// HTTP sends a request, as a step or as an agent's tool.
type HTTP struct {
	env     *Env
	flow    string // its flow: the workspace whose secrets it may read
	method  string
	url     *flows.Template
	headers []httpHeader
	body    *flows.Template
	json    *flows.JQ
	timeout time.Duration
	max     int64
	as      string
	ttl     time.Duration
	def     flows.ToolDef
	idem    string // the idempotency key's header; "" none
}

type httpHeader struct {
	name   string
	tpl    *flows.Template // a plain value
	env    string          // or a secret from this environment variable
	prefix string
}

func newHTTP(env *Env, b *flows.Build) (flows.Component, error) {
	var p struct {
		toolConfig
		Method   string                     `json:"method"`
		URL      string                     `json:"url"`
		Headers  map[string]json.RawMessage `json:"headers"`
		Body     string                     `json:"body"`
		JSON     string                     `json:"json"`
		Timeout  flows.Duration             `json:"timeout"`
		MaxBytes int64                      `json:"max_bytes"`
		As       string                     `json:"as"`
		Idem     *string                    `json:"idempotency_header"`
	}
	if err := b.Decode(&p); err != nil {
		return nil, err
	}
	if strings.TrimSpace(p.URL) == "" {
		// Every request of such a node fails; refusing it here makes validation say so.
		return nil, &flows.Error{Code: flows.Invalid, Path: "params.url",
			Message: "the URL is empty: give the address the request goes to, e.g. https://api.example.com/items/{{urlquery .id}} (as a tool, a template over the model's arguments)"}
	}
	h := &HTTP{env: env, flow: flowOf(b), method: p.Method, timeout: p.Timeout.D(), max: p.MaxBytes, as: p.As, ttl: nodeCacheTTL(b), idem: "Idempotency-Key"}
	if p.Idem != nil {
		h.idem = *p.Idem
		if h.idem != "" && strings.ContainsAny(h.idem, " \t\r\n:") {
			return nil, &flows.Error{Code: flows.Invalid, Path: "params.idempotency_header", Message: fmt.Sprintf("%q is not a header name", h.idem)}
		}
	}
	var err error
	if h.url, err = flows.ParseTemplate(p.URL); err != nil {
		return nil, &flows.Error{Code: flows.Invalid, Path: "params.url", Err: err}
	}
	if p.Body != "" && p.JSON != "" {
		return nil, &flows.Error{Code: flows.Invalid, Path: "params.json", Message: "give body or json, not both"}
	}
	if p.Body != "" {
		if h.body, err = flows.ParseTemplate(p.Body); err != nil {
			return nil, &flows.Error{Code: flows.Invalid, Path: "params.body", Err: err}
		}
	}
	if p.JSON != "" {
		if h.json, err = flows.CompileJQ(p.JSON); err != nil {
			return nil, &flows.Error{Code: flows.Invalid, Path: "params.json", Err: err}
		}
	}
	names := make([]string, 0, len(p.Headers))
	for n := range p.Headers {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		path := "params.headers." + n
		if n == "" || strings.ContainsAny(n, " \t\r\n:") {
			return nil, &flows.Error{Code: flows.Invalid, Path: path, Message: fmt.Sprintf("%q is not a header name", n)}
		}
		hd := httpHeader{name: http.CanonicalHeaderKey(n)}
		var s string
		var ref struct {
			Env    string `json:"$env"`
			Prefix string `json:"prefix"`
		}
		switch {
		case json.Unmarshal(p.Headers[n], &s) == nil:
			if hd.tpl, err = flows.ParseTemplate(s); err != nil {
				return nil, &flows.Error{Code: flows.Invalid, Path: path, Err: err}
			}
		case json.Unmarshal(p.Headers[n], &ref) == nil && ref.Env != "":
			hd.env, hd.prefix = ref.Env, ref.Prefix
		default:
			return nil, &flows.Error{Code: flows.Invalid, Path: path, Message: `a header value is a string or {"$env": "NAME"}`}
		}
		h.headers = append(h.headers, hd)
	}
	desc := fmt.Sprintf("HTTP %s %s", p.Method, p.URL)
	h.def = p.def(b, desc, json.RawMessage(`{"type": "object", "properties": {}}`))
	return h, nil
}

// httpRequest is a rendered request: what the cache key hashes. Secret header values
// appear as the name of their environment variable, never as the value.
type httpRequest struct {
	Method  string            `json:"method"`
	URL     string            `json:"url"`
	Headers map[string]string `json:"headers,omitempty"`
	Body    string            `json:"body,omitempty"`
	JSON    bool              `json:"json,omitempty"`
}

// render fills the templates with data (the node's input or the tool's arguments).
func (h *HTTP) render(ctx context.Context, node string, data any, state map[string]any) (*httpRequest, error) {
	bad := func(path string, err error) error { return templateError(node, path, err) }
	r := &httpRequest{Method: h.method, Headers: map[string]string{}}
	var err error
	if r.URL, err = h.url.Execute(ctx, data); err != nil {
		return nil, bad("params.url", err)
	}
	r.URL = strings.TrimSpace(r.URL)
	for _, hd := range h.headers {
		if hd.tpl != nil {
			v, err := hd.tpl.Execute(ctx, data)
			if err != nil {
				return nil, bad("params.headers."+hd.name, err)
			}
			if strings.ContainsAny(v, "\r\n") {
				return nil, bad("params.headers."+hd.name, errors.New("a header value cannot contain a line break"))
			}
			r.Headers[hd.name] = v
		} else {
			r.Headers[hd.name] = "$env:" + hd.env
		}
	}
	switch {
	case h.body != nil:
		if r.Body, err = h.body.Execute(ctx, data); err != nil {
			return nil, bad("params.body", err)
		}
	case h.json != nil:
		v, err := h.json.First(ctx, data, state)
		if err != nil {
			return nil, bad("params.json", err)
		}
		var buf strings.Builder
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(v); err != nil {
			return nil, bad("params.json", err)
		}
		r.Body, r.JSON = strings.TrimSuffix(buf.String(), "\n"), true
	}
	return r, nil
}

// do sends a rendered request and reads the response; key, when set, goes in the
// idempotency header (unless the node's own headers set it).
func (h *HTTP) do(ctx context.Context, node string, r *httpRequest, key string) (map[string]any, error) {
	u, err := url.Parse(r.URL)
	if err != nil {
		return nil, flows.Permanent(&flows.Error{Code: flows.Invalid, Node: node, Path: "params.url", Message: fmt.Sprintf("%q is not a URL: %v", r.URL, err)})
	}
	ctx, cancel := context.WithTimeout(ctx, h.timeout)
	defer cancel()
	var body io.Reader
	if r.Body != "" {
		body = strings.NewReader(r.Body)
	}
	req, err := http.NewRequestWithContext(ctx, r.Method, u.String(), body)
	if err != nil {
		return nil, flows.Permanent(&flows.Error{Code: flows.Invalid, Node: node, Path: "params.url", Err: err})
	}
	req.Header.Set("User-Agent", "sluice")
	if key != "" {
		req.Header.Set(h.idem, key)
	}
	if r.JSON {
		req.Header.Set("Content-Type", "application/json")
	}
	for _, hd := range h.headers {
		v := r.Headers[hd.name]
		if hd.env != "" {
			secret, ok, err := h.env.lookupSecret(h.flow, hd.env)
			if err != nil {
				return nil, secretError(err, node, "params.headers."+hd.name)
			}
			if !ok || secret == "" {
				return nil, flows.Permanent(&flows.Error{Code: flows.Invalid, Node: node, Path: "params.headers." + hd.name,
					Message: fmt.Sprintf("environment variable %s is not set on the server", hd.env)})
			}
			v = hd.prefix + secret
		}
		req.Header.Set(hd.name, v)
	}
	res, where, err := h.env.send(ctx, node, "params.url", req, h.timeout)
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(res.Body, h.max+1))
	if err != nil {
		return nil, &flows.Error{Code: flows.Unavailable, Node: node, Message: where + ": reading the response", Err: err}
	}
	if int64(len(raw)) > h.max {
		return nil, flows.Permanent(&flows.Error{Code: flows.TooLarge, Node: node, Path: "params.max_bytes",
			Message: fmt.Sprintf("%s: the response is larger than max_bytes (%d bytes)", where, h.max)})
	}
	// An upstream may echo what it was sent (a header's secret): nothing of the answer
	// leaves this function, for the cache, the state or an error, unredacted.
	secrets := h.env.Secrets.In(flows.WorkspaceOf(h.flow))
	raw = secrets.RedactBytes(raw)
	ctype := secrets.Redact(res.Header.Get("Content-Type"))
	out := map[string]any{"status": res.StatusCode, "content_type": ctype, "body": secrets.RedactValue(responseBody(raw, ctype))}
	if res.StatusCode >= 400 {
		msg := fmt.Sprintf("%s: answered %d %s", where, res.StatusCode, http.StatusText(res.StatusCode))
		if len(raw) > 0 && utf8.Valid(raw) {
			msg += ": " + truncateText(strings.TrimSpace(string(raw)), 200)
		}
		fe := &flows.Error{Code: flows.Unavailable, Node: node, Message: msg}
		if res.StatusCode < 500 && res.StatusCode != http.StatusRequestTimeout && res.StatusCode != http.StatusTooManyRequests {
			fe.Code = flows.Invalid
			return nil, flows.Permanent(fe)
		}
		return nil, fe
	}
	return out, nil
}

// responseBody is a JSON body parsed, a text body as a string, and anything else
// described.
func responseBody(raw []byte, ctype string) any {
	if len(raw) == 0 {
		return nil
	}
	mt, _, _ := mime.ParseMediaType(ctype)
	// JSON is parsed also when it comes as text, as many APIs (and content sniffing) send it.
	looksJSON := len(raw) > 0 && (raw[0] == '{' || raw[0] == '[')
	if mt == "application/json" || strings.HasSuffix(mt, "+json") || ((mt == "" || mt == "text/plain") && looksJSON) {
		if v, err := flows.DecodeJSON(raw); err == nil {
			return v
		}
	}
	if utf8.Valid(raw) {
		return string(raw)
	}
	return fmt.Sprintf("(%d bytes of %s)", len(raw), ctype)
}

// unwrapURLError drops net/url's "Get "…":" prefix, which repeats the URL with its query.
func unwrapURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// request renders, then sends through the cache when the node has one.
func (h *HTTP) request(ctx context.Context, s *flows.Step, data any) (any, error) {
	r, err := h.render(ctx, s.Node, data, s.State)
	if err != nil {
		return nil, err
	}
	key := ""
	if h.idem != "" {
		key = s.IdempotencyKey(ctx)
	}
	b, _, err := h.env.cached(ctx, s, cacheKey("http", s.Version, r), h.ttl, func(ctx context.Context) ([]byte, error) {
		out, err := h.do(ctx, s.Node, r, key)
		if err != nil {
			return nil, err
		}
		return json.Marshal(out)
	})
	if err != nil {
		return nil, err
	}
	return flows.DecodeJSON(b)
}

// Run sends the request with the templates over the node's input.
func (h *HTTP) Run(ctx context.Context, s *flows.Step) (*flows.Result, error) {
	out, err := h.request(ctx, s, s.Input)
	if err != nil {
		return nil, err
	}
	return &flows.Result{Output: out, Update: map[string]any{h.as: out}}, nil
}

// ToolDef offers the request to a model.
func (h *HTTP) ToolDef() flows.ToolDef { return h.def }

// Call sends the request with the templates over the model's arguments.
func (h *HTTP) Call(ctx context.Context, s *flows.Step, args json.RawMessage) (any, error) {
	in, err := toolInput(args)
	if err != nil {
		return nil, fmt.Errorf("the arguments are not JSON: %v", err)
	}
	return h.request(ctx, s, in)
}

var (
	_ flows.Component = (*HTTP)(nil)
	_ flows.Tool      = (*HTTP)(nil)
)
