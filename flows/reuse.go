package flows

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"slices"
)

// ReuseKey names one step's work for a replay that reuses recorded outputs: a hash of
// the node's own definition — its type, parameters, input selector, output mapping,
// timeout, cache and retry settings, and the definitions of the tools attached to it —
// and of the input it sees. Two steps with the same key would ask their component the
// same question, so a replay gives back the recorded answer instead of asking again.
// Where a node is on the canvas, its label and description are not part of it; neither
// are the flow's settings or the server's providers (a provider's model changed under
// the same name is not seen: replay without reuse then).
func (p *Plan) ReuseKey(node string, input any) string {
	def := p.nodeDefinition(node)
	if def == nil {
		return ""
	}
	in, err := json.Marshal(JSONValue(input))
	if err != nil {
		return ""
	}
	b, _ := json.Marshal(struct {
		Def   []json.RawMessage `json:"def"`
		Input json.RawMessage   `json:"input"`
	}{def, in})
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:16])
}

// nodeDefinition is the node's document entry without its place on the canvas, then the
// entries of the tools wired to it (sorted by id).
func (p *Plan) nodeDefinition(node string) []json.RawMessage {
	if p.Doc == nil {
		return nil
	}
	entry := func(id string) json.RawMessage {
		for _, n := range p.Doc.Nodes {
			if n.ID == id {
				n.Position, n.Label, n.Description = nil, "", ""
				b, _ := json.Marshal(n)
				var v any
				if json.Unmarshal(b, &v) != nil {
					return b
				}
				b, _ = json.Marshal(v) // canonical: params' keys sorted too
				return b
			}
		}
		return nil
	}
	own := entry(node)
	if own == nil {
		return nil
	}
	var tools []string
	for _, e := range p.Doc.Edges {
		if e.To != node || slices.Contains(tools, e.From) {
			continue
		}
		if n := p.Nodes[e.From]; n != nil {
			if _, ok := n.Component.(Tool); ok { // conservative: any tool wired in
				tools = append(tools, e.From)
			}
		}
	}
	slices.Sort(tools)
	out := []json.RawMessage{own}
	for _, t := range tools {
		out = append(out, entry(t))
	}
	return out
}
