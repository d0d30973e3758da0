package flows_test

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/flows"
)

// TestFlowFormatDocCoversEveryFieldAndCode keeps docs/flow-format.md in step with the
// format: every field of the document schema, every setting's default and every problem
// code must be in it.
func TestFlowFormatDocCoversEveryFieldAndCode(t *testing.T) {
	b, err := os.ReadFile("../docs/flow-format.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)

	var schema map[string]any
	if err := json.Unmarshal(flows.DocumentSchema(), &schema); err != nil {
		t.Fatal(err)
	}
	var walk func(where string, s map[string]any)
	walk = func(where string, s map[string]any) {
		props, _ := s["properties"].(map[string]any)
		// The document, a state key, settings, a node and an edge each have a table;
		// the fields of smaller objects (position, cache) are named in their row.
		table := where == "" || where == "state.*." || where == "settings." || where == "nodes[]." || where == "edges[]."
		for name, p := range props {
			switch {
			case table && !strings.Contains(doc, "| `"+name+"` |"):
				t.Errorf("field %s%s has no row in docs/flow-format.md", where, name)
			case !table && !strings.Contains(doc, "`"+name+"`") && !strings.Contains(doc, `"`+name+`"`):
				t.Errorf("field %s%s is not named in docs/flow-format.md", where, name)
			}
			if ps, ok := p.(map[string]any); ok {
				walk(where+name+".", ps)
				if items, ok := ps["items"].(map[string]any); ok {
					walk(where+name+"[].", items)
				}
				if ap, ok := ps["additionalProperties"].(map[string]any); ok {
					walk(where+name+".*.", ap)
				}
			}
		}
	}
	walk("", schema)

	d := flows.DefaultSettings
	for name, v := range map[string]string{
		"max_steps": fmt.Sprint(d.MaxSteps), "max_attempts": fmt.Sprint(d.MaxAttempts),
		"claim_after": `"30s"`, "step_timeout": `"5m"`, "checkpoint_ttl": `"24h"`, "keep_last": "0", "max_state_bytes": fmt.Sprint(d.MaxStateBytes),
	} {
		if !strings.Contains(doc, fmt.Sprintf("| `%s` | `%s` |", name, v)) {
			t.Errorf("setting %s: the doc does not give its default %s", name, v)
		}
	}
	if d.ClaimAfter.D().String() != "30s" || d.StepTimeout.D().String() != "5m0s" || d.CheckpointTTL.D().String() != "24h0m0s" {
		t.Errorf("DefaultSettings changed (%+v): update the settings table", d)
	}

	for _, code := range append(errorCodes, flows.CodeUnreachable, flows.CodeMeetWithoutJoin) {
		if !strings.Contains(doc, "| `"+code+"` |") {
			t.Errorf("problem code %s has no row in the problem code table", code)
		}
	}
	if lim := flows.DefaultLimits; lim.MaxBytes != 2<<20 || lim.MaxNodes != 500 || lim.MaxString != 256<<10 {
		t.Errorf("DefaultLimits changed (%+v): update the limits the doc gives", lim)
	}
	// The page opens with a complete flow: it must compile cleanly.
	start := strings.Index(doc, "```json\n")
	end := strings.Index(doc[start+8:], "```")
	if start < 0 || end < 0 {
		t.Fatal("no JSON example")
	}
	if _, ps := flows.Compile([]byte(doc[start+8:start+8+end]), testRegistry(), flows.DefaultLimits); len(ps) > 0 {
		t.Errorf("the opening example has problems:\n%s", problemLines(ps))
	}
	if flows.JQTimeout.String() != "2s" || !strings.Contains(doc, "after 2 seconds") {
		t.Errorf("the doc's jq deadline is not JQTimeout (%s)", flows.JQTimeout)
	}
}
