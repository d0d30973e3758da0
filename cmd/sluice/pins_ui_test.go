package main

import (
	"encoding/json"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/flows"
	"github.com/sluicehq/sluice/flows/nodes"
)

// The editor offers pins only for nodes that call something outside; it knows which do
// not from a list (ui/src/flow/pins.ts PURE_TYPES) that must name exactly the components
// whose steps run inline (flows/nodes/inline.go), which the engine refuses to pin. A
// router is inline in mode "rules" (its example) and not in mode "llm".
func TestEditorKnowsWhichNodesCanBePinned(t *testing.T) {
	src := mustRead(t, "../../ui/src/flow/pins.ts")
	m := regexp.MustCompile(`export const PURE_TYPES: readonly string\[\] = \[([^\]]*)\]`).FindStringSubmatch(src)
	if m == nil {
		t.Fatal("ui/src/flow/pins.ts has no PURE_TYPES list")
	}
	var editor []string
	if err := json.Unmarshal([]byte("["+m[1]+"]"), &editor); err != nil {
		t.Fatalf("PURE_TYPES: %v", err)
	}
	slices.Sort(editor)

	inline := func(spec *flows.Spec, params json.RawMessage) bool {
		t.Helper()
		p, err := spec.WithDefaults(params)
		if err != nil {
			t.Fatalf("%s: %v", spec.Name, err)
		}
		c, err := spec.New(&flows.Build{Flow: &flows.Document{ID: "pins"}, Node: &flows.Node{ID: "n", Type: spec.Name}, Params: p})
		if err != nil {
			t.Fatalf("build a %s from its example: %v", spec.Name, err)
		}
		in, ok := c.(flows.Inliner)
		return ok && in.Inline()
	}
	var engine []string
	for _, spec := range nodes.NewRegistry(nil).Specs() {
		if inline(spec, spec.Example) {
			engine = append(engine, spec.Name)
		}
	}
	slices.Sort(engine)
	if !slices.Equal(editor, engine) {
		t.Errorf("the editor's PURE_TYPES are %v; the components whose steps run inline are %v", editor, engine)
	}
	router, _ := nodes.NewRegistry(nil).Lookup("router")
	if inline(router, json.RawMessage(`{"mode": "llm", "routes": {"a": "when a"}, "model": "m"}`)) {
		t.Error("a router in mode llm runs inline: pins.ts unpinnable() takes it for one that calls a model")
	}
	if !strings.Contains(src, `node.params?.mode === "llm"`) {
		t.Error("pins.ts no longer tells an LLM router from a rules router by its mode")
	}
}
