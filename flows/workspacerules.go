package flows

// WorkspaceRule is what a workspace's owner lets its flows use, within what the
// operator allows the workspace (docs/teams.md): the environment variables they may
// read with {"$env": NAME} and the LLM providers they may call. A nil list narrows
// nothing: the flows get everything the operator gives the workspace.
type WorkspaceRule struct {
	Secrets   []string
	Providers []string
}

// WorkspaceRules gives each workspace's rule. The store keeps them (the workspaces'
// settings, cached in each process); validation applies them to a flow's {"$env"}
// references and its components to what they read and call when they run.
type WorkspaceRules interface {
	// Rule is workspace ws's rule. An error means it could not be read (Redis is away):
	// nothing that needs it may go ahead.
	Rule(ws string) (WorkspaceRule, error)
	// Generation changes whenever a rule does, so that a document validated under an
	// older rule is validated again.
	Generation() uint64
}

// NoWorkspaceRules narrows nothing: every workspace gets what the operator allows it
// (`sluice validate`, processes without Redis).
type NoWorkspaceRules struct{}

// Rule is the zero rule.
func (NoWorkspaceRules) Rule(string) (WorkspaceRule, error) { return WorkspaceRule{}, nil }

// Generation never changes.
func (NoWorkspaceRules) Generation() uint64 { return 0 }

// ProviderCheck reports whether the flows of a workspace may name an LLM provider as
// the operator configured them (its "workspaces"); nil when they may. Workspace
// owners' lists are applied on top of it.
type ProviderCheck func(ws, provider string) error
