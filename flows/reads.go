package flows

import (
	"encoding/json"
	"slices"
	"text/template/parse"

	"github.com/itchyny/gojq"
)

// What a node reads of the run state: the top-level keys its input selector, templates
// and jq expressions name at the state's root. A retry that moves a run to another
// version checks them against the state the step received: a key the new version's node
// needs and the state lacks is a step that would fail (or answer from nothing).
//
// The reading is conservative: a key is listed only where the expression surely reads
// it from the root (".ticket.body", "{{.customer}}", "{a: .x}"); whole is true when the
// node reads the state as a whole ("{{json .}}", ".", a component that queries the state
// itself), so no key can be said to be missing.

// NodeReads returns what node of p reads of the state.
func (p *Plan) NodeReads(node string) (keys []string, whole bool) {
	n := p.Nodes[node]
	if n == nil || p.Doc == nil {
		return nil, false
	}
	if n.Input != nil { // the component sees only what the selector makes of the state
		return n.Input.RootFields()
	}
	var doc *Node
	for i := range p.Doc.Nodes {
		if p.Doc.Nodes[i].ID == node {
			doc = &p.Doc.Nodes[i]
		}
	}
	if doc == nil || n.Spec == nil {
		return nil, false
	}
	formats := paramFormats(n.Spec.Params)
	var params map[string]json.RawMessage
	_ = json.Unmarshal(doc.Params, &params)
	seen := map[string]bool{}
	add := func(ks []string, w bool) {
		whole = whole || w
		for _, k := range ks {
			if !seen[k] {
				seen[k] = true
				keys = append(keys, k)
			}
		}
	}
	for name, raw := range params {
		f := formats[name]
		if f == "" {
			continue
		}
		var texts []string
		var s string
		if json.Unmarshal(raw, &s) == nil {
			texts = []string{s}
		} else {
			var m map[string]json.RawMessage
			if json.Unmarshal(raw, &m) == nil {
				for _, v := range m {
					if json.Unmarshal(v, &s) == nil {
						texts = append(texts, s)
					}
				}
			}
		}
		for _, text := range texts {
			switch f {
			case "template":
				if t, err := ParseTemplate(text); err == nil {
					add(t.RootFields())
				}
			case "jq":
				if q, err := CompileJQ(text); err == nil {
					add(q.RootFields())
				}
			}
		}
	}
	slices.Sort(keys)
	return keys, whole
}

// paramFormats maps each param of a params schema to "template" or "jq" when its value
// (or, for an object, each of its members' values) is one.
func paramFormats(schema json.RawMessage) map[string]string {
	var s struct {
		Properties map[string]json.RawMessage `json:"properties"`
	}
	_ = json.Unmarshal(schema, &s)
	out := map[string]string{}
	for name, raw := range s.Properties {
		var p struct {
			Format               string          `json:"format"`
			AdditionalProperties json.RawMessage `json:"additionalProperties"`
		}
		_ = json.Unmarshal(raw, &p)
		f := p.Format
		if f == "" && len(p.AdditionalProperties) > 0 {
			var ap struct {
				Format string `json:"format"`
				AnyOf  []struct {
					Format string `json:"format"`
				} `json:"anyOf"`
			}
			_ = json.Unmarshal(p.AdditionalProperties, &ap)
			f = ap.Format
			for _, a := range ap.AnyOf {
				if f == "" {
					f = a.Format
				}
			}
		}
		if f == "template" || f == "jq" {
			out[name] = f
		}
	}
	return out
}

