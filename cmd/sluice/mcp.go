package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/sluicehq/sluice/flows/engine"
	"github.com/sluicehq/sluice/server"
	"github.com/sluicehq/sluice/server/live"
	"github.com/sluicehq/sluice/store"
)

// cmdMCP serves the library's flows with "settings": {"mcp": true} as MCP tools on stdin
// and stdout, for MCP clients that start their servers as commands (Claude Desktop,
// IDEs, agent frameworks). Logs go to stderr: stdout is the protocol's.
func cmdMCP(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("mcp", flag.ContinueOnError)
	fs.SetOutput(stderr)
	redisURL := fs.String("redis", envOr("REDIS_URL", ""), "Redis URL; empty starts the embedded Redis (env REDIS_URL)")
	dir := fs.String("flows", envOr("SLUICE_FLOWS", "./flows"), "directory of flow files (env SLUICE_FLOWS); flows with settings.mcp are offered")
	logLevel := fs.String("log-level", envOr("SLUICE_LOG_LEVEL", "warn"), "debug, info, warn or error (logs go to stderr)")
	workers := fs.Int("workers", 1, "in-process workers for the library's flows; 0 leaves the runs to workers elsewhere (needs --redis)")
	cf := addComponentFlags(fs)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "Usage: sluice mcp [flags]\n\nServes the flows of --flows that set \"settings\": {\"mcp\": true} as MCP tools on\n"+
			"stdin and stdout. A tool call runs its flow and returns the run's output. See docs/mcp.md.\n\nFlags:")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return &exitError{code: 2, err: fmt.Errorf("mcp takes no arguments, got %q", fs.Args())}
	}
	if *workers == 0 && *redisURL == "" {
		return &exitError{code: 2, err: errors.New("--workers=0 needs a shared Redis (--redis or REDIS_URL): no one else can run the flows of the embedded one")}
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
	lib, err := store.NewLibrary(*dir)
	if err != nil {
		return err
	}
	rdb, err := store.Open(ctx, store.Options{URL: *redisURL, PoolSize: 64})
	if err != nil {
		return err
	}
	defer rdb.Close()
	if rdb.Embedded() {
		log.Warn("using the embedded Redis: runs vanish when this process exits; set REDIS_URL to keep them", "addr", rdb.Addr())
	}
	e := newEngine(rdb, env, engine.Options{Logger: log, Partitions: envPartitions()})
	var ws []*engine.Worker
	for i := 0; i < *workers; i++ {
		ws = append(ws, e.NewWorker(engine.WorkerOptions{}))
	}
	libSync := e.NewLibrarySync(lib, ws...)
	attach(ctx, env, rdb, e, lib, ws...)
	wctx, stop := context.WithCancel(ctx)
	var bg sync.WaitGroup
	for _, w := range ws {
		bg.Add(1)
		go func() { defer bg.Done(); _ = w.Run(wctx) }()
	}
	firstSync, cancelFirst := context.WithTimeout(wctx, 30*time.Second)
	syncLibrary(firstSync, libSync, log) // the tools are listed from what is published
	cancelFirst()
	bg.Add(1)
	go func() { defer bg.Done(); watchLibrary(wctx, libSync, log) }()
	hub := live.NewHub(rdb, log)
	defer hub.Close()

	srv := server.NewMCPServer(server.MCPDeps{Library: lib, Engine: e, Redis: rdb, Hub: hub, Logger: log, Version: version})
	log.Info("serving MCP on stdio", "flows", lib.Dir, "workers", *workers)
	// A malformed line gets a JSON-RPC error reply; the session goes on (mcpstdio.go).
	err = srv.Run(ctx, &server.StdioTransport{In: os.Stdin, Out: stdout})
	stop()
	bg.Wait()
	if errors.Is(err, context.Canceled) || errors.Is(err, mcp.ErrConnectionClosed) || errors.Is(err, io.EOF) {
		return nil
	}
	return err
}
