package flows

import (
	"bytes"
	"encoding/json"
	"io"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
)

// decodeStd is DecodeJSON with encoding/json alone.
func decodeStd(b []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, io.ErrUnexpectedEOF
	}
	return v, nil
}

// TestDecodeFastIsDecodeJSON: whatever decodeFast decodes, encoding/json decodes to the
// same value; what it gives up on, DecodeJSON still decodes (or refuses) as encoding/json
// does. Hand-made edge cases, then random values (pretty and compact) with mutations,
// and random strings over JSON's alphabet.
func TestDecodeFastIsDecodeJSON(t *testing.T) {
	check := func(b []byte) {
		t.Helper()
		want, werr := decodeStd(b)
		if got, ok := decodeFast(b); ok {
			if werr != nil {
				t.Fatalf("decodeFast(%q) = %#v; encoding/json refuses it: %v", b, got, werr)
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("decodeFast(%q) = %#v; encoding/json gives %#v", b, got, want)
			}
		}
		got, err := DecodeJSON(b)
		if (err != nil) != (werr != nil) || err == nil && !reflect.DeepEqual(got, want) {
			t.Fatalf("DecodeJSON(%q) = %#v, %v; encoding/json gives %#v, %v", b, got, err, want, werr)
		}
	}
	for _, s := range []string{``, ` `, `{}`, ` { } `, `[]`, `[ ]`, `null`, `true`, `false`, `""`, `0`, `-0`, `01`, `-`, `1.`, `1.50`,
		`1e5`, `1E+05`, `-1.5e-7`, `123456789012345678901234567890`, `{"a":1,"a":2}`, `{"a":1,}`, `[1,]`, `[1 2]`, `{"a" 1}`,
		`{"a":{"b":[1,{"c":null}]}}`, "{\n  \"a\": [\n    1,\n    2\n  ]\n}\n", `"\u00e9"`, `"é"`, "\"\xff\"", "\"a\tb\"", `"a\"b"`,
		`{"x":"y"} {"x":"y"}`, `{"x":"y"}x`, `nul`, `truee`, `[true,false,null]`, `{"":""}`, strings.Repeat("[", 300) + strings.Repeat("]", 300),
		`{"pad":"` + strings.Repeat("x", 244) + `"}`} {
		check([]byte(s))
	}
	rng := rand.New(rand.NewPCG(29, 25))
	alphabet := []string{"{", "}", "[", "]", ",", ":", `"`, `\`, " ", "\n", "0", "1", "9", "-", "+", ".", "e", "E", "a", "t", "f",
		"n", "true", "false", "null", "\x01", "\xff", "é", `"k":`, `"v"`}
	for range 100000 {
		var b []byte
		for range rng.IntN(12) {
			b = append(b, alphabet[rng.IntN(len(alphabet))]...)
		}
		check(b)
	}
	for range 20000 {
		v := randomValue(rng, 3)
		b, _ := json.Marshal(v)
		if rng.IntN(2) == 0 {
			b, _ = json.MarshalIndent(v, "", "  ")
		}
		check(b)
		if len(b) > 0 {
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

func randomValue(rng *rand.Rand, depth int) any {
	switch k := rng.IntN(8); {
	case k == 0 && depth > 0:
		m := map[string]any{}
		for range rng.IntN(4) {
			m[randomText(rng)] = randomValue(rng, depth-1)
		}
		return m
	case k == 1 && depth > 0:
		a := []any{}
		for range rng.IntN(4) {
			a = append(a, randomValue(rng, depth-1))
		}
		return a
	case k == 2:
		return json.Number([]string{"0", "-1", "3.25", "1e10", "-2.5E-3", "12345678901234567890"}[rng.IntN(6)])
	case k == 3:
		return rng.IntN(2) == 0
	case k == 4:
		return nil
	default:
		return randomText(rng)
	}
}

func randomText(rng *rand.Rand) string {
	r := []rune("ab <>&\"\\/\t\u00e9\u2028")
	var b strings.Builder
	for range rng.IntN(6) {
		b.WriteRune(r[rng.IntN(len(r))])
	}
	return b.String()
}

// BenchmarkDecodeJSON decodes the benchmark's 256-byte input.
func BenchmarkDecodeJSON(b *testing.B) {
	in := []byte(`{"pad":"` + strings.Repeat("x", 244) + `"}`)
	for b.Loop() {
		if _, err := DecodeJSON(in); err != nil {
			b.Fatal(err)
		}
	}
}

// FuzzDecodeFast: go test -fuzz FuzzDecodeFast ./flows/ looks for an input decodeFast
// decodes otherwise than encoding/json.
func FuzzDecodeFast(f *testing.F) {
	for _, s := range []string{`{"a":[1,2.5e-3,"x",true,null]}`, `"é"`, `01`, `[1,]`, "{\n \"a\": 1\n}"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		want, werr := decodeStd(b)
		if got, ok := decodeFast(b); ok && (werr != nil || !reflect.DeepEqual(got, want)) {
			t.Fatalf("decodeFast(%q) = %#v; encoding/json gives %#v, %v", b, got, want, werr)
		}
	})
}
