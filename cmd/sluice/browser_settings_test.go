package main

// Browser tests of the flow settings that open a flow to other tools (issue 16): the
// inspector's controls for settings.mcp and settings.budget, and the API panel's
// snippets that call a flow as an MCP tool and as an OpenAI-compatible model.

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/sluicehq/sluice/flows/nodes/llmtest"
	"github.com/sluicehq/sluice/store/storetest"
)

// goRunWithModules runs a Go snippet that imports modules this repository uses, as its
// own module resolved from the local module cache (nothing is downloaded).
func goRunWithModules(t *testing.T, env []string, code string) string {
	t.Helper()
	dir := t.TempDir()
	mod := regexp.MustCompile(`(?m)^module .*$`).ReplaceAllString(mustRead(t, filepath.Join("..", "..", "go.mod")), "module snippet")
	for name, text := range map[string]string{"go.mod": mod, "go.sum": mustRead(t, filepath.Join("..", "..", "go.sum")), "main.go": code} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	wd, _ := os.Getwd()
	defer os.Chdir(wd)
	if err := os.Chdir(dir); err != nil {
		t.Fatal(err)
	}
	return runSnippet(t, append(env, "GOFLAGS=-mod=mod", "GOPROXY=off", "GOWORK=off", "GO111MODULE=on"), "go", "run", ".")
}

// checkSyntax parses a Python or JavaScript snippet without running it (its SDK is not
// installed here): a snippet that cannot even parse fails.
func checkSyntax(t *testing.T, lang, code string) {
	t.Helper()
	switch lang {
	case "python":
		runSnippet(t, nil, "python3", "-c", "import ast, sys; ast.parse(sys.argv[1])", code)
	case "javascript":
		f := filepath.Join(t.TempDir(), "snippet.mjs")
		if err := os.WriteFile(f, []byte(code), 0o644); err != nil {
			t.Fatal(err)
		}
		runSnippet(t, nil, "node", "--check", f)
	}
}

// clickEmptyCanvas clicks a point of the canvas where there is neither node nor edge:
// nothing is selected then, and the inspector shows the flow.
func (b *browser) clickEmptyCanvas() {
	b.t.Helper()
	p := evaluate[point](b, `(() => {
		const r = document.querySelector(".react-flow__pane").getBoundingClientRect();
		for (let y = r.top + 10; y < r.bottom; y += 15)
			for (let x = r.left + 10; x < r.right; x += 15)
				if (document.elementFromPoint(x, y)?.classList.contains("react-flow__pane")) return {X: x, Y: y};
		return {X: -1, Y: -1};
	})()`)
	if p.X < 0 {
		b.t.Fatal("the canvas has no empty point")
	}
	b.run("click the empty canvas", chromedp.MouseClickXY(p.X, p.Y))
}

// savedSettings reads the settings of the flow's saved file.
func savedSettings(t *testing.T, dir, flow string) map[string]any {
	t.Helper()
	var doc struct {
		Settings map[string]any `json:"settings"`
	}
	if err := json.Unmarshal([]byte(mustRead(t, filepath.Join(dir, flow+".json"))), &doc); err != nil {
		t.Fatal(err)
	}
	return doc.Settings
}

