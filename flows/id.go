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

// DefaultWorkspace is the workspace of flows with a bare id: today's data, before
// workspaces (package teams has the model).
const DefaultWorkspace = "default"

// InWorkspace is the id of flow in workspace ws: the bare id in the default workspace,
// "ws.flow" in another.
func InWorkspace(ws, flow string) string {
	if ws == "" || ws == DefaultWorkspace {
		return flow
	}
	return ws + "." + flow
}

// WorkspaceOf is the workspace of a flow id: "acme" for "acme.triage", the default
// workspace for a bare id.
func WorkspaceOf(flow string) string {
	if ws, _, ok := strings.Cut(flow, "."); ok {
		return ws
	}
	return DefaultWorkspace
}
