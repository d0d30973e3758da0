package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/sluicehq/sluice/flows/engine"
	"github.com/sluicehq/sluice/server"
	"github.com/sluicehq/sluice/store"
)

func cmdServe(ctx context.Context, args []string, _, stderr io.Writer) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", envOr("SLUICE_ADDR", "localhost:8080"), "address to listen on (env SLUICE_ADDR)")
	redisURL := fs.String("redis", envOr("REDIS_URL", ""), "Redis URL; empty starts the embedded Redis (env REDIS_URL)")
	dir := fs.String("flows", envOr("SLUICE_FLOWS", "./flows"), "directory of flow files (env SLUICE_FLOWS)")
	logLevel := fs.String("log-level", envOr("SLUICE_LOG_LEVEL", "info"), "debug, info, warn or error (env SLUICE_LOG_LEVEL)")
	partitions := addPartitionsFlag(fs)
	workers := fs.Int("workers", 1, "in-process workers for the library's flows; 0 serves only the UI and API (workers run elsewhere)")
	cf := addComponentFlags(fs)
	token := fs.String("token", "", "bearer token every route but health needs (env SLUICE_TOKEN); required unless --addr is loopback or --token-file is given")
	tokenFile := fs.String("token-file", envOr("SLUICE_TOKEN_FILE", ""), "without SLUICE_TOKEN, read the token from this file, or make a random one there on the first start (`sluice token` prints it); the image sets it (env SLUICE_TOKEN_FILE)")
	cors := fs.String("cors", envOr("SLUICE_CORS_ORIGINS", ""), "comma-separated origins allowed to call the API from a browser; empty: CORS off (env SLUICE_CORS_ORIGINS)")
	dispatch := fs.Bool("dispatch", true, "deliver result webhooks from this process")
	schedule := fs.Bool("schedule", true, "start the runs of the library's flows' schedules from this process (any number of processes may: each tick runs once)")
	allowedHosts := fs.String("allowed-hosts", envOr("SLUICE_ALLOWED_HOSTS", ""), "without a token, further Host names to answer besides localhost and loopback addresses, comma-separated (\"sluice.internal\", \"*.example.com\"), for a proxy in front (env SLUICE_ALLOWED_HOSTS)")
	readTimeout := fs.String("read-timeout", envOr("SLUICE_READ_TIMEOUT", "30s"), "how long a request's body may take to arrive; slower ones get 408 (env SLUICE_READ_TIMEOUT)")
	sessionLifetime := fs.Duration("session-lifetime", envDuration("SLUICE_SESSION_LIFETIME", 7*24*time.Hour), "a signed-in browser's session ends this long after sign-in (env SLUICE_SESSION_LIFETIME)")
	sessionIdle := fs.Duration("session-idle", envDuration("SLUICE_SESSION_IDLE", 12*time.Hour), "a session with no request for this long ends (env SLUICE_SESSION_IDLE)")
	secureCookies := fs.Bool("secure-cookies", os.Getenv("SLUICE_SECURE_COOKIES") == "true", "mark cookies Secure on plain HTTP too: a proxy in front terminates TLS (env SLUICE_SECURE_COOKIES=true)")
	gitCommit := fs.Bool("git-commit", os.Getenv("SLUICE_GIT_COMMIT") == "true", "commit every save of a flow (its file and cases) to the git repository --flows is in, by whoever saved (env SLUICE_GIT_COMMIT=true); see docs/environments.md")
	gitRef := fs.String("git-ref", envOr("SLUICE_GIT_REF", ""), "serve the flows as they are at this git ref (a branch, tag or commit) of the repository --flows is in, read-only: a branch is followed as it moves (env SLUICE_GIT_REF)")
	auditRetention := fs.Duration("audit-retention", envDuration("SLUICE_AUDIT_RETENTION", 90*24*time.Hour), "how long the audit log keeps an entry (env SLUICE_AUDIT_RETENTION)")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "Usage: sluice serve [flags]\n\nServes the flow editor, the JSON API and health on --addr.\n\nFlags:")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return &exitError{code: 2, err: fmt.Errorf("serve takes no arguments, got %q", fs.Args())}
	}
	if err := checkPartitions(*partitions); err != nil {
		return err
	}
	log, err := newLogger(stderr, *logLevel)
	if err != nil {
		return err
	}
	env, err := cf.env(log)
	if err != nil {
		return err
	}
	defer env.Close()
	stopTracing, err := startTracing(ctx, log)
	if err != nil {
		return err
	}
	defer stopTracing()
	// The token comes from the environment unless given: a flag shows in ps.
	if *token == "" {
		*token = os.Getenv("SLUICE_TOKEN")
	}
	if *token == "" && *tokenFile != "" {
		var made bool
		if *token, made, err = tokenFromFile(*tokenFile); err != nil {
			return &exitError{code: 2, err: err}
		}
		if made {
			log.Warn("no SLUICE_TOKEN: made a random token and kept it in the token file; `sluice token` prints it (in a container: docker exec CONTAINER sluice token); open the editor once with ?token=TOKEN",
				"file", *tokenFile)
		}
	}
	rt, err := time.ParseDuration(*readTimeout)
	if err != nil || rt <= 0 {
		return &exitError{code: 2, err: fmt.Errorf("--read-timeout %q: want a duration such as 30s", *readTimeout)}
	}
	cfg := server.Config{Addr: *addr, Logger: log, Token: *token, CORSOrigins: splitList(*cors), AllowedHosts: splitList(*allowedHosts), ReadTimeout: rt,
		SessionLifetime: *sessionLifetime, SessionIdle: *sessionIdle, SecureCookies: *secureCookies, AuditRetention: *auditRetention}
	if cfg.OIDC, err = oidcFromEnv(); err != nil {
		return &exitError{code: 2, err: err}
	}
	if cfg.OIDC != nil && *token == "" {
		return &exitError{code: 2, err: errors.New("single sign-on (SLUICE_OIDC_ISSUER) needs SLUICE_TOKEN: without a token the server is the loopback single-person mode, with no accounts")}
	}
	if err := server.CheckConfig(cfg); err != nil {
		return &exitError{code: 2, err: err}
	}
	lib, err := store.NewLibrary(*dir)
	if err != nil {
		return err
	}
	var repo *store.GitRepo
	if *gitCommit || *gitRef != "" {
		if *gitCommit && *gitRef != "" {
			return &exitError{code: 2, err: errors.New("--git-commit and --git-ref: a serve of a ref is read-only; choose one")}
		}
		if repo, err = store.OpenGitRepo(*dir); err != nil {
			return &exitError{code: 2, err: err}
		}
	}
	if *gitRef != "" {
		snap, err := os.MkdirTemp("", "sluice-flows-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(snap)
		commit, err := followRef(repo, *gitRef, snap, "", log)
		if err != nil {
			return &exitError{code: 2, err: err}
		}
		lib = &store.Library{Dir: snap, ReadOnly: fmt.Sprintf("this server serves git ref %q of the flows repository, read-only: commit your change to the repository instead", *gitRef)}
		go func() {
			for {
				select {
				case <-ctx.Done():
					return
				case <-time.After(2 * time.Second):
				}
				if c, err := followRef(repo, *gitRef, snap, commit, log); err == nil {
					commit = c
				}
			}
		}()
	}
	// Every flow of the library has a blocking reader per worker, each holding a
	// connection for its block time: the pool is sized for a few hundred flows.
	rdb, err := store.Open(ctx, store.Options{URL: *redisURL, PoolSize: 256})
	if err != nil {
		return err
	}
	defer rdb.Close()
	if rdb.Embedded() {
		log.Warn("using the embedded Redis: runs, checkpoints and queues vanish when this process exits; set REDIS_URL to keep them", "addr", rdb.Addr())
	} else {
		log.Info("using Redis", "addr", rdb.Addr())
	}
	metrics := server.NewMetrics()
	metrics.SetCacheStats(func() (int64, int64) { st := env.CacheStats(); return st.Hits, st.Misses })
	env.Observer = metrics
	e := newEngine(rdb, env, engine.Options{Logger: log, Observer: metrics, Partitions: *partitions})
	metrics.SetStateCache(e.StateCacheStats)
	var ws []*engine.Worker
	for i := 0; i < *workers; i++ {
		ws = append(ws, e.NewWorker(engine.WorkerOptions{}))
	}
	libSync := e.NewLibrarySync(lib, ws...)
	attach(ctx, env, rdb, e, lib, ws...)
	var bg sync.WaitGroup
	for _, w := range ws {
		bg.Add(1)
		go func() { defer bg.Done(); _ = w.Run(ctx) }()
	}
	// The folder's flows are published before the server says it serves, so that a
	// request sent at once (a run, a promotion) finds them; then every two seconds.
	firstSync, cancelFirst := context.WithTimeout(ctx, 30*time.Second)
	syncLibrary(firstSync, libSync, log)
	cancelFirst()
	bg.Add(1)
	go func() { defer bg.Done(); watchLibrary(ctx, libSync, log) }()

	if *dispatch {
		// The library's flows: flows that only headless workers serve are theirs to
		// dispatch (several deployments may share one Redis).
		d := newDispatcher(e, env, libraryFlows(lib), metrics)
		bg.Add(1)
		go func() { defer bg.Done(); _ = d.Run(ctx) }()
	}

	if *schedule {
		sch := e.NewScheduler(engine.SchedulerOptions{Flows: libraryFlows(lib), Started: metrics.ScheduleRun})
		bg.Add(1)
		go func() { defer bg.Done(); _ = sch.Run(ctx) }()
	}

	// Bulk replay jobs of the library's flows: any serve works on them and takes over
	// those another stopped working on (docs/replay.md).
	br := e.NewBulkRunner(engine.BulkRunnerOptions{Flows: libraryFlows(lib)})
	bg.Add(1)
	go func() { defer bg.Done(); _ = br.Run(ctx) }()

	cfg.Embedded = rdb.Embedded()
	deps := server.Deps{Redis: rdb, Library: lib, Engine: e, Sync: libSync, Metrics: metrics, MCPTools: env, Version: version, Files: fileStore(env), Grader: env, Rules: env.Workspaces.(*store.WorkspaceRules)}
	if *gitCommit {
		deps.Git = repo
		log.Info("git: saves are committed", "repository", repo.Root())
	}
	srv := server.New(cfg, deps)
	err = srv.Run(ctx, func(a net.Addr) {
		log.Info("sluice is serving", "url", "http://"+displayAddr(*addr, a), "flows", lib.Dir, "workers", *workers, "auth", *token != "")
	})
	bg.Wait()
	return err
}

