package server

// Workspaces in the flow library and the engine (docs/teams.md): flow F of workspace W
// is the engine's flow "W.F". authorize qualifies the :flow of every route; what names
// flows elsewhere — a document's id, a model or tool name, a listing — goes through
// these helpers.

import (
	"context"
	"strings"

	"github.com/sluicehq/sluice/flows"
	"github.com/sluicehq/sluice/teams"
)

type workspaceKey struct{}

func withWorkspace(ctx context.Context, ws string) context.Context {
	return context.WithValue(ctx, workspaceKey{}, ws)
}

type byKey struct{}

// withBy records in ctx who a request acts as, for what it starts (runFrom).
func withBy(ctx context.Context, who string) context.Context {
	return context.WithValue(ctx, byKey{}, who)
}

// byFrom is who the request acts as, as authorize put it in the context: what a run it
// starts records as who started it ("" in the single-person mode).
func byFrom(ctx context.Context) string {
	who, _ := ctx.Value(byKey{}).(string)
	return who
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

// qualifyDoc gives a flow document the id it has in ws (teams.QualifyDocument).
func qualifyDoc(ws string, doc []byte) []byte { return teams.QualifyDocument(ws, doc) }
