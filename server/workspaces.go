package server

// Workspaces in the flow library and the engine (docs/teams.md): flow F of workspace W
// is the engine's flow "W.F". authorize qualifies the :flow of every route; what names
// flows elsewhere — a document's id, a model or tool name, a listing — goes through
// these helpers.

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"

	"github.com/sluicehq/sluice/flows"
	"github.com/sluicehq/sluice/teams"
)

type workspaceKey struct{}

func withWorkspace(ctx context.Context, ws string) context.Context {
	return context.WithValue(ctx, workspaceKey{}, ws)
}

// workspaceFrom is the request's workspace as authorize put it in the context.
func workspaceFrom(ctx context.Context) string {
	if ws, _ := ctx.Value(workspaceKey{}).(string); ws != "" {
		return ws
	}
	return teams.DefaultWorkspace
}

// qualifyName turns a flow name a client gave (a model, a tool, a ?flow=) into the
// engine's flow id in ws; ok is false for a name of another workspace.
func qualifyName(ws, name string) (string, bool) {
	if w, f, found := strings.Cut(name, teams.Sep); found {
		if w != ws || ws == teams.DefaultWorkspace {
			return "", false
		}
		return name, flows.ValidID(f)
	}
	return teams.Qualify(ws, name), true
}

// inWorkspace reports whether an engine flow id belongs to ws.
func inWorkspace(ws, id string) bool {
	w, _ := teams.Split(id)
	return w == ws
}

// qualifyDoc gives a flow document the id it has in ws: its bare id, prefixed with the
// workspace unless that is the default (a document exported from another workspace
// moves into this one). Only the id's bytes change; the rest of the file stays as
// written.
func qualifyDoc(ws string, doc []byte) []byte {
	start, end, id, ok := topLevelID(doc)
	if !ok {
		return doc
	}
	_, bare := teams.Split(id)
	want := teams.Qualify(ws, bare)
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
