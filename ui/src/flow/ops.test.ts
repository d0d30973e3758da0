import { describe, expect, it } from "vitest";
import { flow } from "./fixtures.test-util";
import { addNode, connect, removeItems, renameNode, renamePort, setNodeField, setParam, updateEdge } from "./ops";

describe("document edits", () => {
  it("names a new node after its type, and the next one with a number", () => {
    let d = flow([]);
    ({ doc: d } = addNode(d, "transform", { x: 10.4, y: 20.6 }));
    const { doc, id } = addNode(d, "transform", { x: 0, y: 0 });
    expect(id).toBe("transform-2");
    expect(doc.nodes[0]).toEqual({ id: "transform", type: "transform", position: { x: 10, y: 21 } });
  });
  it("removes a node with every edge touching it", () => {
    const d = flow([["in", "input"], ["a", "transform"], ["b", "transform"]], [{ from: "in", to: "a" }, { from: "a", to: "b" }, { from: "in", to: "b" }]);
    const out = removeItems(d, new Set(["a"]), new Set());
    expect(out.edges).toEqual([{ from: "in", to: "b" }]);
  });
  it("removes an edge by its canvas id", () => {
    const d = flow([["in", "input"], ["a", "transform"]], [{ from: "in", to: "a" }]);
    expect(removeItems(d, new Set(), new Set(["in:out->a:in"])).edges).toEqual([]);
  });
  it("writes a new edge without default ports", () => {
    const d = connect(flow([["in", "input"], ["a", "transform"]]), { from: "in", port: "out", to: "a", to_port: "in" });
    expect(d.edges).toEqual([{ from: "in", to: "a" }]);
  });
  it("removes a parameter set to nothing so its default applies", () => {
    let d = setParam(flow([["a", "transform"]]), "a", "expr", "{x: 1}");
    expect(d.nodes[0]!.params).toEqual({ expr: "{x: 1}" });
    d = setParam(d, "a", "expr", undefined);
    expect(d.nodes[0]!.params).toBeUndefined();
  });
  it("removes an emptied node field", () => {
    let d = setNodeField(flow([["a", "transform"]]), "a", "label", "Greet");
    expect(d.nodes[0]!.label).toBe("Greet");
    d = setNodeField(d, "a", "label", "");
    expect("label" in d.nodes[0]!).toBe(false);
  });
  it("renames a node in its edges too", () => {
    const d = renameNode(flow([["in", "input"], ["a", "transform"]], [{ from: "in", to: "a" }]), "a", "greet");
    expect(d.nodes[1]!.id).toBe("greet");
    expect(d.edges).toEqual([{ from: "in", to: "greet" }]);
  });
  it("keeps a renamed route's edges", () => {
    const d = renamePort(flow([["r", "router"], ["a", "transform"]], [{ from: "r", port: "code", to: "a" }]), "r", "code", "coding");
    expect(d.edges).toEqual([{ from: "r", port: "coding", to: "a" }]);
  });
  it("sets an edge's condition and clears it", () => {
    let d = flow([["in", "input"], ["a", "transform"]], [{ from: "in", to: "a" }]);
    d = updateEdge(d, "in:out->a:in", (e) => ({ ...e, condition: ".ok" }));
    expect(d.edges[0]).toEqual({ from: "in", to: "a", condition: ".ok" });
    d = updateEdge(d, "in:out->a:in", (e) => ({ ...e, condition: "" }));
    expect(d.edges[0]).toEqual({ from: "in", to: "a" });
  });
  it("never changes the document it is given", () => {
    const d = flow([["a", "transform"]]);
    const before = JSON.stringify(d);
    setParam(d, "a", "expr", "x");
    addNode(d, "input", { x: 0, y: 0 });
    renameNode(d, "a", "b");
    expect(JSON.stringify(d)).toBe(before);
  });
});
