package store

import (
	"encoding/json"
	"strconv"
)

// Checkpoint bodies are encoded on every step's commit; encoding/json's reflection and
// its re-scan of raw fields took a tenth of a worker's CPU. appendBody writes the same
// bytes by hand for the bodies of real commits, and gives up (ok false) wherever
// encoding/json would write something else than the plain copy — a raw field with
// whitespace or characters it escapes, or that is not valid JSON — so the caller then
// uses encoding/json, and the result is always encoding/json's.

// appendBody appends b's JSON as encoding/json writes it, or reports ok false.
func appendBody(dst []byte, b *ckptBody) (_ []byte, ok bool) {
	dst = append(dst, '{')
	n := len(dst)
	field := func(name string) {
		if len(dst) > n {
			dst = append(dst, ',')
		}
		dst = append(dst, '"')
		dst = append(dst, name...)
		dst = append(dst, '"', ':')
	}
	str := func(name, v string) {
		if v != "" {
			field(name)
			dst = appendString(dst, v)
		}
	}
	num := func(name string, v int64) {
		if v != 0 {
			field(name)
			dst = strconv.AppendInt(dst, v, 10)
		}
	}
	raw := func(name string, v json.RawMessage) bool {
		if len(v) == 0 {
			return true
		}
		if !plainRaw(v) {
			return false
		}
		field(name)
		dst = append(dst, v...)
		return true
	}
	list := func(name string, v []string) {
		if len(v) == 0 {
			return
		}
		field(name)
		dst = append(dst, '[')
		for i, s := range v {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendString(dst, s)
		}
		dst = append(dst, ']')
	}
	str("n", b.Node)
	field("k")
	dst = appendString(dst, b.Kind)
	if !raw("u", b.Update) || !raw("o", b.Output) {
		return nil, false
	}
	str("e", b.Error)
	num("a", int64(b.Attempt))
	list("ports", b.Ports)
	list("br", b.Branches)
	num("us", b.DurUS)
	num("in", b.InTok)
	num("out", b.OutTok)
	num("cr", b.CacheRead)
	num("cw", b.CacheWrite)
	num("mu", b.MicroUSD)
	num("sb", int64(b.StateBytes))
	str("w", b.Worker)
	str("x", b.Entry)
	if b.Pinned {
		field("pin")
		dst = append(dst, "true"...)
	}
	if b.RunInput {
		field("ri")
		dst = append(dst, "true"...)
	}
	if b.ParentState {
		field("op")
		dst = append(dst, "true"...)
	}
	return append(dst, '}'), true
}

// encodeBody is b's JSON, by hand where that gives encoding/json's bytes.
func encodeBody(b *ckptBody) []byte {
	if out, ok := appendBody(make([]byte, 0, 128+len(b.Update)+len(b.Output)+len(b.Error)), b); ok {
		return out
	}
	out, _ := json.Marshal(b)
	return out
}

// encodeBodies is the JSON array of bodies of a packed entry.
func encodeBodies(bs []ckptBody) []byte {
	dst := make([]byte, 0, 128*len(bs))
	dst = append(dst, '[')
	for i := range bs {
		if i > 0 {
			dst = append(dst, ',')
		}
		var ok bool
		if dst, ok = appendBody(dst, &bs[i]); !ok {
			out, _ := json.Marshal(bs)
			return out
		}
	}
	return append(dst, ']')
}

// stepEventsJSON is the JSON array of a commit's step events: {"n": the node, "d": the
// event, "{}" when it has none}, or the short form of the common event (see stepEvent).
// Step events are plain JSON written by hand (engine's stepEvent), so the copy is the
// common case.
func stepEventsJSON(steps []CommitStep) []byte {
	n := 2
	for i := range steps {
		n += 16 + len(steps[i].Node) + len(steps[i].Event)
	}
	dst := make([]byte, 0, n)
	dst = append(dst, '[')
	for i := range steps {
		ev := steps[i].Event
		if len(ev) == 0 {
			ev = json.RawMessage("{}")
		}
		if !plainRaw(ev) {
			events := make([]stepEvent, len(steps))
			for i, s := range steps {
				events[i] = stepEvent{Node: s.Node, Data: s.Event}
				if len(s.Event) == 0 {
					events[i].Data = json.RawMessage("{}")
				}
			}
			out, _ := json.Marshal(events)
			return out
		}
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, `{"n":`...)
		dst = appendString(dst, steps[i].Node)
		if ms, kind, ok := shortEvent(ev); ok {
			dst = append(dst, `,"ms":`...)
			dst = append(dst, ms...)
			if string(kind) != "step" {
				dst = append(dst, `,"k":"`...)
				dst = append(dst, kind...)
				dst = append(dst, '"')
			}
		} else {
			dst = append(dst, `,"d":`...)
			dst = append(dst, ev...)
		}
		dst = append(dst, '}')
	}
	return append(dst, ']')
}