// RootFields returns the top-level keys the template reads at its root ("{{.customer}}",
// "{{$.items}}"), and whether it reads the root whole ("{{json .}}", "{{range .}}").
func (t *Template) RootFields() (keys []string, whole bool) {
	var walk func(n parse.Node, root bool)
	pipe := func(p *parse.PipeNode, root bool) {
		if p == nil {
			return
		}
		for _, c := range p.Cmds {
			for _, a := range c.Args {
				walk(a, root)
			}
		}
	}
	walk = func(n parse.Node, root bool) {
		switch n := n.(type) {
		case *parse.ListNode:
			if n == nil {
				return
			}
			for _, c := range n.Nodes {
				walk(c, root)
			}
		case *parse.ActionNode:
			pipe(n.Pipe, root)
		case *parse.FieldNode:
			if root && len(n.Ident) > 0 {
				keys = append(keys, n.Ident[0])
			}
		case *parse.VariableNode:
			if len(n.Ident) > 1 && n.Ident[0] == "$" {
				keys = append(keys, n.Ident[1])
			} else if len(n.Ident) == 1 && n.Ident[0] == "$" {
				whole = true
			}
		case *parse.DotNode:
			if root {
				whole = true
			}
		case *parse.ChainNode:
			walk(n.Node, root)
		case *parse.PipeNode:
			pipe(n, root)
		case *parse.IfNode:
			pipe(n.Pipe, root)
			walk(n.List, root)
			walk(n.ElseList, root)
		case *parse.RangeNode:
			pipe(n.Pipe, root)
			walk(n.List, false) // the dot is each item
			walk(n.ElseList, root)
		case *parse.WithNode:
			pipe(n.Pipe, root)
			walk(n.List, false)
			walk(n.ElseList, root)
		case *parse.TemplateNode:
			pipe(n.Pipe, root)
		}
	}
	for _, def := range t.t.Templates() {
		if def.Tree != nil {
			walk(def.Tree.Root, true)
		}
	}
	return dedupe(keys), whole
}

// RootFields returns the top-level keys the expression reads at its input's root
// (".ticket.body", "{a: .x}", ".items[] | .price" reads items), and whether it takes
// the root whole (".", "tojson", "keys").
func (q *JQ) RootFields() (keys []string, whole bool) {
	parsed, err := gojq.Parse(q.src)
	if err != nil {
		return nil, true
	}
	var query func(e *gojq.Query, root bool)
	term := func(t *gojq.Term, root bool) {
		if t == nil {
			return
		}
		switch t.Type {
		case gojq.TermTypeIdentity:
			if root && len(t.SuffixList) == 0 {
				whole = true
			}
			if root && len(t.SuffixList) > 0 && t.SuffixList[0].Index != nil && t.SuffixList[0].Index.Name != "" {
				keys = append(keys, t.SuffixList[0].Index.Name)
			}
		case gojq.TermTypeIndex:
			if root && t.Index != nil && t.Index.Name != "" {
				keys = append(keys, t.Index.Name)
			}
		case gojq.TermTypeObject:
			if t.Object != nil {
				for _, kv := range t.Object.KeyVals {
					if kv.Val != nil {
						query(kv.Val, root)
					} else if root && kv.Key != "" && kv.KeyQuery == nil {
						keys = append(keys, kv.Key) // {name}: the shorthand of {name: .name}
					}
				}
			}
		case gojq.TermTypeArray:
			if t.Array != nil {
				query(t.Array.Query, root)
			}
		case gojq.TermTypeQuery:
			query(t.Query, root)
		case gojq.TermTypeIf:
			if t.If != nil {
				query(t.If.Cond, root)
				query(t.If.Then, root)
				for _, e := range t.If.Elif {
					query(e.Cond, root)
					query(e.Then, root)
				}
				query(t.If.Else, root)
			}
		case gojq.TermTypeFunc:
			// select(f) and not-changing-input functions keep the input; most others
			// (map, sort_by, …) run their arguments on other inputs.
			if t.Func != nil && (t.Func.Name == "select" || t.Func.Name == "has" || t.Func.Name == "tostring" || t.Func.Name == "tojson") {
				for _, a := range t.Func.Args {
					query(a, root)
				}
			}
			if t.Func != nil && root && len(t.Func.Args) == 0 && (t.Func.Name == "tojson" || t.Func.Name == "keys" || t.Func.Name == "to_entries" || t.Func.Name == "length") {
				whole = true
			}
		}
	}
	query = func(e *gojq.Query, root bool) {
		if e == nil {
			return
		}
		if e.Term != nil {
			term(e.Term, root)
			return
		}
		switch e.Op {
		case gojq.OpPipe:
			query(e.Left, root)
			query(e.Right, false)
		default:
			query(e.Left, root)
			query(e.Right, root)
		}
	}
	query(parsed, true)
	return dedupe(keys), whole
}

func dedupe(keys []string) []string {
	slices.Sort(keys)
	return slices.Compact(keys)
}
