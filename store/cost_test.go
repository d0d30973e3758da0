package store_test

import (
	"bufio"
	"cmp"
	"context"
	"fmt"
	"net"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/storetest"
)

// runCost is what one run costs Redis, as MONITOR shows it: the commands the process
// sends and their argument bytes, and the commands the scripts run inside Redis.
type runCost struct {
	Commands, Bytes, Scripts, InScripts int
	Lines                               []string
}

// The Redis work of one run of a fused flow of three no-op nodes (five steps: input,
// three nodes, output), pinned: a start, the worker's read and one commit of the five
// steps. This is the regression guard of docs/benchmarks.md that needs no callgrind: a
// change that adds a command to the start or a redis.call to the commit, or makes their
// arguments grow, fails here and has to say so by changing the figures (and the table
// in docs/benchmarks.md). Argument bytes are pinned within a few bytes: stream ids and
// times differ in length by a digit now and then.
func TestAFusedRunCostsPinnedRedisCommands(t *testing.T) {
	r := storetest.Real(t)
	ctx := context.Background()
	flow := storetest.FlowID(t)
	storetest.DeleteFlowKeys(t, r, flow)
	nodes := []string{"in", "n1", "n2", "n3", "out"}
	if err := r.StoreVersion(ctx, flow, "v1", []byte("{}"), nodes); err != nil {
		t.Fatal(err)
	}
	if err := r.EnsureGroups(ctx, flow, nodes); err != nil {
		t.Fatal(err)
	}
	state := []byte(`{"pad":"` + strings.Repeat("x", 240) + `"}`)
	run := "r0123456789abcdefghijk" // as long as engine.NewRunID's

	got := monitorRun(t, flow, func() {
		costStart(t, r, flow, run, "in", state)
		acts, err := r.ReadNodes(ctx, "w-1", []store.NodeRef{{Flow: flow, Node: "in"}}, 16, 0)
		if err != nil || len(acts) != 1 {
			t.Fatalf("read: %v %v", acts, err)
		}
		c := &store.Commit{Act: acts[0], Consumer: "w-1", MaxSteps: 100, TTL: 24 * time.Hour}
		for _, n := range nodes {
			s := store.CommitStep{Node: n, State: state, Event: []byte(`{"status":"done","ms":0.01}`),
				Checkpoint: store.Checkpoint{Node: n, Kind: "step", Attempt: 1, Worker: "w-1", Duration: 10 * time.Microsecond}}
			if n == "out" {
				s.Final = []byte("null")
			}
			c.Steps = append(c.Steps, s)
		}
		res, errs := r.CommitBatch(ctx, []*store.Commit{c})
		if errs[0] != nil || res[0].Status != store.CommitOK || res[0].RunStatus != store.StatusSucceeded {
			t.Fatalf("commit: %v %+v", errs[0], res[0])
		}
	})
	want := runCost{Commands: 11, Bytes: 2806, Scripts: 1, InScripts: 11}
	if got.Commands != want.Commands || got.Scripts != want.Scripts || got.InScripts != want.InScripts ||
		got.Bytes < want.Bytes-16 || got.Bytes > want.Bytes+16 {
		t.Errorf("one fused run: %d commands (%d scripts) of %d argument bytes, %d commands inside scripts; want %d (%d), %d ± 16, %d\n%s",
			got.Commands, got.Scripts, got.Bytes, got.InScripts, want.Commands, want.Scripts, want.Bytes, want.InScripts, strings.Join(got.Lines, "\n"))
	}
}

// foldedStart is the commit of a fused run of three no-op nodes (five steps) that also
// starts the run (store/startfold.go), as engine.Start sends it when the steps ran there.
func foldedStart(flow, run string, state []byte) *store.Commit {
	args := store.StartArgs{Flow: flow, Run: run, Version: "v1", State: state, Fresh: true, Ckpt: store.FirstCkptID(),
		Checkpoint: store.Checkpoint{Kind: "input", Update: state}, Entries: []string{"in"}, Fields: []string{"input", string(state)}}
	c := &store.Commit{Consumer: "w-1", MaxSteps: 100, TTL: 24 * time.Hour, Start: &args,
		Act: store.Activation{Flow: flow, Node: "in", Run: run, Version: "v1", Ckpt: args.Ckpt, Depth: 1, Deliveries: 1}}
	for _, n := range []string{"in", "n1", "n2", "n3", "out"} {
		s := store.CommitStep{Node: n, State: state, Event: []byte(`{"status":"done","ms":0.01}`),
			Checkpoint: store.Checkpoint{Node: n, Kind: "step", Attempt: 1, Worker: "w-1", Duration: 10 * time.Microsecond}}
		if n == "out" {
			s.Final = []byte("null")
		}
		c.Steps = append(c.Steps, s)
	}
	return c
}

