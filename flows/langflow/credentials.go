package langflow

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"

	"github.com/sluicehq/sluice/flows"
)

// A credential in an export is never copied into the flow or the report. The fields
// the conversion copies go through literal, which leaves out a field whose text looks
// like one (flows.LooksLikeCredential, the detector validation uses for
// literal_secret) and says so. scrub then looks at every string of the converted flow
// and of the report, so that text copied some other way (a name, a description, an
// option quoted in a reason) cannot carry one either.

// credentialMark stands in for a credential found by scrub.
const credentialMark = "[credential not copied]"

// literal is a field's own value; a value that looks like a credential is left out and
// reported, once per node and field.
func (c *conv) literal(n *lfNode, field string) string {
	s := n.str(field)
	if flows.LooksLikeCredential(s) {
		c.dropped(n, "field "+field)
		return ""
	}
	return s
}

// dropped reports that what (a field, a header, a parameter) of n was left out.
func (c *conv) dropped(n *lfNode, what string) {
	if k := n.ID + "\x00" + what; !c.noted[k] {
		c.noted[k] = true
		c.note(n, "%s holds what looks like a credential; it was not copied", what)
	}
}

// scrub replaces what looks like a credential in any string of doc, of the gaps and of
// the notes by credentialMark, and reports each place in the flow where it did.
func (c *conv) scrub(doc *flows.Document) {
	var found []string
	clean := func(where string, s *string) {
		if flows.LooksLikeCredential(*s) {
			*s = flows.RedactCredentials(*s, credentialMark)
			found = append(found, where)
		}
	}
	clean("the flow's name", &doc.Name)
	clean("the flow's description", &doc.Description)
	for i := range doc.Nodes {
		n := &doc.Nodes[i]
		clean("node "+n.ID+": type", &n.Type)
		clean("node "+n.ID+": label", &n.Label)
		clean("node "+n.ID+": description", &n.Description)
		if p, ok := scrubJSON(n.Params); ok {
			n.Params = p
			found = append(found, "node "+n.ID+": params")
		}
	}
	keys := make([]string, 0, len(doc.State))
	for k := range doc.State {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		s := doc.State[k]
		clean("state key "+k+": description", &s.Description)
		if d, ok := scrubJSON(s.Default); ok {
			s.Default = d
			found = append(found, "state key "+k+": default")
		}
		doc.State[k] = s
	}
	for _, where := range found {
		c.notes = append(c.notes, Note{Message: fmt.Sprintf("%s held what looks like a credential; it was replaced by %s", where, credentialMark)})
	}
	for i := range c.gaps {
		g := &c.gaps[i]
		for _, s := range []*string{&g.Node, &g.Type, &g.Why, &g.Placeholder} {
			clean("", s)
		}
	}
	for i := range c.notes {
		n := &c.notes[i]
		for _, s := range []*string{&n.Node, &n.Type, &n.Message} {
			clean("", s)
		}
	}
}

// scrubJSON is raw with credentials replaced by credentialMark in every string and
// member name; ok is false when there were none.
func scrubJSON(raw json.RawMessage) (json.RawMessage, bool) {
	if len(raw) == 0 {
		return raw, false
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if dec.Decode(&v) != nil {
		return raw, false
	}
	changed := false
	var walk func(v any) any
	walk = func(v any) any {
		switch x := v.(type) {
		case string:
			if flows.LooksLikeCredential(x) {
				changed = true
				return flows.RedactCredentials(x, credentialMark)
			}
		case []any:
			for i := range x {
				x[i] = walk(x[i])
			}
		case map[string]any:
			out := make(map[string]any, len(x))
			for k, e := range x {
				if flows.LooksLikeCredential(k) {
					changed = true
					k = flows.RedactCredentials(k, credentialMark)
				}
				out[k] = walk(e)
			}
			return out
		}
		return v
	}
	v = walk(v)
	if !changed {
		return raw, false
	}
	b, err := json.Marshal(v)
	if err != nil {
		return raw, false
	}
	return b, true
}
