package flows

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
)

// DecodeJSON decodes JSON into plain values (map[string]any, []any, json.Number, string,
// bool, nil), keeping numbers exact. Trailing data is an error.
func DecodeJSON(b []byte) (any, error) {
	if v, ok := decodeFast(b); ok {
		return v, nil
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("unexpected data after the JSON value")
	}
	return v, nil
}

// DecodeState decodes a JSON object into a state map.
func DecodeState(b []byte) (map[string]any, error) {
	v, err := DecodeJSON(b)
	if err != nil {
		return nil, err
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("state must be a JSON object, got %s", TypeName(v))
	}
	return m, nil
}

// toJSONValue converts any marshalable Go value into plain JSON values.
func toJSONValue(v any) any {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	out, err := DecodeJSON(b)
	if err != nil {
		return fmt.Sprint(v)
	}
	return out
}

// JSONValue converts a Go value (structs, typed slices) into plain JSON values, the form
// state and jq work with.
func JSONValue(v any) any { return normalize(v) }

// TypeName names the JSON type of a plain value for messages: "an object", "null".
func TypeName(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "a boolean"
	case string:
		return "a string"
	case json.Number, float64, int, int64:
		return "a number"
	case []any:
		return "an array"
	case map[string]any:
		return "an object"
	default:
		return fmt.Sprintf("%T", v)
	}
}
