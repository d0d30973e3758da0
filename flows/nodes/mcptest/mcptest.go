// Package mcptest is a Model Context Protocol server built with the official Go SDK, for
// tests: over stdio in a child process (the test binary itself, see ServeStdioIfAsked)
// and over Streamable HTTP on loopback. Its tools add numbers, look orders up, fail,
// wait until the test lets them answer, and kill their own process. It is for tests only.
package mcptest

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// StdioEnv is the environment variable that makes a test binary serve MCP on stdio
// (ServeStdioIfAsked) instead of running its tests. With the value "stderr" it instead
// prints its environment variable MCPTEST_TOKEN to stderr and exits with status 1, like a
// server that fails to start and says why with what it was given.
const StdioEnv = "MCPTEST_SERVE_STDIO"

// TokenEnv is the variable the "stderr" mode prints (see StdioEnv).
const TokenEnv = "MCPTEST_TOKEN"

// Server is the test server's tools and what they were asked.
type Server struct {
	*mcp.Server

	mu      sync.Mutex
	calls   map[string]int
	metas   []map[string]any // the _meta of every call of "add"
	release chan struct{}
	waiting chan struct{} // receives when "wait" is called
}

// AddArgs are the arguments of "add".
type AddArgs struct {
	A float64 `json:"a" jsonschema:"the first number"`
	B float64 `json:"b" jsonschema:"the second number"`
}

// OrderArgs are the arguments of "lookup_order".
type OrderArgs struct {
	ID string `json:"id" jsonschema:"the order id, e.g. A-1"`
}

// GetenvArgs are the arguments of "getenv".
type GetenvArgs struct {
	Name string `json:"name" jsonschema:"the variable's name"`
}

// Order is what "lookup_order" answers.
type Order struct {
	ID     string `json:"id"`
	Status string `json:"status"`
	Table  string `json:"table"`
	Rows   int    `json:"rows"`
}

// New returns the server with its tools:
//
//	add          {a, b} -> a + b
//	lookup_order {id}   -> the order (structured)
//	fail         {}     -> a tool error: "the order database is down"
//	wait         {}     -> "released" once the test calls Release
//	die          {}     -> the process exits with status 3 before answering
//	getenv       {name} -> the value of the server's environment variable name (a
//	                       server that echoes what it was given, a secret too)
func New() *Server {
	s := &Server{Server: mcp.NewServer(&mcp.Implementation{Name: "mcptest", Version: "1"}, nil),
		calls: map[string]int{}, release: make(chan struct{}), waiting: make(chan struct{}, 100)}
	mcp.AddTool(s.Server, &mcp.Tool{Name: "add", Description: "Add two numbers."},
		func(ctx context.Context, req *mcp.CallToolRequest, in AddArgs) (*mcp.CallToolResult, any, error) {
			s.count("add")
			s.mu.Lock()
			s.metas = append(s.metas, req.Params.Meta)
			s.mu.Unlock()
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprint(in.A + in.B)}}}, nil, nil
		})
	mcp.AddTool(s.Server, &mcp.Tool{Name: "lookup_order", Description: "Look an order up by id."},
		func(ctx context.Context, _ *mcp.CallToolRequest, in OrderArgs) (*mcp.CallToolResult, Order, error) {
			s.count("lookup_order")
			return nil, Order{ID: in.ID, Status: "report slow", Table: "orders", Rows: 120000000}, nil
		})
	mcp.AddTool(s.Server, &mcp.Tool{Name: "fail", Description: "Always fails."},
		func(ctx context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
			s.count("fail")
			return nil, nil, errors.New("the order database is down")
		})
	mcp.AddTool(s.Server, &mcp.Tool{Name: "wait", Description: "Answers when the test lets it."},
		func(ctx context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
			s.count("wait")
			s.waiting <- struct{}{}
			select {
			case <-s.release:
			case <-ctx.Done():
				return nil, nil, ctx.Err()
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "released"}}}, nil, nil
		})
	mcp.AddTool(s.Server, &mcp.Tool{Name: "getenv", Description: "Tells the value of one of the server's environment variables."},
		func(ctx context.Context, _ *mcp.CallToolRequest, in GetenvArgs) (*mcp.CallToolResult, any, error) {
			s.count("getenv")
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: in.Name + "=" + os.Getenv(in.Name)}}}, nil, nil
		})
	mcp.AddTool(s.Server, &mcp.Tool{Name: "die", Description: "Kills the server's process."},
		func(ctx context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
			os.Exit(3)
			return nil, nil, nil
		})
	return s
}

func (s *Server) count(tool string) {
	s.mu.Lock()
	s.calls[tool]++
	s.mu.Unlock()
}

// Calls is how often tool was called.
func (s *Server) Calls(tool string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls[tool]
}

// Metas are the _meta of every call of "add", in order.
func (s *Server) Metas() []map[string]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]map[string]any(nil), s.metas...)
}

// Waiting receives once for every call of "wait" that has started.
func (s *Server) Waiting() <-chan struct{} { return s.waiting }

// Release lets every call of "wait" answer, now and later.
func (s *Server) Release() {
	s.mu.Lock()
	defer s.mu.Unlock()
	select {
	case <-s.release:
	default:
		close(s.release)
	}
}

// HTTP is the server on loopback over Streamable HTTP.
type HTTP struct {
	*Server
	// URL is the MCP endpoint.
	URL string
	srv *httptest.Server

	hmu     sync.Mutex
	headers http.Header // of the last request
}

// StartHTTP serves New() over Streamable HTTP until the test ends.
func StartHTTP(t testing.TB) *HTTP {
	s := New()
	h := &HTTP{Server: s}
	mh := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s.Server }, nil)
	h.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.hmu.Lock()
		h.headers = r.Header.Clone()
		h.hmu.Unlock()
		mh.ServeHTTP(w, r)
	}))
	t.Cleanup(func() {
		s.Release()
		h.srv.CloseClientConnections()
		h.srv.Close()
	})
	h.URL = h.srv.URL + "/mcp"
	return h
}

// Header is a header of the last request the server received.
func (h *HTTP) Header(name string) string {
	h.hmu.Lock()
	defer h.hmu.Unlock()
	return h.headers.Get(name)
}

// Kill drops every connection and stops serving, like a server that died.
func (h *HTTP) Kill() {
	h.srv.CloseClientConnections()
	h.srv.Listener.Close()
}

// ServeStdioIfAsked serves New() on stdin and stdout and exits when StdioEnv is set; a
// test package's TestMain calls it first, so the test binary is also the MCP server
// that stdio tests start.
func ServeStdioIfAsked() {
	switch os.Getenv(StdioEnv) {
	case "":
		return
	case "stderr":
		fmt.Fprintf(os.Stderr, "mcptest: cannot log in with token %s\n", os.Getenv(TokenEnv))
		os.Exit(1)
	}
	err := New().Run(context.Background(), &mcp.StdioTransport{})
	if err != nil && !errors.Is(err, mcp.ErrConnectionClosed) {
		fmt.Fprintln(os.Stderr, "mcptest:", err)
		os.Exit(1)
	}
	os.Exit(0)
}
