package nodes

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"
	"unicode"

	"github.com/sluicehq/sluice/flows"
)

func memoryStoreSpec(env *Env) flows.Spec {
	return flows.Spec{
		Name:     "memory_store",
		Title:    "Long-term memory",
		Category: "data",
		Description: "A long-term store in the manner of LangGraph's: JSON values under keys in namespaces (a path of " +
			"labels, templates over the state such as [\"users\", \"{{.user_id}}\", \"memories\"]), kept in Redis with an " +
			"optional ttl, read across runs and, with shared, across the flows of its workspace. As a step it puts (the value jq makes, under " +
			"key), gets (the value under key, null when there is none), searches (the items under the namespace and the " +
			"namespaces below it whose value matches filter, ranked by the words of query they contain) or deletes; the " +
			"result is stored under \"as\". Attached to an agent's tools port it offers the model the operations in tools " +
			"as functions (NAME_put, NAME_get, NAME_search, NAME_delete, NAME being tool_name or the node id), always in " +
			"the node's namespace: the model chooses keys and values, never whose memories it reads.",
		Ports: []flows.Port{inPort, outPort, toolPort},
		Params: json.RawMessage(`{
			"type": "object", "additionalProperties": false, "required": ["namespace"],
			"properties": {
				"operation": {"enum": ["put", "get", "search", "delete"], "default": "search", "description": "What a step does."},
				"namespace": {"type": "array", "minItems": 1, "maxItems": 8, "items": {"type": "string", "format": "template"}, "description": "The namespace's labels, each a template over the node's input (over the run state when the model calls)."},` + sharedParam + `,
				"key": {"type": "string", "format": "template", "description": "put, get, delete: the item's key, a template."},
				"value": {"type": "string", "format": "jq", "description": "put: jq making the value to store."},
				"query": {"type": "string", "format": "template", "description": "search: rank items by how many of these words their value contains (items with none are left out)."},
				"filter": {"type": "object", "description": "search: only items whose value has these fields with these values (a list: any of them)."},
				"limit": {"type": "integer", "minimum": 1, "maximum": 100, "default": 10, "description": "search: the most items returned."},
				"ttl": {"type": "string", "format": "duration", "description": "put: how long the item is kept; left out, for ever."},
				"refresh_on_read": {"type": "boolean", "default": true, "description": "A get or search restarts the time to live of the items it returns."},
				"tools": {"type": "array", "uniqueItems": true, "items": {"enum": ["put", "get", "search", "delete"]}, "default": ["put", "get", "search", "delete"], "description": "The operations offered to an agent."},
				"as": {"type": "string", "pattern": "^[A-Za-z_][A-Za-z0-9_]*$", "default": "memories", "description": "State key the result is stored under."},` + toolParams + `
			}
		}`),
		Example: json.RawMessage(`{"namespace": ["users", "{{.user_id}}", "preferences"], "tool_name": "preferences", "tool_description": "What this user told us they prefer."}`),
		New:     func(b *flows.Build) (flows.Component, error) { return newMemoryStore(env, b) },
	}
}

// MemoryStore is the long-term store, as a step or as an agent's tools.
type MemoryStore struct {
	env       *Env
	op        string
	namespace []*flows.Template
	shared    string
	key       *flows.Template
	value     *flows.JQ
	query     *flows.Template
	filter    map[string]any
	limit     int
	ttl       time.Duration
	refresh   bool
	tools     []string
	as        string
	def       flows.ToolDef
	name      string
}

