package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/sluicehq/sluice/flows/examples"
	"github.com/sluicehq/sluice/flows/nodes/mcptest"
	"github.com/sluicehq/sluice/store/storetest"
)

// The inspector of an mcp node lists the tools its server offers (those the node
// allows), connecting from the server as a worker would.
func TestBrowserInspectorListsAnMCPServersTools(t *testing.T) {
	rdb := storetest.Real(t)
	orders := mcptest.StartHTTP(t)
	flow := storetest.FlowID(t)
	storetest.DeleteFlowKeys(t, rdb, flow)
	b, err := examples.Read("support-mcp")
	if err != nil {
		t.Fatal(err)
	}
	var d map[string]any
	json.Unmarshal(b, &d)
	d["id"] = flow
	for _, n := range d["nodes"].([]any) {
		if n := n.(map[string]any); n["id"] == "orders" {
			n["params"].(map[string]any)["url"] = orders.URL
		}
	}
	dir := t.TempDir()
	b, _ = json.MarshalIndent(d, "", "  ")
	if err := os.WriteFile(filepath.Join(dir, flow+".json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	br := newBrowser(t, serveForBrowserEnv(t, dir, []string{"SLUICE_HTTP_ALLOW=127.0.0.1"}))
	br.open("/flows/" + flow)
	br.click(`.react-flow__node[data-id="orders"]`)
	br.click(`[data-mcp-list]`)
	br.waitText(`.mcp-tool-list`, "lookup_order")
	br.waitText(`.mcp-tool-list`, "Look an order up by id.")
	if n := evaluate[int](br, `document.querySelectorAll(".mcp-tool-list li").length`); n != 1 {
		t.Errorf("the inspector lists %d tools, want lookup_order only (the node's allow-list)", n)
	}
}
