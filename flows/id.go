package flows

import (
	"regexp"
	"strings"
)

// MaxIDLen bounds flow and node ids; they become parts of Redis keys and file names.
const MaxIDLen = 64

var idPattern = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]*$`)

// ValidID reports whether s can be a flow or node id: lower-case letters, digits, '-'
// and '_', starting with a letter or digit, at most MaxIDLen bytes. Such an id cannot
// name a path outside the flows directory nor break a Redis key's hash tag.
func ValidID(s string) bool {
	return len(s) > 0 && len(s) <= MaxIDLen && idPattern.MatchString(s)
}

// ValidFlowID reports whether s can be the id of a flow: a ValidID, or one in a
// workspace, "workspace.flow" with both parts ValidIDs (package teams). The '.' keeps
// the two apart from each other and from every other workspace's flows.
func ValidFlowID(s string) bool {
	if ws, f, ok := strings.Cut(s, "."); ok {
		return ValidID(ws) && ValidID(f)
	}
	return ValidID(s)
}
