// Copy and paste of nodes with the edges between them. Pasted nodes get fresh ids and
// sit a little below and right of the originals.
import { uniqueId } from "./ids";
import type { FlowDocument, FlowEdge, FlowNode } from "./types";

export interface Clip {
  nodes: FlowNode[];
  edges: FlowEdge[];
}

export function copy(doc: FlowDocument, nodeIds: Set<string>): Clip | undefined {
  const nodes = doc.nodes.filter((n) => nodeIds.has(n.id));
  if (nodes.length === 0) return undefined;
  const edges = doc.edges.filter((e) => nodeIds.has(e.from) && nodeIds.has(e.to));
  return structuredClone({ nodes, edges });
}

export function paste(doc: FlowDocument, clip: Clip, offset = 40): { doc: FlowDocument; ids: string[] } {
  const rename = new Map<string, string>();
  const taken = new Set(doc.nodes.map((n) => n.id));
  const nodes = clip.nodes.map((n) => {
    const id = uniqueId(n.id.replace(/-\d+$/, ""), (x) => taken.has(x));
    taken.add(id);
    rename.set(n.id, id);
    const p = n.position ?? { x: 0, y: 0 };
    return { ...structuredClone(n), id, position: { x: p.x + offset, y: p.y + offset } };
  });
  const edges = clip.edges.map((e) => {
    const copy: FlowEdge = { ...e, from: rename.get(e.from)!, to: rename.get(e.to)! };
    delete copy.id; // ids must stay unique; the pasted edge is named by its ends
    return copy;
  });
  return { doc: { ...doc, nodes: [...doc.nodes, ...nodes], edges: [...doc.edges, ...edges] }, ids: nodes.map((n) => n.id) };
}

/** Reads a clip from text (another tab's copy), or undefined when it is not one. */
export function parseClip(text: string): Clip | undefined {
  try {
    const v = JSON.parse(text) as { sluice_clip?: Clip };
    const c = v?.sluice_clip;
    if (c && Array.isArray(c.nodes) && Array.isArray(c.edges)) return c;
  } catch {
    /* not ours */
  }
  return undefined;
}

export function clipText(c: Clip): string {
  return JSON.stringify({ sluice_clip: c });
}