// The same fused run started by the commit of its steps, which the starting process ran
// (engine: startInline): one script call, nothing read, fenced or acknowledged — the
// start's MULTI, the worker's read and the fence's XPENDING, XACK and XTRIM are gone;
// the run's first checkpoint, written first under the id the start chose, is what
// refuses a start sent again.
// Pinned as the test above.
func TestAFusedRunStartedByItsCommitCostsOneScriptCall(t *testing.T) {
	r := storetest.Real(t)
	ctx := context.Background()
	flow := storetest.FlowID(t)
	storetest.DeleteFlowKeys(t, r, flow)
	if err := r.StoreVersion(ctx, flow, "v1", []byte("{}"), []string{"in", "n1", "n2", "n3", "out"}); err != nil {
		t.Fatal(err)
	}
	if err := r.LoadScripts(ctx); err != nil {
		t.Fatal(err)
	}
	state := []byte(`{"pad":"` + strings.Repeat("x", 240) + `"}`)
	run := "r0123456789abcdefghijk"
	got := monitorRun(t, flow, func() {
		res, errs := r.CommitBatch(ctx, []*store.Commit{foldedStart(flow, run, state)})
		if errs[0] != nil || res[0].Status != store.CommitOK || res[0].RunStatus != store.StatusSucceeded {
			t.Fatalf("commit: %v %+v", errs[0], res[0])
		}
	})
	want := runCost{Commands: 1, Bytes: 1917, Scripts: 1, InScripts: 8}
	if got.Commands != want.Commands || got.Scripts != want.Scripts || got.InScripts != want.InScripts ||
		got.Bytes < want.Bytes-16 || got.Bytes > want.Bytes+16 {
		t.Errorf("one fused run started by its commit: %d commands (%d scripts) of %d argument bytes, %d commands inside scripts; want %d (%d), %d ± 16, %d\n%s",
			got.Commands, got.Scripts, got.Bytes, got.InScripts, want.Commands, want.Scripts, want.Bytes, want.InScripts, strings.Join(got.Lines, "\n"))
	}
}

// What a worker of another process than the start's reads before a run's first step
// (its preload), pinned: the first checkpoint's state, kept as the run's input, and the
// input itself in one HMGET, with the run's status: one round trip of two commands. (It
// was two round trips of four: the state, then the input from the state hash and from
// the run hash, where an older build kept it.)
func TestAFirstStepsInputsCostOneRoundTrip(t *testing.T) {
	r := storetest.Real(t)
	ctx := context.Background()
	flow := costFlow(t, r, "in", "a")
	state := []byte(`{"pad":"` + strings.Repeat("x", 240) + `"}`)
	costStart(t, r, flow, costRun, "in", state)
	a := costRead(t, r, flow, "in")[0]
	var ins []store.StepInput
	got := monitorRun(t, flow, func() {
		var err error
		ins, err = r.LoadStepInputs(ctx, []store.StateRef{{RunRef: a.Ref(), Ckpt: a.Ckpt, First: a.Depth == 1}}, []bool{true})
		if err != nil {
			t.Fatal(err)
		}
	})
	if len(ins) != 1 || string(ins[0].State) != string(state) || ins[0].Status != store.StatusQueued {
		t.Errorf("the first step's inputs %+v, want the run's input as its state, status queued", ins)
	}
	checkCost(t, "the first step's inputs", got, runCost{Commands: 2, Bytes: 221, Scripts: 0, InScripts: 0})
}

// costFlow makes a flow of nodes with their streams and groups (version v1), for the
// pinned costs and the store tests that commit steps.
func costFlow(t *testing.T, r *store.Redis, nodes ...string) string {
	t.Helper()
	ctx := context.Background()
	flow := storetest.FlowID(t)
	storetest.DeleteFlowKeys(t, r, flow)
	if err := r.StoreVersion(ctx, flow, "v1", []byte("{}"), nodes); err != nil {
		t.Fatal(err)
	}
	if err := r.EnsureGroups(ctx, flow, nodes); err != nil {
		t.Fatal(err)
	}
	return flow
}

// costRead reads the one activation waiting on each of nodes (one read) as worker w-1.
func costRead(t *testing.T, r *store.Redis, flow string, nodes ...string) []store.Activation {
	t.Helper()
	var refs []store.NodeRef
	for _, n := range nodes {
		refs = append(refs, store.NodeRef{Flow: flow, Node: n})
	}
	acts, err := r.ReadNodes(context.Background(), "w-1", refs, 16, 0)
	if err != nil || len(acts) != len(nodes) {
		t.Fatalf("read %v: %v %v", nodes, acts, err)
	}
	return acts
}

// costCommit commits one step of each activation in one call, with its transitions, and
// wants each committed, the run in status want.
func costCommit(t *testing.T, r *store.Redis, state []byte, want string, acts []store.Activation, trans ...[]store.Transition) {
	t.Helper()
	var cs []*store.Commit
	for i, a := range acts {
		s := store.CommitStep{Node: a.Node, State: state, Event: []byte(`{"status":"done","ms":0.01}`),
			Checkpoint: store.Checkpoint{Node: a.Node, Kind: "step", Attempt: 1, Worker: "w-1", Duration: 10 * time.Microsecond}}
		if a.Node == "out" {
			s.Final = []byte("null")
		}
		cs = append(cs, &store.Commit{Act: a, Consumer: "w-1", MaxSteps: 100, TTL: 24 * time.Hour,
			Steps: []store.CommitStep{s}, Transitions: trans[i]})
	}
	res, errs := r.CommitBatch(context.Background(), cs)
	for i := range cs {
		if errs[i] != nil || res[i].Status != store.CommitOK {
			t.Fatalf("commit of %s: %v %+v", acts[i].Node, errs[i], res[i])
		}
	}
	if want != "" && res[len(res)-1].RunStatus != want {
		t.Fatalf("after %s the run is %s, want %s", acts[len(acts)-1].Node, res[len(res)-1].RunStatus, want)
	}
}

