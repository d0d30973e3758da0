package nodes

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/sluicehq/sluice/flows"
)

// What the flows of a workspace may use (docs/teams.md): the operator gives environment
// variables (flows.Secrets) and providers (a provider's "workspaces") to some workspaces
// or to all; a workspace's owner may narrow that to lists of their own (Env.Workspaces).
// Validation applies both, and so does every component when it runs: a flow file dropped
// into a workspace's folder, or a version saved before an owner narrowed the lists, reads
// and calls nothing more than the workspace may.

// envRules is the Env's Workspaces as the registry sees them (read when used, so that
// they can be set after Register).
type envRules struct{ e *Env }

func (r envRules) Rule(ws string) (flows.WorkspaceRule, error) {
	if r.e.Workspaces == nil {
		return flows.WorkspaceRule{}, nil
	}
	return r.e.Workspaces.Rule(ws)
}

func (r envRules) Generation() uint64 {
	if r.e.Workspaces == nil {
		return 0
	}
	return r.e.Workspaces.Generation()
}

// ruleUnavailable is a workspace's rule that could not be read: the step is tried again
// (not a refusal).
type ruleUnavailable struct{ err error }

func (u *ruleUnavailable) Error() string {
	return fmt.Sprintf("what this workspace's flows may use could not be read: %v", u.err)
}

func (u *ruleUnavailable) Unwrap() error { return u.err }

func (e *Env) workspaceRule(ws string) (flows.WorkspaceRule, error) {
	r, err := envRules{e}.Rule(ws)
	if err != nil {
		return r, &ruleUnavailable{err}
	}
	return r, nil
}

// lookupSecret reads the environment variable name for a step of flow, as its
// workspace may (flows.Secrets.LookupIn with the owner's list).
func (e *Env) lookupSecret(flow, name string) (string, bool, error) {
	e.init()
	ws := flows.WorkspaceOf(flow)
	rule, err := e.workspaceRule(ws)
	if err != nil {
		return "", false, err
	}
	return e.Secrets.LookupIn(ws, name, rule.Secrets)
}

// secretError is the error of a step whose secret could not be read at node and path:
// a refusal is permanent (the flow must change), a rule that could not be read is not.
func secretError(err error, node, path string) error {
	var u *ruleUnavailable
	if errors.As(err, &u) {
		return &flows.Error{Code: flows.Unavailable, Node: node, Path: path, Err: err}
	}
	return flows.Permanent(&flows.Error{Code: flows.Forbidden, Node: node, Path: path, Err: err})
}

// givenTo reports whether the operator lets workspace ws's flows call p.
func (p *Provider) givenTo(ws string) bool {
	return len(p.Workspaces) == 0 || slices.Contains(p.Workspaces, ws)
}

// operatorProvider is the operator's rule for the providers of workspace ws's flows
// (flows.ProviderCheck): configured, and given to ws.
func (e *Env) operatorProvider(ws, name string) error {
	e.init()
	if p, ok := e.Providers[name]; ok && p.givenTo(ws) {
		return nil
	}
	return &flows.Error{Code: flows.Invalid, Path: "params.provider",
		Message: fmt.Sprintf("no LLM provider %q for workspace %q's flows; there are: %s (providers are configured on the server: see docs/llm-providers.md)", name, ws, e.providerNamesFor(ws))}
}

// providerIn is the provider name for flow: one the operator gives the flow's
// workspace and, when the workspace's owner lists providers, one they list.
func (e *Env) providerIn(flow, name string) (*Provider, error) {
	ws := flows.WorkspaceOf(flow)
	if err := e.operatorProvider(ws, name); err != nil {
		return nil, err
	}
	rule, err := e.workspaceRule(ws)
	if err != nil {
		return nil, err
	}
	if rule.Providers != nil && !slices.Contains(rule.Providers, name) {
		return nil, &flows.Error{Code: flows.Forbidden, Path: "params.provider",
			Message: fmt.Sprintf("workspace %q does not let its flows call provider %q: its owner lists the providers they may call (settings: providers)", ws, name)}
	}
	return e.Providers[name], nil
}

// runProvider is providerIn for a running step: a refusal is permanent, at the node.
func (e *Env) runProvider(step *flows.Step, name string) (*Provider, error) {
	p, err := e.providerIn(step.Flow, name)
	if err == nil {
		return p, nil
	}
	var u *ruleUnavailable
	if errors.As(err, &u) {
		return nil, &flows.Error{Code: flows.Unavailable, Node: step.Node, Path: "params.provider", Err: err}
	}
	var fe *flows.Error
	if errors.As(err, &fe) {
		c := *fe
		c.Node = step.Node
		return nil, flows.Permanent(&c)
	}
	return nil, flows.Permanent(err)
}

// providerNamesFor lists the providers the operator gives workspace ws, for messages
// (never another workspace's).
func (e *Env) providerNamesFor(ws string) string {
	var names []string
	for n, p := range e.Providers {
		if p.givenTo(ws) {
			names = append(names, n)
		}
	}
	if len(names) == 0 {
		return "none"
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}

// flowOf is the id of the flow a node is built for ("" when built alone).
func flowOf(b *flows.Build) string {
	if b == nil || b.Flow == nil {
		return ""
	}
	return b.Flow.ID
}
