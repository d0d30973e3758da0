package flows

import "fmt"

// MaxJSONDepth is how deeply a state, an update or an input may nest. Go's JSON decoder
// refuses documents nested 10,000 deep, so a state deeper than that could be committed
// but never read back; no real state comes near this.
const MaxJSONDepth = 512

// CheckJSON refuses a JSON document (a state, an update, an input) larger than maxBytes
// or nested deeper than MaxJSONDepth, with a TooLarge error that names what it is, its
// size and the limit. It scans the bytes once and allocates nothing.
func CheckJSON(what string, b []byte, maxBytes int) error {
	if maxBytes > 0 && len(b) > maxBytes {
		return &Error{Code: TooLarge, Message: fmt.Sprintf("%s would be %s bytes, over max_state_bytes (%s)", what, thousands(len(b)), thousands(maxBytes))}
	}
	depth, inString, escaped := 0, false, false
	for _, c := range b {
		switch {
		case inString:
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
		case c == '"':
			inString = true
		case c == '{' || c == '[':
			if depth++; depth > MaxJSONDepth {
				return &Error{Code: TooLarge, Message: fmt.Sprintf("%s nests deeper than %d levels", what, MaxJSONDepth)}
			}
		case c == '}' || c == ']':
			depth--
		}
	}
	return nil
}

// thousands writes n with commas: 1,048,576.
func thousands(n int) string {
	s := fmt.Sprint(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
