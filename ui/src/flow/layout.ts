// Auto-layout: ranks the nodes left to right along their edges with dagre; a tool hangs
// under the agent it serves (its edge is no step of the flow); and a viewport that shows
// the result with its text still readable.
import dagre from "@dagrejs/dagre";
import type { FlowDocument, Position } from "./types";

export interface Size {
  width: number;
  height: number;
}

export const DEFAULT_SIZE: Size = { width: 200, height: 80 };

/**
 * How much taller a node gets at most while a run shows on it: its status line and one
 * line of streamed text (or of its error). Auto-layout and the places new nodes land
 * leave this room under every node, so that a run never draws a node over the one below.
 */
export const RUN_ROOM = 48;

/** Edges to an agent's tools port: they attach a tool, they are no step. */
function isToolEdge(e: FlowDocument["edges"][number]): boolean {
  return e.to_port === "tools";
}

/** New positions (top-left corners) for every node of doc. */
export function layout(doc: FlowDocument, sizes: (id: string) => Size | undefined): Map<string, Position> {
  const size = (id: string) => sizes(id) ?? DEFAULT_SIZE;
  // A tool is laid out under its (first) agent, unless it is also a step of the flow.
  const stepNodes = new Set(doc.edges.filter((e) => !isToolEdge(e)).flatMap((e) => [e.from, e.to]));
  const toolOf = new Map<string, string>();
  for (const e of doc.edges) if (isToolEdge(e) && !stepNodes.has(e.from) && !toolOf.has(e.from)) toolOf.set(e.from, e.to);

  const g = new dagre.graphlib.Graph({ multigraph: true });
  g.setGraph({ rankdir: "LR", nodesep: 48, ranksep: 96, marginx: 0, marginy: 0 });
  g.setDefaultEdgeLabel(() => ({}));
  for (const n of doc.nodes) {
    if (toolOf.has(n.id)) continue;
    const s = size(n.id);
    // An agent with tools keeps room below it for them.
    const tools = [...toolOf.values()].filter((a) => a === n.id).length;
    g.setNode(n.id, { width: s.width, height: s.height + RUN_ROOM + (tools > 0 ? tools * (DEFAULT_SIZE.height + RUN_ROOM + 24) + 24 : 0) });
  }
  doc.edges.forEach((e, i) => {
    if (!isToolEdge(e) && g.hasNode(e.from) && g.hasNode(e.to)) g.setEdge(e.from, e.to, {}, String(i));
  });
  dagre.layout(g);
  const out = new Map<string, Position>();
  for (const n of doc.nodes) {
    const p = g.node(n.id) as { x: number; y: number; width: number; height: number } | undefined;
    if (p) out.set(n.id, { x: Math.round(p.x - p.width / 2), y: Math.round(p.y - p.height / 2) });
  }
  const below = new Map<string, number>();
  for (const [tool, agent] of toolOf) {
    const a = out.get(agent);
    if (!a) continue;
    const y = below.get(agent) ?? a.y + size(agent).height + RUN_ROOM + 24;
    out.set(tool, { x: a.x, y });
    below.set(agent, y + size(tool).height + RUN_ROOM + 24);
  }
  return out;
}

export interface Viewport {
  x: number;
  y: number;
  zoom: number;
}

/** The smallest zoom at which a node's text reads well (13 px titles stay over 10 px). */
export const READABLE_ZOOM = 0.8;

/**
 * A viewport showing the nodes in a view of width × height: all of them when they fit at
 * a readable zoom, else at the readable zoom from the start of the flow (its left edge,
 * vertically centred, or its top when it is taller than the view).
 */
