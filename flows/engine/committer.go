package engine

import (
	"context"
	"log/slog"
	"time"

	"github.com/sluicehq/sluice/store"
)

// committer sends step commits to Redis in batches: whatever is waiting when a pipeline
// returns goes in the next one, so under load many commits share a round trip and with
// no load a commit waits for nothing.
type committer struct {
	rdb *store.Redis
	log *slog.Logger
	ch  chan *commitReq
}

type commitReq struct {
	c    *store.Commit
	done chan commitResp
}

type commitResp struct {
	res store.CommitResult
	err error
	dur time.Duration
}

const maxCommitBatch = 128

func newCommitter(rdb *store.Redis, log *slog.Logger) *committer {
	return &committer{rdb: rdb, log: log, ch: make(chan *commitReq, 4*maxCommitBatch)}
}

// commit queues c and waits for its result.
func (c *committer) commit(ctx context.Context, cm *store.Commit) (store.CommitResult, time.Duration, error) {
	req := &commitReq{c: cm, done: make(chan commitResp, 1)}
	select {
	case c.ch <- req:
	case <-ctx.Done():
		return store.CommitResult{}, 0, ctx.Err()
	}
	select {
	case r := <-req.done:
		return r.res, r.dur, r.err
	case <-ctx.Done():
		return store.CommitResult{}, 0, ctx.Err()
	}
}

// run sends batches until ctx ends.
func (c *committer) run(ctx context.Context) {
	batch := make([]*commitReq, 0, maxCommitBatch)
	commits := make([]*store.Commit, 0, maxCommitBatch)
	for {
		batch, commits = batch[:0], commits[:0]
		select {
		case <-ctx.Done():
			return
		case r := <-c.ch:
			batch = append(batch, r)
		}
	fill:
		for len(batch) < maxCommitBatch {
			select {
			case r := <-c.ch:
				batch = append(batch, r)
			default:
				break fill
			}
		}
		for _, r := range batch {
			commits = append(commits, r.c)
		}
		start := time.Now()
		cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		results, errs := c.rdb.CommitBatch(cctx, commits)
		cancel()
		d := time.Since(start)
		for i, r := range batch {
			r.done <- commitResp{res: results[i], err: errs[i], dur: d}
		}
	}
}
