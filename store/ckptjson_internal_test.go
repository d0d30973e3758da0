package store

import (
	"bytes"
	"encoding/json"
	"math"
	"math/rand/v2"
	"reflect"
	"strings"
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

// TestStepEventsComeBackAsWritten pins the events array of a commit: what a reader
// decodes from it (stepEvent.full) is each step's event byte for byte ("{}" for none);
// the common event is kept short, anything else as encoding/json writes it; and it says
// which arrays are written by hand.
func TestStepEventsComeBackAsWritten(t *testing.T) {
	for _, tc := range []struct {
		steps []CommitStep
		hand  bool
		short bool // every event in the short form
	}{
		{[]CommitStep{{Node: "a", Event: json.RawMessage(`{"duration_ms":0.012,"kind":"step","status":"done"}`)}}, true, true},
		{[]CommitStep{{Node: "a", Event: json.RawMessage(`{"duration_ms":0,"kind":"step","status":"done"}`)},
			{Node: "b", Event: json.RawMessage(`{"duration_ms":12.5,"kind":"join","status":"done"}`)}}, true, true},
		{[]CommitStep{{Node: "a", Event: json.RawMessage(`{"duration_ms":1e-05,"kind":"resume","status":"done"}`)}}, true, true},
		{[]CommitStep{{Node: "a", Event: json.RawMessage(`{"duration_ms":1,"kind":"step","status":"waiting"}`)}}, true, false},
		{[]CommitStep{{Node: "a", Event: json.RawMessage(`{"duration_ms":1,"kind":"Step","status":"done"}`)}}, true, false},
		{[]CommitStep{{Node: "a", Event: json.RawMessage(`{"duration_ms":"1","kind":"step","status":"done"}`)}}, true, false},
		{[]CommitStep{{Node: "a", Event: json.RawMessage(`{"duration_ms":1,"kind":"step","status":"done","ports":["x"]}`)}}, true, false},
		{[]CommitStep{{Node: "a"}, {Node: "b", Event: json.RawMessage(`{"kind":"step"}`)}, {Node: "c", Event: json.RawMessage(`{}`)}}, true, false},
		{[]CommitStep{{Node: "node \"q\" <x>", Event: json.RawMessage(`{"usage":{"input_tokens":3}}`)}}, true, false},
		{[]CommitStep{{Node: "a", Event: json.RawMessage(`{"prompt":"<b>"}`)}}, false, false},   // HTML: escaped
		{[]CommitStep{{Node: "a", Event: json.RawMessage(`{"status": "done"}`)}}, false, false}, // whitespace: compacted
	} {
		got := stepEventsJSON(tc.steps)
		var events []stepEvent
		if err := json.Unmarshal(got, &events); err != nil || len(events) != len(tc.steps) {
			t.Fatalf("%+v: %s does not decode to %d events: %v", tc.steps, got, len(tc.steps), err)
		}
		for i, s := range tc.steps {
			if events[i].Node != s.Node {
				t.Errorf("%+v: node %q, want %q", tc.steps, events[i].Node, s.Node)
			}
			if short := events[i].Data == nil; short != tc.short {
				t.Errorf("%+v: %s: short %v, want %v", tc.steps, got, short, tc.short)
			}
			events[i].full()
			want := string(s.Event)
			if len(s.Event) == 0 {
				want = "{}"
			}
			if tc.hand || !tc.short {
				var a, b any
				if json.Unmarshal(events[i].Data, &a) != nil || json.Unmarshal([]byte(want), &b) != nil || !reflect.DeepEqual(a, b) {
					t.Errorf("%+v: event %d reads back as %s, want %s", tc.steps, i, events[i].Data, want)
				}
			}
			if tc.hand && plainRaw(s.Event) && string(events[i].Data) != want && len(s.Event) > 0 {
				t.Errorf("%+v: event %d reads back as %s, want it byte for byte", tc.steps, i, events[i].Data)
			}
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

// plainByEncodingJSON is what plainRaw must say: encoding/json copies v as it is when v
// is valid, already compact, and holds none of the characters HTML escaping changes.
func plainByEncodingJSON(v []byte) bool {
	var c bytes.Buffer
	if json.Compact(&c, v) != nil || !bytes.Equal(c.Bytes(), v) {
		return false
	}
	var h bytes.Buffer
	json.HTMLEscape(&h, v)
	return bytes.Equal(h.Bytes(), v)
}

// TestPlainRawIsWhatEncodingJSONCopies checks the one-pass validator against
// encoding/json: hand-made values at every edge of the grammar, then random mutations of
// valid JSON and random byte soup over JSON's alphabet.
func TestPlainRawIsWhatEncodingJSONCopies(t *testing.T) {
	cases := []string{
		``, ` `, `{}`, `[]`, `null`, `true`, `false`, `""`, `0`, `-0`, `01`, `-`, `1.`, `1.5`, `1e`, `1e+`, `1E-7`, `-12.5e10`,
		`{"a":1}`, `{"a":1,}`, `{"a" :1}`, `{"a": 1}`, `{a:1}`, `{"a":1}}`, `{"a":[1,2,{"b":null}]}`, `[1,2`, `[1,,2]`, `[,]`,
		`"\u00e9"`, `"\u00g9"`, `"\x"`, `"\\"`, `"\"`, `"a b"`, `"<"`, `"&amp;"`, "\"\u2028\"", "\"\u2029x\"", "\"\xe2\x80\"",
		"\"\xff\xfe\"", "\"\t\"", `"\t"`, `"\/"`, `{"a":"b"}x`, `truex`, `nul`, `[true,false,null]`, `{"":""}`, `[[[[[]]]]]`,
		`{"a":{"b":{"c":{"d":{"e":{"f":{"g":{"h":{"i":{"j":{"k":{"l":{"m":{"n":{"o":{"p":{"q":{"r":{"s":{"t":{"u":{"v":{"w":{"x":{"y":{"z":{"A":{"B":{"C":{"D":{"E":{"F":{"G":1}}}}}}}}}}}}}}}}}}}}}}}}}}}}}}}}}`,
		`{"pad":"` + strings.Repeat("x", 244) + `"}`, `{"duration_ms":0.004,"kind":"step","status":"done"}`,
	}
	check := func(v []byte) {
		t.Helper()
		if got, want := plainRaw(v), plainByEncodingJSON(v); got != want {
			t.Fatalf("plainRaw(%q) = %v, encoding/json says %v", v, got, want)
		}
	}
	for _, c := range cases {
		check([]byte(c))
	}
	rng := rand.New(rand.NewPCG(29, 2))
	alphabet := []string{"{", "}", "[", "]", ",", ":", `"`, `\`, " ", "0", "1", "9", "-", "+", ".", "e", "E", "u", "a", "f", "t",
		"n", "true", "false", "null", "<", "&", "\t", "\x01", "\u2028", "\xe2", "\x80", "\xff", "é", `\u00e9`, `"k":`}
	for range 100000 {
		var b []byte
		for range rng.IntN(12) {
			b = append(b, alphabet[rng.IntN(len(alphabet))]...)
		}
		check(b)
	}
	for range 20000 {
		v := randomJSON(rng, 3)
		b, _ := json.Marshal(v)
		check(b)
		if len(b) > 0 { // a mutation: one byte changed, dropped or doubled
			m := append([]byte(nil), b...)
			k := rng.IntN(len(m))
			switch rng.IntN(3) {
			case 0:
				m[k] = alphabet[rng.IntN(len(alphabet))][0]
			case 1:
				m = append(m[:k], m[k+1:]...)
			default:
				m = append(m[:k+1], m[k:]...)
			}
			check(m)
		}
	}
}

// randomJSON is a random JSON value nested at most depth deep.
func randomJSON(rng *rand.Rand, depth int) any {
	switch k := rng.IntN(8); {
	case k == 0 && depth > 0:
		m := map[string]any{}
		for range rng.IntN(4) {
			m[randomString(rng)] = randomJSON(rng, depth-1)
		}
		return m
	case k == 1 && depth > 0:
		var a []any
		for range rng.IntN(4) {
			a = append(a, randomJSON(rng, depth-1))
		}
		return a
	case k == 2:
		return rng.NormFloat64() * math.Pow(10, float64(rng.IntN(40)-20))
	case k == 3:
		return rng.IntN(2) == 0
	case k == 4:
		return nil
	default:
		return randomString(rng)
	}
}

func randomString(rng *rand.Rand) string {
	const chars = "ab <>&\"\\/\t\n\u00e9\u2028\x01"
	r := []rune(chars)
	var b strings.Builder
	for range rng.IntN(6) {
		b.WriteRune(r[rng.IntN(len(r))])
	}
	return b.String()
}

// FuzzPlainRaw: go test -fuzz FuzzPlainRaw ./store/ looks for an input on which plainRaw
// and encoding/json disagree.
func FuzzPlainRaw(f *testing.F) {
	for _, s := range []string{`{"a":[1,2.5e-3,"x\u00e9",true,null]}`, `"<"`, "\"\u2028\"", `01`, `[1,]`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, v []byte) {
		if got, want := plainRaw(v), plainByEncodingJSON(v); got != want {
			t.Fatalf("plainRaw(%q) = %v, encoding/json says %v", v, got, want)
		}
	})
}

// BenchmarkPlainRaw measures the check on a 256-byte state and on a step event.
func BenchmarkPlainRaw(b *testing.B) {
	state := []byte(`{"pad":"` + strings.Repeat("x", 244) + `"}`)
	ev := []byte(`{"duration_ms":0.004,"kind":"step","status":"done"}`)
	for b.Loop() {
		plainRaw(state)
		plainRaw(ev)
	}
}
