import { describe, expect, it } from "vitest";
import { chatSupport, newSession, parseChat, replyOf, takesSession, turnInput } from "./chat";
import { flow } from "./fixtures.test-util";

describe("chat", () => {
  it("knows a flow that takes a conversation, and says why another does not", () => {
    const d = flow([["in", "input"]]);
    expect(chatSupport(d)).toMatchObject({ ok: false });
    d.nodes[0]!.params = { schema: { type: "object", properties: { messages: { type: "array" } } } };
    expect(chatSupport(d)).toEqual({ ok: true });
    expect(chatSupport(flow([["a", "transform"]]))).toMatchObject({ ok: false, why: expect.stringContaining("no Input") });
  });
  it("sends the whole conversation, leaving failed turns out", () => {
    const input = turnInput([{ role: "user", content: "hi" }, { role: "assistant", content: "boom", failed: true }, { role: "user", content: "again" }, { role: "assistant", content: "hello", run: "r1" }], "how are you?");
    expect(input.messages).toEqual([
      { role: "user", content: "hi" },
      { role: "user", content: "again" },
      { role: "assistant", content: "hello" },
      { role: "user", content: "how are you?" },
    ]);
  });
  it("sends the session with each turn to a flow whose input takes one", () => {
    expect(turnInput([], "hi", "s1")).toEqual({ messages: [{ role: "user", content: "hi" }], session_id: "s1" });
    expect(turnInput([], "hi")).toEqual({ messages: [{ role: "user", content: "hi" }] });
    const d = flow([["in", "input"]]);
    d.nodes[0]!.params = { schema: { type: "object", additionalProperties: false, properties: { messages: { type: "array" } } } };
    expect(takesSession(d)).toBe(false);
    d.nodes[0]!.params = { schema: { type: "object", additionalProperties: false, properties: { messages: { type: "array" }, session_id: { type: "string" } } } };
    expect(takesSession(d)).toBe(true);
    d.nodes[0]!.params = { schema: { type: "object", properties: { messages: { type: "array" } } } };
    expect(takesSession(d)).toBe(true);
    expect(newSession()).not.toBe(newSession());
  });
  it("finds the reply in an output", () => {
    expect(replyOf("plain")).toBe("plain");
    expect(replyOf({ reply: "r", answer: "a" })).toBe("r");
    expect(replyOf({ answer: "a" })).toBe("a");
    expect(replyOf({ n: 1 })).toBe('{\n  "n": 1\n}');
    expect(replyOf(null)).toBe("");
  });
  it("keeps only messages it can show", () => {
    expect(parseChat('[{"role":"user","content":"x"},{"role":"bot"},3]')).toEqual([{ role: "user", content: "x" }]);
    expect(parseChat("nope")).toEqual([]);
  });
});
