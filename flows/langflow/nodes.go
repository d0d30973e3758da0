package langflow

import (
	"encoding/json"
	"fmt"
	"net/url"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/sluicehq/sluice/flows"
)

// node builds the Sluice node of a Langflow node.
func (c *conv) node(n *lfNode) flows.Node {
	id := c.ids[n.ID]
	out := flows.Node{ID: id}
	if n.Position != nil {
		out.Position = &flows.Position{X: n.Position.X, Y: n.Position.Y}
	}
	if t := n.title(); strings.Trim(idChars.ReplaceAllString(strings.ToLower(t), "_"), "_") != id {
		out.Label = t
	}
	var params map[string]any
	switch c.role[n.ID] {
	case roleEntry:
		out.Type, params = flows.EntryType, c.entryParams(n)
	case roleOutput:
		out.Type, params = "output", map[string]any{"value": c.jqOf(n, passField(n))}
		if n.kindName() == "SaveToFile" {
			c.note(n, "Sluice writes no files on the server: what Langflow saved to %s is the output of the run (GET /api/flows/FLOW/runs/RUN, or the output node's webhook)", c.saveTarget(n))
		}
	case roleRouter:
		out.Type, params = "router", c.routerParams(n)
	case roleGap:
		out.Type = PlaceholderPrefix + n.kindName()
		out.Label = "Replace: " + n.title()
		for _, g := range c.gaps {
			if g.Node == n.ID {
				out.Description = fmt.Sprintf("Placeholder for Langflow node %s (%s): %s. Replace it with Sluice nodes; the flow does not validate until then.", n.ID, n.kindName(), g.Why)
			}
		}
	default:
		switch typ := n.kindName(); {
		case typ == "Prompt" || typ == "PromptTemplate":
			out.Type, params = "template", map[string]any{"template": c.prompt(n), "as": id}
		case isModel(typ):
			out.Type, params = "llm", c.modelParams(n, n)
			params["user"] = c.text(n, "input_value")
			if s := c.text(n, "system_message"); s != "" {
				params["system"] = s
			}
			if n.flag("json_mode") {
				params["json"] = true
			}
			if n.flag("stream") {
				params["stream"] = true
			}
			params["as"] = id
		case typ == "Agent":
			out.Type, params = "agent", c.agentParams(n)
		case typ == "StructuredOutput" || typ == "StructuredOutputComponent":
			out.Type, params = "llm", c.structuredParams(n)
		case typ == "APIRequest":
			out.Type, params = "http", c.httpParams(n)
		}
	}
	if params != nil {
		b, _ := json.Marshal(params)
		out.Params = b
	}
	return out
}

func (c *conv) entryParams(n *lfNode) map[string]any {
	key := c.ids[n.ID]
	value := c.literal(n, "input_value")
	def, _ := json.Marshal(value)
	c.state[key] = flows.StateKey{Default: def, Description: "The text of Langflow's " + n.title() + "; a run's input sets it."}
	example := value
	if example == "" {
		example = "Hello"
	}
	return map[string]any{"schema": c.inputSchema(key, n.title()), "example": map[string]any{key: example}}
}

// inputSchema is the run input's schema: the entry's text (key, "" for none), the
// session a conversation continues, the files the file nodes read.
func (c *conv) inputSchema(key, title string) map[string]any {
	props := map[string]any{}
	if key != "" {
		props[key] = map[string]any{"type": "string", "description": title + " (from Langflow)"}
	}
	if c.usesSession {
		props["session_id"] = map[string]any{"type": "string", "description": "The conversation to continue; default the flow's own."}
	}
	for _, k := range sortedValues(c.fileKeys) {
		props[k] = map[string]any{"type": "array", "description": "Files to read: the references an upload answers.",
			"items": map[string]any{"type": "object", "required": []string{"$file"}, "properties": map[string]any{"$file": map[string]any{"type": "string"}}}}
	}
	return map[string]any{"type": "object", "properties": props}
}

