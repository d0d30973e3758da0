// Package storetest gives tests a Redis: the real server at REDIS_URL (default
// redis://127.0.0.1:6379/15) and the embedded one, so that the same suite runs on both.
// A missing real Redis fails the test; it never skips. Tests share the real server, so
// each one works under its own flow ids (FlowID) and never flushes a database.
package storetest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/store"
)

// DefaultURL is the real Redis the tests use when REDIS_URL is not set.
const DefaultURL = "redis://127.0.0.1:6379/15"

// URL is the real Redis the tests use.
func URL() string {
	if u := os.Getenv("REDIS_URL"); u != "" {
		return u
	}
	return DefaultURL
}

// Real opens the real Redis server and fails the test if it does not answer.
func Real(t testing.TB) *store.Redis {
	t.Helper()
	r, err := store.Open(context.Background(), store.Options{URL: URL()})
	if err != nil {
		t.Fatalf("the tests need a real Redis at %s (set REDIS_URL): %v", URL(), err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

// Embedded starts the embedded Redis for one test.
func Embedded(t testing.TB) *store.Redis {
	t.Helper()
	r, err := store.Open(context.Background(), store.Options{})
	if err != nil {
		t.Fatalf("start embedded redis: %v", err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

// Kind names a Redis the suites run against.
type Kind string

const (
	KindReal     Kind = "real"
	KindEmbedded Kind = "embedded"
	// KindCluster is a Redis Cluster of 3 masters and 3 replicas, one per test binary
	// (SharedCluster: its TestMain calls StopShared).
	KindCluster Kind = "cluster"
)

// Open returns a Redis of the given kind.
func Open(t testing.TB, k Kind) *store.Redis {
	t.Helper()
	switch k {
	case KindEmbedded:
		return Embedded(t)
	case KindCluster:
		c := SharedCluster(t)
		r, err := store.Open(context.Background(), store.Options{URL: c.URL()})
		if err != nil {
			t.Fatalf("open the test cluster: %v", err)
		}
		t.Cleanup(func() { r.Close() })
		return r
	}
	return Real(t)
}

// URLOf is the URL of a Redis of the given kind that other processes can reach (not
// the embedded one's).
func URLOf(t testing.TB, k Kind) string {
	if k == KindCluster {
		return SharedCluster(t).URL()
	}
	return URL()
}

// Conformance runs fn as a subtest against the real Redis, the embedded one and a Redis
// Cluster: the runtime's conformance suite, one suite over every backend.
func Conformance(t *testing.T, fn func(t *testing.T, r *store.Redis)) {
	t.Helper()
	for _, k := range []Kind{KindReal, KindEmbedded, KindCluster} {
		t.Run(string(k), func(t *testing.T) { fn(t, Open(t, k)) })
	}
}

// Each runs fn as a subtest against the real Redis and against the embedded one.
func Each(t *testing.T, fn func(t *testing.T, r *store.Redis)) {
	t.Helper()
	for _, k := range []Kind{KindReal, KindEmbedded} {
		t.Run(string(k), func(t *testing.T) { fn(t, Open(t, k)) })
	}
}

var nonID = regexp.MustCompile(`[^a-z0-9]+`)

// FlowID returns a flow id unique to this test and this process, so tests that share
// the real Redis never see each other's keys.
func FlowID(t testing.TB) string {
	t.Helper()
	var b [4]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	name := strings.Trim(nonID.ReplaceAllString(strings.ToLower(t.Name()), "-"), "-")
	if len(name) > 40 {
		name = name[len(name)-40:]
		name = strings.TrimLeft(name, "-_")
	}
	return "t-" + name + "-" + hex.EncodeToString(b[:])
}

// DeleteFlowKeys removes every key of flow (and the test counters under the same hash
// tag) when the test ends, so the shared real Redis does not fill up; and what the
// audit log of `sluice serve` (its workspace's, ForgetTeams) says of the flow.
func DeleteFlowKeys(t testing.TB, r *store.Redis, flow string) {
	t.Helper()
	t.Cleanup(func() {
		ctx := context.Background()
		r.DeleteFlowKeys(ctx, flow)
		r.DeleteKeys(ctx, "sluicetest:{f:"+flow+"}:*")
		forgetFlowAudit(ctx, r, flow)
	})
}
