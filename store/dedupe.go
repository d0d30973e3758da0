package store

import (
	"context"
	"errors"
	"time"

	"github.com/redis/go-redis/v9"
)

// Claim records value under flow's dedupe key hash for ttl, unless a value is there
// already: then it returns that value and false. One command (SET NX GET), so of two
// requests racing for the same hash exactly one claims it.
func (r *Redis) Claim(ctx context.Context, flow, hash, value string, ttl time.Duration) (string, bool, error) {
	prev, err := r.Client.SetArgs(ctx, FlowKeys(flow).Dedupe(hash), value, redis.SetArgs{Mode: "NX", TTL: ttl, Get: true}).Result()
	if errors.Is(err, redis.Nil) {
		return "", true, nil
	}
	if err != nil {
		return "", false, err
	}
	return prev, false, nil
}

// Unclaim drops flow's dedupe key hash.
func (r *Redis) Unclaim(ctx context.Context, flow, hash string) error {
	return r.Client.Del(ctx, FlowKeys(flow).Dedupe(hash)).Err()
}
