package main

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/sluicehq/sluice/flows/nodes/llmtest"
	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/storetest"
)

// ragModel answers like a model that follows the rag example's prompt: from the first
// passage it was given, citing its source, or that the passages say nothing.
func ragModel(t *testing.T) *llmtest.Server {
	model := llmtest.New(t)
	model.Respond(func(r llmtest.Request) llmtest.Reply {
		prompt := r.Last().Text()
		_, passages, _ := strings.Cut(prompt, "Passages:\n")
		for _, line := range strings.Split(passages, "\n") {
			if strings.HasPrefix(line, "[") {
				source := line[1:strings.Index(line, "]")]
				rest := passages[strings.Index(passages, line)+len(line)+1:]
				for _, para := range strings.Split(rest, "\n\n") {
					if para = strings.TrimSpace(para); para != "" && !strings.HasPrefix(para, "#") {
						return llmtest.Text(fmt.Sprintf("%s [%s]", strings.ReplaceAll(para, "\n", " "), source))
					}
				}
			}
		}
		return llmtest.Text("The passages do not answer this.")
	})
	return model
}

// The RAG example from the gallery: a person attaches a folder of Markdown in the Test
// run tab (uploaded, referenced in the input, never inlined), runs the ingest, then asks
// a question and gets an answer that cites the file it came from.
func TestBrowserAskYourDocumentsFromTheGallery(t *testing.T) {
	rdb := storetest.Real(t)
	name, flowID := namedFlow(t, "Handbook")
	storetest.DeleteFlowKeys(t, rdb, flowID)
	t.Cleanup(func() { store.NewVectors(rdb).Drop(context.Background(), "f:"+flowID, "docs") })
	model := ragModel(t)
	base := serveForBrowserEnv(t, t.TempDir(), []string{"OPENAI_BASE_URL=" + model.URL, "OPENAI_API_KEY=test-key", "SLUICE_PROVIDERS="})
	b := newBrowser(t, base)
	b.open("/")
	b.typeInto("#new-name", name)
	b.click(`.gallery-card[data-example="rag"] a`)
	b.waitFor("the example's nine nodes", `document.querySelectorAll(".react-flow__node").length === 9`)
	b.waitText("#problems-count", "Valid")
	b.click("#run-tab")

	// Asked before anything is ingested, it says so.
	b.waitFor("the example's question", `document.querySelector("#run-input").value.includes("retry a dead letter")`)
	b.click("#run-button")
	b.waitText("#run-status", "succeeded")
	b.waitText("#run-output", "do not answer")

	// A folder of Markdown: the files are uploaded and the input gets their references.
	dir, err := filepath.Abs(filepath.Join("testdata", "handbook"))
	if err != nil {
		t.Fatal(err)
	}
	b.run("attach the folder", chromedp.SetUploadFiles(chromedp.CSS("#run-attach-folder"), []string{dir}))
	b.waitFor("three file references in the input", `(document.querySelector("#run-input").value.match(/"\$file"/g) || []).length === 3`)
	if input := evaluate[string](b, `document.querySelector("#run-input").value`); strings.Contains(input, "fresh attempts") || !strings.Contains(input, "dead-letters.md") {
		t.Errorf("the input holds %s, want references to the files and none of their text", input)
	}
	b.click("#run-button")
	b.waitFor("the ingest run", `document.querySelector("#run-output")?.innerText.includes('"chunks"')`)
	for _, f := range []string{"install.md", "dead-letters.md", "schedules.md"} {
		b.waitText("#run-output", f)
	}
	for _, node := range []string{"read", "split", "index"} {
		b.waitFor(node+" done", fmt.Sprintf(`document.querySelector('[data-node=%q]')?.dataset.status === "done"`, node))
	}

	// The question: the answer comes from the dead letters file and cites it.
	b.typeInto("#run-input", `{"question": "How do I retry a dead letter?"}`)
	b.click("#run-button")
	b.waitText("#run-output", "[dead-letters.md]")
	b.waitText("#run-output", "press Retry")
	if out := evaluate[string](b, `document.querySelector("#run-output").innerText`); !strings.Contains(out, `"sources"`) || !strings.Contains(out, `"dead-letters.md"`) {
		t.Errorf("the answer's output %s, want its sources listed", out)
	}
	b.shot("editor-rag")
}

