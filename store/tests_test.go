package store_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/sluicehq/sluice/flows"
	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/storetest"
)

// A flow's cases file lives beside it, is not listed as a flow, and goes with it when
// the flow is deleted.
func TestCasesFileLivesBesideTheFlow(t *testing.T) {
	lib, err := store.NewLibrary(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lib.LoadCases("triage"); flows.ErrorCode(err) != flows.NotFound {
		t.Fatalf("no cases yet: %v, want NotFound", err)
	}
	if err := lib.Save("triage", []byte(`{"sluice": 1, "id": "triage"}`)); err != nil {
		t.Fatal(err)
	}
	if err := lib.SaveCases("triage", []byte(`{"sluice_cases": 1, "cases": []}`)); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(lib.Dir, "triage.cases.json")); err != nil {
		t.Fatalf("the cases file is not triage.cases.json beside the flow: %v", err)
	}
	files, err := lib.List()
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 1 || files[0].ID != "triage" {
		t.Errorf("the library lists %v, want the flow alone", files)
	}
	if err := lib.Delete("triage"); err != nil {
		t.Fatal(err)
	}
	if _, err := lib.LoadCases("triage"); flows.ErrorCode(err) != flows.NotFound {
		t.Errorf("after deleting the flow its cases remain: %v", err)
	}
	if err := lib.SaveCases("../x", nil); flows.ErrorCode(err) != flows.Invalid {
		t.Errorf("a bad flow id: %v, want Invalid", err)
	}
}

// A version's last test result: its summary beside the version history, the whole of
// it for a week; a newer result replaces the older.
func TestTestResultsByVersion(t *testing.T) {
	storetest.Each(t, func(t *testing.T, r *store.Redis) {
		ctx := context.Background()
		flow := storetest.FlowID(t)
		storetest.DeleteFlowKeys(t, r, flow)
		if _, err := r.TestResult(ctx, flow, "v1"); flows.ErrorCode(err) != flows.NotFound {
			t.Fatalf("no result yet: %v", err)
		}
		if err := r.SaveTestResult(ctx, flow, "v1", json.RawMessage(`{"passed": 1}`), json.RawMessage(`{"results": [1]}`)); err != nil {
			t.Fatal(err)
		}
		if err := r.SaveTestResult(ctx, flow, "v1", json.RawMessage(`{"passed": 2}`), json.RawMessage(`{"results": [2]}`)); err != nil {
			t.Fatal(err)
		}
		if err := r.SaveTestResult(ctx, flow, "v2", json.RawMessage(`{"passed": 0}`), json.RawMessage(`{}`)); err != nil {
			t.Fatal(err)
		}
		sums, err := r.TestSummaries(ctx, flow)
		if err != nil {
			t.Fatal(err)
		}
		if string(sums["v1"]) != `{"passed": 2}` || string(sums["v2"]) != `{"passed": 0}` || len(sums) != 2 {
			t.Errorf("summaries %v", sums)
		}
		whole, err := r.TestResult(ctx, flow, "v1")
		if err != nil || string(whole) != `{"results": [2]}` {
			t.Errorf("whole result %s, %v", whole, err)
		}
		ttl, err := r.Client.TTL(ctx, store.FlowKeys(flow).TestResult("v1")).Result()
		if err != nil || ttl <= 0 || ttl > store.TestResultTTL {
			t.Errorf("the whole result's TTL is %s, want at most %s", ttl, store.TestResultTTL)
		}
	})
}
