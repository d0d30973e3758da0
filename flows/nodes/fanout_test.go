package nodes_test

import (
	"reflect"
	"testing"
)

func TestFanoutSeedsOneBranchPerItem(t *testing.T) {
	f := build(t, "fanout", `{"items": ".docs", "as": "doc"}`)
	res, err := run(t, f, state(t, `{"docs": ["a", {"b": 1}, null]}`))
	if err != nil {
		t.Fatal(err)
	}
	want := []any{
		map[string]any{"doc": "a", "doc_index": 0},
		map[string]any{"doc": map[string]any{"b": num("1")}, "doc_index": 1},
		map[string]any{"doc": nil, "doc_index": 2},
	}
	if !reflect.DeepEqual(res.Items, want) {
		t.Errorf("items %#v, want %#v", res.Items, want)
	}
	if res.Output != 3 {
		t.Errorf("output %v, want the number of branches, 3", res.Output)
	}
}

func TestFanoutDefaultsToItemsAndItem(t *testing.T) {
	res, err := run(t, build(t, "fanout", `{}`), state(t, `{"items": [7]}`))
	if err != nil {
		t.Fatal(err)
	}
	if want := []any{map[string]any{"item": num("7"), "item_index": 0}}; !reflect.DeepEqual(res.Items, want) {
		t.Errorf("items %#v, want %#v", res.Items, want)
	}
}

// An empty or missing list starts no branch; the result still says it is a fan-out
// (Items is empty, not nil), so the runtime goes straight to the join.
func TestFanoutOverNothingStartsNoBranch(t *testing.T) {
	f := build(t, "fanout", `{"items": ".docs"}`)
	for _, s := range []string{`{"docs": []}`, `{}`} {
		res, err := run(t, f, state(t, s))
		if err != nil {
			t.Fatal(err)
		}
		if res.Items == nil || len(res.Items) != 0 || res.Output != 0 {
			t.Errorf("%s: items %#v, output %v; want an empty, non-nil list and 0", s, res.Items, res.Output)
		}
	}
}

func TestFanoutRefusesWhatIsNotAList(t *testing.T) {
	f := build(t, "fanout", `{"items": ".docs"}`)
	for s, want := range map[string]string{
		`{"docs": "abc"}`:    "items must be a list, got a string",
		`{"docs": {"a": 1}}`: "items must be a list, got an object",
		`{"docs": 3}`:        "items must be a list, got a number",
	} {
		_, err := run(t, f, state(t, s))
		wantPermanent(t, err, "params.items", want)
	}
}

func TestFanoutRefusesMoreThanMaxItems(t *testing.T) {
	f := build(t, "fanout", `{"items": ".docs", "max_items": 2}`)
	_, err := run(t, f, state(t, `{"docs": [1, 2, 3]}`))
	wantPermanent(t, err, "params.items", "3 items, more than max_items (2)")
	if _, err := run(t, f, state(t, `{"docs": [1, 2]}`)); err != nil {
		t.Errorf("max_items itself: %v", err)
	}
}
