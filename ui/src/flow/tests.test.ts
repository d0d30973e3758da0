import { describe, expect, it } from "vitest";
import type { CaseResult } from "../api/tests";
import { changedNodes, firstToShow, summaryLine } from "./tests";

const r = (c: string, pass: boolean, changed: string[] = []): CaseResult => ({ case: c, pass, changed, version: "v", checks: [], status: "succeeded", output: null, tokens: 0, cost_usd: 0, duration_ms: 1 });

describe("test results on the canvas", () => {
  it("marks the nodes a chosen case changed", () => {
    const rs = [r("a", true, ["x"]), r("b", false, ["y", "z"])];
    expect([...changedNodes(rs, "a")]).toEqual(["x"]);
    expect([...changedNodes(rs, "b")].sort()).toEqual(["y", "z"]);
  });
  it("marks, with no case chosen, the nodes of the failed cases only", () => {
    expect([...changedNodes([r("a", true, ["x"]), r("b", false, ["y"])])]).toEqual(["y"]);
  });
  it("shows the first failed case first", () => {
    expect(firstToShow([r("a", true), r("b", false)])).toBe("b");
    expect(firstToShow([r("a", true)])).toBe("a");
    expect(firstToShow([])).toBeUndefined();
  });
  it("sums a result up in one line", () => {
    expect(summaryLine({ version: "v", cases: 3, passed: 2, failed: 1, pass_rate: 0.67, tokens: 120, cost_usd: 0.001, duration_ms: 5 })).toBe("2/3 passed · 120 tokens · $0.0010");
    expect(summaryLine({ version: "v", cases: 1, passed: 1, failed: 0, pass_rate: 1, tokens: 0, cost_usd: 0, duration_ms: 5 })).toBe("1/1 passed");
  });
});
