// Package server is the HTTP face of Sluice: pages, the editor bundle, the JSON API,
// health and metrics. Handlers declare the small interfaces they need; routes.go shows
// the whole surface; errors.go is the one place that maps error codes to HTTP.
package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/sluicehq/sluice/store"
)

// Pinger answers whether the Redis behind the server is reachable.
type Pinger interface {
	Ping(ctx context.Context, d time.Duration) error
}

// Config is what the server needs to know about its environment.
type Config struct {
	Addr            string // host:port to listen on
	Embedded        bool   // running on the embedded Redis: pages show a banner
	ShutdownTimeout time.Duration
	Logger          *slog.Logger
}

// Server is the Echo app with its dependencies.
type Server struct {
	cfg     Config
	log     *slog.Logger
	echo    *echo.Echo
	redis   Pinger
	library *store.Library
}

// New builds the server; it does not listen until Run.
func New(cfg Config, redis Pinger, library *store.Library) *Server {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.ShutdownTimeout == 0 {
		cfg.ShutdownTimeout = 10 * time.Second
	}
	s := &Server{cfg: cfg, log: cfg.Logger, redis: redis, library: library}
	e := echo.New()
	e.HideBanner = true
	e.HidePort = true
	e.HTTPErrorHandler = s.handleError
	s.echo = e
	s.routes()
	return s
}

// Handler is the server's http.Handler, for tests and embedding.
func (s *Server) Handler() http.Handler { return s.echo }

// Run listens on cfg.Addr and serves until ctx ends, then shuts down gracefully within
// cfg.ShutdownTimeout. ready, when not nil, receives the bound address once listening.
func (s *Server) Run(ctx context.Context, ready func(addr net.Addr)) error {
	ln, err := net.Listen("tcp", s.cfg.Addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", s.cfg.Addr, err)
	}
	hs := &http.Server{
		Handler:           s.echo,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       120 * time.Second,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	}
	if ready != nil {
		ready(ln.Addr())
	}
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), s.cfg.ShutdownTimeout)
	defer cancel()
	err = hs.Shutdown(sctx)
	if errors.Is(err, context.DeadlineExceeded) {
		hs.Close()
		return fmt.Errorf("shutdown took longer than %s; connections closed", s.cfg.ShutdownTimeout)
	}
	if serr := <-errc; serr != nil && !errors.Is(serr, http.ErrServerClosed) {
		return serr
	}
	return err
}