// checkCost compares a measured cost with the pinned one.
func checkCost(t *testing.T, what string, got, want runCost) {
	t.Helper()
	if got.Commands != want.Commands || got.Scripts != want.Scripts || got.InScripts != want.InScripts ||
		got.Bytes < want.Bytes-16 || got.Bytes > want.Bytes+16 {
		t.Errorf("%s: %d commands (%d scripts) of %d argument bytes, %d commands inside scripts; want %d (%d), %d ± 16, %d\n%s",
			what, got.Commands, got.Scripts, got.Bytes, got.InScripts, want.Commands, want.Scripts, want.Bytes, want.InScripts, strings.Join(got.Lines, "\n"))
	}
}

// One unfused hop, pinned as the fused run is: the worker's read of an activation of a
// node in the middle of a flow and the commit of its step, which activates the next
// node. An unfused flow pays this for every node.
func TestAnUnfusedHopCostsPinnedRedisCommands(t *testing.T) {
	r := storetest.Real(t)
	flow := costFlow(t, r, "a", "b", "c")
	state := []byte(`{"pad":"` + strings.Repeat("x", 240) + `"}`)
	costStart(t, r, flow, costRun, "a", state)
	costCommit(t, r, state, store.StatusRunning, costRead(t, r, flow, "a"), []store.Transition{store.Activate{Node: "b"}})

	got := monitorRun(t, flow, func() {
		costCommit(t, r, state, store.StatusRunning, costRead(t, r, flow, "b"), []store.Transition{store.Activate{Node: "c"}})
	})
	checkCost(t, "one unfused hop", got, runCost{Commands: 2, Bytes: 1373, Scripts: 1, InScripts: 10})
}

// A fork of three branches into a join, pinned as the engine commits it when the
// branches start at pure steps: the start, the step that opens the fork with the three
// branches' steps run inline in its commit (a checkpoint entry each, each arriving at the
// join with it; the last arrival activates the join), the join's step (closes the fork,
// activates the output) and the output's step, which finishes the run. Three commits
// where the branches run apart (below) take five.
func TestAForkOfThreeIntoAJoinCostsPinnedRedisCommands(t *testing.T) {
	r := storetest.Real(t)
	ctx := context.Background()
	flow := costFlow(t, r, "in", "b0", "b1", "b2", "join", "out")
	fork := []store.Transition{store.OpenFork{Frame: costFrame, Branches: 3, Join: "join"}}
	for b := range 3 {
		node := fmt.Sprintf("b%d", b)
		// No state: nothing reads a branch's state after it arrives (the engine sends
		// none, see Branch).
		step := store.CommitStep{Node: node, Event: []byte(`{"status":"done","ms":0.01}`),
			Checkpoint: store.Checkpoint{Node: node, Kind: "step", Attempt: 1, Worker: "w-1", Duration: 10 * time.Microsecond}}
		fork = append(fork, store.Branch{Steps: []store.CommitStep{step}},
			store.Arrive{Frame: costFrame, Branch: strconv.Itoa(b), From: store.Ref(b + 1), Join: "join"})
	}
	got := costFork(t, r, flow, fork, nil)
	cps, err := r.Checkpoints(ctx, store.RunRef{Flow: flow, Run: costRun}, "-", 0)
	if err != nil {
		t.Fatal(err)
	}
	var hist []string
	for _, c := range cps {
		hist = append(hist, fmt.Sprintf("%s#%d", c.Node, c.Step))
	}
	if got := strings.Join(hist, " "); got != "#0 in#1 b0#2 b1#3 b2#4 join#5 out#6" {
		t.Errorf("history %s, want every step with a checkpoint of its own, numbered in order", got)
	}
	checkCost(t, "a fork of three into a join", got, runCost{Commands: 15, Bytes: 5542, Scripts: 3, InScripts: 36})
}