func newMemoryStore(env *Env, b *flows.Build) (flows.Component, error) {
	var p struct {
		toolConfig
		Operation     string         `json:"operation"`
		Namespace     []string       `json:"namespace"`
		Shared        string         `json:"shared"`
		Key           string         `json:"key"`
		Value         string         `json:"value"`
		Query         string         `json:"query"`
		Filter        map[string]any `json:"filter"`
		Limit         int            `json:"limit"`
		TTL           flows.Duration `json:"ttl"`
		RefreshOnRead bool           `json:"refresh_on_read"`
		Tools         []string       `json:"tools"`
		As            string         `json:"as"`
	}
	if err := b.Decode(&p); err != nil {
		return nil, err
	}
	m := &MemoryStore{env: env, op: p.Operation, shared: p.Shared, filter: p.Filter, limit: p.Limit, ttl: p.TTL.D(),
		refresh: p.RefreshOnRead, tools: p.Tools, as: p.As}
	for i, l := range p.Namespace {
		t, err := flows.ParseTemplate(l)
		if err != nil {
			return nil, &flows.Error{Code: flows.Invalid, Path: fmt.Sprintf("params.namespace[%d]", i), Err: err}
		}
		m.namespace = append(m.namespace, t)
	}
	var err error
	if p.Key != "" {
		if m.key, err = flows.ParseTemplate(p.Key); err != nil {
			return nil, &flows.Error{Code: flows.Invalid, Path: "params.key", Err: err}
		}
	} else if p.Operation == "put" || p.Operation == "get" || p.Operation == "delete" {
		return nil, &flows.Error{Code: flows.Invalid, Path: "params.key", Message: p.Operation + " needs a key"}
	}
	if p.Value != "" {
		if m.value, err = flows.CompileJQ(p.Value); err != nil {
			return nil, &flows.Error{Code: flows.Invalid, Path: "params.value", Err: err}
		}
	} else if p.Operation == "put" {
		return nil, &flows.Error{Code: flows.Invalid, Path: "params.value", Message: "put needs a value: jq making what to store"}
	}
	if p.Query != "" {
		if m.query, err = flows.ParseTemplate(p.Query); err != nil {
			return nil, &flows.Error{Code: flows.Invalid, Path: "params.query", Err: err}
		}
	}
	p.ToolParameters = nil
	m.def = p.def(b, "The long-term memory.", json.RawMessage(`{"type": "object"}`))
	m.name = m.def.Name
	return m, nil
}

// where renders the namespace over data.
func (m *MemoryStore) where(ctx context.Context, node string, data any) ([]string, error) {
	ns := make([]string, len(m.namespace))
	for i, t := range m.namespace {
		path := fmt.Sprintf("params.namespace[%d]", i)
		l, err := t.Execute(ctx, data)
		if err != nil {
			return nil, templateError(node, path, err)
		}
		if l = strings.TrimSpace(l); l == "" || len(l) > 256 {
			return nil, flows.Permanent(&flows.Error{Code: flows.Invalid, Node: node, Path: path,
				Message: fmt.Sprintf("the namespace label is %d characters; it must be 1 to 256 (does the input carry it?)", len(l))})
		}
		ns[i] = l
	}
	return ns, nil
}

func checkKey(node, path, key string) error {
	if key == "" || len(key) > 512 {
		return flows.Permanent(&flows.Error{Code: flows.Invalid, Node: node, Path: path,
			Message: fmt.Sprintf("the key is %d characters; it must be 1 to 512", len(key))})
	}
	return nil
}

func (m *MemoryStore) refreshTTL() time.Duration {
	if m.refresh {
		return m.ttl
	}
	return 0
}

// Run puts, gets, searches or deletes with the templates over the node's input.
func (m *MemoryStore) Run(ctx context.Context, s *flows.Step) (*flows.Result, error) {
	if m.env.Memory == nil {
		return nil, noRedis(s.Node, "the long-term memory")
	}
	ns, err := m.where(ctx, s.Node, s.Input)
	if err != nil {
		return nil, err
	}
	scope := scopeOf(s.Flow, m.shared)
	var key string
	if m.key != nil {
		if key, err = m.key.Execute(ctx, s.Input); err != nil {
			return nil, templateError(s.Node, "params.key", err)
		}
		if err := checkKey(s.Node, "params.key", key); err != nil && m.op != "search" {
			return nil, err
		}
	}
	var out any
	switch m.op {
	case "put":
		v, err := m.value.First(ctx, s.Input, s.State)
		if err != nil {
			return nil, flows.Permanent(&flows.Error{Code: flows.Invalid, Node: s.Node, Path: "params.value", Err: err})
		}
		if err := m.env.Memory.PutItem(ctx, scope, flows.StoreItem{Namespace: ns, Key: key, Value: v}, m.ttl); err != nil {
			return nil, err
		}
		out = map[string]any{"namespace": ns, "key": key, "stored": true}
	case "get":
		it, err := m.env.Memory.GetItem(ctx, scope, ns, key, m.refreshTTL())
		if err != nil {
			return nil, err
		}
		if it != nil {
			out = it.Value
		}
	case "delete":
		found, err := m.env.Memory.DeleteItem(ctx, scope, ns, key)
		if err != nil {
			return nil, err
		}
		out = map[string]any{"namespace": ns, "key": key, "deleted": found}
	default:
		query := ""
		if m.query != nil {
			if query, err = m.query.Execute(ctx, s.Input); err != nil {
				return nil, templateError(s.Node, "params.query", err)
			}
		}
		found, err := m.search(ctx, scope, ns, query, m.filter, m.limit)
		if err != nil {
			return nil, err
		}
		out = found
	}
	return &flows.Result{Output: out, Update: map[string]any{m.as: out}}, nil
}

