import { describe, expect, it } from "vitest";
import type { Checkpoint } from "../api/types";
import { flow } from "./fixtures.test-util";
import { activePins, canPin, editPin, isPinnedFrom, parsePins, pinOf, pinSource, pinsKey, pinsToSend, removePin, serializePins, setPin, unpinnable, type Pins, type StoredPin } from "./pins";

const doc = flow(
  [["in", "input"], ["ask", "llm"], ["fix", "transform"], ["route", "router"], ["out", "output"]],
  [{ from: "in", to: "ask" }, { from: "ask", to: "fix" }, { from: "fix", to: "route" }, { from: "route", port: "a", to: "out" }],
);
const classify = { ...doc, nodes: doc.nodes.map((n) => (n.id === "route" ? { ...n, params: { mode: "llm", routes: { a: "when a" } } } : n)) };

const ckpt = (c: Partial<Checkpoint>): Checkpoint => ({ id: "1-0", node: "ask", kind: "step", step: 2, duration_ms: 3, usage: { input_tokens: 10, output_tokens: 5 }, time: "", ...c });

describe("which nodes can be pinned", () => {
  it("pins nodes that call something outside, not those that only compute", () => {
    const node = (id: string) => doc.nodes.find((n) => n.id === id);
    expect(unpinnable(node("ask"))).toBeUndefined();
    for (const id of ["in", "fix", "out"]) expect(unpinnable(node(id))).toMatch(/calls nothing outside/);
    expect(unpinnable({ id: "j", type: "join" } as never)).toMatch(/calls nothing outside/);
    expect(unpinnable(undefined)).toMatch(/no such node/);
  });
  it("pins a router only when it asks a model", () => {
    expect(unpinnable(doc.nodes.find((n) => n.id === "route"))).toMatch(/rules router/);
    expect(unpinnable(classify.nodes.find((n) => n.id === "route"))).toBeUndefined();
  });
  it("offers a pin from a step that ran only, not from an agent's turn, a failed attempt or a pinned step", () => {
    expect(canPin(ckpt({}), doc)).toBe(true);
    expect(canPin(ckpt({ pinned: true }), doc)).toBe(false);
    expect(canPin(ckpt({ kind: "turn" }), doc)).toBe(false);
    expect(canPin(ckpt({ kind: "error" }), doc)).toBe(false);
    expect(canPin(ckpt({ node: "fix" }), doc)).toBe(false);
  });
});

describe("a pin from a checkpoint", () => {
  it("holds the checkpoint's output, update and ports and says where it came from", () => {
    const p = pinOf(ckpt({ output: { text: "hi" }, update: { answer: "hi" }, ports: ["a"] }), "run1", "llm", 7);
    expect(p).toEqual({ type: "llm", run: "run1", checkpoint: "1-0", step: 2, at: 7, output: { text: "hi" }, update: { answer: "hi" }, ports: ["a"] });
    expect(pinSource(p)).toBe("from run run1, step 2");
  });
  it("leaves out what the step did not give (no ports: every port)", () => {
    const p = pinOf(ckpt({ output: null }), "run1", "llm", 7);
    expect(p).toEqual({ type: "llm", run: "run1", checkpoint: "1-0", step: 2, at: 7, output: null });
  });
  it("knows the checkpoint it was taken from, until it is edited", () => {
    const c = ckpt({ output: "x" });
    const pins = setPin({}, "ask", pinOf(c, "run1", "llm", 1));
    expect(isPinnedFrom(pins, c, "run1")).toBe(true);
    expect(isPinnedFrom(pins, c, "run2")).toBe(false);
    const edited = editPin(pins.ask!, `"y"`, "", 2);
    if (!("pin" in edited)) throw new Error(edited.error);
    expect(isPinnedFrom(setPin(pins, "ask", edited.pin), c, "run1")).toBe(false);
  });
});

describe("pins sent with a run", () => {
  const p: StoredPin = { type: "llm", at: 1, output: { text: "hi" }, update: { answer: "hi" }, run: "r", checkpoint: "1-0", step: 2 };
  it("sends only output, update and ports", () => {
    expect(pinsToSend({ ask: p }, doc)).toEqual({ pins: { ask: { output: { text: "hi" }, update: { answer: "hi" } } }, skipped: [] });
    expect(activePins({ ask: p }, doc)).toEqual(new Set(["ask"]));
  });
  it("sends nothing without pins", () => {
    expect(pinsToSend({}, doc)).toEqual({ pins: undefined, skipped: [] });
  });
  it("skips a pin whose node is gone, changed type or cannot be pinned, and says why", () => {
    const pins: Pins = { gone: p, fix: { ...p, type: "transform" }, ask: p };
    const other = { ...doc, nodes: doc.nodes.map((n) => (n.id === "ask" ? { ...n, type: "agent" } : n)) };
    const got = pinsToSend(pins, other);
    expect(got.pins).toBeUndefined();
    expect(got.skipped).toEqual([
      { node: "gone", why: "the flow has no node with this id any more" },
      { node: "fix", why: "a transform node calls nothing outside: it runs again as it is" },
      { node: "ask", why: "the node is a agent now, not a llm" },
    ]);
  });
});

describe("editing and removing pins", () => {
  const p: StoredPin = { type: "llm", at: 1, output: "a", run: "r", checkpoint: "1-0", step: 2 };
  it("takes new JSON for the output and the update", () => {
    const got = editPin(p, `{"text": "b"}`, `{"answer": "b"}`, 5);
    expect(got).toEqual({ pin: { type: "llm", at: 5, output: { text: "b" }, update: { answer: "b" }, run: "r", checkpoint: "1-0", step: 2, edited: true } });
    if ("pin" in got) expect(pinSource(got.pin)).toBe("from run r, step 2, edited");
  });
  it("refuses text that is not JSON and an update that is not an object", () => {
    expect(editPin(p, "{", "", 5)).toEqual({ error: expect.stringMatching(/^the output is not JSON/) });
    expect(editPin(p, "", "[1]", 5)).toEqual({ error: "the update must be a JSON object (it is merged into the state)" });
  });
  it("empties a field to leave it out", () => {
    expect(editPin({ ...p, update: { x: 1 } }, "", "", 5)).toEqual({ pin: { type: "llm", at: 5, run: "r", checkpoint: "1-0", step: 2, edited: true } });
  });
  it("removes one pin and leaves the others", () => {
    const pins: Pins = { ask: p, other: p };
    expect(removePin(pins, "ask")).toEqual({ other: p });
    expect(removePin(pins, "none")).toBe(pins);
  });
});

describe("stored pins", () => {
  it("are kept per flow", () => {
    expect(pinsKey("triage")).toBe("sluice:pins:triage");
  });
  it("read back what was written and drop anything that is not a pin", () => {
    const p: StoredPin = { type: "llm", at: 1, output: [1], ports: ["a"] };
    expect(parsePins(serializePins({ ask: p }))).toEqual({ ask: p });
    expect(parsePins(JSON.stringify({ a: { type: "llm" }, b: { type: "llm", at: 1, update: [1] }, c: { type: "llm", at: 1, ports: [1] }, d: 5, e: p }))).toEqual({ e: p });
    expect(parsePins("{")).toEqual({});
    expect(parsePins("[1]")).toEqual({});
    expect(parsePins(null)).toEqual({});
  });
});
