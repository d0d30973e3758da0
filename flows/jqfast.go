package flows

import (
	"math/big"
	"strings"

	"github.com/itchyny/gojq"
)

// fastFn evaluates a jq expression of a few common shapes without gojq's machine: the
// identity, paths (.a.b, ."a b", $state.x), literals, [] and objects built of these
// ({}, {a: .x, b: "y", c}). Such an expression has exactly one output, computed in time
// bounded by its size. ok is false where gojq must decide (indexing something that is
// not an object or null, which is gojq's error to word): the caller then runs gojq,
// so the outputs and errors are always gojq's.
type fastFn func(v any, state map[string]any) (out any, ok bool)

// compileFast returns the fast evaluation of q, or nil when q has another shape.
func compileFast(q *gojq.Query) fastFn {
	if q == nil || q.Meta != nil || len(q.Imports) > 0 || len(q.FuncDefs) > 0 || q.Left != nil || q.Right != nil ||
		len(q.Patterns) > 0 || q.Op != 0 || q.Term == nil {
		return nil
	}
	return fastTerm(q.Term)
}

func fastTerm(t *gojq.Term) fastFn {
	f := fastBase(t)
	if f == nil {
		return nil
	}
	for _, s := range t.SuffixList {
		if s.Iter || s.Optional {
			return nil
		}
		name, ok := plainKey(s.Index)
		if !ok {
			return nil
		}
		prev := f
		f = func(v any, st map[string]any) (any, bool) {
			x, ok := prev(v, st)
			if !ok {
				return nil, false
			}
			return fastIndex(x, name)
		}
	}
	return f
}

func fastBase(t *gojq.Term) fastFn {
	switch t.Type {
	case gojq.TermTypeIdentity:
		return func(v any, _ map[string]any) (any, bool) { return v, true }
	case gojq.TermTypeIndex:
		name, ok := plainKey(t.Index)
		if !ok {
			return nil
		}
		return func(v any, _ map[string]any) (any, bool) { return fastIndex(v, name) }
	case gojq.TermTypeFunc:
		if t.Func == nil || t.Func.Name != "$state" || len(t.Func.Args) > 0 {
			return nil
		}
		return func(_ any, st map[string]any) (any, bool) { return normalizeState(st), true }
	case gojq.TermTypeNull, gojq.TermTypeTrue, gojq.TermTypeFalse, gojq.TermTypeNumber, gojq.TermTypeString:
		// Literals are immutable values (numbers, strings, booleans, null): one for every
		// evaluation. gojq computes them, so a number is the same int or float as gojq's.
		c, ok := literal(t)
		if !ok {
			return nil
		}
		return func(any, map[string]any) (any, bool) { return c, true }
	case gojq.TermTypeArray:
		if t.Array == nil || t.Array.Query != nil {
			return nil
		}
		return func(any, map[string]any) (any, bool) { return []any{}, true }
	case gojq.TermTypeObject:
		return fastObject(t.Object)
	case gojq.TermTypeQuery:
		return compileFast(t.Query)
	}
	return nil
}

// fastObject builds an object of fast values; a key is a name or a plain string, and
// {a} is {a: .a}.
func fastObject(o *gojq.Object) fastFn {
	if o == nil {
		return nil
	}
	keys := make([]string, len(o.KeyVals))
	vals := make([]fastFn, len(o.KeyVals))
	for i, kv := range o.KeyVals {
		switch {
		case kv.KeyQuery != nil:
			return nil
		case kv.Key != "":
			if strings.HasPrefix(kv.Key, "$") {
				return nil // {$x} and {$__loc__}: variables, gojq's
			}
			keys[i] = kv.Key
		case kv.KeyString != nil && len(kv.KeyString.Queries) == 0:
			keys[i] = kv.KeyString.Str
		default:
			return nil
		}
		if kv.Val == nil {
			name := keys[i]
			vals[i] = func(v any, _ map[string]any) (any, bool) { return fastIndex(v, name) }
			continue
		}
		if vals[i] = compileFast(kv.Val); vals[i] == nil {
			return nil
		}
	}
	return func(v any, st map[string]any) (any, bool) {
		m := make(map[string]any, len(keys))
		for i, k := range keys {
			x, ok := vals[i](v, st)
			if !ok {
				return nil, false
			}
			m[k] = x
		}
		return m, true
	}
}

// plainKey is the name an index .name or ."name" or .["name"] reads.
func plainKey(ix *gojq.Index) (string, bool) {
	switch {
	case ix == nil || ix.IsSlice || ix.End != nil:
		return "", false
	case ix.Name != "" && ix.Start == nil:
		return ix.Name, true
	case ix.Str != nil && len(ix.Str.Queries) == 0 && ix.Start == nil:
		return ix.Str.Str, true
	case ix.Start != nil && ix.Name == "" && ix.Str == nil:
		// .["name"]: a query that is one plain string
		q := ix.Start
		if q.Term != nil && q.Left == nil && q.Right == nil && q.Op == 0 && len(q.Term.SuffixList) == 0 &&
			q.Term.Type == gojq.TermTypeString && q.Term.Str != nil && len(q.Term.Str.Queries) == 0 {
			return q.Term.Str.Str, true
		}
	}
	return "", false
}

// fastIndex is .name on v: a field of an object, null of null; anything else is gojq's
// error.
func fastIndex(v any, name string) (any, bool) {
	switch x := v.(type) {
	case nil:
		return nil, true
	case map[string]any:
		return x[name], true
	}
	return nil, false
}

// literal is a literal term's value as gojq computes it.
func literal(t *gojq.Term) (any, bool) {
	if t.Type == gojq.TermTypeString && (t.Str == nil || len(t.Str.Queries) > 0) {
		return nil, false
	}
	code, err := gojq.Compile(&gojq.Query{Term: &gojq.Term{Type: t.Type, Number: t.Number, Str: t.Str}})
	if err != nil {
		return nil, false
	}
	iter := code.Run(nil)
	v, ok := iter.Next()
	if !ok {
		return nil, false
	}
	if _, more := iter.Next(); more {
		return nil, false
	}
	switch v.(type) {
	case nil, bool, string, int, float64:
		return v, true
	case *big.Int, error:
		return nil, false
	}
	return nil, false
}
