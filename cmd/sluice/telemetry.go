package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/sluicehq/sluice/flows"
	"github.com/sluicehq/sluice/observe"
	"github.com/sluicehq/sluice/server"
	"github.com/sluicehq/sluice/store"
)

// startTracing exports OpenTelemetry traces when the OTEL_* environment asks for it
// (docs/tracing.md); the returned function flushes what is left. Call it after the
// components' env (which sets the secrets rule spans are redacted with) and before the
// engine, the server and HTTP clients are made: they check once whether tracing is on.
func startTracing(ctx context.Context, log *slog.Logger) (func(), error) {
	shutdown, err := observe.Setup(ctx, observe.Config{Version: version, Redact: flows.RedactString, Logger: log})
	if err != nil {
		return func() {}, &exitError{code: 2, err: err}
	}
	if observe.Enabled() {
		log.Info("exporting traces over OTLP/HTTP", "capture_content", observe.CaptureContent())
	}
	return func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := shutdown(sctx); err != nil {
			log.Warn("tracing: could not flush the last spans", "error", err)
		}
	}, nil
}

// listenMetrics opens --metrics-addr before the worker starts, so a port in use stops it.
func listenMetrics(addr string) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, &exitError{code: 2, err: fmt.Errorf("--metrics-addr: %w", err)}
	}
	return ln, nil
}

// serveMetrics serves a worker's /metrics, /healthz and /readyz on addr until ctx ends:
// healthy while the process runs, ready while Redis answers and the consumer groups of
// its flows' nodes exist.
func serveMetrics(ctx context.Context, ln net.Listener, m *server.Metrics, rdb *store.Redis, flowIDs []string, log *slog.Logger) error {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", m.Handler())
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		ready := server.Ready{Status: "ready", Checks: map[string]string{"redis": "ok", "groups": "ok"}}
		rctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
		defer cancel()
		if err := rdb.Ping(rctx, 2*time.Second); err != nil {
			ready.Status, ready.Checks["redis"], ready.Checks["groups"] = "not_ready", err.Error(), "unknown"
		} else if missing, err := missingGroups(rctx, rdb, flowIDs); err != nil {
			ready.Status, ready.Checks["groups"] = "not_ready", err.Error()
		} else if missing != "" {
			ready.Status, ready.Checks["groups"] = "not_ready", "no consumer group on "+missing
		}
		code := http.StatusOK
		if ready.Status != "ready" {
			code = http.StatusServiceUnavailable
		}
		writeJSON(w, code, ready)
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	log.Info("serving metrics", "url", "http://"+ln.Addr().String()+"/metrics")
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// missingGroups names the first node stream of flowIDs without its consumer group.
func missingGroups(ctx context.Context, rdb *store.Redis, flowIDs []string) (string, error) {
	for _, f := range flowIDs {
		missing, err := rdb.MissingGroups(ctx, f)
		if err != nil {
			return "", err
		}
		if len(missing) > 0 {
			return f + "/" + missing[0], nil
		}
	}
	return "", nil
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}
