import { describe, expect, it } from "vitest";
import { flow } from "./fixtures.test-util";
import { comparePair, diffView, summary, versionLabel, type VersionDiff } from "./versions";

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

describe("choosing two versions to compare", () => {
  const v = (version: string, current = false) => ({ version, current });
  it("starts from the version before the current one, to the current one", () => {
    expect(comparePair([v("c"), v("b", true), v("a")])).toEqual({ from: "a", to: "b" });
    expect(comparePair([v("c", true), v("b"), v("a")])).toEqual({ from: "b", to: "c" });
  });
  it("takes a newer version when the current one is the oldest (after a rollback)", () => {
    expect(comparePair([v("c"), v("b"), v("a", true)])).toEqual({ from: "c", to: "a" });
  });
  it("keeps what was chosen, in either order, while both are listed", () => {
    expect(comparePair([v("c", true), v("b"), v("a")], "c", "a")).toEqual({ from: "c", to: "a" });
    expect(comparePair([v("c", true), v("b"), v("a")], "gone", "b")).toEqual({ from: "a", to: "b" });
    expect(comparePair([v("c", true), v("b"), v("a")], "gone", "a")).toEqual({ from: "c", to: "a" });
  });
  it("has nothing to compare with one version", () => {
    expect(comparePair([v("a", true)])).toBeUndefined();
  });
  it("labels a version with its time, whether it is current and its note", () => {
    const ago = () => "2 h ago";
    expect(versionLabel({ version: "3f2a9c1e0b7d55", current: true, saved_at: "2026-01-01T00:00:00Z", message: "shorter prompt" }, ago)).toBe("3f2a9c1e0b7d · 2 h ago · current · shorter prompt");
    expect(versionLabel({ version: "3f2a9c1e0b7d55", current: false, saved_at: "0001-01-01T00:00:00Z" }, ago)).toBe("3f2a9c1e0b7d");
  });
});
