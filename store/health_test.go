package store_test

import (
	"context"
	"testing"

	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/storetest"
)

func TestMissingGroupsNamesNodeStreamsWithoutTheirGroup(t *testing.T) {
	storetest.Each(t, func(t *testing.T, r *store.Redis) {
		ctx := context.Background()
		id := storetest.FlowID(t)
		storetest.DeleteFlowKeys(t, r, id)
		if _, err := r.MissingGroups(ctx, id); err == nil {
			t.Error("a flow never published: no error")
		}
		if err := r.StoreVersion(ctx, id, "v1", []byte(`{}`), []string{"a", "b"}); err != nil {
			t.Fatal(err)
		}
		if missing, err := r.MissingGroups(ctx, id); err != nil || len(missing) != 0 {
			t.Fatalf("after publishing: missing %v, %v", missing, err)
		}
		r.Client.Del(ctx, store.FlowKeys(id).In("b"))
		if missing, err := r.MissingGroups(ctx, id); err != nil || len(missing) != 1 || missing[0] != "b" {
			t.Errorf("b's stream gone: missing %v, %v; want [b]", missing, err)
		}
	})
}
