package flows_test

import (
	"bytes"
	"encoding/json"
	"sort"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/flows"
	"github.com/sluicehq/sluice/flows/examples"
	"github.com/sluicehq/sluice/flows/nodes"
)

// compileOK compiles data and fails the test on any error.
func compileOK(t *testing.T, reg *flows.Registry, data []byte) *flows.Plan {
	t.Helper()
	p, ps := flows.Compile(data, reg, flows.DefaultLimits)
	if p == nil {
		t.Fatalf("does not compile:\n%s", problemLines(ps))
	}
	return p
}

// edit decodes the document, lets fn change it and encodes it again. Keys come out
// sorted, params too: use it on documents that write them sorted (triage does).
func edit(t *testing.T, data []byte, fn func(doc map[string]any)) []byte {
	t.Helper()
	v, err := flows.DecodeJSON(data)
	if err != nil {
		t.Fatal(err)
	}
	doc := v.(map[string]any)
	fn(doc)
	out, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func node(doc map[string]any, id string) map[string]any {
	for _, n := range doc["nodes"].([]any) {
		if m := n.(map[string]any); m["id"] == id {
			return m
		}
	}
	panic("no node " + id)
}

// reordered writes the document with the keys of every object of the format in reverse
// order and other whitespace; params are copied as written, since their key order may
// mean something (a router's routes).
func reordered(t *testing.T, data []byte) []byte {
	t.Helper()
	v, err := flows.DecodeJSON(data)
	if err != nil {
		t.Fatal(err)
	}
	var raw struct {
		Nodes []struct {
			Params json.RawMessage `json:"params"`
		} `json:"nodes"`
	}
	if err := json.Unmarshal(data, &raw); err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	var write func(v any, indent string, path string)
	write = func(v any, indent, path string) {
		switch x := v.(type) {
		case map[string]any:
			keys := make([]string, 0, len(x))
			for k := range x {
				keys = append(keys, k)
			}
			sort.Sort(sort.Reverse(sort.StringSlice(keys)))
			b.WriteString("{\n")
			for i, k := range keys {
				if i > 0 {
					b.WriteString(",\n")
				}
				kb, _ := json.Marshal(k)
				b.WriteString(indent + "\t")
				b.Write(kb)
				b.WriteString(" :  ")
				write(x[k], indent+"\t", path+"."+k)
			}
			b.WriteString("\n" + indent + "}")
		case []any:
			b.WriteString("[ ")
			for i, it := range x {
				if i > 0 {
					b.WriteString(" ,\n" + indent)
				}
				if path == ".nodes" {
					if p := raw.Nodes[i].Params; p != nil {
						it.(map[string]any)["params"] = p
					}
				}
				write(it, indent, path)
			}
			b.WriteString(" ]")
		case json.RawMessage:
			b.Write(x)
		default:
			vb, _ := json.Marshal(x)
			b.Write(vb)
		}
	}
	write(v, "", "")
	return b.Bytes()
}

func TestCompilingTwiceGivesTheSameVersionAndPlan(t *testing.T) {
	reg := nodes.NewRegistry(nil)
	for _, id := range examples.IDs() {
		data, _ := examples.Read(id)
		a, b := compileOK(t, reg, data), compileOK(t, reg, data)
		if a.Version != b.Version {
			t.Errorf("%s: versions %s and %s", id, a.Version, b.Version)
		}
		if sa, sb := summary(a, nil), summary(b, nil); !bytes.Equal(sa, sb) {
			t.Errorf("%s: plans differ:\n%s\n%s", id, sa, sb)
		}
		if len(a.Version) != 64 || strings.Trim(a.Version, "0123456789abcdef") != "" {
			t.Errorf("%s: version %q is not a hex SHA-256", id, a.Version)
		}
	}
}

func TestVersionIgnoresLayoutButNotMeaning(t *testing.T) {
	reg := nodes.NewRegistry(nil)
	data, err := examples.Read("triage")
	if err != nil {
		t.Fatal(err)
	}
	base := compileOK(t, reg, data)
	for _, tc := range []struct {
		name string
		doc  []byte
		same bool
	}{
		{"moving a node keeps the version", edit(t, data, func(d map[string]any) {
			node(d, "route")["position"] = map[string]any{"x": 999, "y": -5}
		}), true},
		{"removing every position keeps the version", edit(t, data, func(d map[string]any) {
			for _, n := range d["nodes"].([]any) {
				delete(n.(map[string]any), "position")
			}
		}), true},
		{"key order and whitespace keep the version", reordered(t, data), true},
		{"adding, editing and moving notes keeps the version", edit(t, data, func(d map[string]any) {
			d["notes"] = []any{map[string]any{"id": "n1", "text": "The router tries code first.", "position": map[string]any{"x": 40, "y": -80}, "width": 240, "color": "blue"}}
		}), true},
		{"reordering a router's routes changes the version", swap(t, data,
			`"code": ".intent == \"code\"", "database": ".intent == \"database\""`,
			`"database": ".intent == \"database\"", "code": ".intent == \"code\""`), false},
		{"changing a param changes the version", edit(t, data, func(d map[string]any) {
			node(d, "route")["params"].(map[string]any)["routes"].(map[string]any)["code"] = `.intent == "bug"`
		}), false},
		{"changing a setting changes the version", edit(t, data, func(d map[string]any) {
			d["settings"] = map[string]any{"max_steps": 7}
		}), false},
		{"changing an edge's port changes the version", edit(t, data, func(d map[string]any) {
			d["edges"].([]any)[1].(map[string]any)["port"] = "database"
			d["edges"].([]any)[2].(map[string]any)["port"] = "code"
		}), false},
		{"renaming the flow changes the version", edit(t, data, func(d map[string]any) {
			d["name"] = "Renamed"
		}), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := compileOK(t, reg, tc.doc)
			if got := p.Version == base.Version; got != tc.same {
				t.Errorf("version %s, original %s: same = %v, want %v", p.Version, base.Version, got, tc.same)
			}
			v, err := flows.Version(p.Doc)
			if err != nil || v != p.Version {
				t.Errorf("Version(plan.Doc) = %s, %v; the plan says %s", v, err, p.Version)
			}
		})
	}
}

// swap replaces old, which must occur in data, with new.
func swap(t *testing.T, data []byte, old, new string) []byte {
	t.Helper()
	if !bytes.Contains(data, []byte(old)) {
		t.Fatalf("the document does not contain %s", old)
	}
	return bytes.Replace(data, []byte(old), []byte(new), 1)
}

func TestCanonicalLeavesOutPositionsAndKeepsParamsOrder(t *testing.T) {
	data, _ := examples.Read("linear")
	p := compileOK(t, nodes.NewRegistry(nil), data)
	c, err := flows.Canonical(p.Doc)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(c, []byte(`"position"`)) {
		t.Errorf("canonical form keeps positions: %s", c)
	}
	if bytes.ContainsAny(c, "\n\t") {
		t.Errorf("canonical form has layout whitespace: %s", c)
	}
	// The format's own fields come in a fixed order; params keep the order written.
	if !bytes.HasPrefix(c, []byte(`{"sluice":1,"id":"linear","name":`)) {
		t.Errorf("canonical form does not start with sluice, id, name: %s", c)
	}
	if !bytes.Contains(c, []byte(`"params":{"schema":{"type":"object","required":["name"],`)) ||
		!bytes.Contains(c, []byte(`},"example":{"name":"Ada"}}`)) {
		t.Errorf("params are not kept as written: %s", c)
	}
	if !bytes.Equal(p.Source, data) {
		t.Errorf("the plan's Source is not the document as compiled")
	}
}
