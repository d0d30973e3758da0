package store

import (
	"context"
	"fmt"
	"strconv"
	"sync"

	"github.com/redis/go-redis/v9"
	"github.com/sluicehq/sluice/flows"
)

// StartRuns creates runs as StartRun does, sending the fresh starts among them
// (StartArgs.Fresh, no wait_replicas) in one round trip: one MULTI holding all of them
// on one server, on a cluster one per slot, all at once. Starts that arrive together
// (concurrent API calls, schedules, a bench's submitters) then share a round trip, as
// a worker's commits do (CommitBatch): the round trip was most of a start's CPU. Every
// start stays atomic (a larger MULTI only holds more). Each result is its own: the
// run's first checkpoint id, or an error — a NotFound when its version is not stored,
// as StartRun says (the run is created anyway).
func (r *Redis) StartRuns(ctx context.Context, as []StartArgs) ([]string, []error) {
	ckpts := make([]string, len(as))
	errs := make([]error, len(as))
	var fresh []int
	for i := range as {
		if r.Batches(as[i]) {
			fresh = append(fresh, i)
			continue
		}
		ckpts[i], errs[i] = r.StartRun(ctx, as[i])
	}
	if len(fresh) == 0 {
		return ckpts, errs
	}
	_, cluster := r.Client.(*redis.ClusterClient)
	// The versions are flow-wide keys: on a cluster in another slot than the runs', so
	// not in their transaction but beside it, at the same time.
	type flowVersion struct{ flow, version string }
	vindex := map[flowVersion]int{}
	var versions []flowVersion
	for _, i := range fresh {
		fv := flowVersion{as[i].Flow, as[i].Version}
		if _, ok := vindex[fv]; !ok {
			vindex[fv] = len(versions)
			versions = append(versions, fv)
		}
	}
	has := make([]*redis.IntCmd, len(versions))
	var wg sync.WaitGroup
	if cluster {
		for v, fv := range versions {
			wg.Add(1)
			go func() {
				defer wg.Done()
				has[v] = r.Client.Exists(ctx, FlowKeys(fv.flow).Version(fv.version))
			}()
		}
	}
	groups := [][]int{fresh}
	if cluster {
		groups = bySlot(as, fresh)
	}
	for _, g := range groups {
		send := func() {
			pipe := r.Client.TxPipeline()
			spans := make([][2]int, len(g))
			for j, i := range g {
				lo := pipe.Len()
				ckpts[i], _ = queueFresh(ctx, pipe, as[i])
				spans[j] = [2]int{lo, pipe.Len()}
			}
			if !cluster {
				for v, fv := range versions {
					has[v] = pipe.Exists(ctx, FlowKeys(fv.flow).Version(fv.version))
				}
			}
			cmds, err := pipe.Exec(ctx)
			for j, i := range g {
				errs[i] = nil
				for _, c := range cmds[spans[j][0]:spans[j][1]] {
					if c.Err() != nil {
						errs[i] = fmt.Errorf("start run: %w", c.Err())
						break
					}
				}
				if errs[i] == nil && err != nil && len(cmds) == 0 {
					errs[i] = fmt.Errorf("start run: %w", err)
				}
			}
		}
		if len(groups) == 1 {
			send()
			continue
		}
		wg.Add(1)
		go func() { defer wg.Done(); send() }()
	}
	wg.Wait()
	for _, i := range fresh {
		if errs[i] != nil {
			ckpts[i] = ""
			continue
		}
		if c := has[vindex[flowVersion{as[i].Flow, as[i].Version}]]; c != nil && c.Err() == nil && c.Val() == 0 {
			errs[i] = &flows.Error{Code: flows.NotFound, Flow: as[i].Flow, Message: fmt.Sprintf("version %.12s is not stored", as[i].Version)}
		}
	}
	return ckpts, errs
}

// bySlot groups the starts at the given indexes by their partition's hash tag (one
// slot of a cluster), in order.
func bySlot(as []StartArgs, idx []int) [][]int {
	at := map[string]int{}
	var groups [][]int
	for _, i := range idx {
		tag := tagOf(as[i].Flow, as[i].Part)
		g, ok := at[tag]
		if !ok {
			g = len(groups)
			at[tag] = g
			groups = append(groups, nil)
		}
		groups[g] = append(groups[g], i)
	}
	return groups
}

// Batches reports whether StartRuns sends start a in a shared round trip: a fresh run id
// and no wait for replicas (a start that waits for them waits on its own).
func (r *Redis) Batches(a StartArgs) bool { return a.Fresh && r.wait <= 0 }

// FirstCkptID is an id for the first checkpoint of a fresh run (StartArgs.Ckpt): its
// checkpoint stream is new, and every later entry's id is Redis's, larger.
func FirstCkptID() string { return strconv.FormatInt(nowMS(), 10) + "-1" }
