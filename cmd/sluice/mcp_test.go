package main

import (
	"context"
	"encoding/json"
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