func sortedValues(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for _, v := range m {
		out = append(out, v)
	}
	sort.Strings(out)
	return out
}

// saveTarget says where a Write File component saved.
func (c *conv) saveTarget(n *lfNode) string {
	name := c.literal(n, "file_name")
	if f := c.literal(n, "local_format"); name != "" && f != "" {
		name += "." + f
	}
	if name == "" {
		return "a file"
	}
	return strconv.Quote(name)
}

// constant declares a text input without edges as a state key with its value.
func (c *conv) constants() {
	for i := range c.ex.Data.Nodes {
		n := &c.ex.Data.Nodes[i]
		if c.role[n.ID] != roleConst {
			continue
		}
		def, _ := json.Marshal(c.literal(n, "input_value"))
		c.state[c.ids[n.ID]] = flows.StateKey{Default: def, Description: "The text of Langflow's " + n.title() + "; a run's input may set it."}
		c.note(n, "became the state key %q with its text as the default (a flow has one input node; a run's input may set the key)", c.ids[n.ID])
	}
}

// prompt converts a Langflow prompt template ({var} placeholders, {{ and }} for literal
// braces) into a Go template over the state. Everything but the placeholders is text:
// it is gathered into one run between two placeholders and escaped as a whole, so that
// no brace, however the export arranges them, opens an action.
func (c *conv) prompt(n *lfNode) string {
	tmpl := c.literal(n, "template")
	var b, text strings.Builder
	lit := func(s string) { text.WriteString(s) }
	flush := func() {
		t := escapeTemplate(text.String())
		text.Reset()
		c.grow(n, len(t))
		b.WriteString(t)
	}
	for i := 0; i < len(tmpl); {
		c.step()
		switch {
		case strings.HasPrefix(tmpl[i:], "{{"):
			lit("{")
			i += 2
		case strings.HasPrefix(tmpl[i:], "}}"):
			lit("}")
			i += 2
		case tmpl[i] == '{':
			end := strings.IndexByte(tmpl[i:], '}')
			name := ""
			if end > 0 {
				name = strings.TrimSpace(tmpl[i+1 : i+end])
			}
			if end < 0 || !varRE.MatchString(name) {
				lit(tmpl[i : i+1])
				i++
				continue
			}
			flush()
			b.WriteString(c.text(n, name))
			i += end + 1
		default:
			j := i + 1
			for j < len(tmpl) && tmpl[j] != '{' && tmpl[j] != '}' {
				j++
			}
			lit(tmpl[i:j])
			i = j
		}
	}
	flush()
	return b.String()
}

var varRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// modelParams are the model settings of model node m, for node n that uses it.
func (c *conv) modelParams(n, m *lfNode) map[string]any {
	p := map[string]any{"provider": nodesDefault}
	name, provider := c.modelChoice(m)
	if name != "" {
		p["model"] = name
	} else {
		p["model"] = c.opts.Model
		c.note(m, "the export names no model (Langflow leaves the choice to its Model Providers setting): node %q uses %s; change it there", c.ids[n.ID], c.opts.Model)
	}
	keyEnv := "OPENAI_API_KEY"
	if lfProviders[provider] == anthropicProvider {
		p["provider"] = anthropicProvider
		keyEnv = "ANTHROPIC_API_KEY"
		c.note(m, "an Anthropic model: the server needs a provider named %q of type anthropic (--providers, docs/llm-providers.md)", anthropicProvider)
	}
	if t, ok := m.number("temperature"); ok && t >= 0 && t <= 2 {
		p["temperature"] = t
	}
	if t, ok := m.number("max_tokens"); ok && t >= 1 {
		p["max_tokens"] = int64(t)
	}
	if f, ok := m.field("api_key"); ok && len(f.Value) > 0 && string(f.Value) != `""` && string(f.Value) != "null" {
		if v := m.str("api_key"); f.LoadFromDB && !flows.LooksLikeCredential(v) {
			c.note(m, "the API key comes from Langflow's global variable %s; Sluice takes the model's key from the server's provider: set %s (or name a provider from --providers); the key was not copied", v, keyEnv)
		} else {
			c.note(m, "the API key was not copied: Sluice takes the model's key from the server's provider (%s, or a provider from --providers)", keyEnv)
		}
	}
	field := modelBaseField[m.kindName()]
	if provider == "Ollama" {
		field = "ollama_base_url"
	}
	if base := c.literal(m, field); field != "" && base != "" && !strings.HasPrefix(base, "https://api.openai.com") && !strings.HasPrefix(base, "https://api.anthropic.com") {
		c.note(m, "the model is served at %s: configure a provider with that base_url (docs/llm-providers.md) and name it in node %q, or set OPENAI_BASE_URL", base, c.ids[n.ID])
	} else if lfProviders[provider] == nodesDefault && provider != "" && provider != "OpenAI" {
		c.note(m, "a %s model: configure a provider for its OpenAI-compatible endpoint (docs/llm-providers.md) and name it in node %q, or set OPENAI_BASE_URL", provider, c.ids[n.ID])
	}
	return p
}