// appendString appends s as a JSON string: by hand when it holds only printable ASCII
// that encoding/json does not escape, else as encoding/json writes it.
func appendString(dst []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			q, _ := json.Marshal(s)
			return append(dst, q...)
		}
	}
	dst = append(dst, '"')
	dst = append(dst, s...)
	return append(dst, '"')
}

// plainRaw reports whether encoding/json copies a raw field as it is: valid JSON with
// no whitespace between tokens and none of the characters it escapes (<, >, &, U+2028,
// U+2029). Spaces inside strings are kept, as encoding/json keeps them; so are bytes that
// are not UTF-8, which encoding/json copies too. One pass, without encoding/json's
// scanner (json.Valid was most of the cost of a body): TestPlainRawIsWhatEncodingJSONCopies
// checks it against encoding/json on hand-made and random inputs.
func plainRaw(v []byte) bool {
	switch string(v) {
	case "{}", "null", "[]", "true", "false", `""`:
		return true
	}
	const (
		value = iota // a value comes next
		key          // a member's name comes next
		after        // a value ended
	)
	var buf [32]byte
	stack := buf[:0] // the open '{' and '['
	i, n, state := 0, len(v), value
	for {
		switch state {
		case value:
			if i >= n {
				return false
			}
			switch c := v[i]; {
			case c == '{':
				i++
				if i < n && v[i] == '}' {
					i, state = i+1, after
				} else {
					stack, state = append(stack, '{'), key
				}
			case c == '[':
				i++
				if i < n && v[i] == ']' {
					i, state = i+1, after
				} else {
					stack = append(stack, '[')
				}
			case c == '"':
				if i = plainString(v, i); i < 0 {
					return false
				}
				state = after
			case c == '-' || c >= '0' && c <= '9':
				if i = plainNumber(v, i); i < 0 {
					return false
				}
				state = after
			case c == 't' && len(v)-i >= 4 && string(v[i:i+4]) == "true",
				c == 'n' && len(v)-i >= 4 && string(v[i:i+4]) == "null":
				i, state = i+4, after
			case c == 'f' && len(v)-i >= 5 && string(v[i:i+5]) == "false":
				i, state = i+5, after
			default:
				return false
			}
		case key:
			if i >= n || v[i] != '"' {
				return false
			}
			if i = plainString(v, i); i < 0 || i >= n || v[i] != ':' {
				return false
			}
			i, state = i+1, value
		case after:
			if len(stack) == 0 {
				return i == n
			}
			if i >= n {
				return false
			}
			top := stack[len(stack)-1]
			switch v[i] {
			case ',':
				i, state = i+1, value
				if top == '{' {
					state = key
				}
			case '}', ']':
				if (v[i] == '}') != (top == '{') {
					return false
				}
				i, stack = i+1, stack[:len(stack)-1]
			default:
				return false
			}
		}
	}
}

// plainString returns where the JSON string at v[i] (a quote) ends, or -1 when it is
// not a valid string encoding/json copies as it is.
func plainString(v []byte, i int) int {
	n := len(v)
	for i++; i < n; i++ {
		switch c := v[i]; {
		case c == '"':
			return i + 1
		case c == '\\':
			if i++; i >= n {
				return -1
			}
			switch v[i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if n-i < 5 || !isHex(v[i+1]) || !isHex(v[i+2]) || !isHex(v[i+3]) || !isHex(v[i+4]) {
					return -1
				}
				i += 4
			default:
				return -1
			}
		case c < 0x20, c == '<', c == '>', c == '&':
			return -1
		case c == 0xE2 && i+2 < n && v[i+1] == 0x80 && (v[i+2] == 0xA8 || v[i+2] == 0xA9):
			return -1
		}
	}
	return -1
}

// plainNumber returns where the JSON number at v[i] ends, or -1 when it is not one.
func plainNumber(v []byte, i int) int {
	n := len(v)
	digits := func() bool {
		start := i
		for i < n && v[i] >= '0' && v[i] <= '9' {
			i++
		}
		return i > start
	}
	if v[i] == '-' {
		i++
	}
	switch {
	case i < n && v[i] == '0':
		i++
	case i < n && v[i] >= '1' && v[i] <= '9':
		digits()
	default:
		return -1
	}
	if i < n && v[i] == '.' {
		i++
		if !digits() {
			return -1
		}
	}
	if i < n && (v[i] == 'e' || v[i] == 'E') {
		i++
		if i < n && (v[i] == '+' || v[i] == '-') {
			i++
		}
		if !digits() {
			return -1
		}
	}
	return i
}

func isHex(c byte) bool { return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F' }
