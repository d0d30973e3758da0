package flows

import (
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
)

// DocumentDiff is what changed from one version of a flow to another: nodes added,
// removed and changed (with each changed field), edges added, removed and changed (a
// condition), and the flow's own fields. Node positions are layout and not compared.
type DocumentDiff struct {
	NodesAdded   []string     `json:"nodes_added"`
	NodesRemoved []string     `json:"nodes_removed"`
	NodesChanged []NodeChange `json:"nodes_changed"`
	EdgesAdded   []Edge       `json:"edges_added"`
	EdgesRemoved []Edge       `json:"edges_removed"`
	EdgesChanged []EdgeChange `json:"edges_changed"`
	// Flow lists changes of the flow's own fields: name, description, state, settings.
	Flow []ValueChange `json:"flow"`
}

// NodeChange is a node that both versions have, with what differs.
type NodeChange struct {
	Node    string        `json:"node"`
	Changes []ValueChange `json:"changes"`
}

// EdgeChange is a connection both versions have whose other fields differ.
type EdgeChange struct {
	From    Edge          `json:"from"`
	To      Edge          `json:"to"`
	Changes []ValueChange `json:"changes"`
}

// ValueChange is one changed value, by path ("params.model", "settings.schedules[0].cron").
type ValueChange struct {
	Path string `json:"path"`
	Op   string `json:"op"` // add, remove, replace
	From any    `json:"from,omitempty"`
	To   any    `json:"to,omitempty"`
}

// Empty reports whether the two versions do the same.
func (d *DocumentDiff) Empty() bool {
	return len(d.NodesAdded)+len(d.NodesRemoved)+len(d.NodesChanged)+len(d.EdgesAdded)+len(d.EdgesRemoved)+len(d.EdgesChanged)+len(d.Flow) == 0
}

// DiffDocuments compares two flow documents, a the older.
func DiffDocuments(a, b *Document) *DocumentDiff {
	d := &DocumentDiff{NodesAdded: []string{}, NodesRemoved: []string{}, NodesChanged: []NodeChange{},
		EdgesAdded: []Edge{}, EdgesRemoved: []Edge{}, EdgesChanged: []EdgeChange{}, Flow: []ValueChange{}}
	an, bn := map[string]Node{}, map[string]Node{}
	for _, n := range a.Nodes {
		an[n.ID] = n
	}
	for _, n := range b.Nodes {
		bn[n.ID] = n
		old, ok := an[n.ID]
		if !ok {
			d.NodesAdded = append(d.NodesAdded, n.ID)
			continue
		}
		if ch := diffValues("", nodeValue(old), nodeValue(n)); len(ch) > 0 {
			d.NodesChanged = append(d.NodesChanged, NodeChange{Node: n.ID, Changes: ch})
		}
	}
	for _, n := range a.Nodes {
		if _, ok := bn[n.ID]; !ok {
			d.NodesRemoved = append(d.NodesRemoved, n.ID)
		}
	}
	conn := func(e Edge) string { return e.From + "\x00" + e.FromPort() + "\x00" + e.To + "\x00" + e.InPort() }
	ae := map[string][]Edge{}
	for _, e := range a.Edges {
		ae[conn(e)] = append(ae[conn(e)], e)
	}
	for _, e := range b.Edges {
		olds := ae[conn(e)]
		if len(olds) == 0 {
			d.EdgesAdded = append(d.EdgesAdded, e)
			continue
		}
		// The same connection: take the old edge with the same condition, else the first.
		j := 0
		for i, o := range olds {
			if o.Condition == e.Condition && o.ID == e.ID {
				j = i
				break
			}
		}
		old := olds[j]
		ae[conn(e)] = append(olds[:j:j], olds[j+1:]...)
		if ch := diffValues("", edgeValue(old), edgeValue(e)); len(ch) > 0 {
			d.EdgesChanged = append(d.EdgesChanged, EdgeChange{From: old, To: e, Changes: ch})
		}
	}
	for _, e := range a.Edges {
		for _, left := range ae[conn(e)] {
			if left == e {
				d.EdgesRemoved = append(d.EdgesRemoved, e)
				break
			}
		}
	}
	if ch := diffValues("", flowValue(a), flowValue(b)); len(ch) > 0 {
		d.Flow = ch
	}
	return d
}

func nodeValue(n Node) map[string]any {
	n.Position = nil
	n.ID = ""
	return plain(n)
}

func edgeValue(e Edge) map[string]any {
	return map[string]any{"id": e.ID, "condition": e.Condition}
}

func flowValue(d *Document) map[string]any {
	return plain(struct {
		Name        string              `json:"name,omitempty"`
		Description string              `json:"description,omitempty"`
		State       map[string]StateKey `json:"state,omitempty"`
		Settings    Settings            `json:"settings,omitzero"`
	}{d.Name, d.Description, d.State, d.Settings})
}

// plain turns a value into generic JSON values, so that raw params compare by content.
func plain(v any) map[string]any {
	b, _ := json.Marshal(v)
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	if m == nil {
		m = map[string]any{}
	}
	return m
}

func diffValues(path string, a, b any) []ValueChange {
	join := func(k string) string {
		if path == "" {
			return k
		}
		return path + "." + k
	}
	am, aok := a.(map[string]any)
	bm, bok := b.(map[string]any)
	if aok && bok {
		keys := map[string]bool{}
		for k := range am {
			keys[k] = true
		}
		for k := range bm {
			keys[k] = true
		}
		sorted := make([]string, 0, len(keys))
		for k := range keys {
			sorted = append(sorted, k)
		}
		sort.Strings(sorted)
		var out []ValueChange
		for _, k := range sorted {
			av, ina := am[k]
			bv, inb := bm[k]
			switch {
			case !ina:
				out = append(out, ValueChange{Path: join(k), Op: "add", To: bv})
			case !inb:
				out = append(out, ValueChange{Path: join(k), Op: "remove", From: av})
			default:
				out = append(out, diffValues(join(k), av, bv)...)
			}
		}
		return out
	}
	al, aok := a.([]any)
	bl, bok := b.([]any)
	if aok && bok {
		var out []ValueChange
		for i := 0; i < max(len(al), len(bl)); i++ {
			p := fmt.Sprintf("%s[%d]", path, i)
			switch {
			case i >= len(al):
				out = append(out, ValueChange{Path: p, Op: "add", To: bl[i]})
			case i >= len(bl):
				out = append(out, ValueChange{Path: p, Op: "remove", From: al[i]})
			default:
				out = append(out, diffValues(p, al[i], bl[i])...)
			}
		}
		return out
	}
	if reflect.DeepEqual(a, b) {
		return nil
	}
	if path == "" {
		path = "."
	}
	return []ValueChange{{Path: path, Op: "replace", From: a, To: b}}
}
