import { describe, expect, it } from "vitest";
import { flow } from "./fixtures.test-util";
import { mapProblems, problemField, worst } from "./problems";
import type { Problem } from "./types";

const doc = flow([["in", "input"], ["a", "transform"], ["out", "output"]], [{ from: "in", to: "a" }, { id: "named", from: "a", to: "out" }]);
const p = (x: Partial<Problem>): Problem => ({ severity: "error", code: "x", message: "m", ...x });

describe("mapProblems", () => {
  it("puts a node's problem on that node", () => {
    const m = mapProblems([p({ node: "a", path: "nodes[1].params.expr" })], doc);
    expect(m.byNode.get("a")).toHaveLength(1);
    expect(m.general).toHaveLength(0);
  });
  it("finds an unnamed edge by its from:port->to:to_port name", () => {
    const m = mapProblems([p({ edge: "in:out->a:in", path: "edges[0]" })], doc);
    expect([...m.byEdge.keys()]).toEqual(["in:out->a:in"]);
  });
  it("finds a named edge by its id", () => {
    const m = mapProblems([p({ edge: "named" })], doc);
    expect([...m.byEdge.keys()]).toEqual(["named"]);
  });
  it("finds a node by its path when the problem names no node", () => {
    const m = mapProblems([p({ path: "nodes[2].params" })], doc);
    expect(m.byNode.get("out")).toHaveLength(1);
  });
  it("keeps problems of the whole flow apart and counts severities", () => {
    const m = mapProblems([p({ code: "no_input", path: "nodes" }), p({ severity: "warning", node: "gone" })], doc);
    expect(m.general.map((x) => x.code)).toEqual(["no_input", "x"]);
    expect([m.errors, m.warnings]).toEqual([1, 1]);
  });
});

describe("problemField", () => {
  it("names the parameter of a params path", () => {
    expect(problemField(p({ path: "nodes[1].params.expr" }))).toEqual({ param: "expr" });
  });
  it("names the node field of other paths", () => {
    expect(problemField(p({ path: "nodes[1].input" }))).toEqual({ field: "input" });
  });
  it("says nothing for a problem of the whole node", () => {
    expect(problemField(p({ path: "nodes[1]" }))).toEqual({});
  });
});

describe("worst", () => {
  it("is an error when any problem is one", () => {
    expect(worst([p({ severity: "warning" }), p({})])).toBe("error");
    expect(worst([p({ severity: "warning" })])).toBe("warning");
    expect(worst([])).toBeUndefined();
  });
});
