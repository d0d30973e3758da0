package engine

import (
	"context"
	"testing"

	"github.com/sluicehq/sluice/flows"
	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/storetest"
)

// On a cluster a node's partitions are read by several readers sharing its limit. A
// reader that finds the room taken by the others (who hold it while they block on their
// own, maybe empty, partitions) must come back soon, not block a whole read on its
// other streams while its partition of the node has a backlog: that stalled one
// partition's runs for a second at a time (3 partitions: 640 runs/s instead of 2300).
func TestAReaderLeftWithoutRoomComesBackSoon(t *testing.T) {
	r, err := store.Open(context.Background(), store.Options{URL: storetest.SharedCluster(t).URL()})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	e := New(r, flows.NewRegistry(), Options{})
	flow := storetest.FlowID(t)
	w := e.NewWorker(WorkerOptions{Flows: []string{flow}})
	w.cat.served[flow] = &served{flow: flow, nodes: []string{"a", "b"}, parts: []int{1, 2, 3},
		limits: map[string]int{"a": 8, "b": 8}, settings: flows.DefaultSettings}
	groups, _, _ := w.readGroups()
	if len(groups) != 3 {
		t.Fatalf("%d read groups for 3 partitions on a cluster, want 3", len(groups))
	}
	// Readers 1 and 2 plan their reads and hold their room (as while they block), and
	// steps of a are in flight: nothing of a's limit is left for reader 0.
	held := []aRead{w.planRead(1, 0), w.planRead(2, 0)}
	defer func() {
		for _, rd := range held {
			w.done(rd)
		}
	}()
	w.inflight.busy[nodeKey{flow, "a"}] = 8 - w.inflight.reserved[nodeKey{flow, "a"}]
	rd := w.planRead(0, 0)
	defer w.done(rd)
	readsA := false
	for _, s := range rd.streams {
		readsA = readsA || s.Node == "a"
	}
	if !readsA && !rd.busy {
		t.Errorf("reader 0 reads %v without node a, for lack of room, and blocks a whole read: want a short one", rd.streams)
	}
}

// A step's end wakes every reader waiting for room, not one of them: with a reader per
// partition or per group of streams, a wake-up taken by a reader whose nodes were still
// full left the reader of the node the step freed asleep until its Block ran out (the
// wake-up was one slot that the first waiter emptied).
func TestAStepsEndWakesEveryReaderWaitingForRoom(t *testing.T) {
	var rs readerSet
	waiting := []<-chan struct{}{rs.wakeup(), rs.wakeup(), rs.wakeup()}
	rs.poke()
	for i, wake := range waiting {
		select {
		case <-wake:
		default:
			t.Errorf("reader %d still waits after a step ended", i)
		}
	}
	// The next wait is for the next step's end, and a step that ends after a reader
	// took its wake-up (while it read) wakes it when it waits.
	next := rs.wakeup()
	select {
	case <-next:
		t.Fatal("a reader woke with no step ended since it last woke")
	default:
	}
	rs.poke()
	select {
	case <-next:
	default:
		t.Error("a step that ended while the reader read did not wake it")
	}
}
