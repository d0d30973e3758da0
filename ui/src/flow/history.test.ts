import { describe, expect, it } from "vitest";
import { History } from "./history";

describe("History", () => {
  it("undoes and redoes edits in order", () => {
    const h = new History<number>();
    h.record(1);
    h.record(2);
    expect(h.undo(3)).toBe(2);
    expect(h.undo(2)).toBe(1);
    expect(h.undo(1)).toBeUndefined();
    expect(h.redo(1)).toBe(2);
    expect(h.redo(2)).toBe(3);
    expect(h.canRedo).toBe(false);
  });
  it("drops the redo steps when a new edit comes", () => {
    const h = new History<number>();
    h.record(1);
    h.undo(2);
    h.record(1);
    expect(h.canRedo).toBe(false);
  });
  it("undoes typing into one field as one step", () => {
    const h = new History<string>();
    h.record("", "expr");
    h.record("a", "expr");
    h.record("ab", "expr");
    expect(h.undo("abc")).toBe("");
    expect(h.canUndo).toBe(false);
  });
  it("starts a new step after seal", () => {
    const h = new History<string>();
    h.record("", "expr");
    h.seal();
    h.record("a", "expr");
    expect(h.undo("ab")).toBe("a");
  });
  it("keeps at most its limit", () => {
    const h = new History<number>(2);
    [1, 2, 3].forEach((n) => h.record(n));
    expect(h.undo(4)).toBe(3);
    expect(h.undo(3)).toBe(2);
    expect(h.undo(2)).toBeUndefined();
  });
});
