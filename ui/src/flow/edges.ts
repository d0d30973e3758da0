// How edges are named: the same rule as flows.Edge.Key in Go, so a problem's "edge"
// field finds its edge on the canvas.
import { DEFAULT_IN, DEFAULT_OUT, type FlowEdge } from "./types";

export function fromPort(e: FlowEdge): string {
  return e.port || DEFAULT_OUT;
}

export function toPort(e: FlowEdge): string {
  return e.to_port || DEFAULT_IN;
}

/** The edge's name in problems and events: its id, else "from:port->to:to_port". */
export function edgeKey(e: FlowEdge): string {
  return e.id ? e.id : `${e.from}:${fromPort(e)}->${e.to}:${toPort(e)}`;
}

/** The connection an edge makes, ignoring its id and condition. */
export function sameConnection(a: FlowEdge, b: FlowEdge): boolean {
  return a.from === b.from && fromPort(a) === fromPort(b) && a.to === b.to && toPort(a) === toPort(b);
}

/**
 * Unique ids for the canvas: the edge's key, with "#2", "#3"... for edges that share
 * a key (the same connection twice with different conditions).
 */
export function canvasEdgeIds(edges: FlowEdge[]): string[] {
  const seen = new Map<string, number>();
  return edges.map((e) => {
    const k = edgeKey(e);
    const n = (seen.get(k) ?? 0) + 1;
    seen.set(k, n);
    return n === 1 ? k : `${k}#${n}`;
  });
}

/** Writes an edge the way the format prefers: default ports left out. */
export function normalEdge(e: FlowEdge): FlowEdge {
  const out: FlowEdge = { from: e.from, to: e.to };
  if (e.id) out.id = e.id;
  if (e.port && e.port !== DEFAULT_OUT) out.port = e.port;
  if (e.to_port && e.to_port !== DEFAULT_IN) out.to_port = e.to_port;
  if (e.condition) out.condition = e.condition;
  return out;
}
