package nodes_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/flows"
	"github.com/sluicehq/sluice/flows/nodes"
	"github.com/sluicehq/sluice/flows/nodes/llmtest"
	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/storetest"
)

// memoryStep is a step of flow over the state st.
func memoryStep(t *testing.T, flow, st string) *flows.Step {
	t.Helper()
	s, _ := newStep(state(t, st))
	s.Flow = flow
	return s
}

func runStep(t *testing.T, c flows.Component, s *flows.Step) *flows.Result {
	t.Helper()
	res, err := c.Run(context.Background(), s)
	if err != nil {
		t.Fatalf("step: %v", err)
	}
	return res
}

func asJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// A conversation appended in one run is there in the next, in order, windowed to the
// newest messages; another session, and another flow, see nothing of it unless the
// scope is shared.
func TestMemoryContinuesAConversationAcrossRuns(t *testing.T) {
	storetest.Each(t, func(t *testing.T, r *store.Redis) {
		flow := storetest.FlowID(t)
		storetest.DeleteFlowKeys(t, r, flow)
		env := &nodes.Env{Memory: store.NewMemory(r)}
		appendTurn := buildIn(t, env, "memory", `{"operation": "append", "session": "{{.session_id}}",
			"messages": "[{role: \"user\", content: .message}, {role: \"assistant\", content: .reply}]"}`)
		load := buildIn(t, env, "memory", `{"session": "{{.session_id}}", "max_messages": 3}`)

		runStep(t, appendTurn, memoryStep(t, flow, `{"session_id": "s1", "message": "My name is Ada.", "reply": "Hello Ada."}`))
		runStep(t, appendTurn, memoryStep(t, flow, `{"session_id": "s1", "message": "I like Go.", "reply": "Noted."}`))

		res := runStep(t, load, memoryStep(t, flow, `{"session_id": "s1"}`))
		want := `[{"content":"Hello Ada.","role":"assistant"},{"content":"I like Go.","role":"user"},{"content":"Noted.","role":"assistant"}]`
		if got := asJSON(res.Update["history"]); got != want {
			t.Errorf("the next run loaded %s, want the newest 3 messages in order %s", got, want)
		}
		if got := asJSON(runStep(t, load, memoryStep(t, flow, `{"session_id": "s2"}`)).Output); got != "[]" {
			t.Errorf("another session loaded %s, want nothing", got)
		}
		if got := asJSON(runStep(t, load, memoryStep(t, flow+"-other", `{"session_id": "s1"}`)).Output); got != "[]" {
			t.Errorf("another flow loaded %s of this flow's session, want nothing", got)
		}

		storetest.DeleteFlowKeys(t, r, flow+"-other")
		shared := strings.TrimPrefix(flow, "t-")
		shared = shared[max(0, len(shared)-60):]
		t.Cleanup(func() { r.DeleteKeys(context.Background(), "sluice:{m:s:"+shared+":*") })
		put := buildIn(t, env, "memory", `{"operation": "append", "session": "s1", "shared": "`+shared+`", "messages": "{role: \"user\", content: \"hi\"}"}`)
		get := buildIn(t, env, "memory", `{"session": "s1", "shared": "`+shared+`"}`)
		runStep(t, put, memoryStep(t, flow, `{}`))
		if got := asJSON(runStep(t, get, memoryStep(t, flow+"-other", `{}`)).Output); got != `[{"content":"hi","role":"user"}]` {
			t.Errorf("another flow loaded %s from the shared scope, want the message", got)
		}

		// The session is kept for its ttl (720h by default) after its last use.
		k := store.SessionKeys("f:"+flow, "s1")
		for _, key := range []string{k.Messages(), k.Meta()} {
			if ttl := r.Client.PTTL(context.Background(), key).Val(); ttl <= 719*time.Hour || ttl > 720*time.Hour {
				t.Errorf("%s expires in %s, want 720h", key, ttl)
			}
		}
		clear := buildIn(t, env, "memory", `{"operation": "clear", "session": "{{.session_id}}"}`)
		runStep(t, clear, memoryStep(t, flow, `{"session_id": "s1"}`))
		if got := asJSON(runStep(t, load, memoryStep(t, flow, `{"session_id": "s1"}`)).Output); got != "[]" {
			t.Errorf("a cleared session loaded %s", got)
		}
	})
}

