package bench

import (
	"encoding/json"
	"net"
	"net/http"
	"time"
)

// The agent shape's model: a no-op chat model speaking the OpenAI protocol on loopback.
// Its first reply in a conversation calls the tool "lookup"; once the conversation ends
// with the tool's result it answers. So every run of the shape makes two model calls and
// one tool call, and the model itself costs next to nothing.

// agentTool is the tool the model calls, and the query it asks for.
const (
	agentTool  = "lookup"
	agentQuery = `{"query": ".n"}`
)

// startModel serves the model until stop is called; url is its base URL (…/v1).
func startModel() (url string, stop func(), err error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	srv := &http.Server{Handler: http.HandlerFunc(serveModel), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	return "http://" + ln.Addr().String() + "/v1", func() { _ = srv.Close() }, nil
}

var (
	toolCallReply = mustJSON(map[string]any{
		"id": "bench", "object": "chat.completion", "created": 0, "model": "bench",
		"choices": []any{map[string]any{"index": 0, "finish_reason": "tool_calls", "message": map[string]any{
			"role": "assistant", "content": nil,
			"tool_calls": []any{map[string]any{"id": "call_1", "type": "function",
				"function": map[string]any{"name": agentTool, "arguments": agentQuery}}},
		}}},
		"usage": map[string]any{"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
	})
	answerReply = mustJSON(map[string]any{
		"id": "bench", "object": "chat.completion", "created": 0, "model": "bench",
		"choices": []any{map[string]any{"index": 0, "finish_reason": "stop",
			"message": map[string]any{"role": "assistant", "content": "done"}}},
		"usage": map[string]any{"prompt_tokens": 20, "completion_tokens": 1, "total_tokens": 21},
	})
)

func serveModel(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Messages []struct {
			Role string `json:"role"`
		} `json:"messages"`
	}
	if r.Method != http.MethodPost || json.NewDecoder(r.Body).Decode(&req) != nil {
		http.Error(w, `{"error": {"message": "a chat completion request, please"}}`, http.StatusBadRequest)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	if n := len(req.Messages); n > 0 && req.Messages[n-1].Role == "tool" {
		_, _ = w.Write(answerReply)
		return
	}
	_, _ = w.Write(toolCallReply)
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}
