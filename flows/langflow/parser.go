package langflow

// Langflow's Parser, as a template over the records wired into it.

import (
	"strconv"
	"strings"

	"github.com/sluicehq/sluice/flows"
)

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