// The flow inspector exposes a flow as an MCP tool with a checkbox and sets its budget
// in four number fields; saved, the flow's file has them, and the API panel shows how
// an MCP client calls it — a snippet that, run as it is, gets the flow's output.
func TestBrowserFlowSettingsExposeAnMCPToolAndSetABudget(t *testing.T) {
	rdb := storetest.Real(t)
	flowID := storetest.FlowID(t)
	storetest.DeleteFlowKeys(t, rdb, flowID)
	dir := t.TempDir()
	writeDoc(t, dir, exampleDoc(t, "linear", flowID))
	const token = "settings-token-4d2e9b"
	base := serveForBrowser(t, dir, "--token", token)
	b := newBrowser(t, base)
	b.open("/flows/" + flowID + "?token=" + token)
	b.waitFor("the editor", `document.querySelectorAll(".react-flow__node").length === 4`)
	b.click("#api-tab")
	b.waitText(".api-panel", "SLUICE_TOKEN")
	if evaluate[bool](b, `!!document.querySelector('[data-snippet="mcp"]') || !!document.querySelector('[data-snippet="chat"]')`) {
		t.Error("the API panel offers an MCP or chat snippet for a flow that is neither offered over MCP nor takes messages")
	}

	b.clickEmptyCanvas()
	b.click(".side-panel [role=tab]:first-child") // Inspect
	b.waitFor("the flow inspector", `!!document.querySelector('[aria-label="flow"] input[data-setting="mcp"]')`)
	if evaluate[bool](b, `document.querySelector('input[data-setting="mcp"]').checked`) {
		t.Error("a flow without settings.mcp shows as exposed")
	}
	b.click(`input[data-setting="mcp"]`)
	b.typeInto(`[data-setting="budget"] input[data-param="run_tokens"]`, "20000")
	b.typeInto(`[data-setting="budget"] input[data-param="day_usd"]`, "1.5")
	b.waitFor("the raw settings JSON following the controls", `(() => { const s = JSON.parse(document.querySelector('[data-param="settings"]').value); return s.mcp === true && s.budget.run_tokens === 20000 && s.budget.day_usd === 1.5; })()`)
	b.typeInto(`[data-setting="budget"] input[data-param="run_tokens"]`, "-3")
	b.waitText(`[data-setting="budget"]`, "at least 0")
	b.typeInto(`[data-setting="budget"] input[data-param="run_tokens"]`, "20000")
	b.click("#save-button")
	b.waitFor("saved", `document.querySelector("#save-state").innerText === "Saved"`)
	got, _ := json.Marshal(savedSettings(t, dir, flowID))
	if string(got) != `{"budget":{"day_usd":1.5,"run_tokens":20000},"mcp":true}` {
		t.Errorf("the saved flow's settings are %s", got)
	}
	b.shot("editor-flow-settings")

	// The API panel now shows the MCP client's side, in every language.
	b.click("#api-tab")
	b.waitFor("the MCP snippet", `!!document.querySelector('[data-snippet="mcp"]')`)
	var config struct {
		MCPServers map[string]struct {
			Type, URL string
			Headers   map[string]string
		} `json:"mcpServers"`
	}
	if err := json.Unmarshal([]byte(b.snippet("curl", "mcp")), &config); err != nil {
		t.Fatalf("the MCP client config is not JSON: %v", err)
	}
	if s := config.MCPServers["sluice"]; s.URL != base+"/mcp" || s.Headers["Authorization"] != "Bearer ${SLUICE_TOKEN}" {
		t.Errorf("the MCP client config %+v", config)
	}
	env := []string{"SLUICE_TOKEN=" + token}
	if out := goRunWithModules(t, env, b.snippet("go", "mcp")); !strings.HasPrefix(out, "false ") || !strings.Contains(out, "HELLO, ADA!") {
		t.Errorf("the Go MCP snippet printed:\n%s", out)
	}
	for _, lang := range []string{"python", "javascript"} {
		code := b.snippet(lang, "mcp")
		if !strings.Contains(code, base+"/mcp") || !strings.Contains(code, fmt.Sprintf("%q", flowID)) {
			t.Errorf("the %s MCP snippet lacks the server or the tool:\n%s", lang, code)
		}
		checkSyntax(t, lang, code)
	}

	// Unchecked, the flow is no longer exposed and the panel stops offering the snippet.
	b.click(".side-panel [role=tab]:first-child")
	b.click(`input[data-setting="mcp"]`)
	b.waitFor("settings.mcp gone", `!("mcp" in JSON.parse(document.querySelector('[data-param="settings"]').value))`)
	b.click("#api-tab")
	b.waitFor("no MCP snippet", `!!document.querySelector('[data-snippet="start"]') && !document.querySelector('[data-snippet="mcp"]')`)
}

// A flow whose input takes chat messages gets a /v1/chat/completions snippet in the API
// panel; run as it is, it gets the model's reply through the flow.
func TestBrowserTheAPIPanelCallsAChatFlowAsAModel(t *testing.T) {
	rdb := storetest.Real(t)
	flowID := storetest.FlowID(t)
	storetest.DeleteFlowKeys(t, rdb, flowID)
	model := llmtest.New(t)
	model.Respond(func(llmtest.Request) llmtest.Reply { return llmtest.Text("Streams are append-only logs.") })
	dir := t.TempDir()
	writeDoc(t, dir, exampleDoc(t, "chat", flowID))
	const token = "chat-token-7c1f0a"
	base := serveForBrowserEnv(t, dir, []string{"OPENAI_BASE_URL=" + model.URL, "OPENAI_API_KEY=test-key", "SLUICE_PROVIDERS="}, "--token", token)
	b := newBrowser(t, base)
	b.open("/flows/" + flowID + "?token=" + token)
	b.waitFor("the editor", `document.querySelectorAll(".react-flow__node").length === 3`)
	b.click("#api-tab")
	b.waitFor("the chat snippet", `!!document.querySelector('[data-snippet="chat"]')`)
	env := []string{"SLUICE_TOKEN=" + token}

	curl := b.snippet("curl", "chat")
	var reply struct {
		Model   string
		Choices []struct{ Message struct{ Content string } }
	}
	if err := json.Unmarshal([]byte(runSnippet(t, env, "sh", "-c", curl)), &reply); err != nil || reply.Model != flowID ||
		len(reply.Choices) != 1 || !strings.Contains(reply.Choices[0].Message.Content, "Streams are append-only logs.") {
		t.Errorf("the curl chat snippet answered %+v (%v):\n%s", reply, err, curl)
	}
	if out := goRunWithModules(t, env, b.snippet("go", "chat")); !strings.Contains(out, "Streams are append-only logs.") {
		t.Errorf("the Go chat snippet printed:\n%s", out)
	}
	for _, lang := range []string{"python", "javascript"} {
		code := b.snippet(lang, "chat")
		if !strings.Contains(code, base+"/v1") || !strings.Contains(code, fmt.Sprintf("%q", flowID)) {
			t.Errorf("the %s chat snippet lacks the server or the model:\n%s", lang, code)
		}
		checkSyntax(t, lang, code)
	}
	b.center(`[data-snippet="chat"]`) // scrolled into view
	b.shot("editor-api-chat")
}
