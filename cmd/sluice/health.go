package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// cmdHealth probes a serve's (or a worker's metrics port's) /healthz: exit 0 when it
// answers 200, else 1 with why. The image's HEALTHCHECK runs it (the image has no
// shell or curl).
func cmdHealth(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("health", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", envOr("SLUICE_HEALTH_ADDR", "127.0.0.1:8080"), "host:port of the serve (or a worker's --metrics-addr) to probe (env SLUICE_HEALTH_ADDR)")
	timeout := fs.Duration("timeout", 3*time.Second, "how long to wait for the answer")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "Usage: sluice health [flags]\n\nAsks http://ADDR/healthz; exits 0 when it answers 200, else 1.\n\nFlags:")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+*addr+"/healthz", nil)
	if err != nil {
		return &exitError{code: 2, err: fmt.Errorf("health: --addr %q: %v", *addr, err)}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return &exitError{code: 1, err: fmt.Errorf("health: %v", err)}
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusOK {
		return &exitError{code: 1, err: fmt.Errorf("health: %s answers %d: %s", *addr, resp.StatusCode, strings.TrimSpace(string(body)))}
	}
	fmt.Fprintln(stdout, strings.TrimSpace(string(body)))
	return nil
}

// cmdToken prints the token serve reads from (or made in) its --token-file, for a
// person to open the editor with (docker exec CONTAINER sluice token).
func cmdToken(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("token", flag.ContinueOnError)
	fs.SetOutput(stderr)
	file := fs.String("token-file", envOr("SLUICE_TOKEN_FILE", ""), "the file serve keeps its token in (env SLUICE_TOKEN_FILE)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *file == "" {
		return &exitError{code: 2, err: errors.New("token: say which file: --token-file or SLUICE_TOKEN_FILE (a token in SLUICE_TOKEN is yours already)")}
	}
	b, err := os.ReadFile(*file)
	if err != nil {
		return &exitError{code: 1, err: fmt.Errorf("token: %v", err)}
	}
	fmt.Fprintln(stdout, strings.TrimSpace(string(b)))
	return nil
}

// tokenFromFile reads serve's token from file, or, when there is no such file, makes a
// random one and writes it there (mode 0600) so that it lasts across restarts. The
// token never goes to the log: `sluice token` prints it.
func tokenFromFile(file string) (token string, made bool, err error) {
	b, err := os.ReadFile(file)
	if err == nil {
		return strings.TrimSpace(string(b)), false, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return "", false, fmt.Errorf("--token-file: %w", err)
	}
	var r [24]byte
	if _, err := rand.Read(r[:]); err != nil {
		return "", false, err
	}
	token = hex.EncodeToString(r[:])
	if err := os.MkdirAll(filepath.Dir(file), 0o700); err != nil {
		return "", false, fmt.Errorf("--token-file: %w", err)
	}
	f, err := os.OpenFile(file, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		if errors.Is(err, fs.ErrExist) { // another process made it first
			return tokenFromFile(file)
		}
		return "", false, fmt.Errorf("--token-file: %w", err)
	}
	defer f.Close()
	if _, err := f.WriteString(token + "\n"); err != nil {
		return "", false, fmt.Errorf("--token-file: %w", err)
	}
	return token, true, f.Close()
}
