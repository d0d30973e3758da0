// Sticky notes on the canvas. They live in the document's "notes" (layout only, like
// positions: the flow's version ignores them) and on the canvas as nodes of their own
// type, whose ids carry a prefix no node id can have (node ids have no ':').
import type { Node } from "@xyflow/react";
import type { FlowDocument, Note, NoteColor, Position } from "./types";

export const NOTE_PREFIX = "note:";
export const NOTE_COLORS: NoteColor[] = ["yellow", "blue", "green", "pink"];
export const NOTE_SIZE = { width: 220, height: 120 };

export function noteCanvasId(id: string): string {
  return NOTE_PREFIX + id;
}

/** The note id of a canvas id, or undefined for a node's. */
export function noteIdOf(canvasId: string): string | undefined {
  return canvasId.startsWith(NOTE_PREFIX) ? canvasId.slice(NOTE_PREFIX.length) : undefined;
}

export function addNote(doc: FlowDocument, position: Position, text = ""): { doc: FlowDocument; id: string } {
  const notes = doc.notes ?? [];
  let n = notes.length + 1;
  while (notes.some((x) => x.id === `note-${n}`)) n++;
  const id = `note-${n}`;
  const note: Note = { id, text, position: { x: Math.round(position.x), y: Math.round(position.y) } };
  return { doc: { ...doc, notes: [...notes, note] }, id };
}

export function updateNote(doc: FlowDocument, id: string, patch: Partial<Omit<Note, "id">>): FlowDocument {
  if (!doc.notes?.some((n) => n.id === id)) return doc;
  return {
    ...doc,
    notes: doc.notes.map((n) => {
      if (n.id !== id) return n;
      const next: Note = { ...n, ...patch };
      if (next.color === "yellow") delete next.color;
      if (patch.position) next.position = { x: Math.round(patch.position.x), y: Math.round(patch.position.y) };
      if (patch.width !== undefined) next.width = Math.round(patch.width);
      if (patch.height !== undefined) next.height = Math.round(patch.height);
      return next;
    }),
  };
}

export function moveNotes(doc: FlowDocument, moves: Map<string, Position>): FlowDocument {
  if (!doc.notes || moves.size === 0) return doc;
  let changed = false;
  const notes = doc.notes.map((n) => {
    const p = moves.get(n.id);
    if (!p) return n;
    changed = true;
    return { ...n, position: { x: Math.round(p.x), y: Math.round(p.y) } };
  });
  return changed ? { ...doc, notes } : doc;
}

export function removeNotes(doc: FlowDocument, ids: Set<string>): FlowDocument {
  if (!doc.notes || ids.size === 0 || !doc.notes.some((n) => ids.has(n.id))) return doc;
  const notes = doc.notes.filter((n) => !ids.has(n.id));
  const { notes: _, ...rest } = doc;
  return notes.length === 0 ? rest : { ...rest, notes };
}

export type NoteData = { note: Note };
export type CanvasNote = Node<NoteData, "note">;

/** The notes as canvas nodes, drawn beneath the flow's nodes. */
export function toCanvasNotes(doc: FlowDocument, selected: Set<string> = new Set()): CanvasNote[] {
  return (doc.notes ?? []).map((n, i) => ({
    id: noteCanvasId(n.id),
    type: "note",
    position: n.position ?? { x: i * 40, y: -160 },
    selected: selected.has(noteCanvasId(n.id)),
    style: { width: n.width ?? NOTE_SIZE.width, height: n.height ?? NOTE_SIZE.height },
    // Its size is known (it is the note's): the canvas need not measure it before showing it.
    measured: { width: n.width ?? NOTE_SIZE.width, height: n.height ?? NOTE_SIZE.height },
    data: { note: n },
  }));
}
