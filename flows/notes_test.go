package flows_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/flows"
)

func TestWithNotesOfKeepsTheCanvasNotesAndTheVersionsBytes(t *testing.T) {
	indented := "{\n  \"sluice\": 1,\n  \"id\": \"x\",\n  \"nodes\": [\n    {\"id\": \"in\", \"type\": \"input\"}\n  ],\n  \"edges\": []\n}\n"
	withNote := `{"sluice":1,"id":"x","nodes":[],"edges":[],"notes":[{"id":"n1","text":"Greets, then shouts.","position":{"x":10,"y":20},"color":"blue"}]}`
	cases := []struct {
		name, doc, from, want string
	}{
		{"neither has notes: the version's bytes", indented, `{"sluice":1,"id":"x","nodes":[],"edges":[]}`, indented},
		{"the same notes: the version's bytes", `{"id":"x", "notes": [{"id":"n1","text":"a"}]}`, `{"notes":[{"text":"a","id":"n1"}]}`, `{"id":"x", "notes": [{"id":"n1","text":"a"}]}`},
		{"notes added after the version, into an indented document",
			indented, withNote,
			"{\n  \"sluice\": 1,\n  \"id\": \"x\",\n  \"nodes\": [\n    {\"id\": \"in\", \"type\": \"input\"}\n  ],\n  \"edges\": [],\n  \"notes\": [\n    {\n      \"id\": \"n1\",\n      \"text\": \"Greets, then shouts.\",\n      \"position\": {\n        \"x\": 10,\n        \"y\": 20\n      },\n      \"color\": \"blue\"\n    }\n  ]\n}\n"},
		{"notes changed, in a compact document", `{"sluice":1,"notes":[{"id":"old","text":"gone"}],"id":"x"}`, withNote,
			`{"sluice":1,"notes":[{"id":"n1","text":"Greets, then shouts.","position":{"x":10,"y":20},"color":"blue"}],"id":"x"}`},
		{"notes removed since the version", `{"sluice":1,"notes":[{"id":"old","text":"gone"}],"id":"x"}`, `{"sluice":1,"id":"x"}`, `{"sluice":1,"id":"x"}`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := flows.WithNotesOf([]byte(c.doc), []byte(c.from))
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != c.want {
				t.Errorf("got\n%s\nwant\n%s", got, c.want)
			}
			if !json.Valid(got) {
				t.Errorf("not JSON: %s", got)
			}
		})
	}
}

func TestWithNotesOfKeepsTheVersion(t *testing.T) {
	doc := `{"sluice": 1, "id": "x", "nodes": [{"id": "in", "type": "input"}, {"id": "out", "type": "output"}], "edges": [{"from": "in", "to": "out"}]}`
	got, err := flows.WithNotesOf([]byte(doc), []byte(`{"notes": [{"id": "n1", "text": "a note"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	version := func(b []byte) string {
		var d flows.Document
		if err := json.Unmarshal(b, &d); err != nil {
			t.Fatal(err)
		}
		v, err := flows.Version(&d)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	if !strings.Contains(string(got), "a note") || version(got) != version([]byte(doc)) {
		t.Errorf("with the note %s: version %s, want %s", got, version(got), version([]byte(doc)))
	}
}

func TestWithNotesOfSaysWhichDocumentIsNotJSON(t *testing.T) {
	if _, err := flows.WithNotesOf([]byte(`{"id": "x"}`), []byte(`{"notes": `)); err == nil || !strings.Contains(err.Error(), "the flow's document") {
		t.Errorf("err = %v, want one naming the flow's document", err)
	}
	if _, err := flows.WithNotesOf([]byte(`[1]`), []byte(`{}`)); err == nil {
		t.Error("a document that is no object: no error")
	}
}
