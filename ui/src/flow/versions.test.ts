import { describe, expect, it } from "vitest";
import { flow } from "./fixtures.test-util";
import { diffView, summary, type VersionDiff } from "./versions";

const empty: VersionDiff = { from: "a", to: "b", nodes_added: [], nodes_removed: [], nodes_changed: [], edges_added: [], edges_removed: [], edges_changed: [], flow: [] };

describe("diffView", () => {
  const older = flow([["in", "input"], ["old", "transform"], ["out", "output"]], [{ from: "in", to: "old" }, { from: "old", to: "out" }]);
  const newer = flow([["in", "input"], ["new", "transform"], ["out", "output"]], [{ from: "in", to: "new" }, { from: "new", to: "out", condition: ".ok" }]);
  newer.nodes[2]!.params = { value: ".x" };
  const d: VersionDiff = {
    ...empty,
    nodes_added: ["new"],
    nodes_removed: ["old"],
    nodes_changed: [{ node: "out", changes: [{ path: "params.value", op: "add", to: ".x" }] }],
    edges_added: [{ from: "in", to: "new" }, { from: "new", to: "out", condition: ".ok" }],
    edges_removed: [{ from: "in", to: "old" }, { from: "old", to: "out" }],
  };
  const v = diffView(older, newer, d);
  it("draws both versions: the newer one plus what it removed, where it was", () => {
    expect(v.doc.nodes.map((n) => n.id)).toEqual(["in", "new", "out", "old"]);
    expect(v.doc.nodes[3]!.position).toEqual(older.nodes[1]!.position);
    expect(v.doc.edges).toHaveLength(4);
  });
  it("marks nodes added, removed and changed, and leaves the others alone", () => {
    expect(Object.fromEntries(v.nodes)).toEqual({ new: "added", old: "removed", out: "changed" });
    expect(v.changes.get("out")).toEqual([{ path: "params.value", op: "add", to: ".x" }]);
  });
  it("marks edges by their canvas ids", () => {
    expect(Object.fromEntries(v.edges)).toEqual({
      "in:out->new:in": "added",
      "new:out->out:in": "added",
      "in:out->old:in": "removed",
      "old:out->out:in": "removed",
    });
  });
  it("summarises the changes", () => {
    expect(summary(d)).toBe("nodes: 1 added, 1 removed, 1 changed; edges: 2 added, 2 removed");
    expect(summary(empty)).toBe("no changes (positions aside)");
  });
});
