import { describe, expect, it } from "vitest";
import { budgetOf, offeredOverMCP, withBudget, withMCP, withSetting } from "./settings";
import type { FlowDocument } from "./types";

const doc: FlowDocument = { sluice: 1, id: "f", nodes: [], edges: [] };

describe("flow settings", () => {
  it("offer the flow over MCP, and write nothing when it is not", () => {
    const on = withMCP(doc, true);
    expect(on.settings).toEqual({ mcp: true });
    expect(offeredOverMCP(on)).toBe(true);
    const off = withMCP(on, false);
    expect(off.settings).toBeUndefined();
    expect(offeredOverMCP(off)).toBe(false);
  });
  it("keep the other settings when one changes", () => {
    const d = withMCP({ ...doc, settings: { max_steps: 50 } }, true);
    expect(d.settings).toEqual({ max_steps: 50, mcp: true });
    expect(withMCP(d, false).settings).toEqual({ max_steps: 50 });
  });
  it("set and clear the budget's caps one by one, the budget going when its last cap does", () => {
    let d = withBudget(doc, "day_tokens", 100000);
    d = withBudget(d, "run_usd", 0.5);
    expect(d.settings).toEqual({ budget: { day_tokens: 100000, run_usd: 0.5 } });
    expect(budgetOf(d).run_usd).toBe(0.5);
    d = withBudget(d, "day_tokens", undefined);
    expect(d.settings).toEqual({ budget: { run_usd: 0.5 } });
    expect(withBudget(d, "run_usd", undefined).settings).toBeUndefined();
  });
  it("keep a cap of 0 as written (no cap), so that typing 0.5 is not cut short", () => {
    expect(withBudget(doc, "run_usd", 0).settings).toEqual({ budget: { run_usd: 0 } });
  });
  it("read a budget that is not an object as none", () => {
    expect(budgetOf(withSetting(doc, "budget", 7))).toEqual({});
  });
});
