package store_test

import (
	"context"
	"testing"

	"github.com/sluicehq/sluice/flows"
	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/storetest"
)

func TestLedgerAddsUpPerRunAndPerDay(t *testing.T) {
	storetest.Each(t, func(t *testing.T, r *store.Redis) {
		ctx := context.Background()
		flow := storetest.FlowID(t)
		storetest.DeleteFlowKeys(t, r, flow)
		l := store.NewLedger(r)
		if _, _, err := l.Spend(ctx, flow, "a", "2030-01-02", flows.Spend{Tokens: 100, USD: 0.25}); err != nil {
			t.Fatal(err)
		}
		run, day, err := l.Spend(ctx, flow, "b", "2030-01-02", flows.Spend{Tokens: 50, USD: 0.000001})
		if err != nil {
			t.Fatal(err)
		}
		if run != (flows.Spend{Tokens: 50, USD: 0.000001}) || day != (flows.Spend{Tokens: 150, USD: 0.250001}) {
			t.Errorf("run b %+v, day %+v", run, day)
		}
		run, day, err = l.Spent(ctx, flow, "a", "2030-01-03")
		if err != nil || run != (flows.Spend{Tokens: 100, USD: 0.25}) || day != (flows.Spend{}) {
			t.Errorf("run a %+v, another day %+v, %v", run, day, err)
		}
		if s, err := r.RunSpend(ctx, flow, "b"); err != nil || s.Tokens != 50 {
			t.Errorf("RunSpend %+v %v", s, err)
		}
	})
}
