package flows

import (
	"context"
	"encoding/json"
)

// Component is a compiled node: what a worker runs for one step. Implementations must be
// safe for concurrent use; one instance serves every run of a plan.
type Component interface {
	Run(ctx context.Context, step *Step) (*Result, error)
}

// Inliner is implemented by components whose steps finish in microseconds without I/O
// (jq, templates). Workers run such steps in their read loop and send their commits in
// one pipeline per read, instead of a goroutine and a commit queue each.
type Inliner interface {
	Inline() bool
}

// Bounder is implemented by inline components whose steps, as compiled, finish in time
// bounded by their parameters' size (a jq expression of the shapes in jqfast.go):
// workers arm no deadline timer for their steps.
type Bounder interface {
	Bounded() bool
}

// Tool is a component an agent can call through its tools port.
type Tool interface {
	// ToolDef describes the tool to the model.
	ToolDef() ToolDef
	// Call runs the tool with the model's arguments for the step that asked.
	Call(ctx context.Context, step *Step, args json.RawMessage) (any, error)
}

// ToolDef is a tool as a model sees it.
type ToolDef struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters"` // JSON Schema of the arguments
}

// Step is one activation of a node as its component sees it.
type Step struct {
	Flow    string
	Run     string
	Node    string
	Version string
	Depth   int // steps along this activation's line since the run started (what max_steps bounds)
	Attempt int // 1 for the first delivery
	// Branch is the activation's fork tokens: with Node and Depth, where the step is in
	// its run (the branches of a fanout run one node at one depth). IdempotencyKey
	// derives the keys of the step's outbound calls from them.
	Branch string
	// KeysOf, when set, is the run whose idempotency keys this step's calls send instead
	// of its own: a replay that asks to keep its origin's side effects single.
	KeysOf string

	// Input is the state as the node's input selector sees it ("." by default).
	Input any
	// State is the whole run state, read-only; the data tool queries it.
	State map[string]any
	// Resume is the human input when an approval is resumed, else nil.
	Resume json.RawMessage
	// Tools are the tools attached to the node's tools port, by tool name.
	Tools map[string]Tool
	// Emit publishes a live event (such as streamed LLM tokens) for this step.
	// It never blocks the step for long and may drop events under load.
	Emit func(kind string, data any)
	// Turns are what an earlier attempt of this same step saved with SaveTurn, oldest
	// first: an agent whose worker crashed mid-loop resumes from them instead of
	// repeating finished model turns and tool calls. Empty on a first attempt.
	Turns []json.RawMessage
	// SaveTurn durably records one turn of a long step (a model reply, a tool result) as
	// a "turn" entry in the run's checkpoint history. It fails when another worker has
	// taken the step over.
	SaveTurn func(ctx context.Context, turn any) error
}

// Result is what one step produced.
type Result struct {
	// Output is the node's output value: shown in the UI and, through the node's output
	// mapping, turned into the state update.
	Output any
	// Update is merged into the state with the flow's reducers. When the node has an
	// output mapping, the runtime computes Update from Output instead.
	Update map[string]any
	// Ports are the output ports the step chose (a router's route). Nil means every
	// output port of the node.
	Ports []string
	// Items, for a fanout, start one branch per item.
	Items []any
	// Wait parks the run until a person resumes it (approval).
	Wait *Wait
	// Final marks the output of an output node: it becomes (part of) the run's output.
	Final bool
	// Usage counts the tokens the step spent.
	Usage Usage
	// Turns are turns of the step saved with its commit instead of one by one with
	// Step.SaveTurn: the last ones, after which the step pays for and changes nothing
	// (an agent's final model reply, the results of tools that only read the state
	// before it). They reach the run's history as SaveTurn's do, with one write fewer
	// each; an attempt that dies before its commit loses them, and the next one makes
	// them again. Only a step with a SaveTurn may return them.
	Turns []any
	// StateBytes is how many bytes of state the step showed to a model, so the saving of
	// the data tool is visible.
	StateBytes int
	// Pinned says the step did not run: its result is what the run pinned for the node.
	Pinned bool
}

// Wait is what an approval step asks a person.
type Wait struct {
	Prompt  string   `json:"prompt"`
	Data    any      `json:"data,omitempty"`
	Timeout Duration `json:"timeout,omitzero"`
	// OnTimeout is the decision taken when Timeout passes: "approve" or "reject".
	OnTimeout string `json:"on_timeout,omitempty"`
}

// Usage is token usage of one step or a whole run. InputTokens counts every prompt
// token, cached ones included; CacheReadTokens and CacheWriteTokens say how many of them
// a provider with prompt caching (Anthropic) read from or wrote to its cache. Runs total
// only input and output tokens; the cache figures are kept per step.
type Usage struct {
	InputTokens      int64 `json:"input_tokens"`
	OutputTokens     int64 `json:"output_tokens"`
	CacheReadTokens  int64 `json:"cache_read_tokens,omitempty"`
	CacheWriteTokens int64 `json:"cache_write_tokens,omitempty"`
	// CostUSD is what the tokens cost at the provider's prices (0 when it has none), as
	// estimated when the model answered.
	CostUSD float64 `json:"cost_usd,omitempty"`
}

// Add returns the sum of two usages.
func (u Usage) Add(o Usage) Usage {
	return Usage{u.InputTokens + o.InputTokens, u.OutputTokens + o.OutputTokens,
		u.CacheReadTokens + o.CacheReadTokens, u.CacheWriteTokens + o.CacheWriteTokens, u.CostUSD + o.CostUSD}
}

// Total is input plus output tokens.
func (u Usage) Total() int64 { return u.InputTokens + u.OutputTokens }
