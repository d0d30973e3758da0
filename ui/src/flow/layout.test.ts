import { describe, expect, it } from "vitest";
import { flow } from "./fixtures.test-util";
import { freeSpot, layout, nearestFreeSpot, READABLE_ZOOM, readableViewport, RUN_ROOM } from "./layout";

describe("layout", () => {
  it("places each node right of the nodes it comes from", () => {
    const doc = flow(
      [["out", "output"], ["b", "transform"], ["in", "input"], ["a", "transform"]],
      [{ from: "in", to: "a" }, { from: "in", to: "b" }, { from: "a", to: "out" }, { from: "b", to: "out" }],
    );
    const pos = layout(doc, () => ({ width: 200, height: 80 }));
    expect(pos.size).toBe(4);
    for (const e of doc.edges) expect(pos.get(e.to)!.x).toBeGreaterThan(pos.get(e.from)!.x + 200);
  });
  it("does not stack parallel branches on one another", () => {
    const doc = flow([["in", "input"], ["a", "transform"], ["b", "transform"]], [{ from: "in", to: "a" }, { from: "in", to: "b" }]);
    const pos = layout(doc, () => ({ width: 200, height: 80 }));
    expect(Math.abs(pos.get("a")!.y - pos.get("b")!.y)).toBeGreaterThanOrEqual(80);
  });
  it("leaves room under each node for what a run shows on it", () => {
    const doc = flow([["in", "input"], ["a", "llm"], ["b", "transform"]], [{ from: "in", to: "a" }, { from: "in", to: "b" }]);
    const pos = layout(doc, () => ({ width: 200, height: 50 }));
    const [top, bottom] = [pos.get("a")!.y, pos.get("b")!.y].sort((x, y) => x - y);
    // The upper node may grow by RUN_ROOM while a run streams into it, and still clear the lower.
    expect(bottom! - (top! + 50 + RUN_ROOM)).toBeGreaterThanOrEqual(24);
  });
  it("leaves room under an agent and each of its tools", () => {
    const doc = flow([["in", "input"], ["ag", "agent"], ["t1", "http"], ["t2", "data"]], [
      { from: "in", to: "ag" },
      { from: "t1", port: "tool", to: "ag", to_port: "tools" },
      { from: "t2", port: "tool", to: "ag", to_port: "tools" },
    ]);
    const pos = layout(doc, () => ({ width: 200, height: 50 }));
    expect(pos.get("t1")!.y).toBeGreaterThanOrEqual(pos.get("ag")!.y + 50 + RUN_ROOM);
    expect(pos.get("t2")!.y).toBeGreaterThanOrEqual(pos.get("t1")!.y + 50 + RUN_ROOM);
  });
  it("lays out loops and unconnected nodes too", () => {
    const doc = flow([["a", "transform"], ["b", "transform"], ["lonely", "transform"]], [{ from: "a", to: "b" }, { from: "b", to: "a", condition: ".x" }]);
    expect(layout(doc, () => undefined).size).toBe(3);
  });
});

describe("freeSpot", () => {
  const sizes = () => ({ width: 200, height: 80 });
  it("keeps the wanted place when it is free", () => {
    expect(freeSpot(flow([]), sizes, { x: 10, y: 10 })).toEqual({ x: 10, y: 10 });
  });
  it("moves a new node right of the nodes it would cover", () => {
    const d = flow([["a", "input"], ["b", "transform"]]);
    d.nodes[0]!.position = { x: 0, y: 0 };
    d.nodes[1]!.position = { x: 224, y: 0 };
    expect(freeSpot(d, sizes, { x: 10, y: 5 })).toEqual({ x: 448, y: 5 });
  });
});

describe("nearestFreeSpot", () => {
  const sizes = () => ({ width: 200, height: 50 });
  it("keeps the place a node was dropped when it is free", () => {
    const d = flow([["a", "input"]]);
    d.nodes[0]!.position = { x: 0, y: 0 };
    expect(nearestFreeSpot(d, sizes, { x: 600, y: 0 })).toEqual({ x: 600, y: 0 });
  });
  it("moves a node dropped onto another just beside it, clear of the room a run takes", () => {
    const d = flow([["a", "input"]]);
    d.nodes[0]!.position = { x: 0, y: 0 };
    const at = nearestFreeSpot(d, sizes, { x: 10, y: 10 }, { width: 200, height: 50 });
    const clear = at.x >= 224 || at.x <= -224 || at.y >= 50 + RUN_ROOM + 24 || at.y <= -(50 + RUN_ROOM + 24);
    expect(clear).toBe(true);
    // Below is nearer than to the side for nodes wider than they are tall.
    expect(at).toEqual({ x: 10, y: 50 + RUN_ROOM + 24 });
  });
  it("finds a free place among several nodes", () => {
    const d = flow([["a", "input"], ["b", "transform"], ["c", "output"]]);
    d.nodes[0]!.position = { x: 0, y: 0 };
    d.nodes[1]!.position = { x: 0, y: 122 };
    d.nodes[2]!.position = { x: 0, y: -122 };
    const at = nearestFreeSpot(d, sizes, { x: 0, y: 0 }, { width: 200, height: 50 });
    for (const n of d.nodes) {
      const p = n.position!;
      const apart = at.x >= p.x + 224 || p.x >= at.x + 224 || at.y >= p.y + 50 + RUN_ROOM + 24 || p.y >= at.y + 50 + RUN_ROOM + 24;
      expect(apart).toBe(true);
    }
  });
});

describe("layout of tools", () => {
  it("hangs a tool under its agent instead of ranking it before it", () => {
    const doc = flow([["in", "input"], ["ag", "agent"], ["t", "http"], ["out", "output"]], [
      { from: "in", to: "ag" },
      { from: "t", port: "tool", to: "ag", to_port: "tools" },
      { from: "ag", to: "out" },
    ]);
    const pos = layout(doc, () => ({ width: 200, height: 80 }));
    expect(pos.get("t")!.x).toBe(pos.get("ag")!.x);
    expect(pos.get("t")!.y).toBeGreaterThanOrEqual(pos.get("ag")!.y + 80);
    expect(pos.get("out")!.x).toBeGreaterThan(pos.get("ag")!.x + 200);
  });
});

describe("readableViewport", () => {
  const box = (x: number, y: number) => ({ position: { x, y }, size: { width: 200, height: 80 } });
  it("fits a small flow in the view, no bigger than the largest zoom", () => {
    const v = readableViewport([box(0, 0), box(300, 0)], { width: 1000, height: 600 });
    expect(v.zoom).toBe(1.2);
    expect(v.x).toBeGreaterThan(0);
  });
  it("keeps text readable for a flow too wide to fit: readable zoom, from its start", () => {
    const nodes = Array.from({ length: 12 }, (_, i) => box(i * 300, 0));
    const v = readableViewport(nodes, { width: 1000, height: 600 }, { padding: 40 });
    expect(v.zoom).toBe(READABLE_ZOOM);
    expect(v.x).toBe(40); // the first node at the left edge
  });
});
