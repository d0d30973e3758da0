package nodes

// These components only evaluate jq or templates: workers run them inline.

// Inline reports that Input runs without I/O.
func (*Input) Inline() bool { return true }

// Inline reports that Output runs without I/O.
func (*Output) Inline() bool { return true }

// Inline reports that Transform runs without I/O.
func (*Transform) Inline() bool { return true }

// Inline reports that Fanout runs without I/O.
func (*Fanout) Inline() bool { return true }

// Inline reports that Approval runs without I/O (it parks or applies a decision).
func (*Approval) Inline() bool { return true }

// Inline reports that a rules router runs without I/O; an LLM router calls a model.
func (r *Router) Inline() bool { return !r.llm }

// Inline reports that Template runs without I/O.
func (*Template) Inline() bool { return true }

// Inline reports that Data, as a step, runs without I/O.
func (*Data) Inline() bool { return true }

// These components' steps finish in bounded time when their jq has one of the shapes
// evaluated without gojq (flows/jqfast.go): workers arm no deadline for them.

// Bounded reports that Input only passes its input on.
func (*Input) Bounded() bool { return true }

// Bounded reports whether Output's value expression is bounded.
func (o *Output) Bounded() bool { return o.value.Bounded() }

// Bounded reports whether Transform's expression is bounded.
func (t *Transform) Bounded() bool { return t.expr.Bounded() }
