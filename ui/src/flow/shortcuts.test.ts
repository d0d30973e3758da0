import { describe, expect, it } from "vitest";
import { plainKeyAction, SHORTCUTS } from "./shortcuts";

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
});
