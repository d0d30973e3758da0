package engine

import (
	"sort"
	"strconv"
	"strings"
)

// A token says which branch of which fork an activation belongs to. Activations carry a
// stack of them, innermost last, written "frame@branch;frame@branch". A frame is named
// "<fork node>~<entry id>", unique per fork; a branch is a dotted path ("2", "2.0") so
// that a branch that forks again towards the same join keeps its place in branch order.

type token struct {
	frame  string
	branch string
}

type tokens []token

func parseTokens(s string) tokens {
	if s == "" {
		return nil
	}
	parts := strings.Split(s, ";")
	out := make(tokens, 0, len(parts))
	for _, p := range parts {
		f, b, _ := strings.Cut(p, "@")
		out = append(out, token{frame: f, branch: b})
	}
	return out
}

func (t tokens) String() string {
	parts := make([]string, len(t))
	for i, x := range t {
		parts[i] = x.frame + "@" + x.branch
	}
	return strings.Join(parts, ";")
}

func (t tokens) top() (token, bool) {
	if len(t) == 0 {
		return token{}, false
	}
	return t[len(t)-1], true
}

// with returns a copy of t with x pushed.
func (t tokens) with(x token) tokens {
	out := make(tokens, len(t), len(t)+1)
	copy(out, t)
	return append(out, x)
}

// pop returns a copy of t without its top.
func (t tokens) pop() tokens {
	if len(t) == 0 {
		return nil
	}
	return append(tokens(nil), t[:len(t)-1]...)
}

// frameNode is the node that opened a frame.
func frameNode(frame string) string {
	n, _, _ := strings.Cut(frame, "~")
	return n
}

// lessBranch orders branch paths numerically, part by part: "2" < "2.0" < "2.1" < "10".
func lessBranch(a, b string) bool {
	pa, pb := strings.Split(a, "."), strings.Split(b, ".")
	for i := 0; i < len(pa) && i < len(pb); i++ {
		x, _ := strconv.Atoi(pa[i])
		y, _ := strconv.Atoi(pb[i])
		if x != y {
			return x < y
		}
	}
	return len(pa) < len(pb)
}

func sortBranches(bs []string) {
	sort.Slice(bs, func(i, j int) bool { return lessBranch(bs[i], bs[j]) })
}
