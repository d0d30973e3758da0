package store

import (
	"testing"
	"time"
)

func TestEmbeddedClockWaitsLongerWhenAnAdvanceIsSlow(t *testing.T) {
	for _, c := range []struct {
		name string
		took time.Duration
		want time.Duration
	}{
		{"a quick advance keeps the clock once a second", 5 * time.Millisecond, time.Second},
		{"an advance of a fiftieth of a second is the break-even", 20 * time.Millisecond, time.Second},
		{"a slow advance over many keys is followed by a wait fifty times as long", 80 * time.Millisecond, 4 * time.Second},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := nextAdvance(c.took); got != c.want {
				t.Fatalf("after an advance of %s the clock waits %s, want %s", c.took, got, c.want)
			}
		})
	}
}

func TestEmbeddedServerExpiresKeysWithItsClock(t *testing.T) {
	r, err := Open(t.Context(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	ctx := t.Context()
	if err := r.Client.Set(ctx, "k", "v", time.Second).Err(); err != nil {
		t.Fatal(err)
	}
	// The clock moves at least once a second while the server holds a few keys.
	for r.Client.Exists(ctx, "k").Val() == 1 {
		time.Sleep(50 * time.Millisecond)
	}
}
