package flows

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/itchyny/gojq"
)

// JQTimeout bounds every jq evaluation: conditions, selectors, mappings and the data tool.
const JQTimeout = 2 * time.Second

// JQ is a compiled jq expression. Expressions see the variable $state (the whole run
// state) and nothing of the process: no environment, no files, no input.
type JQ struct {
	src  string
	code *gojq.Code
	fast fastFn // nil: every evaluation runs gojq (jqfast.go)
}

// CompileJQ parses and compiles a jq expression.
func CompileJQ(src string) (*JQ, error) {
	q, err := gojq.Parse(src)
	if err != nil {
		return nil, fmt.Errorf("jq: %v", err)
	}
	code, err := gojq.Compile(q,
		gojq.WithVariables([]string{"$state"}),
		gojq.WithEnvironLoader(func() []string { return nil }),
		gojq.WithInputIter(gojq.NewIter[any]()),
	)
	if err != nil {
		return nil, fmt.Errorf("jq: %v", err)
	}
	return &JQ{src: src, code: code, fast: compileFast(q)}, nil
}

// Bounded reports whether the expression is one of the shapes evaluated without gojq's
// machine (jqfast.go): one output, in time bounded by the expression's size, so that no
// deadline needs arming for it. Where such an evaluation leaves the decision to gojq
// (an error to word), gojq runs under JQTimeout as always.
func (q *JQ) Bounded() bool { return q != nil && q.fast != nil }

// String is the expression's source.
func (q *JQ) String() string { return q.src }

// ErrJQTimeout is returned when an expression runs past its deadline.
var ErrJQTimeout = errors.New("jq expression ran past its deadline")

// All evaluates the expression on v and returns every output. It stops at ctx's
// deadline or JQTimeout, whichever is first.
func (q *JQ) All(ctx context.Context, v any, state map[string]any) ([]any, error) {
	if q.fast != nil {
		if x, ok := q.fast(normalize(v), state); ok {
			return []any{x}, nil
		}
	}
	ctx, cancel := context.WithTimeout(ctx, JQTimeout)
	defer cancel()
	iter := q.code.RunWithContext(ctx, normalize(v), normalizeState(state))
	var out []any
	for {
		x, ok := iter.Next()
		if !ok {
			return out, nil
		}
		if err, isErr := x.(error); isErr {
			if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
				return nil, fmt.Errorf("%w (%s)", ErrJQTimeout, JQTimeout)
			}
			var halt *gojq.HaltError
			if errors.As(err, &halt) && halt.Value() == nil {
				return out, nil
			}
			return nil, fmt.Errorf("jq: %v", err)
		}
		out = append(out, x)
	}
}

// First evaluates the expression and returns its first output, or nil when it has none.
func (q *JQ) First(ctx context.Context, v any, state map[string]any) (any, error) {
	if q.fast != nil {
		if x, ok := q.fast(normalize(v), state); ok {
			return x, nil
		}
	}
	all, err := q.All(ctx, v, state)
	if err != nil || len(all) == 0 {
		return nil, err
	}
	return all[0], nil
}

// Truthy evaluates the expression as a condition: true when its first output is neither
// false nor null.
func (q *JQ) Truthy(ctx context.Context, v any, state map[string]any) (bool, error) {
	x, err := q.First(ctx, v, state)
	if err != nil {
		return false, err
	}
	return x != nil && x != false, nil
}

func normalizeState(s map[string]any) any {
	if s == nil {
		return map[string]any{}
	}
	return s
}

// normalize turns typed Go values that gojq does not accept ([]string, map[string]string,
// int64...) into the plain JSON forms it does.
func normalize(v any) any {
	switch x := v.(type) {
	case nil, bool, string, int, float64, map[string]any, []any:
		return v
	case int64:
		return int(x)
	case int32:
		return int(x)
	case float32:
		return float64(x)
	default:
		return toJSONValue(v)
	}
}