// A fork of three branches into a join that every branch reaches in the commit that
// opened the fork, pinned as the engine commits it then: the start and one commit — the
// step that opens the fork, the branches' steps (a checkpoint entry each) and the join's
// step with the output's after it (one entry, store.Joined), which finishes the run.
// The fork never reaches the frames hash, the join's checkpoint names its branches'
// checkpoints, and the history reads as if the join had had a commit of its own. Where
// that commit also starts the run, the run is one script call.
func TestAForkOfThreeJoinedInTheCommitThatOpenedItCostsPinnedRedisCommands(t *testing.T) {
	r := storetest.Real(t)
	ctx := context.Background()
	flow := costFlow(t, r, "in", "b0", "b1", "b2", "join", "out")
	state := []byte(`{"pad":"` + strings.Repeat("x", 240) + `"}`)
	step := func(node, kind string, upd []byte) store.CommitStep {
		return store.CommitStep{Node: node, Event: []byte(`{"status":"done","ms":0.01}`),
			Checkpoint: store.Checkpoint{Node: node, Kind: kind, Update: upd, Attempt: 1, Worker: "w-1", Duration: 10 * time.Microsecond}}
	}
	var trans []store.Transition
	for b := range 3 {
		trans = append(trans, store.Branch{Steps: []store.CommitStep{step(fmt.Sprintf("b%d", b), "step", []byte(fmt.Sprintf(`{"b%d":true}`, b)))}})
	}
	join, out := step("join", "join", []byte(`{"b0":true,"b1":true,"b2":true}`)), step("out", "step", nil)
	out.State, out.Final = state, []byte("null")
	// The branches in branch order: 2 arrived from the third branch entry, and so on.
	trans = append(trans, store.Joined{Steps: []store.CommitStep{join, out}, Arrivals: []store.Ref{1, 2, 3}})
	var lines []string
	got := monitorRun(t, flow, func() {
		costStart(t, r, flow, costRun, "in", state)
		costCommit(t, r, state, store.StatusSucceeded, costRead(t, r, flow, "in"), trans)
	})
	for _, l := range got.Lines {
		if strings.Contains(l, store.FlowKeys(flow).Frames(costRun)) {
			lines = append(lines, l)
		}
	}
	if len(lines) > 0 {
		t.Errorf("the fork reached the frames hash:\n%s", strings.Join(lines, "\n"))
	}
	cps, err := r.Checkpoints(ctx, store.RunRef{Flow: flow, Run: costRun}, "-", 0)
	if err != nil {
		t.Fatal(err)
	}
	var hist []string
	byNode := map[string]store.Checkpoint{}
	for _, c := range cps {
		hist = append(hist, fmt.Sprintf("%s#%d", c.Node, c.Step))
		byNode[c.Node] = c
	}
	if got := strings.Join(hist, " "); got != "#0 in#1 b0#2 b1#3 b2#4 join#5 out#6" {
		t.Errorf("history %s, want every step with a checkpoint of its own, numbered in order", got)
	}
	j := byNode["join"]
	want := []string{byNode["b0"].ID, byNode["b1"].ID, byNode["b2"].ID}
	if j.Kind != "join" || j.Parent != byNode["in"].ID || !slices.Equal(j.Branches, want) || string(j.Update) != `{"b0":true,"b1":true,"b2":true}` {
		t.Errorf("the join's checkpoint: kind %q, parent %s (want %s), branches %v (want %v), update %s", j.Kind, j.Parent, byNode["in"].ID, j.Branches, want, j.Update)
	}
	if o := byNode["out"]; o.Parent != j.ID {
		t.Errorf("the output's parent is %s, want the join's %s", o.Parent, j.ID)
	}
	run, err := r.GetRun(ctx, flow, costRun)
	if err != nil || run.LastCkpt != byNode["out"].ID || run.Steps != 6 {
		t.Errorf("the run's last checkpoint %s after %d steps (%v), want the output's %s after 6", run.LastCkpt, run.Steps, err, byNode["out"].ID)
	}
	checkCost(t, "a fork of three joined in the commit that opened it", got, runCost{Commands: 11, Bytes: 3269, Scripts: 1, InScripts: 16})

	// Started by that commit (the engine's startInline, when the starting process runs
	// the fork's step): the whole run is one script call.
	flow = costFlow(t, r, "in", "b0", "b1", "b2", "join", "out")
	if err := r.LoadScripts(ctx); err != nil {
		t.Fatal(err)
	}
	c := foldedStart(flow, costRun, state)
	c.Steps, c.Transitions = c.Steps[:1], trans
	got = monitorRun(t, flow, func() {
		res, errs := r.CommitBatch(ctx, []*store.Commit{c})
		if errs[0] != nil || res[0].Status != store.CommitOK || res[0].RunStatus != store.StatusSucceeded {
			t.Fatalf("commit: %v %+v", errs[0], res[0])
		}
	})
	checkCost(t, "a fork of three into a join started and joined by one commit", got, runCost{Commands: 1, Bytes: 2329, Scripts: 1, InScripts: 13})
}

// A fork of three branches into a join whose branches run apart (a branch step with
// side effects, or fusion off), pinned: the start, the step that opens the fork and
// activates the three branches, the branches' steps (read together, committed in one
// call: each arrives at the join, the last activates it), the join's step (closes the
// fork, activates the output) and the output's step, which finishes the run.
func TestAForkOfThreeIntoAJoinWhoseBranchesRunApartCostsPinnedRedisCommands(t *testing.T) {
	r := storetest.Real(t)
	flow := costFlow(t, r, "in", "b0", "b1", "b2", "join", "out")
	fork := []store.Transition{store.OpenFork{Frame: costFrame, Branches: 3, Join: "join"}}
	for b := range 3 {
		fork = append(fork, store.Activate{Node: fmt.Sprintf("b%d", b), Tokens: fmt.Sprintf("%s@%d", costFrame, b)})
	}
	got := costFork(t, r, flow, fork, func(state []byte) {
		var arrive [][]store.Transition
		for b := range 3 {
			arrive = append(arrive, []store.Transition{store.Arrive{Frame: costFrame, Branch: strconv.Itoa(b), Join: "join"}})
		}
		costCommit(t, r, state, store.StatusRunning, costRead(t, r, flow, "b0", "b1", "b2"), arrive...)
	})
	checkCost(t, "a fork of three into a join", got, runCost{Commands: 17, Bytes: 8671, Scripts: 4, InScripts: 71})
}