func (c *conv) agentParams(n *lfNode) map[string]any {
	m := c.connectedModel(n)
	if m == nil {
		m = n
	}
	p := c.modelParams(n, m)
	p["user"] = c.text(n, "input_value")
	if s := c.text(n, "system_prompt"); s != "" {
		p["system"] = s
	}
	if h := c.agentHistory(n); h != "" {
		p["history"] = h
	}
	if it, ok := n.number("max_iterations"); ok && it >= 1 && it <= 100 {
		p["max_iterations"] = int64(it)
	}
	p["as"] = c.ids[n.ID]
	if f, ok := n.field("add_current_date_tool"); !ok || string(f.Value) != "false" {
		// Langflow's agent has a built-in tool telling the current date.
		id := c.reserve(c.ids[n.ID] + "_current_date")
		t := flows.Node{ID: id, Type: "datetime", Label: "Current date",
			Description: "Added on import: Langflow's agent has a built-in current-date tool.",
			Params:      params(map[string]any{"tool_name": "get_current_date"})}
		if n.Position != nil {
			t.Position = &flows.Position{X: n.Position.X - 160, Y: n.Position.Y + 260}
		}
		c.extra = append(c.extra, t)
		c.edges = append(c.edges, flows.Edge{From: id, Port: "tool", To: c.ids[n.ID], ToPort: "tools"})
	}
	return p
}

func (c *conv) structuredParams(n *lfNode) map[string]any {
	m := c.connectedModel(n)
	if m == nil {
		m = n // Langflow 1.7's structured output names its own model
	}
	p := c.modelParams(n, m)
	p["user"] = c.text(n, "input_value")
	sys := c.text(n, "system_prompt")
	if sys == "" {
		sys = "Extract the requested fields from the text. Answer with JSON only."
	}
	p["system"] = sys
	props := map[string]any{}
	var required []string
	var rows []map[string]any
	_ = json.Unmarshal(n.value("output_schema"), &rows)
	for _, r := range rows {
		name, _ := r["name"].(string)
		if name == "" {
			continue
		}
		typ, _ := r["type"].(string)
		s := map[string]any{"type": jsonType(typ)}
		if d, _ := r["description"].(string); d != "" {
			s["description"] = d
		}
		if multiple(r["multiple"]) {
			s = map[string]any{"type": "array", "items": s}
		}
		props[name] = s
		required = append(required, name)
	}
	if len(props) == 0 {
		c.note(n, "no output schema: the reply is parsed as JSON without a schema")
		p["json"] = true
	} else {
		p["schema"] = map[string]any{"type": "object", "properties": props, "required": required}
	}
	p["as"] = c.ids[n.ID]
	return p
}

func jsonType(t string) string {
	switch strings.ToLower(t) {
	case "int", "integer":
		return "integer"
	case "float", "number":
		return "number"
	case "bool", "boolean":
		return "boolean"
	case "dict", "object":
		return "object"
	case "list", "array":
		return "array"
	}
	return "string"
}

