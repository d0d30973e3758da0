// Auto-layout: ranks the nodes left to right along their edges with dagre.
import dagre from "@dagrejs/dagre";
import type { FlowDocument, Position } from "./types";

export interface Size {
  width: number;
  height: number;
}

export const DEFAULT_SIZE: Size = { width: 200, height: 80 };

/** New positions (top-left corners) for every node of doc. */
export function layout(doc: FlowDocument, sizes: (id: string) => Size | undefined): Map<string, Position> {
  const g = new dagre.graphlib.Graph({ multigraph: true });
  g.setGraph({ rankdir: "LR", nodesep: 40, ranksep: 80, marginx: 0, marginy: 0 });
  g.setDefaultEdgeLabel(() => ({}));
  for (const n of doc.nodes) {
    const s = sizes(n.id) ?? DEFAULT_SIZE;
    g.setNode(n.id, { width: s.width, height: s.height });
  }
  doc.edges.forEach((e, i) => {
    if (g.hasNode(e.from) && g.hasNode(e.to)) g.setEdge(e.from, e.to, {}, String(i));
  });
  dagre.layout(g);
  const out = new Map<string, Position>();
  for (const n of doc.nodes) {
    const p = g.node(n.id) as { x: number; y: number; width: number; height: number } | undefined;
    if (p) out.set(n.id, { x: Math.round(p.x - p.width / 2), y: Math.round(p.y - p.height / 2) });
  }
  return out;
}

function overlaps(a: Position, as: Size, b: Position, bs: Size, gap: number): boolean {
  return a.x < b.x + bs.width + gap && b.x < a.x + as.width + gap && a.y < b.y + bs.height + gap && b.y < a.y + as.height + gap;
}

/**
 * A place for a new node near want where it covers no other node: moved right past
 * whatever it would cover (a new node added from the keyboard lands beside the last one,
 * not on top of it).
 */
export function freeSpot(doc: FlowDocument, sizes: (id: string) => Size | undefined, want: Position, size: Size = DEFAULT_SIZE, gap = 24): Position {
  const placed = doc.nodes.filter((n) => n.position).map((n) => ({ p: n.position!, s: sizes(n.id) ?? DEFAULT_SIZE }));
  let at = { ...want };
  for (let i = 0; i <= placed.length; i++) {
    const hit = placed.find((o) => overlaps(at, size, o.p, o.s, gap));
    if (!hit) return at;
    at = { x: hit.p.x + hit.s.width + gap, y: at.y };
  }
  return at;
}