// The run and the fork frame of the fork tests.
const (
	costRun   = "r0123456789abcdefghijk" // as long as engine.NewRunID's
	costFrame = "f1"
)

// costFork runs, under MONITOR, run costRun of flow (nodes in, b0..b2, join, out) through
// a fork into its join: the start, the commit of in's step with the fork's transitions,
// the branches' steps (branches, when they run apart), the join's step and the output's,
// which finishes the run. It checks that the frames hash is gone and returns the cost.
func costFork(t *testing.T, r *store.Redis, flow string, fork []store.Transition, branches func(state []byte)) runCost {
	t.Helper()
	state := []byte(`{"pad":"` + strings.Repeat("x", 240) + `"}`)
	got := monitorRun(t, flow, func() {
		costStart(t, r, flow, costRun, "in", state)
		costCommit(t, r, state, store.StatusRunning, costRead(t, r, flow, "in"), fork)
		if branches != nil {
			branches(state)
		}
		costCommit(t, r, state, store.StatusRunning, costRead(t, r, flow, "join"),
			[]store.Transition{store.CloseFork{Frame: costFrame}, store.Activate{Node: "out"}})
		costCommit(t, r, state, store.StatusSucceeded, costRead(t, r, flow, "out"), nil)
	})
	if n, err := r.Client.Exists(context.Background(), store.FlowKeys(flow).Frames(costRun)).Result(); err != nil || n != 0 {
		t.Errorf("the run's frames hash is still there after its join (%d, %v)", n, err)
	}
	return got
}

// costStart starts a fresh run of flow at node entry with state as its input.
func costStart(t *testing.T, r *store.Redis, flow, run, entry string, state []byte) {
	t.Helper()
	if _, err := r.StartRun(context.Background(), store.StartArgs{Flow: flow, Run: run, Version: "v1", State: state, Fresh: true,
		Checkpoint: store.Checkpoint{Kind: "input", Update: state}, Entries: []string{entry}, Fields: []string{"input", string(state)}}); err != nil {
		t.Fatal(err)
	}
}

// monitorLine is one line of MONITOR: "<time> [<db> <client or lua>] "ARG" "ARG" ...".
var (
	monitorLine = regexp.MustCompile(`^[0-9.]+ \[\d+ ([^\]]+)\] (.*)$`)
	monitorArg  = regexp.MustCompile(`"(?:[^"\\]|\\.)*"`)
)

// monitorRun runs do and returns what MONITOR saw of it: the commands of the connections
// that named flow's keys and the commands scripts ran on them.
func monitorRun(t *testing.T, flow string, do func()) runCost {
	t.Helper()
	opt, err := redis.ParseURL(storetest.URL())
	if err != nil {
		t.Fatal(err)
	}
	// A raw connection: MONITOR's replies are lines ("+...") until the connection closes.
	conn, err := net.Dial("tcp", opt.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if opt.Password != "" {
		fmt.Fprintf(conn, "AUTH %s %s\r\n", cmp.Or(opt.Username, "default"), opt.Password)
	}
	fmt.Fprintf(conn, "MONITOR\r\n")
	ch := make(chan string, 1<<16)
	go func() {
		defer close(ch)
		rd := bufio.NewReaderSize(conn, 1<<20)
		for {
			l, err := rd.ReadString('\n')
			if err != nil {
				return
			}
			ch <- strings.TrimSuffix(strings.TrimPrefix(l, "+"), "\r\n")
		}
	}()
	// MONITOR is on once it shows a command sent after it.
	start := "cost-start-" + flow
	stop := "cost-stop-" + flow
	waitFor(t, ch, opt, start, nil)
	do()
	var lines []string
	waitFor(t, ch, opt, stop, &lines)

	var cost runCost
	ours := map[string]bool{}
	type line struct{ who, args string }
	var parsed []line
	for _, l := range lines {
		m := monitorLine.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		parsed = append(parsed, line{m[1], m[2]})
		if m[1] != "lua" && strings.Contains(m[2], flow) {
			ours[m[1]] = true
		}
	}
	for _, l := range parsed {
		switch {
		case l.who == "lua":
			if strings.Contains(l.args, flow) {
				cost.InScripts++
				cost.Lines = append(cost.Lines, "  (lua) "+trim(l.args))
			}
		case ours[l.who]:
			cost.Commands++
			for _, a := range monitorArg.FindAllString(l.args, -1) {
				if u, err := strconv.Unquote(a); err == nil {
					cost.Bytes += len(u)
				} else {
					cost.Bytes += len(a) - 2
				}
			}
			name := strings.ToLower(strings.Trim(strings.SplitN(l.args, " ", 2)[0], `"`))
			if name == "evalsha" || name == "eval" {
				cost.Scripts++
			}
			cost.Lines = append(cost.Lines, trim(l.args))
		}
	}
	return cost
}

func trim(s string) string {
	if len(s) > 120 {
		return s[:120] + fmt.Sprintf("… (%d chars)", len(s))
	}
	return s
}

// waitFor sends ECHO marker until MONITOR shows it, keeping the lines before it in
// lines (when not nil).
func waitFor(t *testing.T, ch chan string, opt *redis.Options, marker string, lines *[]string) {
	t.Helper()
	c := redis.NewClient(opt)
	defer c.Close()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		c.Echo(context.Background(), marker)
		timeout := time.After(200 * time.Millisecond)
		for {
			select {
			case l := <-ch:
				if strings.Contains(l, marker) {
					return
				}
				if lines != nil {
					*lines = append(*lines, l)
				}
				continue
			case <-timeout:
			}
			break
		}
	}
	t.Fatalf("MONITOR never showed %q", marker)
}

