import { describe, expect, it } from "vitest";
import { keyAction, plainKeyAction, SHORTCUTS } from "./shortcuts";

const ctrl = (key: string, more: { shiftKey?: boolean } = {}) => ({ key, ctrlKey: true, ...more });

describe("shortcuts", () => {
  it("lists every plain key the canvas acts on", () => {
    const listed = new Set(SHORTCUTS.flatMap((s) => s.keys));
    for (const k of ["?", "N", "L", "F"]) {
      expect(plainKeyAction(k)).toBeDefined();
      expect(listed.has(k)).toBe(true);
    }
  });
  it("leaves other keys to the page", () => {
    expect(plainKeyAction("x")).toBeUndefined();
    expect(plainKeyAction("Enter")).toBeUndefined();
  });
  it("lists the keys that select everything, let go of it and run", () => {
    const listed = new Set(SHORTCUTS.flatMap((s) => s.keys));
    for (const k of ["Ctrl/⌘ A", "Esc", "Ctrl/⌘ Enter"]) expect(listed.has(k)).toBe(true);
  });
});

describe("keyAction on the canvas", () => {
  it("selects every node with Ctrl or ⌘ A and lets go of them with Esc", () => {
    expect(keyAction(ctrl("a"), false)).toBe("selectAll");
    expect(keyAction({ key: "a", metaKey: true }, false)).toBe("selectAll");
    expect(keyAction({ key: "Escape" }, false)).toBe("escape");
  });
  it("runs with Ctrl+Enter and saves with Ctrl+S", () => {
    expect(keyAction(ctrl("Enter"), false)).toBe("run");
    expect(keyAction(ctrl("s"), false)).toBe("save");
  });
  it("undoes and redoes the graph", () => {
    expect(keyAction(ctrl("z"), false)).toBe("undo");
    expect(keyAction(ctrl("Z", { shiftKey: true }), false)).toBe("redo");
    expect(keyAction(ctrl("y"), false)).toBe("redo");
  });
  it("acts on plain letters only without a modifier", () => {
    expect(keyAction({ key: "n" }, false)).toBe("note");
    expect(keyAction(ctrl("n"), false)).toBeUndefined();
    expect(keyAction({ key: "n", altKey: true }, false)).toBeUndefined();
  });
});

describe("keyAction in a text field", () => {
  it("leaves Ctrl+Z, Ctrl+Shift+Z and Ctrl+Y to the field: they undo and redo its typing", () => {
    expect(keyAction(ctrl("z"), true)).toBeUndefined();
    expect(keyAction(ctrl("Z", { shiftKey: true }), true)).toBeUndefined();
    expect(keyAction(ctrl("y"), true)).toBeUndefined();
  });
  it("leaves Ctrl+A, Esc and letters to the field", () => {
    expect(keyAction(ctrl("a"), true)).toBeUndefined();
    expect(keyAction({ key: "Escape" }, true)).toBeUndefined();
    expect(keyAction({ key: "n" }, true)).toBeUndefined();
  });
  it("still saves and runs", () => {
    expect(keyAction(ctrl("s"), true)).toBe("save");
    expect(keyAction(ctrl("Enter"), true)).toBe("run");
  });
});
