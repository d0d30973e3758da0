import { describe, expect, it } from "vitest";
import { flow } from "../flow/fixtures.test-util";
import { addNode, removeItems, setParam } from "../flow/ops";
import { EditorStore } from "./store";

describe("EditorStore", () => {
  it("is clean when opened on a saved flow and dirty after an edit", () => {
    const s = new EditorStore(flow([["a", "transform"]]), true);
    expect(s.dirty).toBe(false);
    s.edit((d) => setParam(d, "a", "expr", "{}"));
    expect(s.dirty).toBe(true);
    s.markSaved(s.get().doc);
    expect(s.dirty).toBe(false);
  });
  it("counts a flow never saved as dirty", () => {
    expect(new EditorStore(flow([]), false).dirty).toBe(true);
  });
  it("undoes and redoes edits, and typing in one field is one step", () => {
    const s = new EditorStore(flow([["a", "transform"]]), true);
    s.edit((d) => setParam(d, "a", "expr", "{"), "a.expr");
    s.edit((d) => setParam(d, "a", "expr", "{}"), "a.expr");
    expect(s.get().canUndo).toBe(true);
    s.undo();
    expect(s.get().doc.nodes[0]!.params).toBeUndefined();
    expect(s.dirty).toBe(false);
    s.redo();
    expect(s.get().doc.nodes[0]!.params).toEqual({ expr: "{}" });
  });
  it("drops deleted nodes from the selection", () => {
    const s = new EditorStore(flow([["a", "transform"], ["b", "transform"]]), true);
    s.select(["a", "b"]);
    s.edit((d) => removeItems(d, new Set(["a"]), new Set()));
    expect([...s.get().selectedNodes]).toEqual(["b"]);
  });
  it("tells its listeners about every change and records nothing for a no-op", () => {
    const s = new EditorStore(flow([]), true);
    let calls = 0;
    s.subscribe(() => calls++);
    s.edit((d) => addNode(d, "input", { x: 0, y: 0 }).doc);
    s.edit((d) => d);
    expect(calls).toBe(1);
    s.undo();
    expect(s.get().doc.nodes).toHaveLength(0);
    expect(s.get().canUndo).toBe(false);
  });
});
