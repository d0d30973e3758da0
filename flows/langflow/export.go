// Package langflow converts a Langflow flow export into a Sluice flow document. It maps
// the components that have a Sluice equivalent (chat and text input and output, prompt
// templates, OpenAI-compatible and Anthropic models, the agent with its tools, the
// If-Else router, structured output, API requests, and the building blocks: parsers,
// URL and file loaders, the text splitter, chat memory, the calculator, web search, the
// current date, vector stores and knowledge bases with their embeddings, MCP tools, the
// Loop and Batch Run) and reports every other node, one line each, with the reason. It reads only the
// export: it runs nothing and calls nothing.
//
// Langflow flows are dataflow graphs (values travel along edges into named fields);
// Sluice flows are control flow over one run state. The conversion stores each node's
// value in the state under the node's id and writes the fields that received a value
// as templates or jq over that state; see docs/import-langflow.md.
package langflow

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/sluicehq/sluice/flows"
)

// export is a Langflow flow export as far as the conversion reads it.
type export struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	Data        *struct {
		Nodes []lfNode `json:"nodes"`
		Edges []lfEdge `json:"edges"`
	} `json:"data"`
}

type lfNode struct {
	ID       string `json:"id"`
	Type     string `json:"type"` // "genericNode", "noteNode"
	Position *struct {
		X float64 `json:"x"`
		Y float64 `json:"y"`
	} `json:"position"`
	Data struct {
		Type string `json:"type"`
		ID   string `json:"id"`
		Node struct {
			DisplayName  string                     `json:"display_name"`
			Description  string                     `json:"description"`
			Template     map[string]json.RawMessage `json:"template"`
			CustomFields map[string][]string        `json:"custom_fields"`
			Edited       bool                       `json:"edited"`
			ToolMode     bool                       `json:"tool_mode"`
		} `json:"node"`
	} `json:"data"`
}

// field is one entry of a node's template.
type field struct {
	Value       json.RawMessage `json:"value"`
	Password    bool            `json:"password"`
	LoadFromDB  bool            `json:"load_from_db"`
	DisplayName string          `json:"display_name"`
	Type        string          `json:"type"`
}

type lfEdge struct {
	ID           string          `json:"id"`
	Source       string          `json:"source"`
	Target       string          `json:"target"`
	SourceHandle json.RawMessage `json:"sourceHandle"`
	TargetHandle json.RawMessage `json:"targetHandle"`
	Data         *struct {
		SourceHandle *struct {
			Name string `json:"name"`
		} `json:"sourceHandle"`
		TargetHandle *struct {
			FieldName string `json:"fieldName"`
		} `json:"targetHandle"`
	} `json:"data"`
}

// output is the name of the source node's output the edge leaves.
func (e lfEdge) output() string {
	if e.Data != nil && e.Data.SourceHandle != nil && e.Data.SourceHandle.Name != "" {
		return e.Data.SourceHandle.Name
	}
	return handleField(e.SourceHandle, "name")
}

// fieldName is the target node's field the edge enters.
func (e lfEdge) fieldName() string {
	if e.Data != nil && e.Data.TargetHandle != nil && e.Data.TargetHandle.FieldName != "" {
		return e.Data.TargetHandle.FieldName
	}
	return handleField(e.TargetHandle, "fieldName")
}

// handleField reads a field of an edge handle written as a string: Langflow writes the
// handle's JSON with "œ" in place of the double quotes.
func handleField(raw json.RawMessage, name string) string {
	var s string
	if json.Unmarshal(raw, &s) != nil || s == "" {
		var m map[string]any
		if json.Unmarshal(raw, &m) == nil {
			v, _ := m[name].(string)
			return v
		}
		return ""
	}
	var m map[string]any
	if json.Unmarshal([]byte(strings.ReplaceAll(s, "œ", `"`)), &m) != nil {
		return ""
	}
	v, _ := m[name].(string)
	return v
}

// IsExport reports whether data looks like a Langflow flow export (a JSON object with
// "data": {"nodes": [...]}) rather than a Sluice document.
func IsExport(data []byte) bool {
	var head struct {
		Sluice json.RawMessage `json:"sluice"`
		Data   *struct {
			Nodes json.RawMessage `json:"nodes"`
		} `json:"data"`
	}
	if json.Unmarshal(data, &head) != nil {
		return false
	}
	return head.Sluice == nil && head.Data != nil && bytes.HasPrefix(bytes.TrimSpace(head.Data.Nodes), []byte("["))
}

func (n *lfNode) field(name string) (field, bool) {
	raw, ok := n.Data.Node.Template[name]
	if !ok {
		return field{}, false
	}
	var f field
	if json.Unmarshal(raw, &f) != nil {
		return field{}, false
	}
	return f, true
}

// str is a field's value as text ("" when absent, null or not a scalar).
func (n *lfNode) str(name string) string {
	f, ok := n.field(name)
	if !ok || len(f.Value) == 0 {
		return ""
	}
	var s string
	if json.Unmarshal(f.Value, &s) == nil {
		return s
	}
	var num json.Number
	if json.Unmarshal(f.Value, &num) == nil {
		return num.String()
	}
	var b bool
	if json.Unmarshal(f.Value, &b) == nil {
		return strconv.FormatBool(b)
	}
	return ""
}

// number is a field's value as a number; ok is false when it is not one.
func (n *lfNode) number(name string) (float64, bool) {
	s := n.str(name)
	if s == "" {
		return 0, false
	}
	v, err := strconv.ParseFloat(s, 64)
	return v, err == nil
}

// flag is a field's value as a boolean (false when absent).
func (n *lfNode) flag(name string) bool {
	return n.str(name) == "true"
}

// value is a field's raw value (nil when absent).
func (n *lfNode) value(name string) json.RawMessage {
	f, ok := n.field(name)
	if !ok || string(f.Value) == "null" {
		return nil
	}
	return f.Value
}

// title is the node's display name; one that looks like a credential is not used (the
// node's id and label come from the title).
func (n *lfNode) title() string {
	if d := n.Data.Node.DisplayName; d != "" && !flows.LooksLikeCredential(d) {
		return d
	}
	return n.Data.Type
}

// isNote reports whether n is a sticky note.
func (n *lfNode) isNote() bool {
	return n.Type == "noteNode" || n.Data.Type == "note" || n.Data.Type == "Note"
}

func (n *lfNode) kindName() string {
	if n.Data.Type != "" {
		return n.Data.Type
	}
	return n.Type
}

func decode(data []byte) (*export, error) {
	var ex export
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&ex); err != nil {
		return nil, fmt.Errorf("not a Langflow export: %v", err)
	}
	if ex.Data == nil {
		return nil, fmt.Errorf("not a Langflow export: it has no \"data\" with \"nodes\" and \"edges\"")
	}
	for i, n := range ex.Data.Nodes {
		if n.ID == "" {
			return nil, fmt.Errorf("not a Langflow export: data.nodes[%d] has no id", i)
		}
	}
	return &ex, nil
}
