package langflow

// Langflow's MCP Tools, as an mcp node of the agent.

import (
	"encoding/json"
	"strings"

	"github.com/sluicehq/sluice/flows"
)

// mcpParams are an MCP Tools component's server and tools as the mcp component's.
func (c *conv) mcpParams(n *lfNode) map[string]any {
	var server struct {
		Name   string         `json:"name"`
		Config map[string]any `json:"config"`
	}
	_ = json.Unmarshal(n.value("mcp_server"), &server)
	p := map[string]any{}
	cfg := server.Config
	url, _ := cfg["url"].(string)
	command, _ := cfg["command"].(string)
	name := server.Name
	if flows.LooksLikeCredential(name) {
		name = ""
	}
	switch {
	case url != "" && !flows.LooksLikeCredential(url) && validURL(url):
		p["url"] = url
		if hs, ok := cfg["headers"].(map[string]any); ok && len(hs) > 0 {
			headers := map[string]any{}
			// No value is copied: any header of an MCP server may carry its key.
			for k := range hs {
				if flows.LooksLikeCredential(k) {
					continue
				}
				env := flows.SecretPrefix + strings.ToUpper(strings.Trim(idChars.ReplaceAllString(strings.ToLower(c.ids[n.ID]+"_"+k), "_"), "_"))
				headers[k] = map[string]any{"$env": env}
				c.note(n, "header %s became a reference to the environment variable %s; its value was not copied", k, env)
			}
			p["headers"] = headers
		}
	case command != "" && !flows.LooksLikeCredential(command):
		p["command"] = command
		var args []string
		if list, ok := cfg["args"].([]any); ok {
			for _, a := range list {
				if s, ok := a.(string); ok && !flows.LooksLikeCredential(s) {
					args = append(args, s)
				}
			}
		}
		if len(args) > 0 {
			p["args"] = args
		}
		c.note(n, "the MCP server runs as %s: the worker must allow that command line (--mcp-commands); its environment was not copied", command)
	default:
		env := flows.SecretPrefix + strings.ToUpper(strings.Trim(idChars.ReplaceAllString(strings.ToLower(c.ids[n.ID]+"_url"), "_"), "_"))
		p["url"] = map[string]any{"$env": env}
		if name != "" {
			c.note(n, "the MCP server %q is configured in Langflow, not in the export: the worker reads its Streamable HTTP URL from the environment variable %s", name, env)
		} else {
			c.note(n, "the export does not say which MCP server: the worker reads its Streamable HTTP URL from the environment variable %s", env)
		}
	}
	var meta []struct {
		Name   string `json:"name"`
		Status *bool  `json:"status"`
	}
	var tools []string
	if json.Unmarshal(n.value("tools_metadata"), &meta) == nil {
		all := true
		for _, m := range meta {
			if m.Status != nil && !*m.Status {
				all = false
				continue
			}
			if m.Name != "" && !flows.LooksLikeCredential(m.Name) {
				tools = append(tools, m.Name)
			}
		}
		if all {
			tools = nil // every tool the server has
		}
	}
	if len(tools) > 0 {
		p["tools"] = tools
	}
	return p
}
