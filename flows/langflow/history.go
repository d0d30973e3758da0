package langflow

// Conversations: Langflow's chat input and output store their messages in a session,
// which its memory components and agents read; the converted flow loads and appends
// them with memory nodes.

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/sluicehq/sluice/flows"
)

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
