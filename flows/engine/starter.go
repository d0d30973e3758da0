package engine

import (
	"context"
	"runtime"
	"sync"
	"time"

	"github.com/sluicehq/sluice/store"
)

// starter sends the starts of new runs in batches (store.StartRuns), as the committer
// sends commits: the starts that arrive while a batch is in flight go in the next one,
// so under load many starts share a round trip, and with no load a start waits for
// nothing. Its goroutine runs while starts wait, so an engine that starts no runs has
// none.
type starter struct {
	rdb *store.Redis

	mu      sync.Mutex
	queue   []*startReq
	running bool

	// The running goroutine's buffers, kept while it comes and goes.
	spare []*startReq
	args  []store.StartArgs
	live  []*startReq
}

type startReq struct {
	ctx  context.Context
	args store.StartArgs
	ckpt string
	err  error
	done chan struct{}
}

// maxStartBatch bounds the starts of one round trip.
const maxStartBatch = 128

// start creates a run and returns its first checkpoint's id (store.StartRun).
func (s *starter) start(ctx context.Context, a store.StartArgs) (string, error) {
	if !s.rdb.Batches(a) {
		return s.rdb.StartRun(ctx, a)
	}
	req := &startReq{ctx: ctx, args: a, done: make(chan struct{})}
	s.mu.Lock()
	s.queue = append(s.queue, req)
	if !s.running {
		s.running = true
		go s.run()
	}
	s.mu.Unlock()
	select {
	case <-req.done:
		return req.ckpt, req.err
	case <-ctx.Done():
		// The start may still be sent (or be in flight): like a start whose reply was
		// lost, the run may exist.
		return "", ctx.Err()
	}
}

// run sends the waiting starts until none wait.
func (s *starter) run() {
	s.mu.Lock()
	spare, args, live := s.spare, s.args, s.live // the last batch's slice: the queue grows into it again
	s.mu.Unlock()
	for {
		// Let the starters this batch's replies woke queue their next starts first:
		// under load the batches grow, and with nothing else to run this returns at once.
		runtime.Gosched()
		s.mu.Lock()
		batch := s.queue
		if len(batch) == 0 {
			s.running = false
			s.spare, s.args, s.live = spare, args, live
			s.mu.Unlock()
			return
		}
		split := len(batch) > maxStartBatch
		if split {
			batch, s.queue = batch[:maxStartBatch], batch[maxStartBatch:]
		} else {
			s.queue = spare
		}
		s.mu.Unlock()
		args, live = args[:0], live[:0]
		for _, r := range batch {
			if err := r.ctx.Err(); err != nil {
				r.err = err
				close(r.done)
				continue
			}
			args = append(args, r.args)
			live = append(live, r)
		}
		if len(live) > 0 {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			ckpts, errs := s.rdb.StartRuns(ctx, args)
			cancel()
			for i, r := range live {
				r.ckpt, r.err = ckpts[i], errs[i]
				close(r.done)
			}
			clear(args)
			clear(live)
		}
		spare = nil
		if !split && cap(batch) <= 4*maxStartBatch {
			clear(batch)
			spare = batch[:0]
		}
	}
}