// A run's input is kept once, in the state hash: the first checkpoint, whose update it
// is, does not store it again, and reading the history gives it back.
func TestTheInputIsKeptOnceAndTheFirstCheckpointShowsIt(t *testing.T) {
	storetest.Each(t, func(t *testing.T, r *store.Redis) {
		ctx := context.Background()
		flow := storetest.FlowID(t)
		storetest.DeleteFlowKeys(t, r, flow)
		in := `{"question":"` + strings.Repeat("why ", 64) + `"}`
		if err := r.StoreVersion(ctx, flow, "v1", []byte("{}"), []string{"a"}); err != nil {
			t.Fatal(err)
		}
		for _, fresh := range []bool{true, false} {
			run := fmt.Sprintf("r-%v", fresh)
			ckpt, err := r.StartRun(ctx, store.StartArgs{Flow: flow, Run: run, Version: "v1", State: []byte(in), Fresh: fresh,
				Checkpoint: store.Checkpoint{Kind: "input", Update: []byte(in)}, Entries: []string{"a"}, Fields: []string{"input", in}})
			if err != nil {
				t.Fatal(err)
			}
			raw, err := r.Client.XRange(ctx, store.FlowKeys(flow).Ckpt(run), "-", "+").Result()
			if err != nil || len(raw) != 1 {
				t.Fatalf("checkpoint stream: %v %v", raw, err)
			}
			for f, v := range raw[0].Values {
				if s, _ := v.(string); strings.Contains(s, "why why") {
					t.Errorf("fresh %v: the first checkpoint's %q holds the input again", fresh, f)
				}
			}
			cps, err := r.Checkpoints(ctx, store.RunRef{Flow: flow, Run: run}, "", 0)
			if err != nil || len(cps) != 1 || string(cps[0].Update) != in {
				t.Errorf("fresh %v: history %+v %v, want the input checkpoint with the input as its update", fresh, cps, err)
			}
			c, err := r.GetCheckpoint(ctx, store.RunRef{Flow: flow, Run: run}, ckpt)
			if err != nil || string(c.Update) != in {
				t.Errorf("fresh %v: checkpoint %+v %v, want the input as its update", fresh, c, err)
			}
			// The first checkpoint's state is the input: kept once, in the state hash, and
			// every reader of states gets it.
			if kept, err := r.Client.HGet(ctx, store.FlowKeys(flow).State(run), ckpt).Result(); err != nil || strings.Contains(kept, "why why") {
				t.Errorf("fresh %v: the state hash keeps %q (%v) for the first checkpoint, want no second copy of the input", fresh, kept, err)
			}
			if c == nil || string(c.State) != in {
				t.Errorf("fresh %v: the first checkpoint's state is %q, want the input", fresh, c.State)
			}
			if st, err := r.LoadState(ctx, store.RunRef{Flow: flow, Run: run}, ckpt); err != nil || string(st) != in {
				t.Errorf("fresh %v: LoadState %q %v, want the input", fresh, st, err)
			}
			for _, first := range []bool{true, false} {
				ins, err := r.LoadStepInputs(ctx, []store.StateRef{{RunRef: store.RunRef{Flow: flow, Run: run}, Ckpt: ckpt, First: first}}, []bool{true})
				if err != nil || len(ins) != 1 || string(ins[0].State) != in || ins[0].Status != store.StatusQueued {
					t.Errorf("fresh %v: LoadStepInputs (first %v) %+v %v, want the input as the state, status queued", fresh, first, ins, err)
				}
			}
		}
	})
}

