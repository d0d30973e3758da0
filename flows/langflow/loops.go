package langflow

// Langflow's Loop and Batch Run, as fan-outs whose branches meet at a join.

import (
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/sluicehq/sluice/flows"
)

// batchChain runs Langflow's Batch Run: the model once for each row of the table wired
// into it, in parallel branches (a fan-out), each row gaining the answer as a column;
// the rows, in order, are gathered under the node's id (append reducer) at a join.
func (c *conv) batchChain(n *lfNode, base flows.Node) []flows.Node {
	id := c.ids[n.ID]
	item, answer := c.reserve(id+"_row"), c.reserve(id+"_answer")
	column := n.str("output_column_name")
	if column == "" {
		column = "model_response"
	}
	user := "{{json ." + item + "}}"
	if col := n.str("column_name"); col != "" && !flows.LooksLikeCredential(col) {
		user = "{{with ." + item + "}}{{index . " + strconv.Quote(col) + "}}{{end}}"
	}
	p := c.modelParams(n, n)
	p["user"] = user
	if sys := c.text(n, "system_message"); sys != "" {
		p["system"] = sys
	}
	p["as"] = answer
	at := func(dx float64) *flows.Position {
		if base.Position == nil {
			return nil
		}
		return &flows.Position{X: base.Position.X + dx, Y: base.Position.Y}
	}
	fan := flows.Node{ID: c.reserve(id + "_rows"), Type: "fanout", Label: n.title() + ": each row", Position: base.Position,
		Params: params(map[string]any{"items": c.dataOf(n, "df"), "as": item})}
	base.Type, base.Params, base.Position = "llm", params(p), at(200)
	col, _ := json.Marshal(column)
	gather := flows.Node{ID: c.reserve(id + "_gather"), Type: "transform", Label: "Gather " + n.title(), Position: at(400),
		Params: params(map[string]any{"expr": fmt.Sprintf("{%s: [((.%s | if type == \"object\" then . else {text: .} end) + {%s: .%s})]}", id, item, col, answer)})}
	join := flows.Node{ID: c.reserve(id + "_done"), Type: "join", Label: n.title() + " done", Position: at(600)}
	c.state[id] = flows.StateKey{Reducer: flows.Append, Default: json.RawMessage("[]"),
		Description: "The rows Langflow's " + n.title() + " was given, each with the model's answer as " + column + "."}
	return []flows.Node{fan, base, gather, join}
}

// loop records a Langflow Loop: its body ends at the node whose edge comes back into
// the loop; the body is what runs between the loop's item and that node.
func (c *conv) loop(n *lfNode) {
	end := ""
	for _, e := range c.in[n.ID] {
		if c.loopBack(e) {
			end = e.Source
		}
	}
	if end == "" {
		c.gap(n, "nothing comes back into the loop: Sluice runs a loop's body as a fan-out over the items, which needs the body's last node")
		return
	}
	c.role[n.ID] = roleStep
	c.loopEnd[n.ID] = end
	// The body: reached from the item output, and reaching the end.
	fwd := map[string]bool{}
	var walk func(id string)
	walk = func(id string) {
		for _, e := range c.out[id] {
			c.step()
			if c.loopBack(e) || fwd[e.Target] || e.Target == n.ID {
				continue
			}
			fwd[e.Target] = true
			walk(e.Target)
		}
	}
	for _, e := range c.out[n.ID] {
		if e.output() != "done" && !fwd[e.Target] {
			fwd[e.Target] = true
			walk(e.Target)
		}
	}
	back := map[string]bool{end: true}
	var up func(id string)
	up = func(id string) {
		for _, e := range c.in[id] {
			c.step()
			if c.loopBack(e) || back[e.Source] || e.Source == n.ID {
				continue
			}
			back[e.Source] = true
			up(e.Source)
		}
	}
	up(end)
	for id := range fwd {
		if back[id] {
			c.inLoop[id] = true
		}
	}
}

// loopBack reports whether e is the edge that closes a Loop: into the loop, not into
// its data.
func (c *conv) loopBack(e lfEdge) bool {
	return c.byID[e.Target].kindName() == "LoopComponent" && e.fieldName() != "data"
}

// loopItem is the state key each branch of a loop finds its item under.
func (c *conv) loopItem(n *lfNode) string {
	if k, ok := c.loopKeys[n.ID]; ok {
		return k
	}
	k := c.reserve(c.ids[n.ID] + "_item")
	c.loopKeys[n.ID] = k
	return k
}

// loopJoin is the id of the join where a loop's branches meet.
func (c *conv) loopJoin(n *lfNode) string {
	if k, ok := c.loopKeys[n.ID+"\x00join"]; ok {
		return k
	}
	k := c.reserve(c.ids[n.ID] + "_done")
	c.loopKeys[n.ID+"\x00join"] = k
	return k
}

// loopClose is what follows the last node of a loop's body: each branch adds its
// result to the loop's list (a state key with the append reducer), and the join where
// the branches meet. Langflow's done output is that list.
func (c *conv) loopClose(n *lfNode) []flows.Node {
	var out []flows.Node
	for lid, end := range c.loopEnd {
		if end != n.ID {
			continue
		}
		l := c.byID[lid]
		key := c.ids[lid]
		result := "null"
		for _, e := range c.in[lid] {
			if c.loopBack(e) {
				if r, ok := c.valueOf(e); ok {
					result = r.jq()
					if r.kind == kText || r.kind == kLit || r.kind == kJoined || r.kind == kHistory {
						result = "{text: " + r.jqText() + "}" // a Message becomes a record, as in Langflow's DataFrame
					}
				}
			}
		}
		c.state[key] = flows.StateKey{Reducer: flows.Append, Default: json.RawMessage("[]"),
			Description: "What each pass of Langflow's " + l.title() + " gave, in the order of its items."}
		gather := flows.Node{ID: c.reserve(key + "_gather"), Type: "transform", Label: "Gather " + l.title(),
			Params: params(map[string]any{"expr": "{" + key + ": [" + result + "]}"})}
		join := flows.Node{ID: c.loopJoin(l), Type: "join", Label: l.title() + " done"}
		if n.Position != nil {
			gather.Position = &flows.Position{X: n.Position.X + 200, Y: n.Position.Y}
			join.Position = &flows.Position{X: n.Position.X + 400, Y: n.Position.Y}
		}
		out = append(out, gather, join)
	}
	return out
}
