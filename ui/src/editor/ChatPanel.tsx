// The chat playground: for a flow whose input takes messages, a conversation kept in this
// browser. Each message starts a run with the conversation so far (shown live on the
// canvas); the reply streams in from the model's tokens and comes from the run's output.
// A conversation has a session id (kept with it, new with "New conversation"), sent as the
// input's session_id to flows that take one, so a flow with memory continues it across runs.
import { useEffect, useRef, useState } from "react";
import { chatKey, chatSupport, newSession, parseChat, replyOf, sessionKey, takesSession, turnInput, type ChatMessage } from "../flow/chat";
import { finished } from "../flow/runview";
import type { FlowDocument } from "../flow/types";
import type { TestRunState } from "./testrun";
import { PinnedNote } from "./PinsPanel";
import { TextArea } from "./TextArea";

interface Props {
  doc: FlowDocument;
  state: TestRunState;
  canRun: boolean;
  /** Starts a run with this input; resolves to its id. */
  onSend: (input: unknown) => Promise<string | undefined>;
  onOpen: (run: string) => void;
}

export function ChatPanel({ doc, state, canRun, onSend, onOpen }: Props) {
  const support = chatSupport(doc);
  const [messages, setMessages] = useState<ChatMessage[]>(() => parseChat(localStorage.getItem(chatKey(doc.id))));
  const [session, setSession] = useState<string>(() => localStorage.getItem(sessionKey(doc.id)) || newSession());
  const [text, setText] = useState("");
  const [pending, setPending] = useState<{ run: string | undefined } | undefined>();
  const end = useRef<HTMLDivElement>(null);

  const keep = (list: ChatMessage[], sid: string = session) => {
    setMessages(list);
    try {
      localStorage.setItem(chatKey(doc.id), JSON.stringify(list));
      localStorage.setItem(sessionKey(doc.id), sid);
    } catch {
      /* storage off: the conversation lasts as long as the page */
    }
  };
  const restart = () => {
    const sid = newSession();
    setSession(sid);
    keep([], sid);
  };

  // The pending turn's run settled: its output is the reply.
  const { view, run } = state;
  useEffect(() => {
    if (!pending?.run || view?.run !== pending.run || !finished(view.status) || run?.id !== pending.run) return;
    const ok = run.status === "succeeded";
    keep([...messages, { role: "assistant", content: ok ? replyOf(run.output) : `The run ${run.status}: ${run.error ?? view.error ?? "no reason given"}`, run: run.id, ...(ok ? {} : { failed: true }) }]);
    setPending(undefined);
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [pending, view, run]);
  useEffect(() => {
    // Braces: newer browsers answer scrollIntoView with a promise, which an effect must not return.
    end.current?.scrollIntoView({ block: "nearest" });
  }, [messages, pending, view]);

  const send = async () => {
    const t = text.trim();
    if (!t || pending) return;
    const input = turnInput(messages, t, takesSession(doc) ? session : undefined);
    const list: ChatMessage[] = [...messages, { role: "user", content: t }];
    keep(list);
    setText("");
    setPending({ run: undefined });
    const id = await onSend(input);
    if (!id) {
      keep([...list, { role: "assistant", content: "The run did not start: see the Test run tab.", failed: true }]);
      setPending(undefined);
      return;
    }
    setPending({ run: id });
  };

  if (!support.ok) return <p className="muted chat-unsupported">{support.why}</p>;
  // While a turn runs: what the model has streamed so far (any node's tokens).
  const streaming = pending?.run && view?.run === pending.run ? Object.values(view.nodes).map((n) => n.text).filter(Boolean).join("\n") : "";
  return (
    <div className="chat-panel">
      <div className="chat-head">
        <span className="muted small">
          {takesSession(doc) ? "Each message runs the flow with the conversation so far and its session, which a flow with memory remembers." : "Each message runs the flow with the conversation so far."}
        </span>
        <button type="button" onClick={restart} disabled={messages.length === 0 || !!pending} id="chat-new" title={`session ${session}`}>
          New conversation
        </button>
      </div>
      <PinnedNote />
      <div className="chat-log" aria-live="polite" aria-label="conversation">
        {messages.length === 0 && !pending && <p className="muted small">Say something to the flow.</p>}
        {messages.map((m, i) => (
          <div key={i} className={`chat-msg chat-${m.role}${m.failed ? " chat-failed" : ""}`}>
            <div className="chat-text">{m.content}</div>
            {m.run && (
              <div className="chat-meta small">
                <button type="button" className="link" onClick={() => onOpen(m.run!)} title="Show this turn's run on the canvas">
                  run {m.run}
                </button>{" "}
                · <a href={`/flows/${encodeURIComponent(doc.id)}/runs/${m.run}`}>steps</a>
              </div>
            )}
          </div>
        ))}
        {pending && (
          <div className="chat-msg chat-assistant chat-pending">
            <div className="chat-text">{streaming || "…"}</div>
            {pending.run && <div className="chat-meta small muted">run {pending.run} · {view?.status ?? "starting"}</div>}
          </div>
        )}
        <div ref={end} />
      </div>
      <form
        className="chat-input"
        onSubmit={(e) => {
          e.preventDefault();
          void send();
        }}
      >
        <TextArea
          id="chat-text"
          rows={2}
          value={text}
          placeholder={canRun ? "Message (Enter sends, Shift+Enter a new line)" : "Fix the flow's problems to chat with it"}
          disabled={!canRun}
          onText={setText}
          onKeyDown={(e) => {
            if (e.key === "Enter" && !e.shiftKey) {
              e.preventDefault();
              void send();
            }
          }}
        />
        <button type="submit" className="primary" id="chat-send" disabled={!canRun || !!pending || !text.trim()}>
          Send
        </button>
      </form>
    </div>
  );
}
