package store

import (
	"encoding/json"
	"reflect"
	"testing"
)

// TestCheckpointBodyIsWhatEncodingJSONWrites pins the hand-written encoding of checkpoint
// bodies to encoding/json's bytes: for each field of ckptBody set alone (so a field added
// later without its encoding fails here), for bodies with everything set, and for raw
// fields and strings encoding/json would change (whitespace, HTML characters, invalid
// JSON), where the hand-written path must give way.
func TestCheckpointBodyIsWhatEncodingJSONWrites(t *testing.T) {
	var bodies []ckptBody
	typ := reflect.TypeOf(ckptBody{})
	for i := 0; i < typ.NumField(); i++ {
		var b ckptBody
		f := reflect.ValueOf(&b).Elem().Field(i)
		switch f.Kind() {
		case reflect.String:
			f.SetString("v")
		case reflect.Int, reflect.Int64:
			f.SetInt(42)
		case reflect.Bool:
			f.SetBool(true)
		case reflect.Slice:
			if f.Type() == reflect.TypeOf(json.RawMessage(nil)) {
				f.SetBytes([]byte(`{"a":1}`))
			} else {
				f.Set(reflect.ValueOf([]string{"x", "y"}))
			}
		default:
			t.Fatalf("field %s of kind %s: teach this test (and appendBody) about it", typ.Field(i).Name, f.Kind())
		}
		bodies = append(bodies, b)
	}
	full := ckptBody{Node: "n1", Kind: "step", Update: json.RawMessage(`{"x":[1,2,{"y":null}]}`), Output: json.RawMessage(`"out"`),
		Error: "boom", Attempt: 2, Ports: []string{"yes"}, Branches: []string{"1-0", "1-1"}, DurUS: 1234, InTok: 10, OutTok: 5,
		CacheRead: 1, CacheWrite: 2, MicroUSD: 300, StateBytes: 256, Worker: "host-1-2", Entry: "1-0", Pinned: true}
	bodies = append(bodies, full, ckptBody{}, ckptBody{Kind: "input"})
	bodies = append(bodies, []ckptBody{
		{Kind: "step", Update: json.RawMessage(`{"a": 1}`)},     // whitespace: compacted
		{Kind: "step", Output: json.RawMessage(`"<b>&"`)},       // HTML: escaped
		{Kind: "step", Output: json.RawMessage("\"\u2028\"")},   // a line separator: escaped
		{Kind: "step", Error: "line\nbreak \"quoted\" <tag> é"}, // strings that need escaping
		{Kind: "step", Ports: []string{"a&b"}},
		{Kind: "step", Update: json.RawMessage(`{`)},                                // not JSON: encoding/json refuses it
		{Kind: "step", Update: json.RawMessage(`{"t":"two words, \"quoted\" \\"}`)}, // spaces in strings stay
		{Kind: "step", Update: json.RawMessage("{\"a\":[1,\n2]}")},                  // a newline between tokens goes
	}...)
	for _, b := range bodies {
		want, _ := json.Marshal(b)
		if got := encodeBody(&b); string(got) != string(want) {
			t.Errorf("%+v:\n got %s\nwant %s", b, got, want)
		}
	}
	want, _ := json.Marshal(bodies[:len(bodies)-1])
	if got := encodeBodies(bodies[:len(bodies)-1]); string(got) != string(want) {
		t.Errorf("packed bodies:\n got %s\nwant %s", got, want)
	}
}

// TestCheckpointBodyTakesTheHandWrittenPath pins which bodies are written by hand (the
// equality test above would pass if every body went through encoding/json).
func TestCheckpointBodyTakesTheHandWrittenPath(t *testing.T) {
	for _, tc := range []struct {
		b    ckptBody
		hand bool
	}{
		{ckptBody{Kind: "step", Output: json.RawMessage(`{}`), DurUS: 12, Worker: "h-1-2"}, true},
		{ckptBody{Kind: "input", Update: json.RawMessage(`{"pad":"two words \"q\" \\ é"}`)}, true},
		{ckptBody{Kind: "step", Update: json.RawMessage(`{"a": 1}`)}, false},
		{ckptBody{Kind: "step", Output: json.RawMessage(`"<b>"`)}, false},
		{ckptBody{Kind: "step", Update: json.RawMessage(`{`)}, false},
	} {
		if _, ok := appendBody(nil, &tc.b); ok != tc.hand {
			t.Errorf("%+v: by hand %v, want %v", tc.b, ok, tc.hand)
		}
	}
}

// TestStepEventsAreWhatEncodingJSONWrites pins the hand-written events array of a commit
// to encoding/json's bytes, and says which arrays are written by hand.
func TestStepEventsAreWhatEncodingJSONWrites(t *testing.T) {
	for _, tc := range []struct {
		steps []CommitStep
		hand  bool
	}{
		{[]CommitStep{{Node: "a", Event: json.RawMessage(`{"duration_ms":0.012,"kind":"step","status":"done"}`)}}, true},
		{[]CommitStep{{Node: "a"}, {Node: "b", Event: json.RawMessage(`{"kind":"step"}`)}, {Node: "c", Event: json.RawMessage(`{}`)}}, true},
		{[]CommitStep{{Node: "node \"q\" <x>", Event: json.RawMessage(`{"usage":{"input_tokens":3}}`)}}, true},
		{[]CommitStep{{Node: "a", Event: json.RawMessage(`{"prompt":"<b>"}`)}}, false},   // HTML: escaped
		{[]CommitStep{{Node: "a", Event: json.RawMessage(`{"status": "done"}`)}}, false}, // whitespace: compacted
	} {
		events := make([]stepEvent, len(tc.steps))
		for i, s := range tc.steps {
			events[i] = stepEvent{Node: s.Node, Data: s.Event}
			if len(s.Event) == 0 {
				events[i].Data = json.RawMessage("{}")
			}
		}
		want, _ := json.Marshal(events)
		if got := stepEventsJSON(tc.steps); string(got) != string(want) {
			t.Errorf("%+v:\n got %s\nwant %s", tc.steps, got, want)
		}
		hand := true
		for _, s := range tc.steps {
			if len(s.Event) > 0 && !plainRaw(s.Event) {
				hand = false
			}
		}
		if hand != tc.hand {
			t.Errorf("%+v: by hand %v, want %v", tc.steps, hand, tc.hand)
		}
	}
}