// memoryModel answers from the history it is given as messages: it knows the person's
// name only if an earlier message said it.
func memoryModel(t *testing.T) *llmtest.Server {
	model := llmtest.New(t)
	model.Respond(func(r llmtest.Request) llmtest.Reply {
		var earlier []string
		for _, m := range r.Messages[1 : len(r.Messages)-1] {
			earlier = append(earlier, m.Text())
		}
		knows := strings.Contains(strings.Join(earlier, "\n"), "My name is Ada")
		switch last := r.Last().Text(); {
		case strings.Contains(last, "my name?") && knows:
			return llmtest.Text("Your name is Ada.")
		case strings.Contains(last, "my name?"):
			return llmtest.Text("I do not know your name yet.")
		}
		return llmtest.Text("Nice to meet you, Ada.")
	})
	return model
}

// The chat-with-memory example in the Chat tab: the second turn's model sees the first
// exchange as messages loaded from Redis by the conversation's session; a new
// conversation is a new session that knows nothing; the session survives a reload.
func TestBrowserChatWithMemoryFromTheGallery(t *testing.T) {
	rdb := storetest.Real(t)
	name, flowID := namedFlow(t, "Memory chat")
	storetest.DeleteFlowKeys(t, rdb, flowID)
	model := memoryModel(t)
	base := serveForBrowserEnv(t, t.TempDir(), []string{"OPENAI_BASE_URL=" + model.URL, "OPENAI_API_KEY=test-key", "SLUICE_PROVIDERS="})
	b := newBrowser(t, base)
	b.open("/")
	b.typeInto("#new-name", name)
	b.click(`.gallery-card[data-example="chat-memory"] a`)
	b.waitFor("the example's six nodes", `document.querySelectorAll(".react-flow__node").length === 6`)
	b.click("#chat-tab")
	send := func(text string, replies int) {
		t.Helper()
		b.typeInto("#chat-text", text)
		b.click("#chat-send")
		b.waitFor(fmt.Sprintf("%d replies", replies), fmt.Sprintf(`document.querySelectorAll(".chat-log .chat-assistant:not(.chat-pending)").length === %d`, replies))
	}
	lastReply := func() string {
		return evaluate[string](b, `[...document.querySelectorAll(".chat-log .chat-assistant")].pop().innerText`)
	}
	send("My name is Ada.", 1)
	send("What is my name?", 2)
	if got := lastReply(); !strings.Contains(got, "Your name is Ada.") {
		t.Errorf("second reply %q", got)
	}
	reqs := model.Requests()
	var seen []string
	for _, m := range reqs[len(reqs)-1].Messages[1:] {
		seen = append(seen, m.Role+": "+m.Text())
	}
	if want := "user: My name is Ada.|assistant: Nice to meet you, Ada.|user: What is my name?"; strings.Join(seen, "|") != want {
		t.Errorf("the second turn's model saw %q, want the first exchange as messages, then the question", strings.Join(seen, "|"))
	}
	session := evaluate[string](b, fmt.Sprintf(`localStorage.getItem("sluice:chat-session:%s")`, flowID))
	if n := rdb.Client.LLen(context.Background(), store.SessionKeys("f:"+flowID, session).Messages()).Val(); session == "" || n != 4 {
		t.Errorf("session %q holds %d messages in Redis, want the 4 of two exchanges", session, n)
	}
	b.shot("editor-chat-memory")

	// After a reload the same session goes on.
	b.run("reload", chromedp.Reload(), chromedp.WaitReady(chromedp.CSS("body")))
	b.click("#chat-tab")
	b.waitFor("the conversation kept", `document.querySelectorAll(".chat-log .chat-msg").length === 4`)
	send("Do you still know my name?", 3)
	if got := lastReply(); !strings.Contains(got, "Your name is Ada.") {
		t.Errorf("after a reload: %q", got)
	}

	// A new conversation is a new session: nothing of the first.
	b.click("#chat-new")
	b.waitFor("an empty conversation", `document.querySelectorAll(".chat-log .chat-msg").length === 0`)
	send("What is my name?", 1)
	if got := lastReply(); !strings.Contains(got, "I do not know your name yet.") {
		t.Errorf("a new conversation's reply %q, want one that knows nothing", got)
	}
	if other := evaluate[string](b, fmt.Sprintf(`localStorage.getItem("sluice:chat-session:%s")`, flowID)); other == session || other == "" {
		t.Errorf("the new conversation's session is %q (the first was %q)", other, session)
	}
}
