// The working copy of a flow, kept safe: every edit goes to this browser's storage at
// once, and (for a flow the server knows) to the server as a draft a moment later. These
// are the decisions, as plain functions; editor/autosave.ts does the I/O.
import type { FlowDocument } from "./types";

/** What this browser keeps of a flow being edited. */
export interface StoredCopy {
  /** The working copy (serialized). */
  doc: string;
  /** What the server held when the copy was made (serialized; "" for a flow never saved). */
  base: string;
  /** When it was written, ms since the epoch. */
  at: number;
}

export function serialize(doc: FlowDocument): string {
  return JSON.stringify(doc);
}

/** The storage key of a flow's working copy; a new flow's is under the id it was opened with. */
export function storageKey(flow: string, isNew: boolean): string {
  return `sluice:working-copy:${isNew ? "new:" : ""}${flow}`;
}

export function parseStored(text: string | null): StoredCopy | undefined {
  if (!text) return undefined;
  try {
    const v = JSON.parse(text) as Partial<StoredCopy>;
    if (typeof v.doc === "string" && typeof v.base === "string" && typeof v.at === "number") return v as StoredCopy;
  } catch {
    /* not ours */
  }
  return undefined;
}

export type RestoreDecision =
  /** Nothing to restore: no copy, or it is what the page loaded. */
  | { kind: "none" }
  /** The copy was made on top of what the page loaded: take it (edits the server never got). */
  | { kind: "restore"; doc: FlowDocument }
  /** The copy was made on an older version (saved elsewhere since): ask before taking it. */
  | { kind: "offer"; doc: FlowDocument; at: number };

/** What to do with a stored copy when the editor opens on `loaded` (serialized). */
export function decideRestore(loaded: string, stored: StoredCopy | undefined): RestoreDecision {
  if (!stored || stored.doc === loaded) return { kind: "none" };
  let doc: FlowDocument;
  try {
    doc = JSON.parse(stored.doc) as FlowDocument;
  } catch {
    return { kind: "none" };
  }
  if (!doc || typeof doc !== "object" || !Array.isArray(doc.nodes) || !Array.isArray(doc.edges)) return { kind: "none" };
  if (stored.base === loaded) return { kind: "restore", doc };
  return { kind: "offer", doc, at: stored.at };
}

/** Where the working copy stands, for the toolbar. */
export interface SaveStatus {
  isNew: boolean;
  saving: boolean;
  /** The working copy is not what the server holds. */
  dirty: boolean;
  /** The server holds a draft that is not the published flow. */
  draft: boolean;
  /** Why the last autosave failed, while it has not succeeded since. */
  autosaveError: string | undefined;
}

export function saveStateText(s: SaveStatus): string {
  if (s.saving) return "Saving…";
  if (s.isNew) return "Not saved yet";
  if (s.dirty) return s.autosaveError ? `Changes not saved: ${s.autosaveError} (kept in this browser)` : "Unsaved changes";
  if (s.draft) return "Draft saved";
  return "Saved";
}

export function plural(n: number, word: string): string {
  return `${n} ${word}${n === 1 ? "" : "s"}`;
}

/** The message after saving: published, or kept as a draft and why. */
export function savedMessage(published: boolean, errors: number, hasPublished: boolean): string {
  if (published) return "Saved";
  const why = `${plural(errors, "error")} to fix before it can run`;
  return hasPublished ? `Saved as a draft: ${why}; runs use the last saved version` : `Saved as a draft: ${why}`;
}