// A run's input is in its state hash, not its run hash, whose fields are then all small
// (Redis keeps such a hash as a listpack: a third of a hash table's bytes); every reader
// of the input gets it — the run (GetRun, GetRuns), the history and the readers of the
// first checkpoint's state — and so does every reader of a run an older build started,
// with its input in its run hash.
func TestARunsInputIsKeptInItsStateHashAndEveryReaderGetsIt(t *testing.T) {
	storetest.Each(t, func(t *testing.T, r *store.Redis) {
		ctx := context.Background()
		flow := costFlow(t, r, "a")
		in := `{"question":"` + strings.Repeat("why ", 64) + `"}`
		k := store.FlowKeys(flow)
		for _, layout := range []string{"fresh", "not fresh", "older build"} {
			run := "r-" + strings.ReplaceAll(layout, " ", "-")
			ref := store.RunRef{Flow: flow, Run: run}
			ckpt, err := r.StartRun(ctx, store.StartArgs{Flow: flow, Run: run, Version: "v1", State: []byte(in), Fresh: layout == "fresh",
				Checkpoint: store.Checkpoint{Kind: "input", Update: []byte(in)}, Entries: []string{"a"}, Fields: []string{"by", "ada", "input", in}})
			if err != nil {
				t.Fatal(err)
			}
			if layout == "older build" {
				// What an older build kept: the input in the run hash, none in the state hash.
				r.Client.HSet(ctx, k.Run(run), "input", in)
				r.Client.HDel(ctx, k.State(run), "input")
			} else {
				h, err := r.Client.HGetAll(ctx, k.Run(run)).Result()
				if err != nil || h["by"] != "ada" || h["status"] != store.StatusQueued {
					t.Fatalf("%s: run hash %v %v", layout, h, err)
				}
				for f, v := range h {
					if len(v) > 64 {
						t.Errorf("%s: the run hash's %q holds %d bytes (%.30q…), want every field within 64 (hash-max-listpack-value)", layout, f, len(v), v)
					}
				}
			}
			got, err := r.GetRun(ctx, flow, run)
			if err != nil || string(got.Input) != in || got.By != "ada" {
				t.Errorf("%s: GetRun input %.30q by %q (%v), want the input", layout, got.Input, got.By, err)
			}
			runs, err := r.GetRuns(ctx, []store.RunRef{ref})
			if err != nil || len(runs) != 1 || string(runs[0].Input) != in {
				t.Errorf("%s: GetRuns %+v %v, want the run with its input", layout, runs, err)
			}
			if st, err := r.LoadState(ctx, ref, ckpt); err != nil || string(st) != in {
				t.Errorf("%s: LoadState %.30q %v, want the input", layout, st, err)
			}
			for _, first := range []bool{true, false} {
				ins, err := r.LoadStepInputs(ctx, []store.StateRef{{RunRef: ref, Ckpt: ckpt, First: first}}, []bool{true})
				if err != nil || len(ins) != 1 || string(ins[0].State) != in {
					t.Errorf("%s: LoadStepInputs (first %v) %+v %v, want the input as the state", layout, first, ins, err)
				}
			}
			cps, err := r.Checkpoints(ctx, ref, "", 0)
			if err != nil || len(cps) != 1 || string(cps[0].Update) != in {
				t.Errorf("%s: history %+v %v, want the input checkpoint with the input as its update", layout, cps, err)
			}
			c, err := r.GetCheckpoint(ctx, ref, ckpt)
			if err != nil || string(c.Update) != in || string(c.State) != in {
				t.Errorf("%s: first checkpoint %+v %v, want the input as its update and state", layout, c, err)
			}
		}
	})
}

