package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/sluicehq/sluice/flows"
	"github.com/sluicehq/sluice/flows/engine"
	"github.com/sluicehq/sluice/flows/engine/dispatch"
	"github.com/sluicehq/sluice/flows/nodes"
	"github.com/sluicehq/sluice/server"
	"github.com/sluicehq/sluice/store"
)

// componentFlags are the settings of the components: LLM providers and the HTTP policy.
type componentFlags struct {
	providers   string
	httpAllow   string
	mcpCommands string
	mcpEnv      string
	secrets     string
	blocks      *blockFlags // blocks.go
}

// addComponentFlags registers --providers, --http-allow, --mcp-commands, --mcp-env and
// --secrets on fs.
func addComponentFlags(fs *flag.FlagSet) *componentFlags {
	f := &componentFlags{}
	fs.StringVar(&f.providers, "providers", envOr("SLUICE_PROVIDERS", ""),
		"JSON file of named LLM providers (env SLUICE_PROVIDERS); the provider \"default\" is OPENAI_BASE_URL with OPENAI_API_KEY")
	fs.StringVar(&f.httpAllow, "http-allow", envOr("SLUICE_HTTP_ALLOW", ""),
		"internal addresses the http component, mcp servers and result webhooks may reach, e.g. 10.0.0.0/8,127.0.0.1:8080 (env SLUICE_HTTP_ALLOW); all others are refused")
	fs.StringVar(&f.mcpCommands, "mcp-commands", envOr("SLUICE_MCP_COMMANDS", ""),
		"command lines the mcp component may start as stdio MCP servers, comma-separated, each a command with exactly its arguments; "+
			"{name} stands for one argument that is no option, e.g. 'github-mcp-server stdio,mcp-server-filesystem {dir}' (env SLUICE_MCP_COMMANDS); none by default; see docs/mcp.md")
	fs.StringVar(&f.mcpEnv, "mcp-env", envOr("SLUICE_MCP_ENV", ""),
		"environment variables an mcp node may set for its stdio server, comma-separated, e.g. GITHUB_PERSONAL_ACCESS_TOKEN,LOG_LEVEL (env SLUICE_MCP_ENV); none by default")
	fs.StringVar(&f.secrets, "secrets", envOr("SLUICE_SECRETS", ""),
		"environment variables flows may read with {\"$env\": NAME} besides SLUICE_SECRET_*, comma-separated (env SLUICE_SECRETS); WORKSPACE:NAME gives NAME to that workspace's flows only; Sluice's own settings never")
	f.blocks = addBlockFlags(fs)
	return f
}