// search lists the items under ns, keeps those that match filter and, with a query,
// those that contain its words, best first (else the most recently updated first).
func (m *MemoryStore) search(ctx context.Context, scope string, ns []string, query string, filter map[string]any, limit int) ([]any, error) {
	items, err := m.env.Memory.ListItems(ctx, scope, ns, 0, m.refreshTTL())
	if err != nil {
		return nil, err
	}
	words := queryWords(query)
	type scored struct {
		it    flows.StoreItem
		score float64
	}
	var hits []scored
	for _, it := range items {
		if !matchesFilter(it.Value, filter) {
			continue
		}
		sc := 0.0
		if len(words) > 0 {
			b, _ := json.Marshal(it.Value)
			text := strings.ToLower(it.Key + " " + string(b))
			for _, w := range words {
				if strings.Contains(text, w) {
					sc++
				}
			}
			if sc == 0 {
				continue
			}
			sc /= float64(len(words))
		}
		hits = append(hits, scored{it, sc})
	}
	sort.SliceStable(hits, func(i, j int) bool {
		if hits[i].score != hits[j].score {
			return hits[i].score > hits[j].score
		}
		return hits[i].it.UpdatedAt.After(hits[j].it.UpdatedAt)
	})
	if len(hits) > limit {
		hits = hits[:limit]
	}
	out := make([]any, len(hits))
	for i, h := range hits {
		o := map[string]any{"namespace": h.it.Namespace, "key": h.it.Key, "value": h.it.Value,
			"created_at": h.it.CreatedAt.Format(time.RFC3339), "updated_at": h.it.UpdatedAt.Format(time.RFC3339)}
		if len(words) > 0 {
			o["score"] = h.score
		}
		out[i] = o
	}
	return out, nil
}

// queryWords are the distinct lower-case words of a query, of two letters or more.
func queryWords(q string) []string {
	seen := map[string]bool{}
	var out []string
	for _, w := range strings.FieldsFunc(strings.ToLower(q), func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) }) {
		if len([]rune(w)) >= 2 && !seen[w] {
			seen[w] = true
			out = append(out, w)
		}
	}
	return out
}

// matchesFilter reports whether value is an object with filter's fields and values.
func matchesFilter(value any, filter map[string]any) bool {
	if len(filter) == 0 {
		return true
	}
	o, ok := value.(map[string]any)
	return ok && flows.MatchFilter(o, filter)
}

// ToolDef describes the node; an agent offers its tools (Tools) instead.
func (m *MemoryStore) ToolDef() flows.ToolDef { return m.def }

// Call is not how an agent calls the store: it calls one of its tools.
func (m *MemoryStore) Call(ctx context.Context, s *flows.Step, args json.RawMessage) (any, error) {
	return nil, fmt.Errorf("call one of %s", strings.Join(m.toolNames(), ", "))
}

func (m *MemoryStore) toolNames() []string {
	out := make([]string, len(m.tools))
	for i, op := range m.tools {
		out[i] = m.name + "_" + op
	}
	return out
}

