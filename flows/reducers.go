package flows

import (
	"encoding/json"
	"fmt"
	"math/big"
	"sort"
)

// Reducer says how an update to a state key is merged with the key's current value.
type Reducer string

const (
	Replace Reducer = "replace" // the update replaces the value (default)
	Append  Reducer = "append"  // arrays are concatenated; a single value is appended
	Merge   Reducer = "merge"   // objects are merged shallowly; null deletes a key
	Add     Reducer = "add"     // numbers are summed
)

// Reducers maps state keys to their reducer; keys not in it use Replace.
type Reducers map[string]Reducer

// ReducersOf returns the reducers a document declares.
func ReducersOf(d *Document) Reducers {
	r := Reducers{}
	for k, v := range d.State {
		if v.Reducer != "" && v.Reducer != Replace {
			r[k] = v.Reducer
		}
	}
	return r
}

// Apply returns a new state: state with update merged in key by key. state is not
// modified. Keys are applied in sorted order so that errors are deterministic.
func (r Reducers) Apply(state, update map[string]any) (map[string]any, error) {
	out := make(map[string]any, len(state)+len(update))
	for k, v := range state {
		out[k] = v
	}
	keys := make([]string, 0, len(update))
	for k := range update {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		v, err := reduce(r[k], out[k], update[k])
		if err != nil {
			return nil, fmt.Errorf("state key %q: %w", k, err)
		}
		out[k] = v
	}
	return out, nil
}

func reduce(red Reducer, cur, upd any) (any, error) {
	switch red {
	case "", Replace:
		return upd, nil
	case Append:
		var base []any
		switch c := cur.(type) {
		case nil:
		case []any:
			base = c
		default:
			base = []any{c}
		}
		res := make([]any, 0, len(base)+1)
		res = append(res, base...)
		if u, ok := upd.([]any); ok {
			return append(res, u...), nil
		}
		return append(res, upd), nil
	case Merge:
		u, ok := upd.(map[string]any)
		if !ok {
			if upd == nil {
				return cur, nil
			}
			return nil, fmt.Errorf("merge reducer needs an object, got %s", TypeName(upd))
		}
		res := map[string]any{}
		if c, ok := cur.(map[string]any); ok {
			for k, v := range c {
				res[k] = v
			}
		} else if cur != nil {
			return nil, fmt.Errorf("merge reducer: current value is %s, not an object", TypeName(cur))
		}
		for k, v := range u {
			if v == nil {
				delete(res, k)
			} else {
				res[k] = v
			}
		}
		return res, nil
	case Add:
		if upd == nil {
			return cur, nil
		}
		a, ok1 := toRat(cur)
		b, ok2 := toRat(upd)
		if cur == nil {
			a, ok1 = new(big.Rat), true
		}
		if !ok1 || !ok2 {
			return nil, fmt.Errorf("add reducer needs numbers, got %s and %s", TypeName(cur), TypeName(upd))
		}
		sum := new(big.Rat).Add(a, b)
		if sum.IsInt() {
			return json.Number(sum.Num().String()), nil
		}
		f, _ := sum.Float64()
		return json.Number(big.NewFloat(f).Text('g', -1)), nil
	}
	return nil, fmt.Errorf("unknown reducer %q", red)
}

func toRat(v any) (*big.Rat, bool) {
	switch x := v.(type) {
	case json.Number:
		r, ok := new(big.Rat).SetString(string(x))
		return r, ok
	case float64:
		r := new(big.Rat)
		if r.SetFloat64(x) == nil {
			return nil, false
		}
		return r, true
	case int:
		return new(big.Rat).SetInt64(int64(x)), true
	case int64:
		return new(big.Rat).SetInt64(x), true
	}
	return nil, false
}
