package store_test

import (
	"context"
	"strconv"
	"testing"

	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/storetest"
)

// A call whose connection Redis dropped is sent again by go-redis on a new one, without
// an error: Dials is how a reader learns that (a read Redis delivered before its
// reply was lost leaves entries pending that the worker never saw), and a call on a
// connection that still works says nothing.
func TestACallThatHadToDialAgainIsSeen(t *testing.T) {
	storetest.Real(t)
	ctx := context.Background()
	r, err := store.Open(ctx, store.Options{URL: storetest.URL(), PoolSize: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	id, err := r.Client.ClientID(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}

	before := r.Dials()
	if err := r.Client.Ping(ctx).Err(); err != nil || r.Dials() != before {
		t.Fatalf("a ping on the open connection: %v, %d dials; want none", err, r.Dials()-before)
	}

	// Redis drops the connection (as a restart does); the next call still succeeds.
	other := storetest.Real(t)
	if err := other.Client.ClientKillByFilter(ctx, "ID", strconv.FormatInt(id, 10)).Err(); err != nil {
		t.Fatal(err)
	}
	before = r.Dials()
	if err := r.Client.Ping(ctx).Err(); err != nil {
		t.Fatalf("a ping after the connection was dropped: %v", err)
	}
	if r.Dials() == before {
		t.Error("a call that had to dial a new connection was not seen: a read delivered before its reply was lost would stay pending for a live worker until the full sweep")
	}
}