// max_tokens keeps the newest messages that fit, never a part of one.
func TestMemoryWindowByTokensKeepsTheNewestMessagesThatFit(t *testing.T) {
	storetest.Each(t, func(t *testing.T, r *store.Redis) {
		flow := storetest.FlowID(t)
		storetest.DeleteFlowKeys(t, r, flow)
		env := &nodes.Env{Memory: store.NewMemory(r)}
		add := buildIn(t, env, "memory", `{"operation": "append", "session": "s", "messages": ".m"}`)
		long := strings.Repeat("word ", 100)
		runStep(t, add, memoryStep(t, flow, `{"m": [{"role": "user", "content": "`+long+`"}, {"role": "assistant", "content": "short one"}, {"role": "user", "content": "short two"}]}`))
		load := buildIn(t, env, "memory", `{"session": "s", "max_tokens": 30}`)
		got := asJSON(runStep(t, load, memoryStep(t, flow, `{}`)).Output)
		if want := `[{"content":"short one","role":"assistant"},{"content":"short two","role":"user"}]`; got != want {
			t.Errorf("a 30-token window loaded %s, want the two short messages %s", got, want)
		}
	})
}

// Once a session holds more than summarize.after messages, what is older than the
// window is summarised by the named model (the previous summary included the next
// time) and comes first as a system message; a load that finds nothing new to
// summarise calls no model.
func TestMemorySummarisesOlderMessagesWithTheNamedModel(t *testing.T) {
	storetest.Each(t, func(t *testing.T, r *store.Redis) {
		flow := storetest.FlowID(t)
		storetest.DeleteFlowKeys(t, r, flow)
		srv := llmtest.New(t)
		env := srv.Env(0)
		env.Memory = store.NewMemory(r)
		add := buildIn(t, env, "memory", `{"operation": "append", "session": "s", "messages": ".m"}`)
		load := buildIn(t, env, "memory", `{"session": "s", "max_messages": 2, "summarize": {"provider": "fake", "model": "summer", "after": 4}}`)
		msgs := func(from, to int) string {
			var parts []string
			for i := from; i <= to; i++ {
				parts = append(parts, `{"role": "user", "content": "message `+string(rune('0'+i))+`"}`)
			}
			return `{"m": [` + strings.Join(parts, ",") + `]}`
		}
		runStep(t, add, memoryStep(t, flow, msgs(1, 4)))
		runStep(t, load, memoryStep(t, flow, `{}`))
		if srv.Calls() != 0 {
			t.Fatalf("%d model calls for 4 messages with after 4, want none", srv.Calls())
		}
		runStep(t, add, memoryStep(t, flow, msgs(5, 6)))
		srv.Reply(llmtest.Reply{Content: "Ada said 1 to 4.", PromptTokens: 50, CompletionTokens: 7})
		res := runStep(t, load, memoryStep(t, flow, `{}`))
		want := `[{"content":"Summary of the conversation so far: Ada said 1 to 4.","role":"system"},{"content":"message 5","role":"user"},{"content":"message 6","role":"user"}]`
		if got := asJSON(res.Output); got != want {
			t.Errorf("loaded %s, want the summary then the window: %s", got, want)
		}
		if res.Usage.InputTokens != 50 || res.Usage.OutputTokens != 7 {
			t.Errorf("usage %+v, want the summary call's", res.Usage)
		}
		reqs := srv.Requests()
		if len(reqs) != 1 || reqs[0].Model != "summer" {
			t.Fatalf("requests %+v, want one to model summer", reqs)
		}
		if text := reqs[0].Last().Text(); !strings.Contains(text, "message 1") || !strings.Contains(text, "message 4") || strings.Contains(text, "message 5") {
			t.Errorf("the model was asked to summarise %q, want messages 1 to 4 and not the window", text)
		}
		if got := asJSON(runStep(t, load, memoryStep(t, flow, `{}`)).Output); got != want || srv.Calls() != 1 {
			t.Errorf("the next load gave %s after %d calls, want the stored summary without a call", got, srv.Calls())
		}
		runStep(t, add, memoryStep(t, flow, msgs(7, 9)))
		srv.Reply(llmtest.Text("Ada said 1 to 7."))
		runStep(t, load, memoryStep(t, flow, `{}`))
		if text := srv.Requests()[1].Last().Text(); !strings.Contains(text, "Ada said 1 to 4.") || !strings.Contains(text, "message 7") || strings.Contains(text, "message 8") {
			t.Errorf("the second summary was asked of %q, want the first summary and messages 5 to 7", text)
		}
	})
}

