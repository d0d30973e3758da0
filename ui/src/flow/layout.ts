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