func multiple(v any) bool {
	switch x := v.(type) {
	case bool:
		return x
	case string:
		x = strings.ToLower(x)
		return x == "true" || x == "1" || x == "yes"
	}
	return false
}

var secretHeaderRE = regexp.MustCompile(`(?i)(authorization|api[-_]?key|token|secret|password|cookie)`)

func (c *conv) httpParams(n *lfNode) map[string]any {
	id := c.ids[n.ID]
	p := map[string]any{"method": strings.ToUpper(n.str("method")), "as": id}
	if p["method"] == "" {
		p["method"] = "GET"
	}
	u, raw := "", "" // the URL template, and the literal URL it escapes
	dropped := false // the URL held a credential and was left out
	for _, f := range []string{"url_input", "url", "urls"} {
		if c.wired(n, f) {
			u = c.text(n, f)
			break
		}
		if flows.LooksLikeCredential(n.str(f)) {
			dropped = true
		}
		if s := c.literal(n, f); s != "" {
			u, raw = escapeTemplate(s), s
			break
		}
		var list []string
		if json.Unmarshal(n.value(f), &list) == nil && len(list) > 0 {
			if flows.LooksLikeCredential(list[0]) {
				c.dropped(n, "field "+f)
				dropped = true
				break
			}
			u, raw = escapeTemplate(list[0]), list[0]
			if len(list) > 1 {
				c.note(n, "the request had %d URLs; the http node sends the first, %s", len(list), list[0])
			}
			break
		}
	}
	if q := keyValues(n.value("query_params")); len(q) > 0 {
		v := url.Values{}
		for _, kv := range q {
			if secretHeaderRE.MatchString(kv[0]) || flows.LooksLikeCredential(kv[0]+" "+kv[1]) {
				c.dropped(n, "query parameter "+kv[0])
				continue
			}
			v.Add(kv[0], kv[1])
		}
		if len(v) > 0 {
			sep := "?"
			if strings.Contains(u, "?") {
				sep = "&"
			}
			u += sep + escapeTemplate(v.Encode())
		}
	}
	p["url"] = u
	if pu, err := url.Parse(raw); raw != "" && err == nil {
		h := pu.Hostname()
		if h == "localhost" || strings.HasPrefix(h, "127.") || strings.HasPrefix(h, "10.") || strings.HasPrefix(h, "192.168.") {
			c.note(n, "%s is an internal address: Sluice refuses it unless the server's HTTP allow-list (--http-allow) admits it", h)
		}
	}
	if hs := keyValues(n.value("headers")); len(hs) > 0 {
		headers := map[string]any{}
		for _, kv := range hs {
			k, v := kv[0], kv[1]
			if secretHeaderRE.MatchString(k) || flows.LooksLikeCredential(v) {
				env := "SLUICE_SECRET_" + strings.ToUpper(strings.Trim(idChars.ReplaceAllString(strings.ToLower(id+"_"+k), "_"), "_"))
				ref := map[string]any{"$env": env}
				if len(v) > 7 && strings.EqualFold(v[:7], "bearer ") {
					ref["prefix"] = "Bearer "
				}
				headers[k] = ref
				c.note(n, "header %s became a reference to the environment variable %s; its value was not copied", k, env)
				continue
			}
			headers[k] = escapeTemplate(v)
		}
		p["headers"] = headers
	}
	if body := keyValues(n.value("body")); len(body) > 0 {
		obj := map[string]any{}
		for _, kv := range body {
			if flows.LooksLikeCredential(kv[0] + " " + kv[1]) {
				c.dropped(n, "body field "+kv[0])
				continue
			}
			obj[kv[0]] = kv[1]
		}
		b, _ := json.Marshal(obj)
		p["json"] = string(b) // a JSON object is also jq that builds it
	}
	if t, ok := n.number("timeout"); ok && t > 0 {
		p["timeout"] = strconv.FormatFloat(t, 'f', -1, 64) + "s"
	}
	if c.role[n.ID] == roleTool {
		p["tool_name"] = id
		desc := n.Data.Node.Description
		if desc == "" {
			desc = "Sends the request " + n.title() + "."
		}
		p["tool_description"] = desc
		delete(p, "as")
		if u == "" && !dropped {
			// Langflow's tool takes the URL from the model (url_input is a tool argument).
			p["url"] = "{{.url_input}}"
			p["tool_parameters"] = map[string]any{"type": "object", "required": []string{"url_input"}, "additionalProperties": false,
				"properties": map[string]any{"url_input": map[string]any{"type": "string", "description": "The URL to send the request to."}}}
			c.note(n, "as a tool it sends a %s request to the URL the model gives (url_input), under Sluice's SSRF policy", p["method"])
		} else {
			c.note(n, "as a tool it sends the request as written; the model passes no arguments")
		}
	}
	return p
}

