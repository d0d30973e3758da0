package store_test

import (
	"bufio"
	"cmp"
	"context"
	"fmt"
	"net"
	"regexp"
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
		if _, err := r.StartRun(ctx, store.StartArgs{Flow: flow, Run: run, Version: "v1", State: state, Fresh: true,
			Checkpoint: store.Checkpoint{Kind: "input", Update: state}, Entries: []string{"in"}, Fields: []string{"input", string(state)}}); err != nil {
			t.Fatal(err)
		}
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
		if errs[0] != nil || res[0].Status != "ok" || res[0].RunStatus != store.StatusSucceeded {
			t.Fatalf("commit: %v %+v", errs[0], res[0])
		}
	})
	want := runCost{Commands: 11, Bytes: 3325, Scripts: 1, InScripts: 14}
	if got.Commands != want.Commands || got.Scripts != want.Scripts || got.InScripts != want.InScripts ||
		got.Bytes < want.Bytes-16 || got.Bytes > want.Bytes+16 {
		t.Errorf("one fused run: %d commands (%d scripts) of %d argument bytes, %d commands inside scripts; want %d (%d), %d ± 16, %d\n%s",
			got.Commands, got.Scripts, got.Bytes, got.InScripts, want.Commands, want.Scripts, want.Bytes, want.InScripts, strings.Join(got.Lines, "\n"))
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
