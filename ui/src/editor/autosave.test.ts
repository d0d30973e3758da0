import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { flow } from "../flow/fixtures.test-util";
import { setParam } from "../flow/ops";
import type { FlowDocument } from "../flow/types";
import { parseStored, serialize, storageKey } from "../flow/workingcopy";
import { Autosave, type AutosaveIO } from "./autosave";
import { EditorStore } from "./store";

function memory() {
  const m = new Map<string, string>();
  return { getItem: (k: string) => m.get(k) ?? null, setItem: (k: string, v: string) => void m.set(k, v), removeItem: (k: string) => void m.delete(k), m };
}

function io(storage = memory()) {
  const drafts: FlowDocument[] = [];
  const deleted: string[] = [];
  let fail: string | undefined;
  const x: AutosaveIO & { drafts: FlowDocument[]; deleted: string[]; storage: ReturnType<typeof memory>; failWith(m?: string): void } = {
    storage,
    drafts,
    deleted,
    saveDraft: async (d) => {
      if (fail) throw new Error(fail);
      drafts.push(d);
    },
    deleteDraft: async (f) => void deleted.push(f),
    saveDraftOnExit: (d) => void drafts.push(d),
    failWith: (m) => (fail = m),
  };
  return x;
}

beforeEach(() => vi.useFakeTimers());
afterEach(() => vi.useRealTimers());

describe("Autosave", () => {
  const saved = flow([["a", "transform"]]);

  it("keeps every edit in this browser at once and sends a draft a moment after the last", async () => {
    const store = new EditorStore(saved, true);
    const x = io();
    new Autosave(store, x, true, "", 1000);
    store.edit((d) => setParam(d, "a", "expr", "{"));
    store.edit((d) => setParam(d, "a", "expr", "{}"));
    const kept = parseStored(x.storage.getItem(storageKey("t", false)));
    expect(kept && JSON.parse(kept.doc).nodes[0].params).toEqual({ expr: "{}" });
    expect(kept?.base).toBe(serialize(saved));
    expect(x.drafts).toHaveLength(0);
    await vi.advanceTimersByTimeAsync(1000);
    expect(x.drafts).toHaveLength(1);
    expect(store.dirty).toBe(false);
    expect(store.draft).toBe(true);
    expect(x.storage.getItem(storageKey("t", false))).toBeNull(); // the server has it
  });

  it("keeps the copy and tries again while the server cannot be reached", async () => {
    const store = new EditorStore(saved, true);
    const x = io();
    const a = new Autosave(store, x, true, "", 1000, 5000);
    x.failWith("the server cannot be reached");
    store.edit((d) => setParam(d, "a", "expr", "{}"));
    await vi.advanceTimersByTimeAsync(1000);
    expect(a.get().error).toBe("the server cannot be reached");
    expect(store.dirty).toBe(true);
    expect(x.storage.getItem(storageKey("t", false))).not.toBeNull();
    x.failWith(undefined);
    await vi.advanceTimersByTimeAsync(5000);
    expect(a.get().error).toBeUndefined();
    expect(x.drafts).toHaveLength(1);
  });

  it("discards the draft when the edits are undone back to the saved file", async () => {
    const store = new EditorStore(saved, true);
    const x = io();
    new Autosave(store, x, true, "", 1000);
    store.edit((d) => setParam(d, "a", "expr", "{}"));
    await vi.advanceTimersByTimeAsync(1000);
    store.undo();
    await vi.advanceTimersByTimeAsync(1000);
    expect(x.deleted).toEqual(["t"]);
    expect(store.draft).toBe(false);
    expect(store.dirty).toBe(false);
  });

  it("keeps a new flow only in this browser until its first save", async () => {
    const doc = flow([]);
    const store = new EditorStore(doc, false);
    const x = io();
    const a = new Autosave(store, x, false, serialize(doc), 1000);
    store.edit((d) => setParam({ ...d, nodes: [{ id: "a", type: "transform" }] }, "a", "expr", "{}"));
    await vi.advanceTimersByTimeAsync(5000);
    expect(x.drafts).toHaveLength(0);
    expect(parseStored(x.storage.getItem(storageKey("t", true)))?.base).toBe(serialize(doc));
    a.serverKnows();
    expect(x.storage.getItem(storageKey("t", true))).toBeNull();
    await vi.advanceTimersByTimeAsync(1000);
    expect(x.drafts).toHaveLength(1);
  });

  it("sends what the server lacks when the page goes away", () => {
    const store = new EditorStore(saved, true);
    const x = io();
    const a = new Autosave(store, x, true, "", 1000);
    a.exit();
    expect(x.drafts).toHaveLength(0);
    store.edit((d) => setParam(d, "a", "expr", "{}"));
    a.exit();
    expect(x.drafts).toHaveLength(1);
  });
});
