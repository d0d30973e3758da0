import { describe, expect, it } from "vitest";
import { clipText, copy, parseClip, paste } from "./clipboard";
import { flow } from "./fixtures.test-util";

describe("copy and paste", () => {
  const doc = flow([["in", "input"], ["a", "transform"], ["b", "transform"]], [{ from: "in", to: "a" }, { id: "ab", from: "a", to: "b" }]);
  it("copies the selected nodes with the edges between them only", () => {
    const c = copy(doc, new Set(["a", "b"]))!;
    expect(c.nodes.map((n) => n.id)).toEqual(["a", "b"]);
    expect(c.edges).toEqual([{ id: "ab", from: "a", to: "b" }]);
  });
  it("pastes with fresh ids, shifted, and rewires the pasted edges", () => {
    const c = copy(doc, new Set(["a", "b"]))!;
    const { doc: out, ids } = paste(doc, c);
    expect(ids).toEqual(["a-2", "b-2"]);
    expect(out.edges.at(-1)).toEqual({ from: "a-2", to: "b-2" });
    expect(out.nodes.find((n) => n.id === "a-2")!.position).toEqual({ x: 140, y: 40 });
  });
  it("does not share objects with the original", () => {
    const d = flow([["a", "transform"]]);
    d.nodes[0]!.params = { expr: "{}" };
    const { doc: out } = paste(d, copy(d, new Set(["a"]))!);
    (out.nodes[1]!.params as Record<string, unknown>).expr = "changed";
    expect(d.nodes[0]!.params!.expr).toBe("{}");
  });
  it("reads back its own text and nothing else", () => {
    const c = copy(doc, new Set(["a"]))!;
    expect(parseClip(clipText(c))).toEqual(c);
    expect(parseClip("hello")).toBeUndefined();
    expect(parseClip('{"nodes": []}')).toBeUndefined();
  });
});
