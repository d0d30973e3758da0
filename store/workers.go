package store

import (
	"context"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// workersKey is the sorted set of worker consumers by the time (ms) each last said it was
// alive. Sweepers claim the steps of workers that stopped saying so, instead of looking
// through every stream all the time.
const workersKey = "sluice:workers"

// WorkerAlive records that consumer is alive now.
func (r *Redis) WorkerAlive(ctx context.Context, consumer string) error {
	return r.Client.ZAdd(ctx, workersKey, redis.Z{Score: float64(nowMS()), Member: consumer}).Err()
}

// DeadWorkers returns the workers (but self) that last said they were alive before
// since.
func (r *Redis) DeadWorkers(ctx context.Context, since time.Time, self string) ([]string, error) {
	ids, err := r.Client.ZRangeByScore(ctx, workersKey, &redis.ZRangeBy{Min: "-inf", Max: "(" + strconv.FormatInt(since.UnixMilli(), 10), Count: 1000}).Result()
	if err != nil {
		return nil, err
	}
	out := ids[:0]
	for _, id := range ids {
		if id != self {
			out = append(out, id)
		}
	}
	return out, nil
}

// ForgetWorkers removes dead workers whose steps have been claimed.
func (r *Redis) ForgetWorkers(ctx context.Context, consumers []string) error {
	if len(consumers) == 0 {
		return nil
	}
	members := make([]any, len(consumers))
	for i, c := range consumers {
		members[i] = c
	}
	return r.Client.ZRem(ctx, workersKey, members...).Err()
}
