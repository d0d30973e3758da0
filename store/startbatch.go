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
			spans := queueStarts(ctx, pipe, as, g, ckpts)
			if !cluster {
				for v, fv := range versions {
					has[v] = pipe.Exists(ctx, FlowKeys(fv.flow).Version(fv.version))
				}
			}
			cmds, err := pipe.Exec(ctx)
			for j, i := range g {
				for _, sp := range spans[j] {
					for _, c := range cmds[sp[0]:sp[1]] {
						if c.Err() != nil && errs[i] == nil {
							errs[i] = fmt.Errorf("start run: %w", c.Err())
						}
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

// queueStarts queues the commands of the fresh starts at idx (one MULTI, pipe) and sets
// their first checkpoints' ids in ckpts. Each start writes its checkpoint entry, its
// state, its run hash and its first activations; the starts of one partition share one
// ZADD to the partition's runs and one events entry, a "batch" entry as a batch of
// commits writes when there are several (a start's "run" event, status queued). It
// returns, for each start, the spans of pipe's commands that decide its error.
func queueStarts(ctx context.Context, pipe redis.Pipeliner, as []StartArgs, idx []int, ckpts []string) [][][2]int {
	now := nowMS()
	nowS := strconv.FormatInt(now, 10)
	spans := make([][][2]int, len(idx))
	type partStarts struct {
		pr   PartRef
		runs []int // positions in idx
	}
	var parts []*partStarts
	byPart := map[PartRef]*partStarts{}
	for j, i := range idx {
		a := &as[i]
		k := PartKeys(a.Flow, a.Part)
		ckpt := a.Ckpt
		if ckpt == "" {
			ckpt = nowS + "-1"
		}
		ckpts[i] = ckpt
		lo := pipe.Len()
		process(ctx, pipe, "xadd", k.Ckpt(a.Run), ckpt, ckptNode, a.Checkpoint.Node, ckptParent, a.Checkpoint.Parent,
			ckptBodyF, a.Checkpoint.inputBody(a.Fields), ckptSteps, "1", ckptStep, "0", ckptTime, nowS)
		process(ctx, pipe, append([]any{"hset", k.State(a.Run)}, a.stateFields(ckpt)...)...)
		// Counters that start at 0 (steps, parked, tokens) are not written: every reader
		// takes a missing one for 0.
		fields := a.runFields()
		run := make([]any, 0, 16+len(fields))
		run = append(run, "hset", k.Run(a.Run), "status", StatusQueued, "version", a.Version, "created_at", nowS, "updated_at", nowS,
			"live", strconv.Itoa(len(a.Entries)), "last_ckpt", ckpt)
		for _, f := range fields {
			run = append(run, f)
		}
		process(ctx, pipe, run...)
		// The fields of start.lua's activations, in its order: every entry of a node
		// stream has the same fields, which Redis keeps once per listpack node.
		for _, n := range a.Entries {
			if a.Trace != "" {
				process(ctx, pipe, "xadd", k.In(n), "*", "run", a.Run, "v", a.Version, "ckpt", ckpt, "tok", "", "d", "1", "tp", a.Trace)
			} else {
				process(ctx, pipe, "xadd", k.In(n), "*", "run", a.Run, "v", a.Version, "ckpt", ckpt, "tok", "", "d", "1")
			}
		}
		spans[j] = append(spans[j], [2]int{lo, pipe.Len()})
		pr := PartRef{Flow: a.Flow, Part: a.Part}
		p := byPart[pr]
		if p == nil {
			p = &partStarts{pr: pr}
			byPart[pr] = p
			parts = append(parts, p)
		}
		p.runs = append(p.runs, j)
	}
	score := float64(now)
	for _, p := range parts {
		k := p.pr.keys()
		lo := pipe.Len()
		zadd := make([]any, 0, 2+2*len(p.runs))
		zadd = append(zadd, "zadd", k.Runs())
		for _, j := range p.runs {
			zadd = append(zadd, score, as[idx[j]].Run)
		}
		process(ctx, pipe, zadd...)
		if len(p.runs) == 1 {
			process(ctx, pipe, "xadd", k.Events(), "maxlen", "~", EventsMaxLen, "*",
				"type", "run", "run", as[idx[p.runs[0]]].Run, "node", "", "data", `{"status":"queued"}`, "ckpt", "", "step", "")
		} else {
			data := make([]byte, 0, 64*len(p.runs))
			data = append(data, '[')
			for n, j := range p.runs {
				if n > 0 {
					data = append(data, ',')
				}
				data = append(data, `{"r":`...)
				data = appendString(data, as[idx[j]].Run)
				data = append(data, `,"st":"queued","c":"","s":0,"e":[]}`...)
			}
			data = append(data, ']')
			process(ctx, pipe, "xadd", k.Events(), "maxlen", "~", EventsMaxLen, "*",
				"type", "batch", "run", "", "node", "", "data", data, "ckpt", "", "step", "")
		}
		for _, j := range p.runs {
			spans[j] = append(spans[j], [2]int{lo, pipe.Len()})
		}
	}
	return spans
}

// process queues one command, given whole, on pipe.
func process(ctx context.Context, pipe redis.Pipeliner, args ...any) {
	_ = pipe.Process(ctx, redis.NewCmd(ctx, args...))
}