// followRef writes the flows of git ref into dir when the ref names another commit
// than last, and returns the commit it names.
func followRef(repo *store.GitRepo, ref, dir, last string, log *slog.Logger) (string, error) {
	commit, err := repo.Resolve(ref)
	if err != nil {
		if last != "" {
			log.Warn("git: cannot resolve the ref served; serving its last commit", "ref", ref, "commit", last[:12], "error", err)
		}
		return last, err
	}
	if commit == last {
		return commit, nil
	}
	if err := repo.Snapshot(commit, dir); err != nil {
		log.Warn("git: cannot read the ref's flows", "ref", ref, "commit", commit[:12], "error", err)
		return last, err
	}
	log.Info("git: serving the flows of a ref", "ref", ref, "commit", commit[:12])
	return commit, nil
}

// watchLibrary publishes new and changed flow files every two seconds (the first
// sync is the caller's).
func watchLibrary(ctx context.Context, s *engine.LibrarySync, log *slog.Logger) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(2 * time.Second):
		}
		syncLibrary(ctx, s, log)
	}
}

// syncLibrary publishes the flow files that are new or changed since the last sync.
func syncLibrary(ctx context.Context, s *engine.LibrarySync, log *slog.Logger) {
	bad, err := s.Sync(ctx)
	if err != nil && ctx.Err() == nil {
		log.Warn("cannot publish the flow library", "error", err)
	}
	for id, probs := range bad { // reported once per content of the file
		log.Warn("flow file has problems; its last good version keeps running", "flow", id, "problems", len(probs.Errors()), "first", probs.Errors()[0].String())
	}
}

