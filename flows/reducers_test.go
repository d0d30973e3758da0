package flows_test

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/flows"
)

func num(s string) json.Number { return json.Number(s) }

func TestReducersMergeUpdatesIntoState(t *testing.T) {
	reducers := flows.Reducers{"log": flows.Append, "meta": flows.Merge, "cost": flows.Add}
	for _, tc := range []struct {
		name          string
		state, update map[string]any
		want          map[string]any
	}{
		{"an undeclared key is replaced",
			map[string]any{"answer": "old"}, map[string]any{"answer": "new"},
			map[string]any{"answer": "new"}},
		{"replace sets a key the state lacks",
			map[string]any{}, map[string]any{"answer": []any{"a"}},
			map[string]any{"answer": []any{"a"}}},
		{"append concatenates an array",
			map[string]any{"log": []any{"a"}}, map[string]any{"log": []any{"b", "c"}},
			map[string]any{"log": []any{"a", "b", "c"}}},
		{"append adds a single value as one item",
			map[string]any{"log": []any{"a"}}, map[string]any{"log": "b"},
			map[string]any{"log": []any{"a", "b"}}},
		{"append starts a list when the key is absent",
			map[string]any{}, map[string]any{"log": []any{"a"}},
			map[string]any{"log": []any{"a"}}},
		{"append keeps a scalar current value as the first item",
			map[string]any{"log": "a"}, map[string]any{"log": "b"},
			map[string]any{"log": []any{"a", "b"}}},
		{"merge merges objects shallowly",
			map[string]any{"meta": map[string]any{"a": num("1"), "b": map[string]any{"x": true}}},
			map[string]any{"meta": map[string]any{"b": map[string]any{"y": true}, "c": num("3")}},
			map[string]any{"meta": map[string]any{"a": num("1"), "b": map[string]any{"y": true}, "c": num("3")}}},
		{"merge deletes a key set to null",
			map[string]any{"meta": map[string]any{"a": num("1"), "b": num("2")}},
			map[string]any{"meta": map[string]any{"a": nil}},
			map[string]any{"meta": map[string]any{"b": num("2")}}},
		{"merge of null leaves the value",
			map[string]any{"meta": map[string]any{"a": num("1")}}, map[string]any{"meta": nil},
			map[string]any{"meta": map[string]any{"a": num("1")}}},
		{"merge starts an object when the key is absent",
			map[string]any{}, map[string]any{"meta": map[string]any{"a": num("1")}},
			map[string]any{"meta": map[string]any{"a": num("1")}}},
		{"add sums integers exactly",
			map[string]any{"cost": num("9007199254740993")}, map[string]any{"cost": num("2")},
			map[string]any{"cost": num("9007199254740995")}},
		{"add sums decimals without binary rounding",
			map[string]any{"cost": num("0.1")}, map[string]any{"cost": num("0.2")},
			map[string]any{"cost": num("0.3")}},
		{"add counts from zero when the key is absent",
			map[string]any{}, map[string]any{"cost": num("5")},
			map[string]any{"cost": num("5")}},
		{"add takes Go numbers too",
			map[string]any{"cost": 2}, map[string]any{"cost": 1.5},
			map[string]any{"cost": num("3.5")}},
		{"add of null leaves the value",
			map[string]any{"cost": num("4")}, map[string]any{"cost": nil},
			map[string]any{"cost": num("4")}},
		{"keys the update does not name are kept",
			map[string]any{"keep": "me", "log": []any{}}, map[string]any{"log": "x"},
			map[string]any{"keep": "me", "log": []any{"x"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before, _ := json.Marshal(tc.state)
			got, err := reducers.Apply(tc.state, tc.update)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %#v, want %#v", got, tc.want)
			}
			if after, _ := json.Marshal(tc.state); string(after) != string(before) {
				t.Errorf("Apply changed its input state: %s became %s", before, after)
			}
		})
	}
}

func TestReducersRefuseWhatTheyCannotMerge(t *testing.T) {
	reducers := flows.Reducers{"meta": flows.Merge, "cost": flows.Add, "odd": flows.Reducer("concat")}
	for _, tc := range []struct {
		name          string
		state, update map[string]any
		want          string
	}{
		{"merge of a non-object", map[string]any{}, map[string]any{"meta": []any{1}},
			`state key "meta": merge reducer needs an object, got an array`},
		{"merge into a non-object", map[string]any{"meta": "text"}, map[string]any{"meta": map[string]any{}},
			`state key "meta": merge reducer: current value is a string, not an object`},
		{"add of a string", map[string]any{"cost": num("1")}, map[string]any{"cost": "2"},
			`state key "cost": add reducer needs numbers, got a number and a string`},
		{"add to a string", map[string]any{"cost": "1"}, map[string]any{"cost": num("2")},
			`state key "cost": add reducer needs numbers, got a string and a number`},
		{"an unknown reducer", map[string]any{}, map[string]any{"odd": 1},
			`state key "odd": unknown reducer "concat"`},
		{"the first bad key in sorted order is the one reported", map[string]any{},
			map[string]any{"meta": 1, "cost": "x"}, `state key "cost"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := reducers.Apply(tc.state, tc.update)
			if err == nil {
				t.Fatalf("no error; state became %v", got)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not say %q", err, tc.want)
			}
		})
	}
}

func TestReducersOfDeclaredState(t *testing.T) {
	d := &flows.Document{State: map[string]flows.StateKey{
		"log": {Reducer: flows.Append}, "answer": {Reducer: flows.Replace}, "plain": {}, "n": {Reducer: flows.Add},
	}}
	want := flows.Reducers{"log": flows.Append, "n": flows.Add}
	if got := flows.ReducersOf(d); !reflect.DeepEqual(got, want) {
		t.Errorf("ReducersOf = %v, want %v", got, want)
	}
}