// wired reports whether an edge enters field.
func (c *conv) wired(n *lfNode, field string) bool {
	for _, e := range c.in[n.ID] {
		if e.fieldName() == field {
			return true
		}
	}
	return false
}

// keyValues reads a table of {key, value} rows, or an object, as pairs in order.
func keyValues(raw json.RawMessage) [][2]string {
	if len(raw) == 0 {
		return nil
	}
	var rows []map[string]any
	if json.Unmarshal(raw, &rows) == nil {
		var out [][2]string
		for _, r := range rows {
			k, _ := r["key"].(string)
			if k == "" {
				continue
			}
			out = append(out, [2]string{k, scalar(r["value"])})
		}
		return out
	}
	var obj map[string]any
	if json.Unmarshal(raw, &obj) == nil {
		var out [][2]string
		for k, v := range obj {
			out = append(out, [2]string{k, scalar(v)})
		}
		sortPairs(out)
		return out
	}
	return nil
}

func sortPairs(ps [][2]string) {
	for i := 1; i < len(ps); i++ {
		for j := i; j > 0 && ps[j][0] < ps[j-1][0]; j-- {
			ps[j], ps[j-1] = ps[j-1], ps[j]
		}
	}
}

func scalar(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case nil:
		return ""
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// routerParams turn an If-Else's comparison into a rules router with one route, "true";
// its false output is the router's default port.
func (c *conv) routerParams(n *lfNode) map[string]any {
	a, b := c.jqOf(n, "input_text"), c.jqOf(n, "match_text")
	op := strings.ToLower(n.str("operator"))
	if op == "" {
		op = "equals"
	}
	str := func(x string) string { return "(" + x + " | tostring)" }
	if !n.flag("case_sensitive") && op != "regex" {
		str = func(x string) string { return "(" + x + " | tostring | ascii_downcase)" }
	}
	num := func(x string) string { return "(" + x + " | tonumber)" }
	var cond string
	switch op {
	case "equals":
		cond = str(a) + " == " + str(b)
	case "not equals":
		cond = str(a) + " != " + str(b)
	case "contains":
		cond = str(a) + " as $t | " + str(b) + " as $m | $t | contains($m)"
	case "starts with":
		cond = str(a) + " as $t | " + str(b) + " as $m | $t | startswith($m)"
	case "ends with":
		cond = str(a) + " as $t | " + str(b) + " as $m | $t | endswith($m)"
	case "regex":
		// Python's re.match anchors at the start.
		cond = str(a) + " as $t | " + str(b) + " as $m | $t | test(\"^(?:\" + $m + \")\")"
		c.note(n, "the regular expression runs as jq's test (RE2 syntax), not Python's re")
	case "less than":
		cond = num(a) + " < " + num(b)
	case "less than or equal":
		cond = num(a) + " <= " + num(b)
	case "greater than":
		cond = num(a) + " > " + num(b)
	case "greater than or equal":
		cond = num(a) + " >= " + num(b)
	default:
		c.note(n, "operator %q is unknown here; the route compares with equals", op)
		cond = str(a) + " == " + str(b)
	}
	return map[string]any{"mode": "rules", "routes": map[string]any{"true": cond}}
}
