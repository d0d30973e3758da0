package flows

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
)

// WithNotesOf returns the document doc with the canvas notes of the document from in place
// of its own. A rollback writes an earlier version's document back to the flow's file;
// notes are layout, not part of what a version runs (Canonical leaves them out), so the
// notes a person has on the canvas now stay, as Langflow and n8n keep a canvas's notes
// when a run or an older workflow comes back. doc comes back byte for byte when it has the
// notes from has; otherwise only its top-level "notes" member changes (added at the end
// when it had none, removed when from has none), and every other member keeps its bytes.
func WithNotesOf(doc, from []byte) ([]byte, error) {
	have, err := notesOf(doc)
	if err != nil {
		return nil, fmt.Errorf("the version's document: %w", err)
	}
	want, err := notesOf(from)
	if err != nil {
		return nil, fmt.Errorf("the flow's document: %w", err)
	}
	if len(have) == 0 && len(want) == 0 || reflect.DeepEqual(have, want) {
		return doc, nil
	}
	members, err := orderedMembers(doc)
	if err != nil {
		return nil, fmt.Errorf("the version's document: %w", err)
	}
	// from's notes as it wrote them, laid out as doc is: indented with its unit when it
	// is indented, else compact.
	indent := indentOf(doc)
	var notes []byte
	if len(want) > 0 {
		fromMembers, err := orderedMembers(from)
		if err != nil {
			return nil, err
		}
		var buf bytes.Buffer
		for _, m := range fromMembers {
			if m.key != "notes" {
				continue
			}
			if indent == "" {
				err = json.Compact(&buf, m.val)
			} else {
				err = json.Indent(&buf, m.val, indent, indent)
			}
			if err != nil {
				return nil, err
			}
		}
		notes = buf.Bytes()
	}
	kept := members[:0]
	set := false
	for _, m := range members {
		if m.key != "notes" {
			kept = append(kept, m)
		} else if notes != nil {
			kept, set = append(kept, member{key: m.key, val: notes}), true
		}
	}
	if notes != nil && !set {
		kept = append(kept, member{key: "notes", val: notes})
	}
	var out bytes.Buffer
	out.WriteByte('{')
	for i, m := range kept {
		if i > 0 {
			out.WriteByte(',')
		}
		key, _ := json.Marshal(m.key)
		if indent != "" {
			out.WriteString("\n" + indent)
			out.Write(key)
			out.WriteString(": ")
		} else {
			out.Write(key)
			out.WriteByte(':')
		}
		out.Write(m.val)
	}
	if indent != "" {
		out.WriteByte('\n')
	}
	out.WriteByte('}')
	if bytes.HasSuffix(bytes.TrimRight(doc, " \t\r"), []byte("\n")) {
		out.WriteByte('\n')
	}
	return out.Bytes(), nil
}

// KeepNotes returns the version's document src with the notes of the first of canvases
// (the flow's draft, its file: nil when it has none) that can be read, else src as it is:
// the notes never stop a rollback.
func KeepNotes(src []byte, canvases ...[]byte) []byte {
	for _, c := range canvases {
		if c == nil {
			continue
		}
		if out, err := WithNotesOf(src, c); err == nil {
			return out
		}
	}
	return src
}

func notesOf(doc []byte) ([]Note, error) {
	var d struct {
		Notes []Note `json:"notes"`
	}
	if err := json.Unmarshal(doc, &d); err != nil {
		return nil, err
	}
	return d.Notes, nil
}

// indentOf returns the whitespace that starts the document's first indented line ("" for
// a document on one line).
func indentOf(doc []byte) string {
	i := bytes.IndexByte(doc, '\n')
	if i < 0 {
		return ""
	}
	rest := doc[i+1:]
	n := 0
	for n < len(rest) && (rest[n] == ' ' || rest[n] == '\t') {
		n++
	}
	if n == 0 {
		return "  "
	}
	return string(rest[:n])
}