// libraryFlows lists the ids of the library's flow files.
func libraryFlows(lib *store.Library) func(context.Context) ([]string, error) {
	return func(context.Context) ([]string, error) {
		files, err := lib.ListAll()
		ids := make([]string, len(files))
		for i, f := range files {
			ids[i] = f.ID
		}
		return ids, err
	}
}

// displayAddr is the address to print: the name the user gave, with the bound port.
func displayAddr(requested string, bound net.Addr) string {
	host, _, err := net.SplitHostPort(requested)
	_, port, err2 := net.SplitHostPort(bound.String())
	if err != nil || err2 != nil {
		return bound.String()
	}
	if host == "" || host == "0.0.0.0" || host == "::" {
		host = "localhost"
	}
	return net.JoinHostPort(host, port)
}

// splitList reads a comma-separated setting, dropping empty entries.
func splitList(s string) []string {
	var out []string
	for _, v := range strings.Split(s, ",") {
		if v = strings.TrimSpace(v); v != "" {
			out = append(out, v)
		}
	}
	return out
}

// envDuration reads a duration from the environment, def when unset or not one.
func envDuration(name string, def time.Duration) time.Duration {
	if d, err := time.ParseDuration(os.Getenv(name)); err == nil && d > 0 {
		return d
	}
	return def
}

// oidcFromEnv reads single sign-on's settings (docs/teams.md); nil without
// SLUICE_OIDC_ISSUER. The client secret is read from the environment only: a flag
// shows in ps.
func oidcFromEnv() (*server.OIDCConfig, error) {
	issuer := os.Getenv("SLUICE_OIDC_ISSUER")
	if issuer == "" {
		return nil, nil
	}
	c := &server.OIDCConfig{Issuer: issuer, ClientID: os.Getenv("SLUICE_OIDC_CLIENT_ID"), ClientSecret: os.Getenv("SLUICE_OIDC_CLIENT_SECRET"),
		RedirectURL: os.Getenv("SLUICE_OIDC_REDIRECT_URL"), GroupsClaim: os.Getenv("SLUICE_OIDC_GROUPS_CLAIM"), Scopes: splitList(os.Getenv("SLUICE_OIDC_SCOPES"))}
	if c.ClientID == "" {
		return nil, errors.New("SLUICE_OIDC_ISSUER is set but SLUICE_OIDC_CLIENT_ID is not")
	}
	var err error
	if c.Groups, err = server.ParseRoleMap(os.Getenv("SLUICE_OIDC_GROUPS")); err != nil {
		return nil, fmt.Errorf("SLUICE_OIDC_GROUPS: %v", err)
	}
	if c.Domains, err = server.ParseRoleMap(os.Getenv("SLUICE_OIDC_DOMAINS")); err != nil {
		return nil, fmt.Errorf("SLUICE_OIDC_DOMAINS: %v", err)
	}
	return c, nil
}