// A step whose output is the state it read (an input node's) keeps that output once,
// as its parent checkpoint's state: the commit does not store it again, and every
// reader of the history gives it back — from the run's input for a first checkpoint
// kept as the input, from the state hash for any other. With keep_last, which deletes
// the states of the checkpoints it drops, the output is stored (keep_last 10 drops
// none of these four).
func TestAnOutputThatIsTheStateReadIsKeptOnceAndTheHistoryShowsIt(t *testing.T) {
	storetest.Each(t, func(t *testing.T, r *store.Redis) {
		ctx := context.Background()
		for _, keep := range []int{0, 10} {
			flow := costFlow(t, r, "in", "a", "b")
			run := fmt.Sprintf("r-keep-%d", keep)
			ref := store.RunRef{Flow: flow, Run: run}
			in := `{"question":"` + strings.Repeat("why ", 64) + `"}`
			next := `{"answer":"` + strings.Repeat("because ", 32) + `"}`
			if _, err := r.StartRun(ctx, store.StartArgs{Flow: flow, Run: run, Version: "v1", State: []byte(in), Fresh: true,
				Checkpoint: store.Checkpoint{Kind: "input", Update: []byte(in)}, Entries: []string{"in"}, Fields: []string{"input", in}}); err != nil {
				t.Fatal(err)
			}
			// in outputs the state it read (the input, kept as the run's input); a outputs
			// the state it read (in's, a state of its own); b outputs something else.
			for _, st := range []struct{ node, read, out, next string }{{"in", in, in, "a"}, {"a", next, next, "b"}, {"b", next, `{"x":1}`, ""}} {
				act := costRead(t, r, flow, st.node)[0]
				state := st.read
				if st.node == "in" {
					state = next // in's commit keeps a state of its own for a to read
				}
				s := store.CommitStep{Node: st.node, State: []byte(state), Event: []byte(`{"status":"done"}`),
					Checkpoint: store.Checkpoint{Node: st.node, Kind: "step", Attempt: 1, Worker: "w-1", Output: []byte(st.out), OutputIsState: st.out == st.read}}
				var trans []store.Transition
				if st.next != "" {
					trans = []store.Transition{store.Activate{Node: st.next}}
				}
				res, errs := r.CommitBatch(ctx, []*store.Commit{{Act: act, Consumer: "w-1", MaxSteps: 100, TTL: time.Hour, KeepLast: keep,
					Steps: []store.CommitStep{s}, Transitions: trans}})
				if errs[0] != nil || res[0].Status != store.CommitOK {
					t.Fatalf("commit of %s: %v %+v", st.node, errs[0], res[0])
				}
			}
			raw, err := r.Client.XRange(ctx, store.FlowKeys(flow).Ckpt(run), "-", "+").Result()
			if err != nil || len(raw) != 4 {
				t.Fatalf("checkpoint stream: %v %v", raw, err)
			}
			copies := map[string]int{}
			for _, m := range raw {
				for _, v := range m.Values {
					s, _ := v.(string)
					copies["why"] += strings.Count(s, in)
					copies["because"] += strings.Count(s, next)
				}
			}
			if want := map[int]int{0: 0, 10: 1}[keep]; copies["why"] != want || copies["because"] != want {
				t.Errorf("keep_last %d: the checkpoint stream holds the input %d time(s) and a's state %d, want %d each", keep, copies["why"], copies["because"], want)
			}
			cps, err := r.Checkpoints(ctx, ref, "", 0)
			if err != nil || len(cps) != 4 {
				t.Fatalf("keep_last %d: history %+v %v", keep, cps, err)
			}
			for i, want := range []string{"", in, next, `{"x":1}`} {
				if string(cps[i].Output) != want {
					t.Errorf("keep_last %d: %s's output in the history is %q, want %.40q…", keep, cps[i].Node, cps[i].Output, want)
				}
				c, err := r.GetCheckpoint(ctx, ref, cps[i].ID)
				if err != nil || string(c.Output) != want {
					t.Errorf("keep_last %d: %s's checkpoint: output %q (%v), want %.40q…", keep, cps[i].Node, c.Output, err, want)
				}
			}
			// A history read from a later checkpoint on fills in the output too.
			if tail, err := r.Checkpoints(ctx, ref, cps[2].ID, 0); err != nil || len(tail) != 2 || string(tail[0].Output) != next {
				t.Errorf("keep_last %d: history from a's checkpoint: %+v %v, want a's output", keep, tail, err)
			}
		}
	})
}

// Closing one of two open forks forgets that fork alone: the frames hash is deleted
// whole only by the join of a run's only open fork, and a run whose forks an older
// build opened (no count of open forks) has its fork's fields deleted one by one.
func TestClosingANestedForkKeepsTheOuterOne(t *testing.T) {
	for _, older := range []bool{false, true} {
		t.Run(fmt.Sprintf("opened by an older build %v", older), func(t *testing.T) {
			storetest.Each(t, func(t *testing.T, r *store.Redis) {
				ctx := context.Background()
				flow := costFlow(t, r, "in", "a", "b", "c", "d")
				run := "r1"
				state := []byte(`{}`)
				if _, err := r.StartRun(ctx, store.StartArgs{Flow: flow, Run: run, Version: "v1", State: state, Fresh: true,
					Checkpoint: store.Checkpoint{Kind: "input"}, Entries: []string{"in"}}); err != nil {
					t.Fatal(err)
				}
				costCommit(t, r, state, store.StatusRunning, costRead(t, r, flow, "in"), []store.Transition{
					store.OpenFork{Frame: "F1", Branches: 2, Join: "d"},
					store.Activate{Node: "a", Tokens: "F1@0"}, store.Activate{Node: "b", Tokens: "F1@1"}})
				costCommit(t, r, state, store.StatusRunning, costRead(t, r, flow, "a"), []store.Transition{
					store.OpenFork{Frame: "F2", Branches: 1, Outer: "F1@0", Join: "c"},
					store.Activate{Node: "c", Tokens: "F1@0 F2@0"}})
				k := store.FlowKeys(flow)
				if older {
					r.Client.HDel(ctx, k.Run(run), "openf")
				}
				costCommit(t, r, state, store.StatusRunning, costRead(t, r, flow, "c"), []store.Transition{
					store.CloseFork{Frame: "F2"}, store.Arrive{Frame: "F1", Branch: "0", Join: "d"}})
				f, err := r.Client.HGetAll(ctx, k.Frames(run)).Result()
				if err != nil || f["F1:n"] != "2" || f["F1:d"] != "1" || f["F2:n"] != "" {
					t.Fatalf("frames after the inner join: %v %v; want the outer fork's (one branch in), not the inner's", f, err)
				}
				costCommit(t, r, state, store.StatusRunning, costRead(t, r, flow, "b"), []store.Transition{
					store.Arrive{Frame: "F1", Branch: "1", Join: "d"}})
				costCommit(t, r, state, store.StatusSucceeded, costRead(t, r, flow, "d"), []store.Transition{store.CloseFork{Frame: "F1"}})
				if n, err := r.Client.Exists(ctx, k.Frames(run)).Result(); err != nil || n != 0 {
					t.Errorf("the frames hash is still there after the outer join (%d, %v)", n, err)
				}
			})
		})
	}
}