// An llm node's history goes between its system and user messages, as messages.
func TestLLMSendsTheHistoryBetweenSystemAndUser(t *testing.T) {
	srv := llmtest.New(t)
	srv.Reply(llmtest.Text("Your name is Ada."))
	l := buildIn(t, srv.Env(0), "llm", `{"model": "m", "system": "Be brief.", "history": ".history", "user": "{{.message}}"}`)
	s, _ := newStep(state(t, `{"message": "What is my name?", "history": [{"role": "user", "content": "I am Ada."}, {"role": "assistant", "content": "Hello Ada."}]}`))
	runStep(t, l, s)
	var got []string
	for _, m := range srv.Requests()[0].Messages {
		got = append(got, m.Role+": "+m.Text())
	}
	if want := "system: Be brief.|user: I am Ada.|assistant: Hello Ada.|user: What is my name?"; strings.Join(got, "|") != want {
		t.Errorf("messages %q, want %q", strings.Join(got, "|"), want)
	}
	bad, _ := newStep(state(t, `{"message": "x", "history": [{"role": "tool", "content": "x"}]}`))
	_, err := l.Run(context.Background(), bad)
	var fe *flows.Error
	if !errors.As(err, &fe) || fe.Path != "params.history" || !flows.IsPermanent(err) {
		t.Errorf("a history with a tool message: %v, want a permanent error at params.history", err)
	}
}

// An agent with the memory node as a tool looks through the session named by the run
// state, older messages included.
func TestMemoryAsAToolSearchesTheSession(t *testing.T) {
	storetest.Each(t, func(t *testing.T, r *store.Redis) {
		flow := storetest.FlowID(t)
		storetest.DeleteFlowKeys(t, r, flow)
		env := &nodes.Env{Memory: store.NewMemory(r)}
		add := buildIn(t, env, "memory", `{"operation": "append", "session": "{{.sid}}", "messages": ".m"}`)
		runStep(t, add, memoryStep(t, flow, `{"sid": "a", "m": [{"role": "user", "content": "My cat is Tom."}, {"role": "user", "content": "I live in Paris."}]}`))
		tool := buildIn(t, env, "memory", `{"session": "{{.sid}}", "tool_name": "recall"}`).(flows.Tool)
		if d := tool.ToolDef(); d.Name != "recall" {
			t.Errorf("tool name %q", d.Name)
		}
		got, err := tool.Call(context.Background(), memoryStep(t, flow, `{"sid": "a"}`), json.RawMessage(`{"query": "CAT"}`))
		if err != nil {
			t.Fatal(err)
		}
		if s := asJSON(got); !strings.Contains(s, "My cat is Tom.") || strings.Contains(s, "Paris") {
			t.Errorf("the tool found %s, want only the message about the cat", s)
		}
	})
}

func TestMemoryRefusesWhatItCannotKeep(t *testing.T) {
	env := &nodes.Env{Memory: store.NewMemory(storetest.Embedded(t))}
	if _, err := tryBuildIn(env, "memory", `{"operation": "append", "session": "s"}`); err == nil || !strings.Contains(err.Error(), "params.messages") {
		t.Errorf("append without messages: %v, want an error at params.messages", err)
	}
	if _, err := tryBuildIn(env, "memory", `{"session": "s", "max_messages": 20, "summarize": {"model": "m", "after": 10}}`); err == nil || !strings.Contains(err.Error(), "summarize.after") {
		t.Errorf("summarize.after below the window: %v", err)
	}
	load := buildIn(t, env, "memory", `{"session": "{{.session_id}}"}`)
	_, err := load.Run(context.Background(), memoryStep(t, "f", `{}`))
	var fe *flows.Error
	if !errors.As(err, &fe) || fe.Path != "params.session" || !flows.IsPermanent(err) {
		t.Errorf("no session id in the input: %v, want a permanent error at params.session", err)
	}
	add := buildIn(t, env, "memory", `{"operation": "append", "session": "s", "messages": "{role: \"robot\", content: \"x\"}"}`)
	if _, err := add.Run(context.Background(), memoryStep(t, "f", `{}`)); err == nil || !strings.Contains(err.Error(), `role "robot"`) {
		t.Errorf("a message with role robot: %v", err)
	}
	noRedis := buildIn(t, &nodes.Env{}, "memory", `{"session": "s"}`)
	if _, err := noRedis.Run(context.Background(), memoryStep(t, "f", `{}`)); err == nil || !strings.Contains(err.Error(), "needs Redis") {
		t.Errorf("without Redis: %v", err)
	}
}
