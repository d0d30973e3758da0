// Package teams is who may do what in Sluice: people, workspaces, the four roles, the
// permission each route needs (one table, Routes), API keys and passwords. It holds the
// rules only; the store keeps people, keys and sessions in Redis and the server's one
// middleware applies Routes. It imports no project package but flows (for ids).
package teams

import (
	"fmt"
	"strings"

	"github.com/sluicehq/sluice/flows"
)

// Role is what a member may do in a workspace.
type Role string

const (
	Viewer   Role = "viewer"   // reads flows, runs, queues; run states unless the workspace hides them
	Operator Role = "operator" // a viewer who runs: start, cancel, resume (approve, answer), fork, retry
	Editor   Role = "editor"   // an operator who changes flows (an editor test-runs what it edits)
	Owner    Role = "owner"    // everything: members, keys, secrets, providers, audit
)

// Roles in ascending order of power: each holds every permission of the one before.
var Roles = []Role{Viewer, Operator, Editor, Owner}

// ParseRole reads a role name.
func ParseRole(s string) (Role, error) {
	for _, r := range Roles {
		if string(r) == s {
			return r, nil
		}
	}
	return "", fmt.Errorf("role %q: use viewer, operator, editor or owner", s)
}

func (r Role) rank() int {
	for i, x := range Roles {
		if x == r {
			return i + 1
		}
	}
	return 0
}

// AtLeast reports whether r holds every permission of o.
func (r Role) AtLeast(o Role) bool { return r.rank() > 0 && r.rank() >= o.rank() }

// Perm is what a route needs.
type Perm string

const (
	// Public routes need no one: health, the static bundle, sign-in and the password
	// reset form, the single sign-on callback, the webhook ingress (it has its own secret).
	Public Perm = "public"
	// Self routes need someone signed in, whatever their role: who am I, sign-out, one's
	// own API keys.
	Self Perm = "self"
	// Read: flows, versions, runs' statuses, queues, dead letters, schedules.
	Read Perm = "read"
	// ReadState: a run's state, checkpoints and files; test cases (runs' inputs and
	// outputs) and test results (their runs' outputs). A workspace marked sensitive
	// gives it to operators and up only.
	ReadState Perm = "read_state"
	// ReadRun: a run and its live events, as anyone who may read sees them: whoever
	// lacks read_state (a viewer in a sensitive workspace) gets the statuses, steps and
	// times without the input, output, state, errors or events' data.
	ReadRun Perm = "read_run"
	// Run: start, cancel, resume, fork runs; retry and discard dead letters and failed
	// deliveries; pause schedules; upload run files; call flows as MCP tools and models.
	Run Perm = "run"
	// Edit: save, import, delete, roll back flows and their drafts; try a node alone.
	Edit Perm = "edit"
	// Promote: move an environment to a version (docs/environments.md). Its least role
	// is the environment's own (editor unless the workspace's owner set another).
	Promote Perm = "promote"
	// Admin: members, every key of the workspace, secrets, providers, the audit log.
	Admin Perm = "admin"
	// Instance: what spans workspaces (metrics, creating workspaces): the owner of every
	// workspace only (SLUICE_TOKEN, the loopback single-person mode).
	Instance Perm = "instance"
)

// minRole is the least role that holds a permission.
var minRole = map[Perm]Role{
	Read:      Viewer,
	ReadRun:   Viewer,
	ReadState: Viewer,
	Run:       Operator,
	Edit:      Editor,
	Promote:   Editor,
	Admin:     Owner,
}

// Allows reports whether role r in a workspace (sensitive: run state hidden from
// viewers) holds p, and when not, why not in words a person reads. Public, Self and
// Instance are decided by the caller (they do not depend on a workspace role).
func Allows(r Role, p Perm, sensitive bool) (bool, string) {
	if _, ok := minRole[p]; !ok {
		return false, fmt.Sprintf("permission %q is not granted by a workspace role", p)
	}
	return AllowsAs(r, p, Need(p, sensitive))
}

// AllowsAs is Allows where the least role the request needs is known (an
// environment's own role for Promote).
func AllowsAs(r Role, p Perm, need Role) (bool, string) {
	if r.AtLeast(need) {
		return true, ""
	}
	if r == "" {
		return false, "you are not a member of this workspace"
	}
	what := map[Perm]string{Read: "read", ReadRun: "read runs", ReadState: "see run states or test cases (this workspace marks them sensitive)", Run: "run flows",
		Edit: "change flows", Promote: "promote flows to this environment", Admin: "manage members, keys and secrets"}[p]
	return false, fmt.Sprintf("a %s may not %s: that needs the %s role", r, what, need)
}

// Need is the least role a route of permission p needs (in a sensitive workspace or not).
func Need(p Perm, sensitive bool) Role {
	if p == ReadState && sensitive {
		return Operator
	}
	return minRole[p]
}

// DefaultWorkspace is the workspace of today's data: its flows have bare ids, their
// keys and files are where they always were.
const DefaultWorkspace = flows.DefaultWorkspace

// Sep joins a workspace and a flow id into the id the engine knows a flow by
// ("acme.triage"): a flow id cannot hold it, so no flow of one workspace can be named
// as another's, and every Redis key and hash tag built from the flow id carries the
// workspace.
const Sep = "."

// Qualify is the engine's id of flow in workspace ws: the bare id in the default
// workspace (today's keys keep working), "ws.flow" in another.
func Qualify(ws, flow string) string { return flows.InWorkspace(ws, flow) }

// Split is the workspace and bare flow id of an engine flow id.
func Split(id string) (ws, flow string) {
	if w, f, ok := strings.Cut(id, Sep); ok {
		return w, f
	}
	return DefaultWorkspace, id
}

// ValidWorkspace reports whether s can name a workspace (the rules of a flow id).
func ValidWorkspace(s string) bool { return flows.ValidID(s) }
