package flows

import (
	"encoding/json"
	"unicode/utf8"
)

// decodeFast decodes the common JSON of inputs and states — objects, arrays, numbers,
// literals and strings without escapes — into the values DecodeJSON gives, without
// encoding/json's decoder (a run's input and every state a worker loads are decoded;
// the decoder's setup and reflection were most of it). It gives up (ok false) on anything
// else: an escape or bytes that are not UTF-8 in a string (encoding/json rewrites
// those), nesting deeper than fastDepth, or anything invalid — DecodeJSON then decodes
// with encoding/json, which also words the error. TestDecodeFastIsDecodeJSON compares the
// two on hand-made and random inputs.
func decodeFast(b []byte) (v any, ok bool) {
	d := fastDecoder{b: b}
	d.space()
	v, ok = d.value(0)
	if !ok {
		return nil, false
	}
	d.space()
	return v, d.i == len(d.b)
}

// fastDepth bounds the nesting decodeFast follows (encoding/json's own bound is 10,000).
const fastDepth = 200

type fastDecoder struct {
	b []byte
	i int
}

func (d *fastDecoder) space() {
	for d.i < len(d.b) {
		switch d.b[d.i] {
		case ' ', '\t', '\n', '\r':
			d.i++
		default:
			return
		}
	}
}

func (d *fastDecoder) value(depth int) (any, bool) {
	if d.i >= len(d.b) || depth > fastDepth {
		return nil, false
	}
	switch c := d.b[d.i]; {
	case c == '{':
		d.i++
		m := map[string]any{}
		d.space()
		if d.i < len(d.b) && d.b[d.i] == '}' {
			d.i++
			return m, true
		}
		for {
			d.space()
			k, ok := d.str()
			if !ok {
				return nil, false
			}
			d.space()
			if d.i >= len(d.b) || d.b[d.i] != ':' {
				return nil, false
			}
			d.i++
			d.space()
			v, ok := d.value(depth + 1)
			if !ok {
				return nil, false
			}
			m[k] = v
			d.space()
			if d.i >= len(d.b) {
				return nil, false
			}
			switch d.b[d.i] {
			case ',':
				d.i++
			case '}':
				d.i++
				return m, true
			default:
				return nil, false
			}
		}
	case c == '[':
		d.i++
		a := []any{}
		d.space()
		if d.i < len(d.b) && d.b[d.i] == ']' {
			d.i++
			return a, true
		}
		for {
			d.space()
			v, ok := d.value(depth + 1)
			if !ok {
				return nil, false
			}
			a = append(a, v)
			d.space()
			if d.i >= len(d.b) {
				return nil, false
			}
			switch d.b[d.i] {
			case ',':
				d.i++
			case ']':
				d.i++
				return a, true
			default:
				return nil, false
			}
		}
	case c == '"':
		return d.str()
	case c == '-' || c >= '0' && c <= '9':
		return d.number()
	case c == 't' && d.lit("true"):
		return true, true
	case c == 'f' && d.lit("false"):
		return false, true
	case c == 'n' && d.lit("null"):
		return nil, true
	}
	return nil, false
}

func (d *fastDecoder) lit(s string) bool {
	if len(d.b)-d.i < len(s) || string(d.b[d.i:d.i+len(s)]) != s {
		return false
	}
	d.i += len(s)
	return true
}

// str decodes a string without escapes, of valid UTF-8, at d.i (a quote).
func (d *fastDecoder) str() (string, bool) {
	if d.i >= len(d.b) || d.b[d.i] != '"' {
		return "", false
	}
	start := d.i + 1
	ascii := true
	for j := start; j < len(d.b); j++ {
		switch c := d.b[j]; {
		case c == '"':
			s := d.b[start:j]
			if !ascii && !utf8.Valid(s) {
				return "", false
			}
			d.i = j + 1
			return string(s), true
		case c == '\\' || c < 0x20:
			return "", false
		case c >= 0x80:
			ascii = false
		}
	}
	return "", false
}

// number decodes a JSON number at d.i as a json.Number of its text.
func (d *fastDecoder) number() (any, bool) {
	b, i := d.b, d.i
	n := len(b)
	digits := func() bool {
		start := i
		for i < n && b[i] >= '0' && b[i] <= '9' {
			i++
		}
		return i > start
	}
	if b[i] == '-' {
		i++
	}
	switch {
	case i < n && b[i] == '0':
		i++
	case i < n && b[i] >= '1' && b[i] <= '9':
		digits()
	default:
		return nil, false
	}
	if i < n && b[i] == '.' {
		i++
		if !digits() {
			return nil, false
		}
	}
	if i < n && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < n && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if !digits() {
			return nil, false
		}
	}
	num := json.Number(b[d.i:i])
	d.i = i
	return num, true
}
