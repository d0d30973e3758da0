import { describe, expect, it } from "vitest";
import { applyPatch, diff, mergePatch } from "./diff";

describe("diff", () => {
  it("names added, removed and replaced values by path", () => {
    expect(diff({ a: 1, b: { c: [1, 2] }, gone: true }, { a: 2, b: { c: [1, 2, 3] }, d: "x" })).toEqual([
      { path: "a", op: "replace", from: 1, to: 2 },
      { path: "b.c[2]", op: "add", to: 3 },
      { path: "d", op: "add", to: "x" },
      { path: "gone", op: "remove", from: true },
    ]);
  });
  it("finds nothing between equal values", () => {
    expect(diff({ a: [1, { b: null }] }, { a: [1, { b: null }] })).toEqual([]);
  });
});

describe("mergePatch", () => {
  it("is the patch that turns one state into the other", () => {
    const a = { name: "Ada", tags: ["x"], deep: { keep: 1, change: 2 }, drop: 1 };
    const b = { name: "Grace", tags: ["x", "y"], deep: { keep: 1, change: 3 } };
    const p = mergePatch(a, b);
    expect(p).toEqual({ drop: null, name: "Grace", tags: ["x", "y"], deep: { change: 3 } });
    expect(applyPatch(a, p)).toEqual(b);
  });
  it("is nothing for equal states", () => {
    expect(mergePatch({ a: 1 }, { a: 1 })).toBeUndefined();
  });
});
