// Edits of a flow document. Each returns a new document and never changes its argument,
// so the undo history can keep the old one.
import { canvasEdgeIds, normalEdge } from "./edges";
import { uniqueId } from "./ids";
import type { Connection } from "./connect";
import type { FlowDocument, FlowEdge, FlowNode, Params, Position } from "./types";

export function blankFlow(id: string, name: string): FlowDocument {
  return { sluice: 1, id, name, nodes: [], edges: [] };
}

export function hasNode(doc: FlowDocument, id: string): boolean {
  return doc.nodes.some((n) => n.id === id);
}

export function addNode(doc: FlowDocument, type: string, position: Position, params?: Params): { doc: FlowDocument; id: string } {
  const id = uniqueId(type, (x) => hasNode(doc, x));
  const node: FlowNode = { id, type, position: roundPos(position) };
  if (params && Object.keys(params).length > 0) node.params = params;
  return { doc: { ...doc, nodes: [...doc.nodes, node] }, id };
}

export function moveNodes(doc: FlowDocument, moves: Map<string, Position>): FlowDocument {
  if (moves.size === 0) return doc;
  return {
    ...doc,
    nodes: doc.nodes.map((n) => {
      const p = moves.get(n.id);
      return p ? { ...n, position: roundPos(p) } : n;
    }),
  };
}

/** Removes nodes (and every edge touching them) and edges, by node id and canvas edge id. */
export function removeItems(doc: FlowDocument, nodeIds: Set<string>, canvasEdges: Set<string>): FlowDocument {
  const ids = canvasEdgeIds(doc.edges);
  return {
    ...doc,
    nodes: doc.nodes.filter((n) => !nodeIds.has(n.id)),
    edges: doc.edges.filter((e, i) => !nodeIds.has(e.from) && !nodeIds.has(e.to) && !canvasEdges.has(ids[i]!)),
  };
}

export function connect(doc: FlowDocument, c: Connection): FlowDocument {
  return { ...doc, edges: [...doc.edges, normalEdge({ from: c.from, port: c.port, to: c.to, to_port: c.to_port })] };
}

export function updateNode(doc: FlowDocument, id: string, change: (n: FlowNode) => FlowNode): FlowDocument {
  return { ...doc, nodes: doc.nodes.map((n) => (n.id === id ? change(n) : n)) };
}

/** Sets one field of a node (label, input, output, timeout, ...); undefined or "" removes it. */
export function setNodeField<K extends keyof FlowNode>(doc: FlowDocument, id: string, key: K, value: FlowNode[K] | undefined): FlowDocument {
  return updateNode(doc, id, (n) => {
    const next = { ...n };
    if (value === undefined || value === "") delete next[key];
    else next[key] = value;
    return next;
  });
}

/** Sets one parameter; undefined removes it so that its default applies. */
export function setParam(doc: FlowDocument, id: string, name: string, value: unknown): FlowDocument {
  return updateNode(doc, id, (n) => {
    const params: Params = { ...(n.params ?? {}) };
    if (value === undefined) delete params[name];
    else params[name] = value;
    const next: FlowNode = { ...n, params };
    if (Object.keys(params).length === 0) delete next.params;
    return next;
  });
}

/** Renames a node and every edge that names it. */
export function renameNode(doc: FlowDocument, from: string, to: string): FlowDocument {
  if (from === to) return doc;
  return {
    ...doc,
    nodes: doc.nodes.map((n) => (n.id === from ? { ...n, id: to } : n)),
    edges: doc.edges.map((e) => ({ ...e, from: e.from === from ? to : e.from, to: e.to === from ? to : e.to })),
  };
}

/** Changes the edge at canvas id (its condition, say). */
export function updateEdge(doc: FlowDocument, canvasId: string, change: (e: FlowEdge) => FlowEdge): FlowDocument {
  const ids = canvasEdgeIds(doc.edges);
  return { ...doc, edges: doc.edges.map((e, i) => (ids[i] === canvasId ? normalEdge(change(e)) : e)) };
}

/** Route names a node's params give it as ports, after a route was renamed, keep their edges. */
export function renamePort(doc: FlowDocument, node: string, from: string, to: string): FlowDocument {
  return { ...doc, edges: doc.edges.map((e) => (e.from === node && (e.port || "out") === from ? normalEdge({ ...e, port: to }) : e)) };
}

function roundPos(p: Position): Position {
  return { x: Math.round(p.x), y: Math.round(p.y) };
}