// env builds the components' Env from the flags and the environment. The cache and the
// subflow runner need Redis and the engine; attach adds them.
func (f *componentFlags) env(log *slog.Logger) (*nodes.Env, error) {
	if f == nil {
		f = &componentFlags{}
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	def, err := nodes.NewDefaultProvider(os.Getenv("OPENAI_BASE_URL"), os.Getenv("OPENAI_API_KEY"))
	if err != nil {
		return nil, &exitError{code: 2, err: err}
	}
	providers := map[string]*nodes.Provider{nodes.DefaultProvider: def}
	var keyEnvs []string // the providers' api_key_env: settings, never readable by flows
	if f.providers != "" {
		data, err := os.ReadFile(f.providers)
		if err != nil {
			return nil, &exitError{code: 2, err: fmt.Errorf("--providers: %w", err)}
		}
		named, err := nodes.ParseProviders(data, os.LookupEnv)
		if err != nil {
			return nil, &exitError{code: 2, err: fmt.Errorf("--providers %s: %w", f.providers, err)}
		}
		for name, p := range named {
			providers[name] = p
			if p.APIKeyEnv != "" {
				keyEnvs = append(keyEnvs, p.APIKeyEnv)
			}
		}
	}
	allow, err := nodes.ParseAllowList(f.httpAllow)
	if err != nil {
		return nil, &exitError{code: 2, err: fmt.Errorf("--http-allow: %w", err)}
	}
	names := make([]string, 0, len(providers))
	for n, p := range providers {
		names = append(names, p.String())
		_ = n
	}
	sort.Strings(names)
	secrets, err := flows.NewSecrets(flows.SecretsConfig{Allow: splitList(f.secrets), Reserved: keyEnvs})
	if err != nil {
		return nil, &exitError{code: 2, err: fmt.Errorf("--secrets: %w", err)}
	}
	if short := secrets.TooShort(); len(short) > 0 {
		log.Warn("secrets shorter than 6 characters are not redacted from what steps produce", "variables", strings.Join(short, ", "))
	}
	// The engine's hooks redact every step's result and live events with this rule.
	flows.UseSecrets(secrets)
	log.Debug("components", "providers", strings.Join(names, "; "), "http_allow", f.httpAllow, "secrets", f.secrets)
	mcpCommands, err := nodes.ParseMCPCommands(f.mcpCommands)
	if err != nil {
		return nil, &exitError{code: 2, err: fmt.Errorf("--mcp-commands: %w", err)}
	}
	mcpEnv := splitList(f.mcpEnv)
	if err := nodes.CheckMCPEnvNames(mcpEnv); err != nil {
		return nil, &exitError{code: 2, err: fmt.Errorf("--mcp-env: %w", err)}
	}
	env := &nodes.Env{Providers: providers, HTTP: &nodes.HTTPPolicy{Allow: allow}, Secrets: secrets, Logger: log,
		MCPCommands: mcpCommands, MCPEnv: mcpEnv}
	return env, f.blocks.bind(env)
}

// registry is the component registry of the binary, built with env (nil: defaults).
func registry(env *nodes.Env) *flows.Registry { return nodes.NewRegistry(env) }

// newEngine is the engine on rdb with the components of env, which apply what each
// workspace's owner lets its flows read and call (docs/teams.md) from the first flow
// compiled on.
func newEngine(rdb *store.Redis, env *nodes.Env, opts engine.Options) *engine.Engine {
	env.Workspaces = rdb.Teams("").Rules(time.Second)
	return engine.New(rdb, registry(env), opts)
}

// attach gives env the shared cache on rdb and a subflow runner on e, finding child
// flows in lib (nil: Redis only) and serving them with workers (none: a worker of its
// own that stops with ctx).
func attach(ctx context.Context, env *nodes.Env, rdb *store.Redis, e *engine.Engine, lib *store.Library, workers ...*engine.Worker) {
	env.Cache = store.NewCache(rdb)
	env.Limiter = limiter{store.NewLimiter(rdb)}
	env.Ledger = store.NewLedger(rdb)
	attachBlocks(ctx, env, rdb) // blocks.go
	sub := e.NewSubflows()
	sub.Bind(ctx, lib, workers...)
	env.Subflows = sub
}

// limiter is the store's rate limiter as the components see it.
type limiter struct{ l *store.Limiter }

func scopes(in []nodes.LimitScope) []store.LimitScope {
	out := make([]store.LimitScope, len(in))
	for i, s := range in {
		out[i] = store.LimitScope{Model: s.Model, Window: s.Window, Requests: s.Requests, Tokens: s.Tokens}
	}
	return out
}

func (a limiter) Take(ctx context.Context, provider, model string, s []nodes.LimitScope, id string, tokens int64, lease time.Duration) (time.Duration, bool, error) {
	return a.l.Take(ctx, provider, model, scopes(s), id, tokens, lease)
}

func (a limiter) Mark(ctx context.Context, provider string, s []nodes.LimitScope, id string, began bool, tokens int64) error {
	return a.l.Mark(ctx, provider, scopes(s), id, began, tokens)
}

func (a limiter) Pause(ctx context.Context, provider, model string, d time.Duration) error {
	return a.l.Pause(ctx, provider, model, d)
}

// newDispatcher delivers result webhooks the same way from serve and from worker: each
// signed with its flow's SLUICE_HOOK_SECRET_<FLOW> (X-Sluice-Signature), connecting only
// where the http component may (the same guard and --http-allow list).
// Metrics (nil: none) count the deliveries and the finished runs it takes.
func newDispatcher(e *engine.Engine, env *nodes.Env, flowIDs func(context.Context) ([]string, error), m *server.Metrics) *dispatch.Dispatcher {
	opts := dispatch.Options{Flows: flowIDs, HTTP: env.HTTP,
		Secret: func(flow string) []byte { return []byte(server.HookSecretFromEnv(flow)) }}
	if m != nil {
		opts.Outcome, opts.Finished = m.Delivery, m.RunFinished
	}
	return dispatch.New(e, opts)
}
