import { describe, expect, it } from "vitest";
import { pinsKey, type StoredPin } from "../flow/pins";
import { PinStore } from "./pins";

function memory() {
  const m = new Map<string, string>();
  return { getItem: (k: string) => m.get(k) ?? null, setItem: (k: string, v: string) => void m.set(k, v), removeItem: (k: string) => void m.delete(k), m };
}

const p: StoredPin = { type: "llm", at: 1, output: { text: "hi" } };

describe("PinStore", () => {
  it("keeps a flow's pins in storage, so another page of the flow reads them back", () => {
    const storage = memory();
    const a = new PinStore("triage", storage);
    let told = 0;
    a.subscribe(() => told++);
    a.pin("ask", p);
    expect(told).toBe(1);
    expect(new PinStore("triage", storage).get()).toEqual({ ask: p });
    expect(new PinStore("other", storage).get()).toEqual({});
  });
  it("forgets the storage entry when the last pin goes", () => {
    const storage = memory();
    const a = new PinStore("triage", storage);
    a.pin("ask", p);
    a.pin("classify", p);
    a.unpin("ask");
    expect(a.get()).toEqual({ classify: p });
    a.clear();
    expect(storage.m.has(pinsKey("triage"))).toBe(false);
  });
  it("takes the pins another tab wrote for this flow, and only this flow's", () => {
    const storage = memory();
    const a = new PinStore("triage", storage);
    new PinStore("triage", storage).pin("ask", p);
    a.storageChanged(pinsKey("other"));
    expect(a.get()).toEqual({});
    a.storageChanged(pinsKey("triage"));
    expect(a.get()).toEqual({ ask: p });
  });
  it("follows the flow's id", () => {
    const storage = memory();
    new PinStore("saved", storage).pin("ask", p);
    const a = new PinStore("new-flow", storage);
    a.setFlow("saved");
    expect(a.get()).toEqual({ ask: p });
  });
  it("keeps pins for the page when storage refuses them", () => {
    const a = new PinStore("triage", { getItem: () => null, setItem: () => { throw new Error("full"); }, removeItem: () => undefined });
    a.pin("ask", p);
    expect(a.get()).toEqual({ ask: p });
  });
});
