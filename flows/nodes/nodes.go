// Package nodes holds the built-in components, one file each. Register adds them all to
// a registry; nothing is registered implicitly.
//
// Constructors (Spec.New) only check and compile their params: they open no connections
// and start no goroutines, because validation calls them too. What components need from
// the process — LLM providers, the HTTP policy, the shared cache, the subflow runner — comes
// in an Env that cmd wires; components never import store or engine.
package nodes

import (
	"context"
	"encoding/json"
	"log/slog"
	"sync"
	"time"

	"github.com/sluicehq/sluice/flows"
	"golang.org/x/sync/singleflight"
)

// Env is what components need from the process that runs them. The zero value works:
// it knows only the default provider (OpenAI's API, no key), refuses HTTP requests to
// internal addresses, caches in this process only and cannot run subflows.
type Env struct {
	// Providers are the LLM providers flows may name, by name. DefaultProvider is always
	// known: when it is missing here, it is OpenAI's API without a key.
	Providers map[string]*Provider
	// HTTP is the policy of the http component (nil: refuse every internal address).
	HTTP *HTTPPolicy
	// Cache shares cached results between processes (store.Cache); nil keeps them in
	// this process only.
	Cache Cache
	// Subflows runs other flows for the subflow component; nil makes subflow steps fail.
	Subflows SubflowRunner
	// Limiter shares providers' rate limits between processes (store.Limiter); nil
	// ignores the providers' rate_limit.
	Limiter RateLimiter
	// Ledger keeps what model calls spent, for budgets (store.Ledger); nil keeps it in
	// this process only.
	Ledger SpendLedger
	// MCPCommands are the command lines the mcp component may start as stdio MCP
	// servers (ParseMCPCommands, mcpallow.go); empty: none.
	MCPCommands []MCPCommandLine
	// MCPEnv are the environment variables an mcp node's env may set for its server
	// (CheckMCPEnvNames); empty: none.
	MCPEnv []string
	// MCPIdle closes a connection to an MCP server (a stdio server's process stops)
	// after it was not used for that long; 0: DefaultMCPIdle, negative: never.
	MCPIdle time.Duration
	// MCPServers is how many stdio MCP servers may run at once in this process; the one
	// idle the longest makes room for a new one. 0: DefaultMCPServers.
	MCPServers int
	// Logger logs what components do (never secrets); nil discards.
	Logger *slog.Logger
	// Secrets is the rule for the environment variables {"$env": NAME} may name and the
	// redaction of their values (nil: SLUICE_SECRET_* only, read with LookupEnv).
	Secrets *flows.Secrets
	// Memory keeps conversations and the long-term store (store.Memory); nil makes the
	// memory components' steps fail.
	Memory Memory
	// Files keeps the files runs take by reference (store.Files); nil makes the file
	// component's steps fail.
	Files Files
	// Vectors are the vector store's collections (store.Vectors); nil makes the
	// vector_store component's steps fail.
	Vectors Vectors
	// Observer hears about model calls and cached calls, for metrics; nil: nobody.
	Observer Observer
	// Workspaces gives what each workspace's owner lets its flows read and call, within
	// Secrets and Providers (store.WorkspaceRules, docs/teams.md); nil: owners narrow
	// nothing. Set it before components run (it may be set after Register).
	Workspaces flows.WorkspaceRules
	// LookupEnv reads the environment variables that {"$env": NAME} references name
	// when Secrets is nil (default os.LookupEnv); tests replace it.
	LookupEnv func(name string) (string, bool)

	initOnce sync.Once
	flights  singleflight.Group
	stats    cacheCounters
	chats    sync.Map // provider name -> its SDK's service
	mcps     sync.Map // MCP server identity -> *mcpConnection
	guards   sync.Map // HTTP client per timeout
}

// SubflowRunner runs a flow as one node of another; the engine implements it.
type SubflowRunner interface {
	// RunSubflow starts (or, on a retried step, finds again) a run of flow with input,
	// linked to the step's run and node, and waits for it to finish.
	RunSubflow(ctx context.Context, step *flows.Step, flow string, input json.RawMessage) (*SubflowResult, error)
}

// SubflowResult is a finished child run.
type SubflowResult struct {
	Flow   string          `json:"flow"`
	Run    string          `json:"run"`
	Output json.RawMessage `json:"output"`
	Usage  flows.Usage     `json:"usage"`
}

func (e *Env) init() {
	e.initOnce.Do(func() {
		if e.Providers == nil {
			e.Providers = map[string]*Provider{}
		}
		if _, ok := e.Providers[DefaultProvider]; !ok {
			e.Providers[DefaultProvider] = &Provider{Name: DefaultProvider, BaseURL: OpenAIBaseURL}
		}
		if e.HTTP == nil {
			e.HTTP = &HTTPPolicy{}
		}
		if e.Cache == nil {
			e.Cache = &memoryCache{}
		}
		if e.Ledger == nil {
			e.Ledger = &memoryLedger{}
		}
		if e.Logger == nil {
			e.Logger = slog.New(slog.DiscardHandler)
		}
		if e.Secrets == nil {
			if e.LookupEnv == nil {
				e.Secrets = flows.DefaultSecrets()
			} else {
				e.Secrets, _ = flows.NewSecrets(flows.SecretsConfig{Lookup: e.LookupEnv}) // no allow-list: cannot fail
			}
		}
	})
}

// Close releases what components hold open between steps: connections to MCP servers
// (stdio servers are stopped).
func (e *Env) Close() { e.closeMCP() }

// Register adds every built-in component to reg.
func Register(reg *flows.Registry, env *Env) {
	if env == nil {
		env = &Env{}
	}
	env.init()
	reg.SetSecrets(env.Secrets)
	reg.SetWorkspaceRules(envRules{env})
	reg.SetProviderCheck(env.operatorProvider)
	for _, s := range []flows.Spec{
		inputSpec(),
		outputSpec(),
		llmSpec(env),
		agentSpec(env),
		transformSpec(),
		templateSpec(),
		routerSpec(env),
		fanoutSpec(),
		joinSpec(),
		approvalSpec(),
		delaySpec(),
		httpSpec(env),
		dataSpec(),
		subflowSpec(env),
		mcpSpec(env),
		memorySpec(env),
		memoryStoreSpec(env),
		fileSpec(env),
		urlSpec(env),
		splitTextSpec(),
		embedSpec(env),
		vectorStoreSpec(env),
		calculatorSpec(),
		webSearchSpec(env),
		datetimeSpec(),
	} {
		reg.Register(s)
	}
}

// NewRegistry returns a registry holding the built-in components.
func NewRegistry(env *Env) *flows.Registry {
	reg := flows.NewRegistry()
	Register(reg, env)
	return reg
}

var (
	inPort   = flows.Port{Name: flows.PortIn, Direction: "in", Type: flows.PortState, Multiple: true, Description: "the run state"}
	outPort  = flows.Port{Name: flows.PortOut, Direction: "out", Type: flows.PortState, Description: "the state after this step"}
	toolPort = flows.Port{Name: "tool", Direction: "out", Type: flows.PortTool, Description: "attach to an agent's tools port to offer this node as a tool"}
)
