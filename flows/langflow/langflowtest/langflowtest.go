// Package langflowtest builds Langflow exports for tests: crafted shapes (long chains,
// repeated edges, credentials and template syntax in text) that are easier to generate
// than to keep as files. The exports have the shape the importer reads (nodes with
// data.type and data.node.template.<field>.value, edges with data.sourceHandle.name and
// data.targetHandle.fieldName, the handles also as Langflow's œ-quoted strings).
package langflowtest

import (
	"encoding/json"
	"fmt"
	"strings"
)

// Node is one Langflow node.
type Node struct {
	ID    string
	Type  string // data.type: "ChatInput", "Prompt", "TextInput", ...
	Title string // display_name; "" takes Type
	// Description is the component's description (an agent's tool describes itself with it).
	Description string
	Fields      map[string]any
	// Field attributes: password fields and global variables (load_from_db).
	Password   map[string]bool
	LoadFromDB map[string]bool
	Edited     bool
	// ToolMode is set on a component used as an agent's tool.
	ToolMode bool
	X, Y     float64
}

// Edge is one Langflow edge, from an output of a node into a field of another. An edge
// with no Field goes back into a Loop: its target handle names the loop's item output,
// as Langflow writes the edge that closes a loop.
type Edge struct {
	From, Output, To, Field string
}

// Export is a Langflow export with these nodes and edges, indented.
func Export(name string, nodes []Node, edges []Edge) []byte {
	var ns []any
	for _, n := range nodes {
		title := n.Title
		if title == "" {
			title = n.Type
		}
		tmpl := map[string]any{}
		for k, v := range n.Fields {
			f := map[string]any{"type": "str", "value": v, "name": k, "show": true}
			if n.Password[k] {
				f["password"] = true
			}
			if n.LoadFromDB[k] {
				f["load_from_db"] = true
			}
			tmpl[k] = f
		}
		ns = append(ns, map[string]any{
			"id": n.ID, "type": "genericNode",
			"position": map[string]any{"x": n.X, "y": n.Y},
			"data": map[string]any{"type": n.Type, "id": n.ID, "node": map[string]any{
				"display_name": title, "description": n.Description, "template": tmpl, "edited": n.Edited, "tool_mode": n.ToolMode,
			}},
		})
	}
	var es []any
	for i, e := range edges {
		src := map[string]any{"dataType": typeOf(nodes, e.From), "id": e.From, "name": e.Output, "output_types": []string{"Message"}}
		dst := map[string]any{"fieldName": e.Field, "id": e.To, "inputTypes": []string{"Message"}, "type": "str"}
		if e.Field == "" {
			dst = map[string]any{"dataType": typeOf(nodes, e.To), "id": e.To, "name": "item", "output_types": []string{"Data", "Message"}}
		}
		es = append(es, map[string]any{
			"id": fmt.Sprintf("reactflow__edge-%s-%s-%d", e.From, e.To, i), "source": e.From, "target": e.To,
			"sourceHandle": handle(src), "targetHandle": handle(dst),
			"data": map[string]any{"sourceHandle": src, "targetHandle": dst},
		})
	}
	b, err := json.MarshalIndent(map[string]any{"name": name, "description": "", "data": map[string]any{"nodes": ns, "edges": es}}, "", "  ")
	if err != nil {
		panic(err) // only maps, strings and numbers: it cannot fail
	}
	return b
}

func typeOf(nodes []Node, id string) string {
	for _, n := range nodes {
		if n.ID == id {
			return n.Type
		}
	}
	return ""
}

// handle writes a handle as Langflow does: its JSON with "œ" for the double quotes.
func handle(v map[string]any) string {
	b, _ := json.Marshal(v)
	return strings.ReplaceAll(string(b), `"`, "œ")
}

// Chain is a flow of links+1 text inputs in a row, each fed by the one before through
// copies edges, ending in a prompt that quotes the last one and a chat output. With
// sameField the copies are identical edges into the text's value (a Langflow export
// can hold such duplicates); otherwise they enter different fields, so that they are
// not duplicates and only a walk that visits each node once stays linear. A walk that
// follows every path visits copies^links of them.
func Chain(links, copies int, sameField bool) []byte {
	nodes := []Node{{ID: "TextInput-0", Type: "TextInput", Title: "Text 0", Fields: map[string]any{"input_value": "hello"}}}
	var edges []Edge
	for i := 1; i <= links; i++ {
		id := fmt.Sprintf("TextInput-%d", i)
		nodes = append(nodes, Node{ID: id, Type: "TextInput", Title: fmt.Sprintf("Text %d", i), X: float64(200 * i),
			Fields: map[string]any{"input_value": ""}})
		for k := range copies {
			field := "input_value"
			if !sameField && k > 0 {
				field = fmt.Sprintf("extra_%d", k)
			}
			edges = append(edges, Edge{From: fmt.Sprintf("TextInput-%d", i-1), Output: "text", To: id, Field: field})
		}
	}
	last := fmt.Sprintf("TextInput-%d", links)
	nodes = append(nodes,
		Node{ID: "Prompt-end", Type: "Prompt", Title: "Quote", X: float64(200 * (links + 1)),
			Fields: map[string]any{"template": "The text: {text}", "text": ""}},
		Node{ID: "ChatOutput-end", Type: "ChatOutput", Title: "Chat Output", X: float64(200 * (links + 2)),
			Fields: map[string]any{"input_value": ""}})
	for range copies {
		edges = append(edges,
			Edge{From: last, Output: "text", To: "Prompt-end", Field: "text"},
			Edge{From: "Prompt-end", Output: "prompt", To: "ChatOutput-end", Field: "input_value"})
	}
	return Export(fmt.Sprintf("chain of %d", links), nodes, edges)
}

