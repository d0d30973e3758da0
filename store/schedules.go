package store

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// How schedules keep their state in Redis. A tick is claimed by creating its run: the run
// id is derived from the schedule and the tick time, and creating a run is atomic and
// refuses an id that exists on its partition, so each tick runs once however many
// schedulers try it. The partition comes from the id and a partition count, and
// processes may count differently (their --partitions, during a rollout): so the first
// scheduler to try a tick fixes the count its run is placed with (ClaimTick), and every
// scheduler places the run there. The claim holds no lease: a scheduler that dies after
// claiming, before creating the run, holds nothing, and the others create it where the
// claim says.
// Next to that, each schedule has a marker — the last tick that ran or was passed over —
// so that a tick is not run again once its run has expired, and so that a scheduler
// coming back after an outage knows which ticks it missed.

// ScheduleRunsKept is how many run ids each schedule remembers for its recent runs.
const ScheduleRunsKept = 20

// ScheduledFlows lists the flows whose current version has schedules.
func (r *Redis) ScheduledFlows(ctx context.Context) ([]string, error) {
	return r.Client.SMembers(ctx, scheduledKey).Result()
}

// ScheduleState is what Redis holds about a flow's schedules, by schedule key.
type ScheduleState struct {
	// Last is the last tick that ran or was passed over; a schedule missing here has
	// never been seen by a scheduler.
	Last map[string]time.Time
	// Paused holds the paused schedules and when they were paused.
	Paused map[string]time.Time
}

// ScheduleStates reads the markers and pauses of a flow's schedules in one round trip.
func (r *Redis) ScheduleStates(ctx context.Context, flow string, keys []string) (*ScheduleState, error) {
	k := FlowKeys(flow)
	st := &ScheduleState{Last: map[string]time.Time{}, Paused: map[string]time.Time{}}
	if len(keys) == 0 {
		return st, nil
	}
	pipe := r.Client.Pipeline()
	scores := pipe.ZMScore(ctx, k.ScheduleTicks(), keys...)
	paused := pipe.HMGet(ctx, k.SchedulePaused(), keys...)
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, err
	}
	// ZMSCORE answers nil for a missing member; go-redis reads that as 0.
	for i, s := range scores.Val() {
		if s > 0 {
			st.Last[keys[i]] = time.UnixMilli(int64(s)).UTC()
		}
	}
	for i, v := range paused.Val() {
		if s, ok := v.(string); ok {
			st.Paused[keys[i]] = msTime(s)
		}
	}
	return st, nil
}

// SeeSchedule records t as the marker of a schedule no scheduler has seen before, so
// that ticks from before it existed are not taken as missed. It keeps an existing marker.
func (r *Redis) SeeSchedule(ctx context.Context, flow, key string, t time.Time) error {
	return r.Client.ZAddNX(ctx, FlowKeys(flow).ScheduleTicks(), redis.Z{Score: float64(t.UnixMilli()), Member: key}).Err()
}

// MarkTick moves a schedule's marker forward to tick (never back).
func (r *Redis) MarkTick(ctx context.Context, flow, key string, tick time.Time) error {
	return r.Client.ZAddGT(ctx, FlowKeys(flow).ScheduleTicks(), redis.Z{Score: float64(tick.UnixMilli()), Member: key}).Err()
}

// ClaimTick returns the partition count the run of a schedule's tick is placed with:
// parts when this is the first claim of the tick, else the count the first claimer
// gave. The claim expires after ttl, once no scheduler tries the tick any more (the
// schedule's marker keeps a tick that ran from running again).
func (r *Redis) ClaimTick(ctx context.Context, flow, key string, tick time.Time, parts int, ttl time.Duration) (int, error) {
	if parts < 1 || parts > MaxPartitions {
		return 0, fmt.Errorf("claim of a schedule tick: %d partitions", parts)
	}
	k := FlowKeys(flow).ScheduleClaim(key, tick.UnixMilli())
	old, err := r.Client.SetArgs(ctx, k, strconv.Itoa(parts), redis.SetArgs{Mode: "NX", Get: true, TTL: ttl}).Result()
	if errors.Is(err, redis.Nil) {
		return parts, nil // the first claim
	}
	if err != nil {
		return 0, err
	}
	n, err := strconv.Atoi(old)
	if err != nil || n < 1 || n > MaxPartitions {
		return 0, fmt.Errorf("claim of schedule %s's tick %s holds %q, not a partition count", key, tick.Format(time.RFC3339), old)
	}
	return n, nil
}

// NoteScheduledRun records a run a schedule started among its recent runs. Every
// scheduler that tried the tick may note it: the note is idempotent.
func (r *Redis) NoteScheduledRun(ctx context.Context, flow, key, run string, tick time.Time) error {
	rk := FlowKeys(flow).ScheduleRuns(key)
	pipe := r.Client.TxPipeline()
	pipe.ZAdd(ctx, rk, redis.Z{Score: float64(tick.UnixMilli()), Member: run})
	pipe.ZRemRangeByRank(ctx, rk, 0, -ScheduleRunsKept-1)
	_, err := pipe.Exec(ctx)
	return err
}

// ScheduledRuns returns the ids of the runs a schedule started, newest first.
func (r *Redis) ScheduledRuns(ctx context.Context, flow, key string, n int64) ([]string, error) {
	return r.Client.ZRevRange(ctx, FlowKeys(flow).ScheduleRuns(key), 0, n-1).Result()
}

// PauseSchedule pauses a schedule for every scheduler: its ticks pass without runs.
func (r *Redis) PauseSchedule(ctx context.Context, flow, key string) error {
	return r.Client.HSetNX(ctx, FlowKeys(flow).SchedulePaused(), key, strconv.FormatInt(nowMS(), 10)).Err()
}

// ResumeSchedule lifts a pause. The ticks that passed while it was paused are not run:
// the marker moves to now.
func (r *Redis) ResumeSchedule(ctx context.Context, flow, key string) error {
	k := FlowKeys(flow)
	pipe := r.Client.TxPipeline()
	pipe.HDel(ctx, k.SchedulePaused(), key)
	pipe.ZAddGT(ctx, k.ScheduleTicks(), redis.Z{Score: float64(nowMS()), Member: key})
	_, err := pipe.Exec(ctx)
	return err
}
