package flows

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"strconv"
)

// Idempotency keys: every outbound call a step makes (an http request, an MCP tool call)
// carries a key that names that call, so that a receiver can do it once however often
// Sluice sends it. A step runs at least once — its worker may die after the call and
// before the commit, the sweeper then hands the step to another worker, a dead letter is
// retried — and each of those repeats sends the same key: it is derived from the run,
// the step's place in it (node, depth, fork branch) and the call within the step (an
// agent's tool call id, which a resumed agent replays from its saved turns). A replay is
// a new run and sends new keys, unless it asks to keep its origin's (Step.KeysOf).

type toolCallKey struct{}

// WithToolCall marks ctx as the context of one of a step's tool calls (the model's id of
// the call): the call's idempotency key includes it.
func WithToolCall(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, toolCallKey{}, id)
}

// IdempotencyKey is the key of the outbound call ctx makes in step s.
func (s *Step) IdempotencyKey(ctx context.Context) string {
	run := s.Run
	if s.KeysOf != "" {
		run = s.KeysOf
	}
	call, _ := ctx.Value(toolCallKey{}).(string)
	h := sha256.New()
	for _, part := range []string{s.Flow, run, s.Node, strconv.Itoa(s.Depth), s.Branch, call} {
		h.Write([]byte(part))
		h.Write([]byte{0})
	}
	return "sluice-" + hex.EncodeToString(h.Sum(nil)[:16])
}
