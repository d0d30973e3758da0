package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/sluicehq/sluice/flows"
	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/storetest"
)

// Two runs of one session that both summarise: the second summary, covering no more
// than the first, changes nothing, and messages appended meanwhile are kept.
func TestHistorySummaryIsStoredOnceAndKeepsNewerMessages(t *testing.T) {
	storetest.Each(t, func(t *testing.T, r *store.Redis) {
		ctx := context.Background()
		m := store.NewMemory(r)
		flow := storetest.FlowID(t)
		storetest.DeleteFlowKeys(t, r, flow)
		scope, session := "f:"+flow, "a{b}c" // braces cannot break the hash tag
		var msgs []flows.HistoryMessage
		for _, c := range []string{"one", "two", "three"} {
			msgs = append(msgs, flows.HistoryMessage{Role: "user", Content: c})
		}
		if err := m.AppendHistory(ctx, scope, session, msgs, time.Hour); err != nil {
			t.Fatal(err)
		}
		ok, err := m.Summarize(ctx, scope, session, "first", 2, time.Hour)
		if err != nil || !ok {
			t.Fatalf("summarize: %v, %v", ok, err)
		}
		if err := m.AppendHistory(ctx, scope, session, []flows.HistoryMessage{{Role: "assistant", Content: "four"}}, time.Hour); err != nil {
			t.Fatal(err)
		}
		if ok, _ := m.Summarize(ctx, scope, session, "late", 2, time.Hour); ok {
			t.Error("a summary covering no more than the stored one was stored")
		}
		if h, err := m.LoadHistory(ctx, scope, session, 1, 0); err != nil || len(h.Messages) != 1 || h.Messages[0].Content != "four" || h.Total != 2 {
			t.Errorf("the newest message: %+v, %v", h, err)
		}
		h, err := m.LoadHistory(ctx, scope, session, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		if h.Summary != "first" || h.Through != 2 || len(h.Messages) != 2 || h.Messages[0].Content != "three" || h.Messages[0].Seq != 3 || h.Messages[1].Seq != 4 {
			t.Errorf("history %+v, want summary first through 2, then three (3) and four (4)", h)
		}
	})
}
