// The editor's document store: the flow being edited, its undo history, the selection
// and what the server holds of it. React reads it with useSyncExternalStore; it knows
// nothing of validation or runs (those have their own state and never call this store).
import { History } from "../flow/history";
import type { Size } from "../flow/layout";
import type { FlowDocument } from "../flow/types";
import { noteCanvasId } from "../flow/notes";
import { serialize } from "../flow/workingcopy";

export { serialize };

export interface EditorState {
  doc: FlowDocument;
  /** What the server holds, its draft or its saved file ("" for a flow never saved). */
  server: string;
  /** The saved (published) file: what runs ("" when there is none). */
  published: string;
  selectedNodes: Set<string>;
  selectedEdges: Set<string>;
  sizes: Map<string, Size>;
  canUndo: boolean;
  canRedo: boolean;
}

export class EditorStore {
  private state: EditorState;
  private readonly history = new History<FlowDocument>();
  private readonly listeners = new Set<() => void>();

  /** server and published: what the server holds (the document itself when saved is true) and its saved file. */
  constructor(doc: FlowDocument, saved: boolean | { server: FlowDocument | null; published: FlowDocument | null }) {
    const held = typeof saved === "boolean" ? { server: saved ? doc : null, published: saved ? doc : null } : saved;
    this.state = {
      doc,
      server: held.server ? serialize(held.server) : "",
      published: held.published ? serialize(held.published) : "",
      selectedNodes: new Set(),
      selectedEdges: new Set(),
      sizes: new Map(),
      canUndo: false,
      canRedo: false,
    };
  }

  subscribe = (f: () => void): (() => void) => {
    this.listeners.add(f);
    return () => this.listeners.delete(f);
  };

  get = (): EditorState => this.state;

  /** The working copy is not what the server holds. */
  get dirty(): boolean {
    return serialize(this.state.doc) !== this.state.server;
  }

  /** The server holds a draft that differs from the saved file. */
  get draft(): boolean {
    return this.state.server !== "" && this.state.server !== this.state.published;
  }

  private set(patch: Partial<EditorState>): void {
    this.state = { ...this.state, ...patch, canUndo: this.history.canUndo, canRedo: this.history.canRedo };
    this.listeners.forEach((f) => f());
  }

  /** Applies an edit as one undo step; edits with the same group (typing in one field) merge. */
  edit(change: (doc: FlowDocument) => FlowDocument, group?: string): void {
    const before = this.state.doc;
    const after = change(before);
    if (after === before) return;
    this.history.record(before, group);
    this.set({ doc: after, ...this.pruneSelection(after) });
  }

  /** Ends an edit group, e.g. when a field loses focus or a drag ends. */
  seal(): void {
    this.history.seal();
  }

  undo(): void {
    const prev = this.history.undo(this.state.doc);
    if (prev) this.set({ doc: prev, ...this.pruneSelection(prev) });
  }

  redo(): void {
    const next = this.history.redo(this.state.doc);
    if (next) this.set({ doc: next, ...this.pruneSelection(next) });
  }

  select(nodes: Iterable<string>, edges: Iterable<string> = []): void {
    this.set({ selectedNodes: new Set(nodes), selectedEdges: new Set(edges) });
  }

  setSelection(kind: "node" | "edge", id: string, selected: boolean): void {
    const set = new Set(kind === "node" ? this.state.selectedNodes : this.state.selectedEdges);
    if (selected) set.add(id);
    else set.delete(id);
    this.set(kind === "node" ? { selectedNodes: set } : { selectedEdges: set });
  }

  setSizes(sizes: Map<string, Size>): void {
    const next = new Map(this.state.sizes);
    sizes.forEach((v, k) => next.set(k, v));
    this.set({ sizes: next });
  }

  /** The server now holds doc: published (the saved file) or as a draft. */
  markSaved(doc: FlowDocument, published = true): void {
    const s = serialize(doc);
    this.set(published ? { server: s, published: s } : { server: s });
  }

  /** The server's draft is gone: it holds the saved file again. */
  markDraftDiscarded(): void {
    this.set({ server: this.state.published });
  }

  /** Replaces the document as one undoable edit (restoring a copy, reverting to the saved file). */
  replace(doc: FlowDocument): void {
    this.edit(() => doc);
    this.seal();
  }

  private pruneSelection(doc: FlowDocument): Pick<EditorState, "selectedNodes"> {
    const ids = new Set([...doc.nodes.map((n) => n.id), ...(doc.notes ?? []).map((n) => noteCanvasId(n.id))]);
    return { selectedNodes: new Set([...this.state.selectedNodes].filter((id) => ids.has(id))) };
  }
}
