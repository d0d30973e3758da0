import { describe, expect, it } from "vitest";
import { checkConnection } from "./connect";
import { flow, reg } from "./fixtures.test-util";

const doc = flow(
  [["in", "input"], ["a", "transform"], ["b", "single"], ["ag", "agent"], ["web", "http"], ["r", "router"], ["out", "output"]],
  [{ from: "in", to: "b" }],
);
doc.nodes.find((n) => n.id === "r")!.params = { routes: { code: ".x" } };

function reason(c: { from: string; port: string; to: string; to_port: string }) {
  const v = checkConnection(doc, reg, c);
  return v.ok ? "ok" : v.reason;
}

describe("checkConnection", () => {
  it("lets a state out port connect to a state in port", () => {
    expect(reason({ from: "in", port: "out", to: "a", to_port: "in" })).toBe("ok");
  });
  it("lets a tool attach to an agent's tools port", () => {
    expect(reason({ from: "web", port: "tool", to: "ag", to_port: "tools" })).toBe("ok");
  });
  it("refuses a state port on a tools port and says why", () => {
    expect(reason({ from: "a", port: "out", to: "ag", to_port: "tools" })).toMatch(/state port cannot connect to a tool port/);
  });
  it("refuses a tool port on a state port", () => {
    expect(reason({ from: "web", port: "tool", to: "a", to_port: "in" })).toMatch(/tool port cannot connect to a state port/);
  });
  it("refuses a second edge into a port that takes one, naming the edge it has", () => {
    expect(reason({ from: "a", port: "out", to: "b", to_port: "in" })).toMatch(/takes one edge and already has one from "in"/);
  });
  it("refuses the same connection twice", () => {
    expect(reason({ from: "in", port: "out", to: "b", to_port: "in" })).toMatch(/already connected/);
  });
  it("knows a router's route ports from its params", () => {
    expect(reason({ from: "r", port: "code", to: "a", to_port: "in" })).toBe("ok");
    expect(reason({ from: "r", port: "database", to: "a", to_port: "in" })).toMatch(/no output port "database"; it has "default", "code"/);
  });
  it("refuses a node connecting to itself", () => {
    expect(reason({ from: "a", port: "out", to: "a", to_port: "in" })).toMatch(/itself/);
  });
  it("refuses an input port used as an output", () => {
    expect(reason({ from: "out", port: "in", to: "a", to_port: "in" })).toMatch(/no output port "in"/);
  });
});
