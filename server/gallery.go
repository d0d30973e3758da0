package server

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"

	"github.com/sluicehq/sluice/flows"
	"github.com/sluicehq/sluice/flows/examples"
	"github.com/sluicehq/sluice/templ/pages"
)

// Sizes of a node in a gallery picture, in the flow's own coordinates (the editor draws
// nodes about this big, so the picture looks like the canvas).
const (
	picNodeW = 180
	picNodeH = 56
	picPad   = 24
)

// gallery lists the examples as the flows page shows them: name, a one-line summary, and
// a picture of their graph drawn from the nodes' positions.
func (s *Server) gallery() []pages.Example {
	reg := s.pageEngine().Registry()
	var out []pages.Example
	for _, id := range examples.IDs() {
		raw, err := examples.Read(id)
		if err != nil {
			continue
		}
		var doc flows.Document
		if json.Unmarshal(raw, &doc) != nil {
			continue
		}
		ex := pages.Example{ID: id, Name: doc.Name, Description: doc.Description, Summary: firstSentence(doc.Description), Nodes: len(doc.Nodes)}
		ex.Picture = picture(&doc, func(typ string) string {
			if spec, ok := reg.Lookup(typ); ok {
				return spec.Category
			}
			return "other"
		})
		out = append(out, ex)
	}
	return out
}

// firstSentence is a description's first sentence: what fits on one line of a card.
func firstSentence(s string) string {
	if i := strings.Index(s, ". "); i >= 0 {
		return s[:i+1]
	}
	return s
}

// picture draws a flow's graph: a box per node where the editor puts it, coloured by
// its component's category, and a curve per edge.
func picture(doc *flows.Document, category func(typ string) string) pages.GraphPicture {
	pos := map[string]flows.Position{}
	minX, minY, maxX, maxY := math.Inf(1), math.Inf(1), math.Inf(-1), math.Inf(-1)
	for i, n := range doc.Nodes {
		p := flows.Position{X: float64(i) * (picNodeW + 40)}
		if n.Position != nil {
			p = *n.Position
		}
		pos[n.ID] = p
		minX, minY = math.Min(minX, p.X), math.Min(minY, p.Y)
		maxX, maxY = math.Max(maxX, p.X+picNodeW), math.Max(maxY, p.Y+picNodeH)
	}
	var g pages.GraphPicture
	if len(doc.Nodes) == 0 {
		g.ViewBox = "0 0 200 100"
		return g
	}
	g.ViewBox = fmt.Sprintf("%.0f %.0f %.0f %.0f", minX-picPad, minY-picPad, maxX-minX+2*picPad, maxY-minY+2*picPad)
	for _, e := range doc.Edges {
		a, ok1 := pos[e.From]
		b, ok2 := pos[e.To]
		if !ok1 || !ok2 {
			continue
		}
		x1, y1, x2, y2 := a.X+picNodeW, a.Y+picNodeH/2, b.X, b.Y+picNodeH/2
		if e.InPort() == "tools" { // a tool hangs below the agent it serves
			x1, y1, x2, y2 = a.X+picNodeW/2, a.Y, b.X+picNodeW/2, b.Y+picNodeH
			g.Edges = append(g.Edges, pages.PicEdge{Path: fmt.Sprintf("M%.0f %.0f L%.0f %.0f", x1, y1, x2, y2), Tool: true})
			continue
		}
		dx := math.Max(math.Abs(x2-x1)/2, 30)
		g.Edges = append(g.Edges, pages.PicEdge{Path: fmt.Sprintf("M%.0f %.0f C%.0f %.0f %.0f %.0f %.0f %.0f", x1, y1, x1+dx, y1, x2-dx, y2, x2, y2)})
	}
	for _, n := range doc.Nodes {
		p := pos[n.ID]
		label := n.Label
		if label == "" {
			label = n.ID
		}
		g.Nodes = append(g.Nodes, pages.PicNode{X: p.X, Y: p.Y, W: picNodeW, H: picNodeH, Category: category(n.Type), Label: label})
	}
	return g
}