export function readableViewport(
  nodes: { position: Position; size: Size }[],
  view: Size,
  opts: { padding?: number; minZoom?: number; maxZoom?: number } = {},
): Viewport {
  const pad = opts.padding ?? 40;
  const minZoom = opts.minZoom ?? READABLE_ZOOM;
  const maxZoom = opts.maxZoom ?? 1.2;
  if (nodes.length === 0) return { x: 0, y: 0, zoom: 1 };
  const x0 = Math.min(...nodes.map((n) => n.position.x));
  const y0 = Math.min(...nodes.map((n) => n.position.y));
  const x1 = Math.max(...nodes.map((n) => n.position.x + n.size.width));
  const y1 = Math.max(...nodes.map((n) => n.position.y + n.size.height));
  const w = x1 - x0;
  const h = y1 - y0;
  const fit = Math.min((view.width - 2 * pad) / w, (view.height - 2 * pad) / h);
  const zoom = Math.max(minZoom, Math.min(maxZoom, fit));
  const x = zoom === fit || w * zoom + 2 * pad <= view.width ? (view.width - w * zoom) / 2 - x0 * zoom : pad - x0 * zoom;
  const y = h * zoom + 2 * pad <= view.height ? (view.height - h * zoom) / 2 - y0 * zoom : pad - y0 * zoom;
  return { x: Math.round(x), y: Math.round(y), zoom };
}

/** Whether two nodes, each with the room a run takes under it, come closer than gap. */
function overlaps(a: Position, as: Size, b: Position, bs: Size, gap: number): boolean {
  return a.x < b.x + bs.width + gap && b.x < a.x + as.width + gap && a.y < b.y + bs.height + RUN_ROOM + gap && b.y < a.y + as.height + RUN_ROOM + gap;
}

type Placed = { p: Position; s: Size };

function placedNodes(doc: FlowDocument, sizes: (id: string) => Size | undefined): Placed[] {
  return doc.nodes.filter((n) => n.position).map((n) => ({ p: n.position!, s: sizes(n.id) ?? DEFAULT_SIZE }));
}

/**
 * A place for a new node near want where it covers no other node: moved right past
 * whatever it would cover (a new node added from the keyboard lands beside the last one,
 * not on top of it).
 */
export function freeSpot(doc: FlowDocument, sizes: (id: string) => Size | undefined, want: Position, size: Size = DEFAULT_SIZE, gap = 24): Position {
  const placed = placedNodes(doc, sizes);
  let at = { ...want };
  for (let i = 0; i <= placed.length; i++) {
    const hit = placed.find((o) => overlaps(at, size, o.p, o.s, gap));
    if (!hit) return at;
    at = { x: hit.p.x + hit.s.width + gap, y: at.y };
  }
  return at;
}

/**
 * The free place nearest to want for a node dropped there: want itself when it covers
 * nothing, else just beside (right, left, above or below) what it would cover, whichever
 * is closest to where it was dropped.
 */
export function nearestFreeSpot(doc: FlowDocument, sizes: (id: string) => Size | undefined, want: Position, size: Size = DEFAULT_SIZE, gap = 24): Position {
  const placed = placedNodes(doc, sizes);
  const far = (p: Position) => Math.hypot(p.x - want.x, p.y - want.y);
  const tried = new Set<string>();
  const frontier: Position[] = [{ ...want }];
  // Each spot tried is beside a node it would cover; a few per node reach a free one.
  for (let i = 0; i < 8 * placed.length + 8 && frontier.length > 0; i++) {
    frontier.sort((a, b) => far(a) - far(b));
    const at = frontier.shift()!;
    const key = `${at.x},${at.y}`;
    if (tried.has(key)) continue;
    tried.add(key);
    const hit = placed.find((o) => overlaps(at, size, o.p, o.s, gap));
    if (!hit) return at;
    frontier.push(
      { x: hit.p.x + hit.s.width + gap, y: at.y },
      { x: hit.p.x - size.width - gap, y: at.y },
      { x: at.x, y: hit.p.y + hit.s.height + RUN_ROOM + gap },
      { x: at.x, y: hit.p.y - size.height - RUN_ROOM - gap },
    );
  }
  return freeSpot(doc, sizes, want, size, gap);
}
