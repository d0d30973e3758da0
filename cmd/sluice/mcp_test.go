package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/sluicehq/sluice/flows/examples"
)

// An MCP client starts `sluice mcp` as its server (stdio), lists the flows it offers
// and calls one; progress notifications arrive while the run goes on.
func TestSluiceMCPServesFlowsOnStdio(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		id  string
		mcp bool
	}{{"linear", true}, {"approval", false}} {
		b, err := examples.Read(tc.id)
		if err != nil {
			t.Fatal(err)
		}
		var d map[string]any
		json.Unmarshal(b, &d)
		if tc.mcp {
			d["settings"] = map[string]any{"mcp": true}
		}
		b, _ = json.MarshalIndent(d, "", "  ")
		if err := os.WriteFile(filepath.Join(dir, tc.id+".json"), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command(binary, "mcp", "--flows", dir)
	cmd.Env = append(os.Environ(), "REDIS_URL=")
	var mu sync.Mutex
	var notes []string
	client := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
			mu.Lock()
			notes = append(notes, req.Params.Message)
			mu.Unlock()
		},
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	tools, err := s.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(tools.Tools) != 1 || tools.Tools[0].Name != "linear" || !strings.Contains(tools.Tools[0].Description, "three steps") {
		b, _ := json.Marshal(tools.Tools)
		t.Fatalf("tools %s, want linear only (approval does not set mcp)", b)
	}
	params := &mcp.CallToolParams{Name: "linear", Arguments: map[string]any{"name": "Grace"}}
	params.SetProgressToken(7)
	res, err := s.CallTool(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	if res.IsError || res.Content[0].(*mcp.TextContent).Text != `{"greeting":"HELLO, GRACE!"}` {
		b, _ := json.Marshal(res)
		t.Errorf("result %s", b)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		mu.Lock()
		got := strings.Join(notes, "; ")
		mu.Unlock()
		if strings.Contains(got, "node shout done") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("progress notifications %q, want the run's steps", got)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A malformed line on stdin gets a JSON-RPC error reply (parse error or invalid
// request, with the request's id when it has one) and `sluice mcp` goes on serving.
func TestSluiceMCPAnswersMalformedLinesAndGoesOn(t *testing.T) {
	cmd := exec.Command(binary, "mcp", "--flows", t.TempDir())
	cmd.Env = append(os.Environ(), "REDIS_URL=")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stdin.Close(); cmd.Wait() })
	replies := bufio.NewScanner(stdout)
	replies.Buffer(nil, 1<<20)
	ask := func(line string) map[string]any {
		t.Helper()
		if _, err := io.WriteString(stdin, line+"\n"); err != nil {
			t.Fatalf("writing %.40q: %v (the server is gone?)", line, err)
		}
		if !replies.Scan() {
			t.Fatalf("no reply to %.40q: %v (the server exited?)", line, replies.Err())
		}
		var m map[string]any
		if err := json.Unmarshal(replies.Bytes(), &m); err != nil {
			t.Fatalf("reply to %.40q is not JSON: %s", line, replies.Bytes())
		}
		return m
	}
	deep := strings.Repeat("[", 50000) + strings.Repeat("]", 50000)
	deepObject := strings.Repeat(`{"a":`, 50000) + "1" + strings.Repeat("}", 50000)
	for _, tc := range []struct {
		line string
		code float64
		id   any
	}{
		{"garbage", -32700, nil},
		{"{", -32700, nil},
		{"42", -32600, nil},
		{"[]", -32600, nil},
		{`[{"jsonrpc": "2.0", "id": 1, "method": "ping"}]`, -32600, nil},
		{`{"jsonrpc": "1.0", "id": 5, "method": "tools/list"}`, -32600, float64(5)},
		{`{"jsonrpc": "2.0", "id": "x", "method": 7}`, -32600, "x"},
		{deep, -32700, nil},
		{deepObject, -32700, nil},
	} {
		m := ask(tc.line)
		e, _ := m["error"].(map[string]any)
		if m["jsonrpc"] != "2.0" || e == nil || e["code"] != tc.code || m["id"] != tc.id {
			t.Errorf("reply to %.40q: %v, want error %v with id %v", tc.line, m, tc.code, tc.id)
		}
		if _, ok := m["id"]; !ok {
			t.Errorf("reply to %.40q has no id (JSON-RPC asks for null): %v", tc.line, m)
		}
	}
	// Still serving: a session starts and answers.
	init := ask(`{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}}`)
	if _, ok := init["result"]; !ok {
		t.Fatalf("initialize after malformed lines: %v", init)
	}
	io.WriteString(stdin, `{"jsonrpc": "2.0", "method": "notifications/initialized"}`+"\n")
	if list := ask(`{"jsonrpc": "2.0", "id": 2, "method": "tools/list"}`); list["result"] == nil {
		t.Errorf("tools/list after malformed lines: %v", list)
	}
}

// The operator's allow-lists are checked at start: a launcher's line with a placeholder
// and an environment name that runs code stop the command with exit 2 and say why.
func TestMCPAllowListsAreCheckedAtStart(t *testing.T) {
	flow := filepath.Join(t.TempDir(), "f.json")
	b, _ := examples.Read("linear")
	os.WriteFile(flow, b, 0o644)
	for _, tc := range []struct{ flag, value, says string }{
		{"--mcp-commands", "npx -y {package}", "shell on the worker"},
		{"--mcp-commands", "github-mcp-server 'stdio", "not closed"},
		{"--mcp-env", "LOG_LEVEL,NODE_OPTIONS", "NODE_OPTIONS cannot be allowed"},
	} {
		out, err := exec.Command(binary, "validate", tc.flag, tc.value, flow).CombinedOutput()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 2 || !strings.Contains(string(out), tc.says) || !strings.Contains(string(out), tc.flag) {
			t.Errorf("%s %q: %v %s; want exit 2 saying %q", tc.flag, tc.value, err, out, tc.says)
		}
	}
	if out, err := exec.Command(binary, "validate", "--mcp-commands", "npx -y @modelcontextprotocol/server-github,srv {dir}",
		"--mcp-env", "GITHUB_PERSONAL_ACCESS_TOKEN", flow).CombinedOutput(); err != nil {
		t.Errorf("allowed lists: %v %s", err, out)
	}
}
