package teams

import (
	"bytes"
	"encoding/json"
)

// QualifyDocument gives a flow document the id it has in ws: its bare id, prefixed with the
// workspace unless that is the default (a document exported from another workspace
// moves into this one). Only the id's bytes change; the rest of the file stays as
// written.
func QualifyDocument(ws string, doc []byte) []byte {
	start, end, id, ok := topLevelID(doc)
	if !ok {
		return doc
	}
	_, bare := Split(id)
	want := Qualify(ws, bare)
	if want == id {
		return doc
	}
	q, _ := json.Marshal(want)
	out := make([]byte, 0, len(doc)+len(q))
	out = append(out, doc[:start]...)
	out = append(out, q...)
	return append(out, doc[end:]...)
}

// topLevelID finds the byte range of the string value of a document's top-level "id".
func topLevelID(doc []byte) (start, end int, id string, ok bool) {
	dec := json.NewDecoder(bytes.NewReader(doc))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return 0, 0, "", false
	}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return 0, 0, "", false
		}
		key, _ := t.(string)
		before := dec.InputOffset()
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return 0, 0, "", false
		}
		if key != "id" {
			continue
		}
		after := int(dec.InputOffset())
		if json.Unmarshal(raw, &id) != nil {
			return 0, 0, "", false
		}
		// The value starts after the colon and any space following the key.
		s := int(before)
		for s < after && doc[s] != '"' {
			s++
		}
		return s, after, id, s < after
	}
	return 0, 0, "", false
}