var memoryToolSchemas = map[string]string{
	"put": `{"type": "object", "required": ["key", "value"], "additionalProperties": false, "properties": {
		"key": {"type": "string", "description": "A short key naming what is remembered, e.g. favourite_language."},
		"value": {"description": "What to remember: a JSON value, usually an object."}}}`,
	"get": `{"type": "object", "required": ["key"], "additionalProperties": false, "properties": {
		"key": {"type": "string"}}}`,
	"search": `{"type": "object", "additionalProperties": false, "properties": {
		"query": {"type": "string", "description": "Words the memories should contain."},
		"filter": {"type": "object", "description": "Fields the value must have, with these values."},
		"limit": {"type": "integer", "minimum": 1, "maximum": 100}}}`,
	"delete": `{"type": "object", "required": ["key"], "additionalProperties": false, "properties": {
		"key": {"type": "string"}}}`,
}

var memoryToolVerbs = map[string]string{
	"put":    "Remember something: store a value under a key (replacing what the key held).",
	"get":    "Read what is remembered under a key (null when nothing is).",
	"search": "Search what is remembered: by words, by fields of the values, or the most recent.",
	"delete": "Forget what is remembered under a key.",
}

// Tools lists the operations offered to the model, described with the namespace they
// work in.
func (m *MemoryStore) Tools(ctx context.Context, s *flows.Step) ([]flows.ToolDef, error) {
	ns, err := m.where(ctx, s.Node, s.State)
	if err != nil {
		return nil, failStep(err)
	}
	about := m.def.Description
	var defs []flows.ToolDef
	for _, op := range m.tools {
		defs = append(defs, flows.ToolDef{Name: m.name + "_" + op,
			Description: fmt.Sprintf("%s %s (namespace %s)", memoryToolVerbs[op], about, strings.Join(ns, "/")),
			Parameters:  json.RawMessage(memoryToolSchemas[op])})
	}
	return defs, nil
}

// CallTool runs one operation in the node's namespace (over the run state).
func (m *MemoryStore) CallTool(ctx context.Context, s *flows.Step, name string, args json.RawMessage) (any, error) {
	if m.env.Memory == nil {
		return nil, failStep(noRedis(s.Node, "the long-term memory"))
	}
	op := strings.TrimPrefix(name, m.name+"_")
	var a struct {
		Key    string         `json:"key"`
		Value  any            `json:"value"`
		Query  string         `json:"query"`
		Filter map[string]any `json:"filter"`
		Limit  int            `json:"limit"`
	}
	dec := json.NewDecoder(strings.NewReader(string(args)))
	dec.UseNumber()
	if err := dec.Decode(&a); err != nil {
		return nil, fmt.Errorf("the arguments do not fit %s: %v", name, err)
	}
	ns, err := m.where(ctx, s.Node, s.State)
	if err != nil {
		return nil, failStep(err)
	}
	scope := scopeOf(s.Flow, m.shared)
	if op != "search" && (a.Key == "" || len(a.Key) > 512) {
		return nil, fmt.Errorf("%s needs a key of 1 to 512 characters", name)
	}
	switch op {
	case "put":
		if err := m.env.Memory.PutItem(ctx, scope, flows.StoreItem{Namespace: ns, Key: a.Key, Value: flows.JSONValue(a.Value)}, m.ttl); err != nil {
			return nil, failStep(err)
		}
		return map[string]any{"stored": a.Key}, nil
	case "get":
		it, err := m.env.Memory.GetItem(ctx, scope, ns, a.Key, m.refreshTTL())
		if err != nil {
			return nil, failStep(err)
		}
		if it == nil {
			return map[string]any{"key": a.Key, "value": nil}, nil
		}
		return map[string]any{"key": a.Key, "value": it.Value, "updated_at": it.UpdatedAt.Format(time.RFC3339)}, nil
	case "delete":
		found, err := m.env.Memory.DeleteItem(ctx, scope, ns, a.Key)
		if err != nil {
			return nil, failStep(err)
		}
		return map[string]any{"deleted": found}, nil
	case "search":
		limit := a.Limit
		if limit <= 0 || limit > 100 {
			limit = m.limit
		}
		found, err := m.search(ctx, scope, ns, a.Query, a.Filter, limit)
		if err != nil {
			return nil, failStep(err)
		}
		return found, nil
	}
	return nil, fmt.Errorf("there is no tool %q", name)
}

var (
	_ flows.Component = (*MemoryStore)(nil)
	_ flows.Tool      = (*MemoryStore)(nil)
	_ toolSet         = (*MemoryStore)(nil)
)