// Credentials is a flow that carries key in every field the importer copies something
// from: a prompt's text (Langflow keeps it as typed), a model's key, name and base URL,
// a global variable that holds a key where a variable name belongs, an API request's
// URL, query and body, a node's name and the export's description. With unmapped, it
// also has a memory holding the key as its session, nodes without a Sluice equivalent
// (a hosted transcription service holding the key, an agent whose model provider is the
// key), which become placeholders, and a model named by the key.
func Credentials(key string, unmapped bool) []byte {
	nodes := []Node{
		{ID: "ChatInput-c", Type: "ChatInput", Title: "Chat Input", Fields: map[string]any{"input_value": "hi"}},
		{ID: "Prompt-p", Type: "Prompt", Title: "Prompt", X: 200,
			Fields: map[string]any{"template": "Use the key " + key + " to answer {q}", "q": ""}},
		{ID: "OpenAIModel-m", Type: "OpenAIModel", Title: "OpenAI", X: 400,
			Fields: map[string]any{"api_key": key, "model_name": "gpt-4o", "openai_api_base": "https://gw.example.com/v1?key=" + key,
				"system_message": "Authorization: Bearer " + key, "input_value": ""},
			Password: map[string]bool{"api_key": true}},
		{ID: "OpenAIModel-g", Type: "OpenAIModel", Title: "Second model", X: 400, Y: 200,
			Fields:     map[string]any{"api_key": key, "model_name": "gpt-4o-mini", "input_value": "ping"},
			LoadFromDB: map[string]bool{"api_key": true}},
		{ID: "APIRequest-r", Type: "APIRequest", Title: key, X: 600,
			Fields: map[string]any{"method": "POST", "urls": []string{"https://api.example.com/v1/" + key},
				"query_params": []map[string]any{{"key": "q", "value": key}, {"key": "api_key", "value": "plain-looking-value"}},
				"body":         []map[string]any{{"key": "note", "value": "sent with " + key}, {"key": "n", "value": 1}}}},
		{ID: "ChatOutput-o", Type: "ChatOutput", Title: "Chat Output", X: 800, Fields: map[string]any{"input_value": ""}},
	}
	edges := []Edge{
		{From: "ChatInput-c", Output: "message", To: "Prompt-p", Field: "q"},
		{From: "Prompt-p", Output: "prompt", To: "OpenAIModel-m", Field: "input_value"},
		{From: "OpenAIModel-m", Output: "text_output", To: "ChatOutput-o", Field: "input_value"},
	}
	if unmapped {
		nodes = append(nodes,
			Node{ID: "Memory-k", Type: "Memory", Title: "Chat Memory", Description: "Keeps " + key, Y: 400,
				Fields: map[string]any{"api_key": key, "session_id": key, "n_messages": 10}},
			Node{ID: "AssemblyAITranscriptionJobCreator-k", Type: "AssemblyAITranscriptionJobCreator", Title: "Transcribe", Description: "Uses " + key, Y: 500,
				Fields: map[string]any{"api_key": key, "audio_file_url": "https://files.example.com/a.mp3?token=" + key}},
			Node{ID: "Agent-a", Type: "Agent", Title: "Agent", Y: 600,
				Fields: map[string]any{"agent_llm": key, "api_key": key, "input_value": "", "system_prompt": key}},
			// A model without a name fails validation until it is given one: only here.
			Node{ID: "OpenAIModel-n", Type: "OpenAIModel", Title: "Third model", Y: 800,
				Fields: map[string]any{"model_name": key, "input_value": "ping"}})
		edges = append(edges, Edge{From: "ChatInput-c", Output: "message", To: "Agent-a", Field: "input_value"})
	}
	b := Export("Keys everywhere", nodes, edges)
	var ex map[string]any
	if err := json.Unmarshal(b, &ex); err != nil {
		panic(err)
	}
	ex["description"] = "Calls the API with " + key
	b, _ = json.MarshalIndent(ex, "", "  ")
	return b
}
