// Two versions of a flow on one canvas: the union of their nodes and edges, each marked
// added, removed or changed, from the server's diff (GET .../versions/A/diff?to=B).
// Removed nodes keep their old positions, so both versions show where they were drawn.
import { canvasEdgeIds, sameConnection } from "./edges";
import type { FlowDocument, FlowEdge } from "./types";

export type Mark = "added" | "removed" | "changed";

export interface ValueChange {
  path: string;
  op: "add" | "remove" | "replace";
  from?: unknown;
  to?: unknown;
}

/** The server's answer to a version diff (engine.VersionDiff). */
export interface VersionDiff {
  from: string;
  to: string;
  nodes_added: string[];
  nodes_removed: string[];
  nodes_changed: { node: string; changes: ValueChange[] }[];
  edges_added: FlowEdge[];
  edges_removed: FlowEdge[];
  edges_changed: { from: FlowEdge; to: FlowEdge; changes: ValueChange[] }[];
  flow: ValueChange[];
}

export interface DiffView {
  /** Every node and edge of both versions: the newer document plus what it removed. */
  doc: FlowDocument;
  nodes: Map<string, Mark>;
  /** By canvas edge id of doc's edges. */
  edges: Map<string, Mark>;
  /** The changed fields of each changed node. */
  changes: Map<string, ValueChange[]>;
}

export function diffView(older: FlowDocument, newer: FlowDocument, d: VersionDiff): DiffView {
  const nodes = new Map<string, Mark>();
  const changes = new Map<string, ValueChange[]>();
  d.nodes_added.forEach((id) => nodes.set(id, "added"));
  d.nodes_changed.forEach((c) => {
    nodes.set(c.node, "changed");
    changes.set(c.node, c.changes);
  });
  const removedNodes = older.nodes.filter((n) => d.nodes_removed.includes(n.id));
  removedNodes.forEach((n) => nodes.set(n.id, "removed"));
  const removedEdges = d.edges_removed.filter((e) => older.edges.some((o) => sameConnection(o, e)));
  const doc: FlowDocument = { ...newer, nodes: [...newer.nodes, ...removedNodes], edges: [...newer.edges, ...removedEdges] };
  const ids = canvasEdgeIds(doc.edges);
  const edges = new Map<string, Mark>();
  doc.edges.forEach((e, i) => {
    const id = ids[i]!;
    if (i >= newer.edges.length) edges.set(id, "removed");
    else if (d.edges_added.some((a) => sameConnection(a, e) && (a.condition ?? "") === (e.condition ?? ""))) edges.set(id, "added");
    else if (d.edges_changed.some((c) => sameConnection(c.to, e) && (c.to.condition ?? "") === (e.condition ?? ""))) edges.set(id, "changed");
  });
  return { doc, nodes, edges, changes };
}

/** A one-line summary: "2 nodes added, 1 removed, 3 changed; 1 edge added". */
export function summary(d: VersionDiff): string {
  const parts: string[] = [];
  const n = [d.nodes_added.length && `${d.nodes_added.length} added`, d.nodes_removed.length && `${d.nodes_removed.length} removed`, d.nodes_changed.length && `${d.nodes_changed.length} changed`].filter(Boolean);
  if (n.length) parts.push(`nodes: ${n.join(", ")}`);
  const e = [d.edges_added.length && `${d.edges_added.length} added`, d.edges_removed.length && `${d.edges_removed.length} removed`, d.edges_changed.length && `${d.edges_changed.length} changed`].filter(Boolean);
  if (e.length) parts.push(`edges: ${e.join(", ")}`);
  if (d.flow.length) parts.push(`flow settings: ${d.flow.length} changed`);
  return parts.length ? parts.join("; ") : "no changes (positions aside)";
}

/** A changed value as text, cut to a readable length. */
export function showValue(v: unknown): string {
  if (v === undefined) return "—";
  const s = JSON.stringify(v) ?? String(v);
  return s.length > 80 ? s.slice(0, 79) + "…" : s;
}

/** The short form of a version. */
export function short(version: string): string {
  return version.slice(0, 12);
}

/** What the history says of a version, as far as choosing one to compare needs. */
export interface SavedVersion {
  version: string;
  current: boolean;
  saved_at?: string;
  message?: string;
}

/**
 * The two versions to compare, newest-first list in hand: what was chosen while both are
 * still listed, else the version before the current one (or the newest) to the current one.
 */
export function comparePair(versions: SavedVersion[], from?: string, to?: string): { from: string; to: string } | undefined {
  if (versions.length < 2) return undefined;
  const listed = (v?: string): v is string => v !== undefined && versions.some((x) => x.version === v);
  const cur = Math.max(versions.findIndex((v) => v.current), 0);
  const t = listed(to) ? to : versions[cur]!.version;
  if (listed(from)) return { from, to: t };
  // The version before t (the list is newest first), else a newer one.
  const at = versions.findIndex((v) => v.version === t);
  return { from: (versions[at + 1] ?? versions.find((v) => v.version !== t)!).version, to: t };
}

/** A version as a choice in a list: "3f2a9c1e0b7d · 2 h ago · current · shorter prompt". */
export function versionLabel(v: SavedVersion, ago: (t: string) => string): string {
  const parts = [short(v.version)];
  if (v.saved_at && !v.saved_at.startsWith("0001")) parts.push(ago(v.saved_at));
  if (v.current) parts.push("current");
  if (v.message) parts.push(v.message);
  return parts.join(" · ");
}
