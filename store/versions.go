package store

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// CurrentOptions say what else making a version current records.
type CurrentOptions struct {
	// Message is the note given with a save ("" keeps the version's earlier note).
	Message string
	// Scheduled says the version has schedules: the flow joins the set the schedulers
	// look at (or leaves it).
	Scheduled bool
}

// SetCurrent makes a stored version the one new runs of flow start on, and records it in
// the flow's version history (the first time it is made current, with the time).
func (r *Redis) SetCurrent(ctx context.Context, flow, version string, o CurrentOptions) error {
	k := FlowKeys(flow)
	pipe := r.Client.TxPipeline()
	pipe.Set(ctx, k.Current(), version, 0)
	pipe.ZAddNX(ctx, k.Versions(), redis.Z{Score: float64(nowMS()), Member: version})
	if o.Message != "" {
		pipe.HSet(ctx, k.VersionNotes(), version, o.Message)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return err
	}
	// The scheduled set and the generation are global, so outside the flow's slot and
	// its transaction.
	pipe = r.Client.Pipeline()
	if o.Scheduled {
		pipe.SAdd(ctx, scheduledKey, flow)
	} else {
		pipe.SRem(ctx, scheduledKey, flow)
	}
	pipe.Incr(ctx, generationKey)
	_, err := pipe.Exec(ctx)
	return err
}

// VersionInfo is one entry of a flow's version history.
type VersionInfo struct {
	Version string    `json:"version"`
	SavedAt time.Time `json:"saved_at"`
	Message string    `json:"message,omitempty"`
	Current bool      `json:"current"`
}

// Versions lists the flow's versions, newest first (at most limit), and the current one.
// A current version older than the history (published before it was kept) is listed
// with no time.
func (r *Redis) Versions(ctx context.Context, flow string, limit int64) ([]VersionInfo, string, error) {
	k := FlowKeys(flow)
	pipe := r.Client.Pipeline()
	zs := pipe.ZRevRangeWithScores(ctx, k.Versions(), 0, limit-1)
	cur := pipe.Get(ctx, k.Current())
	notes := pipe.HGetAll(ctx, k.VersionNotes())
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, "", err
	}
	current := cur.Val()
	out := make([]VersionInfo, 0, len(zs.Val()))
	seen := false
	for _, z := range zs.Val() {
		v, _ := z.Member.(string)
		out = append(out, VersionInfo{Version: v, SavedAt: time.UnixMilli(int64(z.Score)).UTC(), Message: notes.Val()[v], Current: v == current})
		seen = seen || v == current
	}
	if current != "" && !seen {
		if _, err := r.Client.ZScore(ctx, k.Versions(), current).Result(); errors.Is(err, redis.Nil) {
			out = append(out, VersionInfo{Version: current, Message: notes.Val()[current], Current: true})
		}
	}
	return out, current, nil
}

// VersionInfoOf returns one version's history entry; ok is false when the version was
// never made current (it may still be stored, as the version of a run).
func (r *Redis) VersionInfoOf(ctx context.Context, flow, version string) (VersionInfo, bool, error) {
	k := FlowKeys(flow)
	pipe := r.Client.Pipeline()
	score := pipe.ZScore(ctx, k.Versions(), version)
	note := pipe.HGet(ctx, k.VersionNotes(), version)
	cur := pipe.Get(ctx, k.Current())
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return VersionInfo{}, false, err
	}
	vi := VersionInfo{Version: version, Message: note.Val(), Current: cur.Val() == version}
	s, err := score.Result()
	if err != nil {
		return vi, vi.Current, nil
	}
	vi.SavedAt = time.UnixMilli(int64(s)).UTC()
	return vi, true, nil
}

// RunSummary is the part of a run hash that per-version figures need.
type RunSummary struct {
	ID       string
	Version  string
	Status   string
	Created  time.Time
	Started  time.Time
	Finished time.Time
	Tokens   int64
	Trigger  string
}

// RunSummaries reads the newest runs of a flow (at most limit), only the fields that
// figures per version need, in one round trip each for the ids and the fields.
func (r *Redis) RunSummaries(ctx context.Context, flow string, limit int64) ([]RunSummary, error) {
	refs, err := r.RunIDs(ctx, flow, time.Time{}, time.Time{}, 0, limit)
	if err != nil {
		return nil, err
	}
	pipe := r.Client.Pipeline()
	cmds := make([]*redis.SliceCmd, len(refs))
	ids := make([]string, len(refs))
	for i, ref := range refs {
		ids[i] = ref.Run
		cmds[i] = pipe.HMGet(ctx, ref.keys().Run(ref.Run), "version", "status", "created_at", "started_at", "finished_at", "in_tokens", "out_tokens", "trigger")
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, err
	}
	out := make([]RunSummary, 0, len(ids))
	for i, c := range cmds {
		v := c.Val()
		s := func(j int) string { x, _ := v[j].(string); return x }
		if len(v) < 8 || s(1) == "" {
			continue // expired
		}
		in, _ := strconv.ParseInt(s(5), 10, 64)
		o, _ := strconv.ParseInt(s(6), 10, 64)
		out = append(out, RunSummary{ID: ids[i], Version: s(0), Status: s(1), Created: msTime(s(2)), Started: msTime(s(3)),
			Finished: msTime(s(4)), Tokens: in + o, Trigger: s(7)})
	}
	return out, nil
}
