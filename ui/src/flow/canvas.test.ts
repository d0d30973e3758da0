import { describe, expect, it } from "vitest";
import { toCanvasEdges, toCanvasNodes } from "./canvas";
import { flow, reg } from "./fixtures.test-util";
import { mapProblems } from "./problems";

describe("canvas conversion", () => {
  const doc = flow([["in", "input"], ["r", "router"], ["a", "transform"]], [{ from: "in", to: "r" }, { from: "r", port: "code", to: "a", condition: ".ok" }]);
  doc.nodes[1]!.params = { routes: { code: ".x" } };
  it("gives each node its ports, a router its routes too", () => {
    const nodes = toCanvasNodes(doc, reg);
    expect(nodes[1]!.data.ports.map((p) => `${p.direction}:${p.name}`)).toEqual(["in:in", "out:default", "out:code"]);
  });
  it("marks the nodes whose pins the next test run uses", () => {
    const nodes = toCanvasNodes(doc, reg, { pins: new Set(["a"]) });
    expect(nodes.map((n) => !!n.data.pinned)).toEqual([false, false, true]);
  });
  it("connects edges by plain port names and labels conditions", () => {
    const [e1, e2] = toCanvasEdges(doc);
    expect(e1).toMatchObject({ id: "in:out->r:in", source: "in", sourceHandle: "out", target: "r", targetHandle: "in" });
    expect(e2).toMatchObject({ sourceHandle: "code", label: ".ok" });
  });
  it("puts problems on the nodes and edges they concern", () => {
    const problems = mapProblems(
      [{ severity: "error", code: "jq_syntax", node: "a", message: "bad" }, { severity: "error", code: "x", edge: "r:code->a:in", message: "bad edge" }],
      doc,
    );
    expect(toCanvasNodes(doc, reg, { problems })[2]!.data.problems).toHaveLength(1);
    expect(toCanvasEdges(doc, { problems })[1]!.className).toContain("edge-error");
  });
});

describe("nodes of an unknown type", () => {
  it("get the ports their edges name, so an import's placeholder stays wired", () => {
    const doc = flow([["in", "input"], ["p", "langflow:Memory"], ["a", "agent"], ["t", "langflow:Calculator"]], [
      { from: "in", to: "p" },
      { from: "p", to: "a" },
      { from: "t", port: "tool", to: "a", to_port: "tools" },
    ]);
    const nodes = toCanvasNodes(doc, reg);
    expect(nodes[1]!.data.ports.map((p) => `${p.direction}:${p.name}:${p.type}`)).toEqual(["in:in:state", "out:out:state"]);
    expect(nodes[3]!.data.ports.map((p) => `${p.direction}:${p.name}:${p.type}`)).toEqual(["out:tool:tool"]);
  });
});

describe("a comparison of two versions", () => {
  it("marks nodes and edges", () => {
    const doc = flow([["in", "input"], ["a", "transform"]], [{ from: "in", to: "a" }]);
    const marks = { nodes: new Map([["a", "added" as const]]), edges: new Map([["in:out->a:in", "added" as const]]) };
    expect(toCanvasNodes(doc, reg, { marks })[1]!.data.mark).toBe("added");
    expect(toCanvasEdges(doc, { marks })[0]!.className).toContain("edge-added");
  });
});
