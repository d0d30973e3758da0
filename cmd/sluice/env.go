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
	"github.com/sluicehq/sluice/flows/nodes"
	"github.com/sluicehq/sluice/store"
)

// componentFlags are the settings of the components: LLM providers and the HTTP policy.
type componentFlags struct {
	providers   string
	httpAllow   string
	mcpCommands string
}

// addComponentFlags registers --providers, --http-allow and --mcp-commands on fs.
func addComponentFlags(fs *flag.FlagSet) *componentFlags {
	f := &componentFlags{}
	fs.StringVar(&f.providers, "providers", envOr("SLUICE_PROVIDERS", ""),
		"JSON file of named LLM providers (env SLUICE_PROVIDERS); the provider \"default\" is OPENAI_BASE_URL with OPENAI_API_KEY")
	fs.StringVar(&f.httpAllow, "http-allow", envOr("SLUICE_HTTP_ALLOW", ""),
		"internal addresses the http component may reach, e.g. 10.0.0.0/8,127.0.0.1:8080 (env SLUICE_HTTP_ALLOW); all others are refused")
	fs.StringVar(&f.mcpCommands, "mcp-commands", envOr("SLUICE_MCP_COMMANDS", ""),
		"commands the mcp component may start as stdio MCP servers, comma-separated, e.g. npx,/usr/local/bin/github-mcp-server (env SLUICE_MCP_COMMANDS); none by default")
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
	log.Debug("components", "providers", strings.Join(names, "; "), "http_allow", f.httpAllow)
	var commands []string
	for _, c := range strings.Split(f.mcpCommands, ",") {
		if c = strings.TrimSpace(c); c != "" {
			commands = append(commands, c)
		}
	}
	return &nodes.Env{Providers: providers, HTTP: &nodes.HTTPPolicy{Allow: allow}, Logger: log, MCPCommands: commands}, nil
}

// registry is the component registry of the binary, built with env (nil: defaults).
func registry(env *nodes.Env) *flows.Registry { return nodes.NewRegistry(env) }

// attach gives env the shared cache on rdb and a subflow runner on e, finding child
// flows in lib (nil: Redis only) and serving them with workers (none: a worker of its
// own that stops with ctx).
func attach(ctx context.Context, env *nodes.Env, rdb *store.Redis, e *engine.Engine, lib *store.Library, workers ...*engine.Worker) {
	env.Cache = store.NewCache(rdb)
	env.Limiter = limiter{store.NewLimiter(rdb)}
	env.Ledger = store.NewLedger(rdb)
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
