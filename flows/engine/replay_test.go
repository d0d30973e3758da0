package engine_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/flows/engine"
	"github.com/sluicehq/sluice/flows/nodes/llmtest"
	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/storetest"
)

// A five-node flow with four model calls: each model node sees only the keys its
// input selector names, so a prompt changed in one of them changes what that node (and
// whatever reads its answer) is asked, and nothing else.
func writerFlow(keywordsPrompt string) string {
	return `{"sluice": 1, "id": "FLOW",
	 "nodes": [
	  {"id": "in", "type": "input"},
	  {"id": "summary", "type": "llm", "input": "{text}", "params": {"model": "m", "user": "Summarize: {{.text}}", "as": "summary"}},
	  {"id": "keywords", "type": "llm", "input": "{text}", "params": {"model": "m", "user": "` + keywordsPrompt + `", "as": "keywords"}},
	  {"id": "title", "type": "llm", "input": "{summary}", "params": {"model": "m", "user": "Title for: {{.summary}}", "as": "title"}},
	  {"id": "tweet", "type": "llm", "input": "{text}", "params": {"model": "m", "user": "Tweet: {{.text}}", "as": "tweet"}}
	 ],
	 "edges": [{"from": "in", "to": "summary"}, {"from": "summary", "to": "keywords"}, {"from": "keywords", "to": "title"}, {"from": "title", "to": "tweet"}]}`
}

// echo answers every model request with what it was asked, so a changed prompt changes
// the answer.
func echo(srv *llmtest.Server) {
	srv.Respond(func(r llmtest.Request) llmtest.Reply { return llmtest.Text("re: " + r.Last().Text()) })
}

func TestReplayWithReuseCallsOnlyTheModelsWhoseQuestionChanged(t *testing.T) {
	storetest.Each(t, func(t *testing.T, r *store.Redis) {
		srv := llmtest.New(t)
		echo(srv)
		v, _, _ := componentEnv(t, r, srv)
		ctx := context.Background()
		p := v.compile(writerFlow("Keywords of: {{.text}}"))
		startWorker(t, v.e, 2*time.Second, p.Flow)
		orig := v.run(p, `{"text": "Redis streams keep a log."}`)
		mustStatus(t, orig, store.StatusSucceeded)
		if n := srv.Calls(); n != 4 {
			t.Fatalf("the original run made %d model calls, want 4", n)
		}

		// The same version replayed with reuse: nothing changed, no model is called.
		same, err := v.e.Replay(ctx, p.Flow, orig.ID, engine.ReplayOptions{Reuse: true})
		if err != nil {
			t.Fatal(err)
		}
		mustStatus(t, v.wait(p, same), store.StatusSucceeded)
		if n := srv.Calls() - 4; n != 0 {
			t.Errorf("a replay on the same version with reuse made %d model calls, want 0", n)
		}

		// One prompt changed: only that node asks the model again.
		changed := v.version(p, writerFlow("Five keywords of: {{.text}}"))
		before := srv.Calls()
		id, err := v.e.Replay(ctx, p.Flow, orig.ID, engine.ReplayOptions{Target: changed, Reuse: true})
		if err != nil {
			t.Fatal(err)
		}
		rp := v.wait(p, id)
		mustStatus(t, rp, store.StatusSucceeded)
		calls := srv.Requests()[before:]
		if len(calls) != 1 || !strings.Contains(calls[0].Last().Text(), "Five keywords") {
			t.Fatalf("the replay with one prompt changed made %d model calls, want 1 (the changed node's)", len(calls))
		}
		t.Logf("model calls per replayed run: %d with reuse (one prompt of four changed), 4 without", len(calls))
		if rp.ReplayOf != orig.ID || rp.Version != changed.Version || rp.Trigger != "replay" {
			t.Errorf("replay: of %q, version %.7s, trigger %q; want of %s on %.7s by replay", rp.ReplayOf, rp.Version, rp.Trigger, orig.ID, changed.Version)
		}
		cmp, err := v.e.Compare(ctx, p.Flow, orig.ID, id)
		if err != nil {
			t.Fatal(err)
		}
		if cmp.Summary != "4 same, 1 changed" {
			t.Errorf("compare summary %q, want \"4 same, 1 changed\"", cmp.Summary)
		}
		for _, n := range cmp.Nodes {
			want := engine.VerdictSame
			if n.Node == "keywords" {
				want = engine.VerdictChanged
				if len(n.Changes) == 0 || n.After == nil || n.After.Reused || n.After.Tokens == 0 {
					t.Errorf("keywords compared: %+v, want its output changed, run (not reused), with tokens", n)
				}
			} else if n.Node != "in" && (n.After == nil || !n.After.Reused) {
				t.Errorf("%s in the replay: %+v, want reused", n.Node, n.After)
			}
			if n.Verdict != want {
				t.Errorf("%s: verdict %q, want %q", n.Node, n.Verdict, want)
			}
		}
		// Without reuse every model is called.
		before = srv.Calls()
		full, err := v.e.Replay(ctx, p.Flow, orig.ID, engine.ReplayOptions{Target: changed})
		if err != nil {
			t.Fatal(err)
		}
		mustStatus(t, v.wait(p, full), store.StatusSucceeded)
		if n := srv.Calls() - before; n != 4 {
			t.Errorf("a replay without reuse made %d model calls, want 4", n)
		}

		// Linked both ways; the original is otherwise untouched.
		o, _ := v.e.Get(ctx, p.Flow, orig.ID)
		if !slices.Equal(o.ReplayedAs, []string{same, id, full}) {
			t.Errorf("original replayed_as %v, want [%s %s %s]", o.ReplayedAs, same, id, full)
		}
		if o.Status != orig.Status || o.Steps != orig.Steps || o.Version != orig.Version || string(o.Output()) != string(orig.Output()) {
			t.Errorf("the original changed: %+v, was %+v", o, orig)
		}
	})
}

func TestReplayFromACheckpointStartsFromItsState(t *testing.T) {
	storetest.Each(t, func(t *testing.T, r *store.Redis) {
		srv := llmtest.New(t)
		echo(srv)
		v, _, _ := componentEnv(t, r, srv)
		ctx := context.Background()
		p := v.compile(writerFlow("Keywords of: {{.text}}"))
		startWorker(t, v.e, 2*time.Second, p.Flow)
		orig := v.run(p, `{"text": "Streams."}`)
		mustStatus(t, orig, store.StatusSucceeded)
		var at string
		for _, c := range v.checkpoints(p, orig.ID) {
			if c.Node == "keywords" && c.Kind == "step" {
				at = c.ID
			}
		}
		before := srv.Calls()
		id, err := v.e.Replay(ctx, p.Flow, orig.ID, engine.ReplayOptions{Checkpoint: at})
		if err != nil {
			t.Fatal(err)
		}
		rp := v.wait(p, id)
		mustStatus(t, rp, store.StatusSucceeded)
		if n := srv.Calls() - before; n != 2 {
			t.Errorf("a replay from keywords' checkpoint made %d model calls, want 2 (title and tweet)", n)
		}
		if rp.ReplayOf != orig.ID || rp.ReplayOfCkpt != at || rp.ParentRun != "" {
			t.Errorf("replay of %q from %q (parent %q), want of %s from %s", rp.ReplayOf, rp.ReplayOfCkpt, rp.ParentRun, orig.ID, at)
		}
	})
}
